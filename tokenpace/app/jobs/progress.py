"""What a caller may watch while a run goes: the app reports, the caller shows (the CLI draws a
progress bar; a Python caller may pass nothing). The app never imports a UI library."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tokenpace.core.record import RequestRecord

if TYPE_CHECKING:
    from tokenpace.app.sweep.sweep import SweepStep


class RunProgress(Protocol):
    """Called on the run's event loop (a display may schedule its own refreshes there)."""

    def started(self, total: int | None, duration_s: float | None) -> None:
        """The run starts: ``total`` requests planned (None when bounded by duration only)."""

    def record(self, record: RequestRecord) -> None:
        """One request ended (any status); called once per record, in the order they ended."""

    def finished(self) -> None:
        """The run ended (completed, stopped or failed)."""


class SweepProgress(Protocol):
    """A sweep's steps, each a full run."""

    def step_started(
        self, index: int, phase: str, mode: str, load: float, total: int | None, duration_s: float | None
    ) -> None: ...

    def record(self, record: RequestRecord) -> None: ...

    def step_finished(self, step: SweepStep, store_problem: str | None) -> None:
        """The step ended and was saved; ``store_problem`` says why it could not be stored, and
        where the step is instead."""


class NoProgress:
    """Shows nothing: the default for Python callers."""

    def started(self, total: int | None, duration_s: float | None) -> None:
        pass

    def record(self, record: RequestRecord) -> None:
        pass

    def finished(self) -> None:
        pass

    def step_started(
        self, index: int, phase: str, mode: str, load: float, total: int | None, duration_s: float | None
    ) -> None:
        pass

    def step_finished(self, step: SweepStep, store_problem: str | None) -> None:
        pass
