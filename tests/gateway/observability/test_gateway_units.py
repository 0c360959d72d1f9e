"""Pure parts of the gateway: SLO buckets, routing, upstream parsing, generated rules and dashboard."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokenpace.cli.main import cli
from tokenpace.core.metrics import Slo
from tokenpace.gateway.config.config import parse_upstream
from tokenpace.gateway.observability.buckets import latency_buckets
from tokenpace.gateway.observability.prom import GatewayMetrics
from tokenpace.gateway.request_path.router import Router

SLO = Slo(ttft_ms=800, tpot_ms=50, e2e_ms=10_000)


def test_every_slo_threshold_is_a_bucket_bound() -> None:
    m = GatewayMetrics(SLO)
    assert 0.8 in m.ttft_buckets and 0.05 in m.tpot_buckets and 10.0 in m.e2e_buckets
    # ... and the exposition carries exactly those le values
    from prometheus_client import generate_latest

    m.ttft.labels("m", "u", "a", "chat").observe(0.8)
    m.tpot.labels("m", "u", "a", "chat").observe(0.05)
    m.e2e.labels("m", "u", "a", "chat", "ok").observe(10.0)
    text = generate_latest(m.registry).decode()
    assert (
        'gen_ai_server_time_to_first_token_seconds_bucket{api="chat",arm="a",le="0.8",model="m",'
        'upstream="u"} 1.0' in text
    )
    assert 'gen_ai_server_time_per_output_token_seconds_bucket{api="chat",arm="a",le="0.05"' in text
    assert 'le="10.0",model="m",outcome="ok"' in text


@pytest.mark.parametrize("threshold", [0.8, 0.35, 1.7, 0.123])
def test_buckets_sorted_unique_and_dense_near_threshold(threshold: float) -> None:
    b = latency_buckets(threshold)
    assert list(b) == sorted(set(b)) and threshold in b
    i = b.index(threshold)
    assert b[i + 1] / threshold <= 1.11 and threshold / b[i - 1] <= 1.12


def test_sticky_users_stay_and_weights_split() -> None:
    ups = [
        parse_upstream("a=http://127.0.0.1:1/v1,weight=3"),
        parse_upstream("b=http://127.0.0.1:2/v1,weight=1"),
    ]
    r = Router(ups, clock=lambda: 0.0, rng=random.Random(1))
    picks = [r.choose(None, f"user{i}".encode()).name for i in range(4000)]
    assert picks == [r.choose(None, f"user{i}".encode()).name for i in range(4000)]  # sticky
    assert 0.70 < picks.count("a") / 4000 < 0.80  # 3:1
    unkeyed = [r.choose(None, None).name for _ in range(4000)]
    assert 0.70 < unkeyed.count("a") / 4000 < 0.80


def test_ramp_moves_users_only_to_the_new_upstream() -> None:
    now = [0.0]
    ups = [
        parse_upstream("old1=http://127.0.0.1:1/v1"),
        parse_upstream("old2=http://127.0.0.1:2/v1"),
        parse_upstream("new=http://127.0.0.1:3/v1,ramp=60s"),
    ]
    r = Router(ups, clock=lambda: now[0])
    users = [f"u{i}".encode() for i in range(3000)]
    before = {u: r.choose(None, u).name for u in users}
    assert "new" not in before.values()  # weight 0 at start
    now[0] = 30.0
    half = {u: r.choose(None, u).name for u in users}
    now[0] = 120.0
    full = {u: r.choose(None, u).name for u in users}
    share = lambda d: sum(v == "new" for v in d.values()) / len(d)  # noqa: E731
    assert 0 < share(half) < share(full)
    assert 0.28 < share(full) < 0.39  # a third at full weight
    # nobody moved between the old upstreams, and everyone on "new" at half weight stayed there
    assert all(half[u] in (before[u], "new") for u in users)
    assert all(full[u] == "new" for u in users if half[u] == "new")


def test_model_routing_prefers_the_upstream_serving_it() -> None:
    ups = [parse_upstream("a=http://127.0.0.1:1/v1,model=x"), parse_upstream("b=http://127.0.0.1:2/v1")]
    r = Router(ups, clock=lambda: 0.0)
    assert {r.choose("x", None).name for _ in range(50)} == {"a"}
    assert {r.choose("y", None).name for _ in range(50)} == {"b"}


def test_parse_upstream() -> None:
    u = parse_upstream("a=http://h:8000/v1,weight=2,model=m,arm=B,ramp=1m,region=eu")
    assert (u.name, u.weight, u.model, u.arm, u.ramp_s, u.labels) == (
        "a",
        2.0,
        "m",
        "B",
        60.0,
        {"region": "eu"},
    )
    assert u.origin == "http://h:8000" and u.base_path == ""
    for bad in ("a", "a=ftp://x", "a=http://h,weight=-1", "a=http://h,colour=red"):
        with pytest.raises(ValueError):
            parse_upstream(bad)


def test_emit_rules_matches_deploy_and_passes_promtool(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["gateway", "--slo", "ttft=800ms,tpot=50ms,e2e=10s", "--emit-rules", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    rules = (tmp_path / "tokenpace-gateway-rules.yml").read_text()
    assert 'le=\\"0.8\\"' in rules and 'le=\\"0.05\\"' in rules and 'le=\\"10.0\\"' in rules
    board = json.loads((tmp_path / "tokenpace-gateway-dashboard.json").read_text())
    assert any('le="0.8"' in t["expr"] for p in board["panels"] for t in p["targets"])
    deploy = Path(__file__).resolve().parents[3] / "deploy"
    for name in ("tokenpace-gateway-rules.yml", "tokenpace-gateway-dashboard.json"):
        assert (deploy / name).read_text() == (tmp_path / name).read_text(), (
            f"deploy/{name} is stale: regenerate"
        )
    if shutil.which("promtool") is None:
        pytest.skip("promtool (Debian prometheus) not installed: rules syntax not checked")
    check = subprocess.run(
        ["promtool", "check", "rules", str(tmp_path / "tokenpace-gateway-rules.yml")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert check.returncode == 0, check.stdout + check.stderr
