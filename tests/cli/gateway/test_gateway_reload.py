"""`tokenpace gateway --config FILE` re-reads its file live (POST /tokenpace/config, SIGHUP): the
command line's flags still win, and a file with an unknown key, a bad URL, weights summing to 0 or
a setting that cannot change live is refused whole, with every reason, the running config kept."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from tokenpace.testing.procs import free_port, run_cli, start_service, wait_listening

KEY = "reload-test-key"


def _post(admin: int) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/tokenpace/config", data=b"", headers={"Authorization": f"Bearer {KEY}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, orjson.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


def _get(admin: int) -> dict[str, Any]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/tokenpace/config", headers={"Authorization": f"Bearer {KEY}"}
    )
    with urllib.request.urlopen(request, timeout=30) as r:
        answer: dict[str, Any] = orjson.loads(r.read())
        return answer


def test_the_file_is_read_again_and_a_bad_one_refused_whole(tmp_path: Path) -> None:
    port, admin = free_port(), free_port()
    (tmp_path / "admin.key").write_text(KEY + "\n")
    head = f'listen = "127.0.0.1:{port}"\nadmin-listen = "127.0.0.1:{admin}"\nadmin-key-file = "admin.key"\n'
    ups = '[[upstream]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\nweight = {a}\n\n'
    ups += '[[upstream]]\nname = "b"\nurl = "{b_url}"\nweight = {b}\n'
    good = head + 'no-store = true\nslo = "ttft=1s"\n' + ups.format(a=90, b=10, b_url="http://127.0.0.1:2/v1")
    path = tmp_path / "gateway.toml"
    path.write_text(good)
    # the command line's --slo wins over the file's, at the start and after
    proc = start_service("gateway", "--config", str(path), "--slo", "ttft=700ms", cwd=tmp_path)
    try:
        wait_listening(admin, proc)
        path.write_text(good.replace("weight = 10", "weight = 30"))
        status, answer = _post(admin)
        assert status == 200 and answer["epoch"] == 1 and answer["changed"] == ["upstream"], answer
        assert answer["config"]["slo"]["ttft_ms"] == pytest.approx(700.0)
        bad = {
            "unknown key 'colour'": 'colour = "blue"\n' + good,
            "not an http(s) URL": head + "no-store = true\n" + ups.format(a=90, b=10, b_url="ftp://x/v1"),
            "every upstream's weight is 0": head
            + "no-store = true\n"
            + ups.format(a=0, b=0, b_url="http://h/v1"),
            "listen cannot change": good.replace(f"127.0.0.1:{port}", f"127.0.0.1:{free_port()}"),
            "no-store cannot change": good.replace("no-store = true\n", ""),
        }
        for reason, text in bad.items():
            path.write_text(text)
            status, answer = _post(admin)
            assert status == 422 and answer["epoch"] == 1, answer
            assert any(reason in e for e in answer["errors"]), (reason, answer)
            weights = {u["arm"]: u["weight"] for u in answer["config"]["split"]}
            assert weights == {"a": 90, "b": 30}  # the running config stayed
        path.write_text(good.replace("weight = 10", "weight = 40"))
        proc.send_signal(signal.SIGHUP)  # the same loader, by signal
        for _ in range(400):  # until the admin surface shows it (how long is not asserted)
            if _get(admin)["epoch"] == 2:
                break
            time.sleep(0.05)
        assert {u["arm"]: u["weight"] for u in _get(admin)["split"]} == {"a": 90, "b": 40}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "config change by SIGHUP applied: epoch 2 (upstream)" in err, err


def test_a_refused_reload_lists_every_problem_as_check_config_does(tmp_path: Path) -> None:
    port, admin = free_port(), free_port()
    (tmp_path / "admin.key").write_text(KEY + "\n")
    head = f'listen = "127.0.0.1:{port}"\nadmin-listen = "127.0.0.1:{admin}"\nadmin-key-file = "admin.key"\n'
    head += "no-store = true\n"
    up = '[[upstream]]\nname = "a"\nurl = "{url}"\n'
    path = tmp_path / "gateway.toml"
    path.write_text(head + 'slo = "ttft=1s"\n' + up.format(url="http://127.0.0.1:1/v1"))
    proc = start_service("gateway", "--config", str(path), cwd=tmp_path)
    try:
        wait_listening(admin, proc)
        bad = 'slo = "ttft=soon"\nfirst-token-timeout = "later"\n' + up.format(url="ftp://x/v1")
        path.write_text(head + bad)
        status, answer = _post(admin)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    checked = run_cli("gateway", "--check-config", str(path), cwd=str(tmp_path))
    assert checked.returncode == 2
    lines = [line.removeprefix("tokenpace gateway: ") for line in checked.stderr.splitlines()]
    assert len(lines) == 3, checked.stderr
    assert status == 422 and answer["errors"] == lines, answer
