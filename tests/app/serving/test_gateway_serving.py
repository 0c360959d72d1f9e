"""A fleet's terms checked before the gateway listens: it needs the store and one process per
replica, and its fleet and replica names are label values, bounded in size."""

from __future__ import annotations

import pytest

from tokenpace.app.serving.gateway_serving import MAX_REPLICA_CHARS, GatewayRefused, check_fleet
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.config.static_labels import MAX_VALUE_CHARS
from tokenpace.testing.procs import run_cli

CONFIG = GatewayConfig(upstreams=(parse_upstream("a=http://127.0.0.1:9"),), port=0)


@pytest.mark.parametrize(
    ("fleet", "save", "replica", "config", "says"),
    [
        ("prod", False, None, CONFIG, "drop --no-store"),
        ("prod", True, None, GatewayConfig(upstreams=CONFIG.upstreams, port=0, workers=2), "drop --workers"),
        (
            "p" * (MAX_VALUE_CHARS + 1),
            True,
            None,
            CONFIG,
            f"--fleet: a printable name of 1 to {MAX_VALUE_CHARS}",
        ),
        ("prod", True, "r\n0", CONFIG, "--replica: a printable name"),
        ("prod", True, "r" * 300_000, CONFIG, "--replica: a printable name"),
    ],
)
def test_a_fleets_terms_are_refused_with_the_reason(
    fleet: str, save: bool, replica: str | None, config: GatewayConfig, says: str
) -> None:
    with pytest.raises(GatewayRefused, match=says):
        check_fleet(config, fleet, save, replica)


def test_a_fleet_and_replica_within_the_bounds_pass() -> None:
    check_fleet(CONFIG, "p" * MAX_VALUE_CHARS, True, "gateway-prod-7d9f-x2k4")
    check_fleet(CONFIG, "prod", True, "r" * MAX_REPLICA_CHARS)  # the longest pod name
    check_fleet(CONFIG, None, False, None)  # not a fleet: nothing to check


def test_the_command_says_it_in_one_line_exit_2() -> None:
    done = run_cli("gateway", "--upstream", "a=http://127.0.0.1:9", "--fleet", "x" * 500, timeout=60)
    assert done.returncode == 2 and "--fleet: a printable name" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
