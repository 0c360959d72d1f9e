"""Start the built-in simulated engine in its own process, so it never shares the client's core."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time

_READY = re.compile(r"listening on (http://\S+)")


class SimStartError(Exception):
    pass


class SimProcess:
    """``with SimProcess(profile) as url:`` runs ``tokenpace sim`` on a free port of 127.0.0.1."""

    def __init__(
        self, profile: str | None = None, extra_args: list[str] | None = None, start_timeout_s: float = 30.0
    ) -> None:
        self.profile = profile
        self.extra_args = extra_args or []
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> str:
        cmd = [sys.executable, "-m", "tokenpace", "sim", "--host", "127.0.0.1", "--port", "0"]
        if self.profile:
            cmd += ["--profile", self.profile]
        cmd += self.extra_args
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )  # Ctrl-C goes to us, not it
        deadline = time.monotonic() + self.start_timeout_s
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = _READY.search(line)
            if match:
                self.url = match.group(1)
                return self.url
        err = ""
        if self.proc.poll() is not None and self.proc.stderr is not None:
            err = (self.proc.stderr.read().strip().splitlines()[-1:] or [""])[0]
        self.__exit__()
        raise SimStartError(f"the simulated engine did not start{': ' + err if err else ''}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()
        self.proc = None
