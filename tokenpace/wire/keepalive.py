"""Does this server keep a connection open after answering? Learned from the run itself, because
some servers (llama.cpp's server) announce keep-alive and then close every connection right after
its response: a request written in that instant reaches a connection the server is closing, and
would fail or have to be resent. So until the server has shown what it does, a finished connection
is offered for reuse only after a short look (``PROBE_S``); if the server closed it, or if a reused
connection is ever dropped unanswered, the run stops reusing connections and says so."""

from __future__ import annotations

PROBE_S = 0.001  # a server that closes after answering does so within microseconds on one host


class KeepAlive:
    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse  # False: a new connection per request
        self.known = not reuse  # the server's behaviour has been seen (or does not matter)
        self.stopped: str | None = None  # why reuse was given up, for the run's warnings

    def judge(self, closed_after_answering: bool) -> None:
        """The first look at a finished connection decides."""
        if self.known:
            return
        self.known = True
        if closed_after_answering:
            self.stop(
                f"the server closed a kept-alive connection within {PROBE_S * 1e3:g} ms of answering "
                "(it closes after every response): each later request opened a new connection"
            )

    def stop(self, reason: str) -> None:
        if self.reuse:
            self.reuse = False
            self.stopped = reason
        self.known = True
