"""A gray release judged end to end: a gateway in front of two upstreams (one slower), users that
report outcomes at different rates per arm, then ``tokenpace arms`` over the store: the verdict,
and the sample-ratio check with a deliberately skewed split."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
from click.testing import CliRunner

from gateway.gray_traffic import users_with_outcomes
from tokenpace.adapters.store import connect
from tokenpace.cli.gateway.arms_cmd import arms
from tokenpace.gateway.config.config import GatewayConfig, parse_upstream
from tokenpace.gateway.lifecycle.serve import RunningGateway
from tokenpace.gateway.recording.store_writer import StoreRecordWriter
from tokenpace.testing.scripted_server import Script, ScriptedServer

GUARDS = "ttft.p95=+10%,error_rate=+0.5pp,complaint=+0pp"
# docs/gray-release.md shows this command; _arms runs it (the store path replaced)
DOC_COMMAND = f"tokenpace arms --since 1h --store runs.db --guard {GUARDS}"


def _serve(db: Path, weights: tuple[float, float], keep_a_users: float, rates: dict[str, float]) -> dict:
    """Traffic of 160 users through a gateway (arm a fast, arm b slow); a share ``keep_a_users`` of
    the users routed to arm a actually come (1.0: an honest split)."""
    store = connect(str(db))

    async def main() -> dict:
        async with (
            ScriptedServer(Script(ttft_s=0.005, itl_s=0.001)) as fast,
            ScriptedServer(Script(ttft_s=0.060, itl_s=0.001)) as slow,
        ):
            config = GatewayConfig(
                upstreams=(
                    parse_upstream(f"a={fast.url},weight={weights[0]:g}"),
                    parse_upstream(f"b={slow.url},weight={weights[1]:g}"),
                ),
                port=0,
            )
            async with RunningGateway(config, writer=StoreRecordWriter(store, config, "gray1")) as gw:
                everyone = [f"user-{i}" for i in range(160)]
                arm_of = {u: gw.gateway.router.choose(None, u.encode()).arm for u in everyone}
                a_users = [u for u in everyone if arm_of[u] == "a"]
                users = a_users[: round(len(a_users) * keep_a_users)] + [
                    u for u in everyone if arm_of[u] == "b"
                ]
                sent = await users_with_outcomes(gw.url, gw.admin_url, users, rates, arm_of)
            return {"users": len(users), **sent}

    try:
        return asyncio.run(main())
    finally:
        store.close()


def _arms(db: Path, *extra: str) -> tuple[int, dict]:
    root = Path(__file__).resolve().parents[3]
    assert (
        DOC_COMMAND in (root / "docs" / "gray-release.md").read_text()
        and DOC_COMMAND in (root / "README.md").read_text()
    )
    args = [str(db) if a == "runs.db" else a for a in DOC_COMMAND.split()[2:]]
    result = CliRunner().invoke(arms, [*args, "--resamples", "300", "--json", *extra])
    assert result.exit_code in (0, 1, 5), result.output
    return result.exit_code, orjson.loads(result.output)


def test_a_slower_arm_with_more_complaints_is_rolled_back(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    sent = _serve(db, (1, 1), 1.0, {"a": 0.02, "b": 0.45})
    code, report = _arms(db)
    assert code == 1 and report["verdict"] == "roll back", report["reason"]
    assert not any(r["flagged"] for r in report["sample_ratio"])  # an honest 50/50 split
    arms_by_name = {a["arm"]: a for a in report["arms"]}
    assert arms_by_name["a"]["requests"] + arms_by_name["b"]["requests"] == 2 * sent["users"]
    assert arms_by_name["a"]["users"] + arms_by_name["b"]["users"] == sent["users"]
    complaints = sum(a["events"]["complaint"]["count"] for a in report["arms"])
    assert complaints == sent["complaints"]
    assert arms_by_name["a"]["events"]["accepted"]["per_request"]["value"] == 1.0  # every answer
    outcome = {g["guard"]: g["outcome"] for g in report["guards"]}
    # the slower arm's P95 is breached, or undecided where its load bands hold too few requests to
    # compare it at matched load; never passed
    assert outcome["ttft.p95=+10%"] in ("breached", "undecided") and outcome["complaint=+0pp"] == "breached"
    ttft = next(m for m in report["diffs"][0]["latency"]["metrics"] if m["metric"] == "ttft")
    assert ttft["percentiles"][0]["verdict"] == "slower"  # its median, 12x the fast arm's
    # no errors on either arm, but a few hundred requests cannot show the rate grew by under 0.5 pp
    # (non-inferiority: the interval's upper bound must be under it); it says what would decide it
    errors = next(g for g in report["guards"] if g["guard"] == "error_rate=+0.5pp")
    assert errors["outcome"] == "undecided" and "would decide it" in errors["reason"]
    assert report["unmatched_events"] == 0

    # the console view puts the sample-ratio check first and ends with the verdict line
    text = CliRunner().invoke(
        arms, ["--since", "1h", "--store", str(db), "--guard", GUARDS, "--resamples", "100"]
    )
    assert text.exit_code == 1
    assert text.output.startswith("sample ratio (users)")
    assert "VERDICT: ROLL BACK" in text.output and "window: since 1h" in text.output
    assert text.output.index("VERDICT") > text.output.index("window: since")  # the last word


def test_a_skewed_split_holds_the_release_whatever_the_rows_say(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _serve(db, (1, 1), 0.4, {"a": 0.1, "b": 0.1})  # most of arm a's users never arrive
    code, report = _arms(db)
    assert code == 5 and report["verdict"] == "hold"
    users = next(r for r in report["sample_ratio"] if r["unit"] == "users")
    assert users["flagged"] and users["p_value"] < 0.001
    assert "sample ratio mismatch" in report["reason"]


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    connect(str(db)).close()
    for args in (["--guard", "ttft.p95=+10pp"], ["--since", "yesterday"], [], ["--reference", "zz"]):
        result = CliRunner().invoke(arms, ["--store", str(db), *args])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert result.output.count("\n") == 1 and result.output.startswith("tokenpace arms: error:")
