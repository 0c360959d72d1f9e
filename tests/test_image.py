"""The Dockerfile: read as text (stages, user, the compiled simulator, what the manifests run), then
built with the Debian podman and the gateway started from the image, where this machine can.

The build needs a base image. Where no registry serves python:3.12-slim, the test makes a Debian one
with mmdebstrap (python3 and its venv module, the host's own CA certificates so pip trusts what the
host trusts) and keeps it as TEST_BASE; $TOKENPACE_IMAGE_BASE names another. The gateway runs from
the image with `buildah run` (chroot isolation, the host's network): it needs no OCI runtime, which
some hosts (nested sandboxes) cannot start."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tokenpace.testing.procs import free_port
from tokenpace.testing.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
MANIFEST = ROOT / "deploy" / "k8s" / "gateway.yaml"
TEST_BASE = "localhost/tokenpace-test-base:bookworm"
TAG = "localhost/tokenpace:test"
LABEL = "org.tokenpace.test=image"
LOCAL_CAS = Path("/usr/local/share/ca-certificates")


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments left out."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            word, _, args = pending.strip().partition(" ")
            out.append((word.upper(), " ".join(args.split())))
            pending = ""
    return out


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for item in instructions(DOCKERFILE.read_text()):
        if item[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(item)
    return found


def _deployment() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    return next(d for d in docs if d["kind"] == "Deployment")


def test_the_dockerfile_builds_in_a_stage_and_runs_slim_and_not_as_root() -> None:
    build, final = stages()
    assert build[0] == ("FROM", "${BASE} AS build") and final[0] == ("FROM", "${BASE}")
    assert ("ARG", "BASE=python:3.12-slim") in instructions(DOCKERFILE.read_text())
    build_runs = " ".join(args for word, args in build if word == "RUN")
    assert "scripts/build_native.py" in build_runs and "COMPILED_WANTED" in build_runs
    assert "'.[postgres]'" in build_runs  # the manifests' fleet stores in PostgreSQL
    # the final stage: the venv from the build stage only (no compiler), a numeric non-root user
    assert [args for word, args in final if word == "COPY"] == ["--from=build /opt/tokenpace /opt/tokenpace"]
    user = [args for word, args in final if word == "USER"]
    assert len(user) == 1 and user[0].split(":")[0].isdigit() and int(user[0].split(":")[0]) > 0
    assert ("ENTRYPOINT", '["tokenpace"]') in final
    final_runs = " ".join(args for word, args in final if word == "RUN")
    assert "apt-get" not in final_runs and "COMPILED_WANTED" in final_runs
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ignored[1] == "*" and "!tokenpace/" in ignored  # no .venv, results or .git in the context


def test_the_manifests_run_the_image_the_dockerfile_builds_as_its_user() -> None:
    header = DOCKERFILE.read_text().split("\nARG", 1)[0]
    assert "podman build -t tokenpace:latest ." in header
    pod = _deployment()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "tokenpace:latest"
    assert container["command"][0] == "tokenpace"  # on PATH in the image (its venv's bin)
    uid = int(next(a for w, a in stages()[1] if w == "USER").split(":")[0])
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == uid
    assert container["securityContext"]["allowPrivilegeEscalation"] is False


def _why_not() -> str | None:
    """Why this machine cannot build and run the image; None when it can."""
    if os.environ.get("TOKENPACE_IMAGE_TEST") == "0":  # a build takes minutes on 2 cores: a CI may opt out
        return "TOKENPACE_IMAGE_TEST=0: the image is not built here"
    for tool in ("podman", "buildah"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs it: scripts/system-packages.txt)"
    if os.environ.get("TOKENPACE_IMAGE_BASE"):
        return None
    if subprocess.run(["podman", "image", "exists", TEST_BASE], capture_output=True).returncode == 0:
        return None
    if shutil.which("mmdebstrap") is None:
        return "no base image: mmdebstrap is not installed and $TOKENPACE_IMAGE_BASE names none"
    if os.geteuid() != 0:
        return "no base image: mmdebstrap needs root here, and $TOKENPACE_IMAGE_BASE names none"
    return None


def _pypi_unreachable() -> str | None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15).close()
    except (OSError, urllib.error.URLError) as exc:
        return f"PyPI is unreachable ({exc}): the image's pip install needs it"
    return None


def _base() -> str:
    given = os.environ.get("TOKENPACE_IMAGE_BASE")
    if given:
        return given
    if subprocess.run(["podman", "image", "exists", TEST_BASE], capture_output=True).returncode == 0:
        return TEST_BASE
    tar = Path(os.environ.get("TMPDIR", "/tmp")) / f"tokenpace-base-{os.getpid()}.tar"
    cas = f'cp -r {LOCAL_CAS}/. "$1{LOCAL_CAS}/"' if LOCAL_CAS.is_dir() else "true"
    made = subprocess.run(
        ["mmdebstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
         f"--customize-hook={cas}", '--customize-hook=chroot "$1" update-ca-certificates',
         "--format=tar", "bookworm", str(tar)],
        capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    try:
        if made.returncode != 0:
            pytest.skip(f"no base image: mmdebstrap failed ({made.stderr.strip().splitlines()[-1:]})")
        subprocess.run(
            ["podman", "import", str(tar), TEST_BASE], check=True, capture_output=True, timeout=600
        )
    finally:
        tar.unlink(missing_ok=True)
    return TEST_BASE


@contextlib.contextmanager
def _container(image: str) -> Iterator[str]:
    made = subprocess.run(["buildah", "from", image], capture_output=True, text=True, check=True)
    name = made.stdout.strip().splitlines()[-1]
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True)


def _get(url: str, body: bytes | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json"} if body else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except OSError as exc:  # not listening yet
        return 0, str(exc).encode()


def _until_ready(admin: int, proc: subprocess.Popen[str]) -> None:
    for _ in range(600):  # a bounded number of polls, each waiting at most 0.2 s on the process
        if _get(f"http://127.0.0.1:{admin}/tokenpace/ready")[0] == 200:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.2)
        if proc.poll() is not None:
            pytest.fail(f"the gateway in the image exited: {proc.stderr.read() if proc.stderr else ''}")
    pytest.fail("the gateway in the image never became ready")


def test_the_image_builds_and_the_gateway_in_it_proxies_and_reports(threaded_server: ScriptedServer) -> None:
    why = _why_not() or _pypi_unreachable()
    if why:
        pytest.skip(why)
    build = subprocess.run(
        ["podman", "build", "--isolation=chroot", "--network=host", f"--build-arg=BASE={_base()}",
         f"--label={LABEL}", "-t", TAG, "."],
        cwd=ROOT, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    # earlier builds' images, untagged by this one (the build stage's layers stay: the next build's cache)
    subprocess.run(["podman", "image", "prune", "-f", f"--filter=label={LABEL}"], capture_output=True)
    config = json.loads(
        subprocess.run(["podman", "image", "inspect", TAG], capture_output=True, text=True).stdout
    )
    assert config[0]["Config"]["User"] == "10001:10001"
    port, admin = free_port(), free_port()
    with _container(TAG) as name:
        proc = subprocess.Popen(
            ["buildah", "run", "--isolation=chroot", "--network=host", name, "tokenpace", "gateway",
             "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
             "--upstream", f"up={threaded_server.url}", "--no-store"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            _until_ready(admin, proc)
            chat = {"model": "ok", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
            status, body = _get(f"http://127.0.0.1:{port}/v1/chat/completions", json.dumps(chat).encode())
            assert status == 200 and json.loads(body)["choices"], body[:500]
            status, metrics = _get(f"http://127.0.0.1:{admin}/metrics")
            assert status == 200 and b'upstream="up"' in metrics
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
