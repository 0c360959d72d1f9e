"""Dealing one schedule to worker processes: every request goes to exactly one worker, open-loop
requests keep their single-process offsets, closed-loop requests follow the users."""

from __future__ import annotations

import pytest

from tokenpace.core.schedule.split import (
    UserShare,
    dealt_offsets,
    owner_of,
    split_users,
    workers_needed,
)


def test_users_split_evenly_and_cover_every_user():
    assert split_users(5, 2) == [UserShare(0, 3), UserShare(3, 2)]
    assert split_users(4, 4) == [UserShare(i, 1) for i in range(4)]
    shares = split_users(17, 3)
    assert sum(s.users for s in shares) == 17
    assert max(s.users for s in shares) - min(s.users for s in shares) <= 1


@pytest.mark.parametrize("users,workers", [(5, 2), (7, 3), (4, 4), (9, 1), (256, 3)])
def test_a_closed_loop_request_goes_to_the_worker_owning_its_user(users, workers):
    shares = split_users(users, workers)
    for index in range(3 * users):
        w = owner_of(index, workers, users)
        share = shares[w]
        assert share.first_user <= index % users < share.first_user + share.users


def test_open_loop_deal_is_round_robin_and_keeps_each_offset():
    offsets = [0.0, 0.1, 0.25, 0.3, 0.42, 0.5, 0.61]
    dealt = [dealt_offsets(offsets, w, 3) for w in range(3)]
    for index, offset in enumerate(offsets):
        w = owner_of(index, 3)
        assert dealt[w][index // 3] == offset  # worker w's k-th request is request w + 3k
    assert sorted(x for share in dealt for x in share) == offsets


def test_auto_asks_for_workers_by_event_rate_up_to_the_cores():
    assert workers_needed(rate=10, users=None, mean_output_tokens=64, cores=8) == 1
    assert workers_needed(rate=600, users=None, mean_output_tokens=64, cores=8) == 3  # 39,000 chunks/s
    assert workers_needed(rate=5000, users=None, mean_output_tokens=128, cores=2) == 2
    assert workers_needed(rate=None, users=3, mean_output_tokens=128, cores=8) == 1
    assert workers_needed(rate=None, users=512, mean_output_tokens=128, cores=8) == 4
