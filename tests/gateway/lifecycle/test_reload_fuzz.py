"""The fuzzer on live reloads: hypothesis draws hostile configuration files (fuzz_files.py) and a
running gateway re-reads each (POST /tokenpace/config, through the command line's own reader):
never a 500 nor a traceback; a refusal lists every problem, the very lines --check-config prints for
the same file; the running config stays what the last applied change made it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

hypothesis = pytest.importorskip("hypothesis")
import fuzz_files  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tokenpace.cli.gateway.gateway_cmd import _from_values, gateway  # noqa: E402
from tokenpace.cli.gateway.gateway_config import reader, value_parts  # noqa: E402
from tokenpace.gateway.lifecycle.serve import RunningGateway  # noqa: E402

KEY = "fuzz-admin-key"
HEAD = f'listen = "127.0.0.1:0"\nadmin-key = "{KEY}"\nno-store = true\nmax-connections = 64\n'
GOOD = HEAD + '\n[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\n'
SHORT = settings(
    max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None
)


def _checked(path: Path) -> tuple[int, list[str]]:
    """--check-config on the file, in process: its exit status and its lines, prefix removed."""
    done = CliRunner().invoke(gateway, ["--check-config", str(path)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert "Traceback" not in done.output
    lines = [ln.removeprefix("tokenpace gateway: ") for ln in done.stderr.splitlines()]
    return done.exit_code, lines


@SHORT
@given(docs=st.lists(fuzz_files.gateway_docs(), min_size=8, max_size=8))
def test_hostile_files_reloaded_live_are_answered_with_every_problem(
    tmp_path_factory: Any, docs: list[str]
) -> None:
    path = tmp_path_factory.mktemp("reload") / "gateway.toml"
    path.write_text(GOOD)
    ctx = gateway.make_context("gateway", ["--config", str(path)])
    load = reader(ctx, lambda o: _from_values(o, None), value_parts)
    assert load is not None
    start = load()
    answers: list[tuple[int, dict[str, Any]]] = []

    async def main() -> None:
        async with RunningGateway(start, load=load) as gw, aiohttp.ClientSession() as s:
            for doc in docs:
                path.write_text(HEAD + doc)
                headers = {"Authorization": f"Bearer {KEY}"}
                async with s.post(gw.admin_url + "/tokenpace/config", headers=headers) as r:
                    answers.append((r.status, await r.json()))
                path.write_text(GOOD)
                async with s.post(gw.admin_url + "/tokenpace/config", headers=headers) as r:
                    assert r.status in (200, 422), await r.text()  # back to the good file (or refused)

    asyncio.run(main())
    for doc, (status, answer) in zip(docs, answers, strict=True):
        assert status in (200, 422), (doc, status, answer)
        path.write_text(HEAD + doc)
        code, lines = _checked(path)
        if code == 2:  # the file's own problems: the same list, every one of them
            assert status == 422 and answer["errors"] == lines, (doc, answer, lines)
        elif status == 422:  # a good file asking what cannot change live: said, never silently
            assert answer["errors"] and all("cannot change" in e or "workers" in e for e in answer["errors"])


def test_a_reload_refused_for_the_whole_file_lists_each_problem(tmp_path: Path) -> None:
    """Checks of the configuration as a whole (ranges, weights, label sizes) are listed one by one
    too, as --check-config lists them, not only the first."""
    path = tmp_path / "gateway.toml"
    path.write_text(GOOD)
    ctx = gateway.make_context("gateway", ["--config", str(path)])
    load = reader(ctx, lambda o: _from_values(o, None), value_parts)
    assert load is not None
    bad = HEAD.replace("max-connections = 64", "max-connections = 9999999999") + "slo-objective = 2\n"
    bad += '\n[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\nweight = 1e308\n'

    async def main() -> tuple[int, dict[str, Any]]:
        async with RunningGateway(load(), load=load) as gw, aiohttp.ClientSession() as s:
            path.write_text(bad)
            headers = {"Authorization": f"Bearer {KEY}"}
            async with s.post(gw.admin_url + "/tokenpace/config", headers=headers) as r:
                return r.status, await r.json()

    status, answer = asyncio.run(main())
    code, lines = _checked(path)
    assert code == 2 and len(lines) == 3, lines
    assert status == 422 and answer["errors"] == lines, answer
