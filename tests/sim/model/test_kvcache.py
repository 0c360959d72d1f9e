"""The KV cache's free queue: least recently freed first, hits taken back, bounded by its blocks."""

from __future__ import annotations

import random
from collections import OrderedDict

from tokenpace.sim.model.kvcache import KVCache


class _ReferencePool:
    """The block pool's order rules written plainly (an ordered dict of free blocks, as vLLM's)."""

    def __init__(self, num_blocks: int) -> None:
        self.ref = [0] * num_blocks
        self.free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.hash_of: dict[int, int] = {}
        self.cached: dict[int, int] = {}

    def allocate(self, n: int) -> list[int]:
        out = [self.free.popitem(last=False)[0] for _ in range(n)]
        for b in out:
            if b in self.hash_of:
                del self.cached[self.hash_of.pop(b)]
            self.ref[b] = 1
        return out

    def touch(self, blocks: list[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                del self.free[b]
            self.ref[b] += 1

    def release(self, blocks: list[int]) -> None:
        for b in reversed(blocks):
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.free[b] = None

    def register(self, b: int, h: int) -> None:
        if b not in self.hash_of and h not in self.cached:
            self.hash_of[b] = h
            self.cached[h] = b


def test_random_operations_give_the_same_blocks_as_the_ordered_dict_pool():
    """Allocation, release, prefix hits and registration in random order: every block handed out,
    every count and every hit equal the plain pool's, over enough operations to compact many times."""
    rng = random.Random(7)
    n = 48
    kv, ref = KVCache(n, 16), _ReferencePool(n)
    held: list[list[int]] = []
    for step in range(20_000):
        op = rng.random()
        if op < 0.4 and kv.num_free:
            k = rng.randint(1, min(6, kv.num_free))
            got = kv.allocate(k) if k > 1 or rng.random() < 0.5 else [kv.allocate_one()]
            assert got == ref.allocate(k), step
            held.append(got)
            for b in got:
                if rng.random() < 0.5:
                    h = rng.randrange(64)  # few hashes: collisions and hits are common
                    kv.register(b, h)
                    ref.register(b, h)
        elif op < 0.75 and held:
            blocks = held.pop(rng.randrange(len(held)))
            kv.free(blocks)
            ref.release(blocks)
        else:
            hashes = rng.sample(range(64), 3)
            hit = kv.lookup(hashes)
            assert hit == [ref.cached[h] for h in hashes[: len(hit)]]
            assert len(hit) == 3 or hashes[len(hit)] not in ref.cached
            if hit:
                assert kv.count_free_among(hit) == sum(1 for b in hit if ref.ref[b] == 0)
                kv.touch(hit)
                ref.touch(hit)
                held.append(hit)
        assert kv.num_free == len(ref.free), step
        assert len(kv._queue) - kv._head <= 2 * n  # the bound: live entries plus stale ones


def test_a_hit_takes_back_the_block_and_a_release_puts_it_last():
    kv = KVCache(4, 16)
    a = kv.allocate(2)  # blocks 0, 1
    kv.register(a[0], 111)
    kv.free(a)  # free order: 2, 3, then 1, 0 (a sequence's tail first)
    (hit,) = kv.lookup([111])
    assert hit == a[0]
    kv.touch([hit])
    assert kv.num_free == 3
    assert kv.allocate(3) == [2, 3, 1]  # the hit block is not handed out
    kv.free([hit])
    assert kv.lookup([111]) == [hit]  # still cached while unreferenced ...
    assert kv.allocate_one() == hit
    assert kv.lookup([111]) == []  # ... until evicted by an allocation


def test_repeated_hits_and_releases_keep_the_queue_bounded():
    """A hot shared prefix: every request hits its blocks and releases them again, so each release
    appends an entry and the earlier one goes stale; the queue is compacted to its live entries."""
    kv = KVCache(8, 16)
    prefix = kv.allocate(2)
    kv.register(prefix[0], 1)
    kv.register(prefix[1], 2)
    kv.free(prefix)
    for _ in range(1_000):
        hit = kv.lookup([1, 2])
        assert hit == prefix
        kv.touch(hit)
        kv.free(hit)
        assert len(kv._queue) - kv._head <= 16
    assert kv.num_free == 8
