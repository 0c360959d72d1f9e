"""Does this server keep a connection open after answering? Learned from the run itself, because
some servers announce keep-alive and then close the connection right after some responses:
llama.cpp's server keeps a connection after a whole (sized) response and closes it after every
streamed (chunked) one. A request written in that instant reaches a connection the server is
closing, and would fail or have to be resent. So the behaviour is judged apart for the two kinds of
response: until a kind has been seen, a connection that finished one is offered for reuse only
after a short look (the pool's ``look_s``); a kind after which the server closed is never reused
again, and if a reused connection is ever dropped unanswered, the run stops reusing connections
and says so."""

from __future__ import annotations

PROBE_S = 0.001  # the client's look: a server on one host closes within microseconds of answering
# The gateway's look is longer: a proxy or a busy host between it and the engine passes the
# engine's close on late (a thread relay waits out a 5 ms interpreter switch), and a wrong
# judgement costs one of its clients a 502. Its callers dial meanwhile instead of waiting.
GATEWAY_LOOK_S = 0.025

_KIND = {True: "a streamed (chunked) response", False: "a whole response"}


class KeepAlive:
    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse  # False: a new connection per request
        # By kind of response (chunked or not): True, the server closed after one; False, it kept
        # the connection open. A kind not in it has not been seen yet (two entries at most).
        self.closes_after: dict[bool, bool] = {}
        self.stopped: str | None = None  # why reuse was given up, for the run's warnings

    def known(self, chunked: bool) -> bool:
        """The server's behaviour after this kind of response has been seen (or does not matter)."""
        return not self.reuse or chunked in self.closes_after

    def reuses(self, chunked: bool) -> bool:
        """A connection that finished this kind of response may be reused."""
        return self.reuse and not self.closes_after.get(chunked, False)

    def judge(self, chunked: bool, closed_after_answering: bool, look_s: float) -> None:
        """The first look at a connection that finished this kind of response decides."""
        if self.known(chunked):
            return
        self.closes_after[chunked] = closed_after_answering
        if closed_after_answering and self.stopped is None:
            self.stopped = (
                f"the server closed a kept-alive connection within {look_s * 1e3:g} ms of answering "
                f"{_KIND[chunked]} (it closes after each): each later request after one opened a "
                "new connection"
            )

    def stop(self, reason: str) -> None:
        if self.reuse:
            self.reuse = False
            self.stopped = reason
