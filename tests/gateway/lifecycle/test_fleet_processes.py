"""The fleet as it runs (fleet_sync.py, docs/gateway-fleet.md): three gateway processes on 127.0.0.1
behind a round-robin front, sharing a PostgreSQL store. A gray release of b from 1 % to 100 %,
each step made by `tokenpace arms` through a different replica, rolled back at 50 % by `arms
--apply` when b starts failing. After each change every replica serves the fleet's epoch and routes
the same users to the same arm; a replica killed (SIGKILL) and started again mid-rollout follows the current
split; no completed request's record is missing from the store; `arms` counts all three replicas."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from baseline_fixtures import new_pg_database, pg_server, served  # noqa: F401
from click.testing import CliRunner, Result

from tokenpace.adapters.store import connect
from tokenpace.cli.main import cli
from tokenpace.testing.procs import free_port, start_service, wait_listening
from tokenpace.testing.scripted_server import Script, ScriptedServer

DOC = Path(__file__).resolve().parents[3] / "docs" / "gateway-fleet.md"
STORE = "postgresql://tokenpace@db.internal/tokenpace"
START = (
    f"tokenpace gateway --config fleet.toml --store {STORE} --fleet prod --replica r0 --spool spool-r0 "
    "--listen 127.0.0.1:9000 --admin-listen 127.0.0.1:9100"
)
SET = f"tokenpace arms --store {STORE} --gateway http://127.0.0.1:9101 --admin-key-file admin.key --set b=25%"
RUNS = f"tokenpace runs list --store {STORE} --where gateway_fleet=prod"
KEY = "fleet-admin-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FAST, FAILING = Script(ttft_s=0.002, itl_s=0.001), Script(http_status=500)
CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
# generous, for a busy host: the design's bound is one poll (0.3 s) plus a query and a swap; every
# wait below is on a condition, polled, and ends as soon as it holds
DEADLINE_S = 30.0
CONFIG = """admin-key-file = "admin.key"
slo = "ttft=2s"
shutdown-timeout = "20s"  # an upper bound: a stop ends when the drain and the last write do

[[upstream]]
name = "a"
url = "{a}"
weight = 100

[[upstream]]
name = "b"
url = "{b}"
weight = 0
"""


@contextlib.contextmanager
def round_robin(ports: list[int]) -> Iterator[int]:
    """A TCP front on its own loop: each new connection to the next replica that accepts it."""
    loop = asyncio.new_event_loop()
    turn = [0]

    async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in ports:
            port = ports[turn[0] % len(ports)]
            turn[0] += 1
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:  # a replica down: the next one
                continue
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            return
        writer.close()

    server = loop.run_until_complete(asyncio.start_server(handle, "127.0.0.1", 0))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


class Fleet:
    def __init__(self, tmp: Path, store_url: str) -> None:
        self.tmp, self.store_url = tmp, store_url
        self.ports = [free_port() for _ in range(3)]
        self.admins = [free_port() for _ in range(3)]
        self.procs: list[subprocess.Popen[str] | None] = [None, None, None]
        self.completed: set[str] = set()  # client request ids whose whole answer arrived
        self.sent = 0

    def start(self, i: int) -> None:
        """docs/gateway-fleet.md's command, for replica ``i`` on this test's store and ports."""
        line = _local(START, self.store_url).replace("r0", f"r{i}").replace(":9000", f":{self.ports[i]}")
        self.procs[i] = start_service(*line.replace(":9100", f":{self.admins[i]}").split()[1:], cwd=self.tmp)

    def wait_ready(self, i: int) -> None:
        proc = self.procs[i]
        assert proc is not None
        wait_listening(self.ports[i], proc, 4 * DEADLINE_S)
        wait_listening(self.admins[i], proc, 4 * DEADLINE_S)

    def stop(self, i: int) -> str:
        proc = self.procs[i]
        assert proc is not None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=4 * DEADLINE_S)
        assert proc.returncode == 0, err
        self.procs[i] = None
        return err

    def kill_during_traffic(self, i: int, front: int) -> None:
        """SIGKILL replica ``i`` once requests through the front are completing, and send on."""
        proc = self.procs[i]
        assert proc is not None
        traffic = threading.Thread(target=self.send, args=(front, [f"k-{n}" for n in range(150)], "kill"))
        traffic.start()
        deadline = time.monotonic() + DEADLINE_S
        while sum(rid.startswith("kill-") for rid in list(self.completed)) < 30:
            assert time.monotonic() < deadline and traffic.is_alive()
            time.sleep(0.01)
        proc.kill()
        proc.communicate(timeout=30)
        self.procs[i] = None
        traffic.join(4 * DEADLINE_S)
        assert not traffic.is_alive(), "the traffic through the front did not end"

    def page(self, i: int) -> dict[str, Any]:
        async def get() -> dict[str, Any]:
            url = f"http://127.0.0.1:{self.admins[i]}/tokenpace/config"
            async with aiohttp.ClientSession() as s, s.get(url, headers=AUTH) as r:
                assert r.status == 200
                page: dict[str, Any] = await r.json()
                return page

        return asyncio.run(get())

    def until_epoch(self, epoch: int, weights: dict[str, float]) -> None:
        """Every replica serves the fleet's epoch (how fast is not asserted: a generous deadline)."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            pages = [self.page(i) for i in range(3)]
            if all(p["epoch"] == epoch for p in pages):
                break
            assert time.monotonic() < deadline, [p["epoch"] for p in pages]
            time.sleep(0.05)
        for p in pages:
            assert {u["arm"]: u["weight"] for u in p["split"]} == weights and p["fleet"] == "prod"

    def send(self, port: int, users: list[str], tag: str) -> None:
        """One request per user to ``port``; each whose answer arrived whole is 'completed'."""

        async def run() -> None:
            limit = asyncio.Semaphore(8)
            # a connection per request: the front deals each to the next replica
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s:

                async def one(n: int, user: str) -> None:
                    rid = f"{tag}-{n}"
                    headers = {"x-user-id": user, "x-request-id": rid}
                    async with limit:
                        self.sent += 1
                        with contextlib.suppress(aiohttp.ClientError):
                            url = f"http://127.0.0.1:{port}/v1/chat/completions"
                            async with s.post(url, json=CHAT, headers=headers) as r:
                                await r.read()
                                self.completed.add(rid)

                await asyncio.gather(*(one(n, u) for n, u in enumerate(users)))

        asyncio.run(run())

    def arms_seen(self, b: ScriptedServer, users: list[str], tag: str) -> list[set[str]]:
        """Per replica, the users it routed to b (b's server saw their x-user-id)."""
        out = []
        for i in range(3):
            b.stats.headers.clear()
            self.send(self.ports[i], users, f"{tag}-r{i}")
            out.append({h["x-user-id"].decode() for h in b.stats.headers if "x-user-id" in h})
        return out

    def stored_ids(self) -> set[str]:
        store = connect(self.store_url)
        try:
            runs = store.list_runs({"source": "gateway", "gateway_fleet": "prod"})
            return {r.labels.get("client_request_id", "") for run in runs for r in store.load_records(run.id)}
        finally:
            store.close()

    def until_stored(self) -> None:
        deadline = time.monotonic() + 4 * DEADLINE_S  # a batch's linger plus PostgreSQL on a busy host
        while missing := self.completed - self.stored_ids():
            assert time.monotonic() < deadline, f"{len(missing)} completed requests have no record"
            time.sleep(0.2)


def _local(command: str, store_url: str) -> str:
    return command.replace(STORE, store_url)


def _cli(argv: list[str]) -> Result:
    """`tokenpace ...` in this process (its imports paid once, not per step)."""
    result = CliRunner().invoke(cli, argv, env={"COLUMNS": "200"})
    assert "Traceback" not in result.output, result.output
    return result


def _arms(fleet: Fleet, *args: str) -> Result:
    """`tokenpace arms` in this process (its imports paid once, not per step)."""
    key = str(fleet.tmp / "admin.key")
    return _cli(["arms", "--store", fleet.store_url, "--admin-key-file", key, *args])


def test_three_replicas_one_split_through_a_gray_release(tmp_path: Path, pg_server: int) -> None:  # noqa: F811
    text = DOC.read_text()
    for command in (START, SET, RUNS):
        assert command in text, command
    fleet = Fleet(tmp_path, new_pg_database(pg_server))
    users = [f"user-{i}" for i in range(40)]
    with served(FAST) as a, served(FAST) as b, round_robin(fleet.ports) as front:
        (tmp_path / "fleet.toml").write_text(CONFIG.format(a=a.url, b=b.url))
        (tmp_path / "admin.key").write_text(KEY + "\n")
        for i in range(3):
            fleet.start(i)
        try:
            for i in range(3):
                fleet.wait_ready(i)
            fleet.until_epoch(0, {"a": 100, "b": 0})
            for epoch, share in enumerate((1, 5, 25, 50), start=1):
                via = f"127.0.0.1:{fleet.admins[epoch % 3]}"  # each step through another replica
                line = _local(SET, fleet.store_url).replace("127.0.0.1:9101", via)
                line = line.replace("admin.key", str(tmp_path / "admin.key"))
                step = _cli(line.replace("b=25%", f"b={share}%").split()[1:])
                assert step.exit_code == 0, step.output
                fleet.until_epoch(epoch, {"a": 100 - share, "b": share})
                seen = fleet.arms_seen(b, users, f"e{epoch}")
                assert seen[0] == seen[1] == seen[2], (epoch, seen)
                fleet.send(front, [f"front-{epoch}-{n}" for n in range(45)], f"front-{epoch}")
                if share == 25:  # a replica killed outright mid-rollout, traffic on; started again
                    # what was sent so far is in the store first, so the killed session has runs of
                    # its own (on a busy host its writer may otherwise not have committed any yet,
                    # and the spool's replay would put them all in the new session)
                    fleet.until_stored()
                    fleet.kill_during_traffic(2, front)
                    fleet.start(2)
                    fleet.wait_ready(2)
                    page = fleet.page(2)  # its file says b=0: it runs the fleet's split from the start
                    assert page["epoch"] == 3 and {u["arm"]: u["weight"] for u in page["split"]} == {
                        "a": 75,
                        "b": 25,
                    }
                    assert fleet.arms_seen(b, users, "restarted")[2] == seen[0]
            assert seen[0], "nobody on b at 50 %"
            b.default = FAILING  # b breaks at 50 %: `arms --apply` through one replica rolls it back
            fleet.send(front, [f"failing-{n}" for n in range(80)], "failing")
            fleet.until_stored()
            rolled = _arms(
                fleet, "--json", "--apply", "--guard", "error_rate=+5pp", "--resamples", "200",
                "--gateway", f"http://127.0.0.1:{fleet.admins[0]}", "--since", "1h", "--fleet", "prod",
            )  # fmt: skip
            assert rolled.exit_code == 1, rolled.output
            report = orjson.loads(rolled.stdout)
            since_50 = {i for i in fleet.completed if i.startswith(("e4-", "front-4-", "failing-"))}
            assert sum(arm["requests"] for arm in report["arms"]) == len(since_50)  # all three replicas'
            other = _arms(fleet, "--fleet", "staging", "--since", "1h")  # another fleet's: none of these
            assert other.exit_code == 2 and "no gateway traffic" in other.output, other.output
            fleet.until_epoch(5, {"a": 100, "b": 0})
            assert fleet.arms_seen(b, users, "rolled") == [set(), set(), set()]
            b.default = FAST
            for epoch, share in ((6, 50), (7, 100)):
                step = _arms(
                    fleet, "--gateway", f"http://127.0.0.1:{fleet.admins[epoch % 3]}", "--set", f"b={share}%"
                )
                assert step.exit_code == 0, step.output
                fleet.until_epoch(epoch, {"a": 100 - share, "b": share})
            assert fleet.arms_seen(b, users, "done") == [set(users)] * 3
        finally:
            for i in range(3):
                if fleet.procs[i] is not None:
                    fleet.stop(i)
    assert fleet.completed <= fleet.stored_ids()  # no completed request's record lost
    listed = _cli(_local(RUNS, fleet.store_url).split()[1:])
    store = connect(fleet.store_url)
    runs = store.list_runs({"source": "gateway", "gateway_fleet": "prod"})
    assert listed.exit_code == 0 and all(r.id in listed.output for r in runs), listed.output
    assert {r.labels["gateway_replica"] for r in runs} == {"r0", "r1", "r2"}
    assert len({r.labels["gateway_session"] for r in runs if r.labels["gateway_replica"] == "r2"}) == 2
    assert [c.epoch for c in store.load_config_changes(0)] == [1, 2, 3, 4, 5, 6, 7]  # one row per change
