"""Where a run goes besides the object it returns (result file, records beside it, the run store),
the ids that name it, and the exit status a command reports for it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tokenpace.adapters.results import records_path_for
from tokenpace.adapters.vllm_json import VllmExport
from tokenpace.core.exit_codes import ExitStatus, worst

__all__ = [
    "RESULTS_DIR",
    "SIGTERM_STOP",
    "USER_STOP",
    "ExitStatus",
    "RunOutputs",
    "default_result_path",
    "new_run_id",
    "step_records_path",
    "stopped_status",
    "worst",
]

RESULTS_DIR = Path("results")

USER_STOP = "interrupted by the user"  # Ctrl-C
SIGTERM_STOP = "interrupted by SIGTERM"  # e.g. `kill` or a CI job's timeout: exit code 143, not 130


def stopped_status(stop_reason: str) -> ExitStatus:
    """The exit status of a run stopped by a signal: SIGTERM is not the user's Ctrl-C."""
    return ExitStatus.TERMINATED if stop_reason == SIGTERM_STOP else ExitStatus.INTERRUPTED


@dataclass
class RunOutputs:
    out: Path | None = None  # result JSON, records beside it; None: results/TIME-ID.json
    write_files: bool = True
    store_url: str | None = None  # None: $TOKENPACE_STORE, else the user's default store
    save: bool = True  # False: --no-store
    # --vllm-json / --save-result: the run also written with `vllm bench serve --save-result` keys
    vllm: VllmExport | None = None


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def default_result_path(run_id: str, kind: str = "") -> Path:
    """results/TIME-ID.json (results/KIND-TIME-ID.json for e.g. a sweep)."""
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
    return RESULTS_DIR / f"{kind + '-' if kind else ''}{stamp}-{run_id}.json"


def step_records_path(out: Path, index: int) -> Path:
    """The records of a sweep's step ``index``, beside the sweep file."""
    return records_path_for(out).with_name(
        records_path_for(out).name.replace(".records.jsonl", f".step{index:02d}.records.jsonl")
    )
