"""``--spool DIR``: the records of completed requests kept on local disk until the store has them,
so that a gateway killed outright (SIGKILL, the OOM killer) loses none of them; its next start with
the same DIR stores what the last one could not.

- Each record the sink accepts is appended at once, synchronously, in the request's own task: in
  the same step of the event loop as the last bytes of its answer were handed to the kernel (one
  ``write`` of its JSON line to the page cache, about as much work as the line's serialisation).
  What is lost to a kill is only a record whose answer's end was sent in that step, before the line.
  The page cache outlives the process, not the machine: a host that fails loses what it held.
- Files of at most ``SEGMENT_RECORDS`` records, named by the process's generation and the index of
  their first record. A file whose records the writer has all handled (stored, or counted dropped
  because the store refused them) is removed. How many it has handled is kept beside them
  (``handled-GEN``, rewritten in place after each batch), so a start skips what was stored. A kill
  between a batch's commit and that mark stores that batch twice: at least once, never lost.
- At most ``MAX_SPOOL_BYTES`` on disk: past that, records are not spooled (counted in ``skipped``)
  until the writer catches up.
- ``leftovers`` at start: what earlier processes left, read within ``MAX_SPOOL_BYTES`` (a line that
  does not parse, torn by a failing host, is counted and skipped); the caller hands the records to
  the sink, which spools them again, then ``discard_leftovers`` removes the old files. They are
  stored in the new session's runs (of their config epoch where this process runs it, else of its
  epoch 0; the record keeps its own ``config_epoch``), their times read on the new session's clock
  anchor: the monotonic clock is the host's, so this holds on the same host (a container restarted
  in its pod).
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import orjson

from tokenpace.adapters.results import record_line
from tokenpace.core.record import RequestRecord

SEGMENT_RECORDS = 2000
MAX_SPOOL_BYTES = 256 * 1024 * 1024
_NAME = re.compile(r"spool-(\d{6})-(\d{12})\.jsonl")


def _handled_file(folder: Path, gen: int) -> Path:
    return folder / f"handled-{gen:06d}"


class Spool:
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.appended = 0  # records appended by this process (cumulative)
        self.handled = 0  # of them, handled by the writer (cumulative, in order)
        self.bytes = 0  # on disk now
        self.skipped = 0  # not spooled: past MAX_SPOOL_BYTES, or the disk refused them
        self.unreadable = 0  # leftover lines that did not parse
        self.replayed = 0  # leftover records handed back to the sink at start
        self._old = self._files()  # earlier processes' files: (generation, first index, path)
        self.gen = 1 + max((g for g, _, _ in self._old), default=0)
        self._closed: list[tuple[Path, int, int]] = []  # (file, its end in ``appended``, bytes)
        self._fd = self._mark = -1
        self._path = self.folder
        self._in_file = self._file_bytes = 0

    def _files(self) -> list[tuple[int, int, Path]]:
        found = [(m, p) for p in self.folder.iterdir() if (m := _NAME.fullmatch(p.name))]
        return sorted((int(m[1]), int(m[2]), p) for m, p in found)

    def leftovers(self) -> list[RequestRecord]:
        """What earlier processes left and did not store, oldest first."""
        out: list[RequestRecord] = []
        budget = MAX_SPOOL_BYTES
        for gen, first, path in self._old:
            try:
                handled = int(_handled_file(self.folder, gen).read_bytes()[:20] or b"0")
            except (OSError, ValueError):
                handled = 0
            try:
                data = path.read_bytes()[: max(budget, 0)]
            except OSError:
                continue
            budget -= len(data)
            for i, line in enumerate(data.splitlines(), start=first):
                if i < handled:  # stored by that process
                    continue
                try:
                    out.append(RequestRecord.from_dict(orjson.loads(line)))
                except Exception:  # a torn or foreign line: skipped, counted
                    self.unreadable += 1
        self.replayed = len(out)
        return out

    def discard_leftovers(self) -> None:
        for gen, _, path in self._old:
            path.unlink(missing_ok=True)
            _handled_file(self.folder, gen).unlink(missing_ok=True)
        self._old = []

    def append(self, record: RequestRecord) -> None:
        """Synchronous; never raises (a disk that refuses is counted, the request goes on)."""
        line = record_line(record)
        self.appended += 1  # handled by the writer, spooled or not: the count stays in step
        if self.bytes + len(line) <= MAX_SPOOL_BYTES:
            try:
                if self._fd < 0 or self._in_file >= SEGMENT_RECORDS:
                    self._next_file(self.appended - 1)
                os.write(self._fd, line)
            except OSError:
                pass
            else:
                self._in_file += 1
                self._file_bytes += len(line)
                self.bytes += len(line)
                return
        self._skip()

    def skip(self) -> None:
        """The next record is not spooled (its index is used all the same: the writer counts it)."""
        self.appended += 1
        self._skip()

    def _skip(self) -> None:
        self.skipped += 1
        self._in_file = SEGMENT_RECORDS  # a file's lines stay consecutive records: the next starts one

    def stored(self, n: int) -> None:
        """The writer handled the next ``n`` records (in the order they were appended)."""
        self.handled = min(self.handled + n, self.appended)
        if self._mark >= 0:
            with contextlib.suppress(OSError):  # else a start replays more: duplicates, never a loss
                os.pwrite(self._mark, b"%020d" % self.handled, 0)
        while self._closed and self._closed[0][1] <= self.handled:
            path, _end, size = self._closed.pop(0)
            path.unlink(missing_ok=True)
            self.bytes -= size
        if self.handled == self.appended and self._fd >= 0:  # all stored: the open file goes too
            self._close_file()
            self._path.unlink(missing_ok=True)
            self.bytes -= self._file_bytes

    def _next_file(self, first: int) -> None:
        if self._fd >= 0:
            self._close_file()
            self._closed.append((self._path, first, self._file_bytes))
        if self._mark < 0:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            self._mark = os.open(_handled_file(self.folder, self.gen), flags, 0o600)
            os.pwrite(self._mark, b"%020d" % self.handled, 0)
        self._path = self.folder / f"spool-{self.gen:06d}-{first:012d}.jsonl"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        self._in_file = self._file_bytes = 0

    def _close_file(self) -> None:
        os.close(self._fd)
        self._fd = -1

    def close(self) -> None:
        """At a clean stop: the files stay only where the writer left records in them."""
        if self._fd >= 0:
            self._close_file()
            if self.handled == self.appended:
                self._path.unlink(missing_ok=True)
        if self._mark >= 0:
            os.close(self._mark)
            self._mark = -1
            if self.handled == self.appended and not self._closed:
                _handled_file(self.folder, self.gen).unlink(missing_ok=True)
