"""One log line per kind of trouble per window, with the count of what was held back.

A hostile client can cause thousands of rejections a second; the operator needs to know that it
happens and how often, not a line (let alone a traceback) for each. Lines carry a kind and a peer
address, never a header value or a request line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

LOG = logging.getLogger("tokenpace.gateway")
WINDOW_S = 10.0


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger = LOG,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.window_s = window_s
        self.clock = clock
        self._since: dict[str, float] = {}  # kind -> when its last line was written
        self._held: dict[str, int] = {}  # kind -> events since that line, not written

    def __call__(self, kind: str, message: str) -> bool:
        """Log ``message`` unless this kind was logged within the window; True when written."""
        now = self.clock()
        since = self._since.get(kind)
        if since is not None and now - since < self.window_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        held = self._held.pop(kind, 0)
        tail = f" ({held} more of this kind in the last {self.window_s:g} s not logged)" if held else ""
        self._since[kind] = now
        self.logger.warning("tokenpace gateway: %s%s", message, tail)
        return True
