"""Use case: calibrate the simulator from measured runs (`tokenpace sim --calibrate`).

Reads sweeps and bench runs (their JSON and the records beside them), turns each load step into a
`MeasuredLoad` with what the server's metrics said about it, fits the step-cost model
(tokenpace.core.analysis.calibration.engine_fit) and
writes the calibrated profile as TOML with its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tokenpace.adapters.results import read_records, read_result
from tokenpace.adapters.safe_files import write_atomic
from tokenpace.core.analysis.calibration.engine_costs import EngineFit
from tokenpace.core.analysis.calibration.engine_fit import fit_engine
from tokenpace.core.analysis.calibration.engine_obs import (
    MAX_KV_SAMPLES,
    MeasuredLoad,
    usable,
)
from tokenpace.core.analysis.calibration.verdicts import FIT_RESIDUAL_BOUND, fit_problems
from tokenpace.core.analysis.capacity.loadpoint import point_from_result
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_provenance
from tokenpace.sim.profiles.profile import Profile, get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml

MAX_RUN_FILES = 64  # --calibrate / --validate files in one command


@dataclass(frozen=True, slots=True)
class LoadedRun:
    """One run file: its loads, and what identifies it in a profile's provenance."""

    path: str
    ident: str  # sweep_id or run_id
    engine: str  # what the server's metrics said it is ("" when not scraped)
    model: str
    loads: tuple[MeasuredLoad, ...]
    # (a load's first pass, its revisit after the sweep's last step): at most one per step
    revisits: tuple[tuple[MeasuredLoad, MeasuredLoad], ...] = ()
    notes: tuple[str, ...] = ()  # what could not be read and was left out (a revisit's records)
    refused: tuple[str, ...] = ()  # steps NOT VALID, short, interrupted or without a success, by name


def load_runs(paths: list[str]) -> list[LoadedRun]:
    """Every load of the given sweeps and bench runs; ValueError with one clear line on bad input."""
    if len(paths) > MAX_RUN_FILES:
        raise ValueError(f"at most {MAX_RUN_FILES} run files at once")
    return [_load_run(Path(p)) for p in paths]


def _load_run(path: Path) -> LoadedRun:
    try:
        doc = read_result(path)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except ValueError:
        raise ValueError(f"{path}: not a tokenpace result (not JSON)") from None
    if not isinstance(doc, dict) or not ("steps" in doc or "records" in doc):
        raise ValueError(f"{path}: not a tokenpace sweep or bench result")
    steps = doc.get("steps", [doc])
    loads, refused = [], []
    for k, step in enumerate(steps):
        which = f"step {k + 1}" if "steps" in doc else "the run"
        why = unusable(step)
        if why:  # a step the tool itself does not trust is no evidence of the engine's speed
            label = load_label(step.get("conditions") or {})
            refused.append(f"{path} {which} ({label}) refused: {why}")
            continue
        load = _step_load(path, step, which)
        if len(usable(load.records)) < MIN_REQUESTS:
            n = len(usable(load.records))
            refused.append(
                f"{path} {which} ({load.label}) refused: short ({n} usable requests, {MIN_REQUESTS} needed)"
            )
            continue
        loads.append(load)
    # The sweep's revisit of a step after its last (sweep --revisit): did the engine's speed move?
    revisits, notes = [], []
    for again in (doc.get("revisit") or [])[: len(steps)]:
        if (again.get("records") or {}).get("path"):
            try:
                load = _step_load(path, again, "the revisit")
            except ValueError as e:  # only a check of the fit, not part of it: say so and go on
                notes.append(f"the engine's speed during the sweep was not checked: {e}")
                continue
            first_pass = next((ld for ld in loads if ld.label == load.label), None)
            if first_pass is not None:
                revisits.append((first_pass, load))
    first = steps[0] if steps else {}
    cond = first.get("conditions", {})
    return LoadedRun(
        path=str(path),
        ident=str(doc.get("sweep_id") or doc.get("run_id") or path.stem),
        engine=str((first.get("server_metrics") or {}).get("engine") or ""),
        model=str(cond.get("model") or ""),
        loads=tuple(loads),
        revisits=tuple(revisits),
        notes=tuple(notes),
        refused=tuple(refused),
    )


MIN_REQUESTS = 3  # usable requests a step needs to be evidence (fewer: short, no median robust to a stall)


def unusable(step: dict[str, Any]) -> str:
    """Why a step's records are no evidence of the engine's speed ("" when they are): no success, the
    client NOT VALID, interrupted. (Plan's "short", too short a steady window for a throughput, does
    not apply: a calibration reads requests one by one; a step is short here with fewer than
    MIN_REQUESTS usable requests, checked once its records are read.)"""
    try:
        reasons = point_from_result(1, step).left_out_reasons
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        return f"not a tokenpace step ({type(e).__name__})"
    return ", ".join(r for r in reasons if not r.startswith("short"))


def _step_load(path: Path, step: dict[str, Any], which: str) -> MeasuredLoad:
    rec = (step.get("records") or {}).get("path")
    if not rec:
        raise ValueError(f"{path}: {which} has no records file (run without --no-records)")
    rec_path = path.parent / rec
    try:
        records = read_records(rec_path)
    except OSError as e:
        raise ValueError(f"cannot read {rec_path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError) as e:  # orjson's errors are ValueErrors without the file
        raise ValueError(f"{rec_path}: not tokenpace records ({type(e).__name__}: {e})") from None
    return measured_load(step, tuple(records))


def load_label(cond: dict[str, Any]) -> str:
    load = cond.get("load", {})
    spec = ((cond.get("workload") or {}).get("input_len") or {}).get("spec", "")
    where = f"c={load['concurrency']}" if load.get("rate") is None else f"{load['rate']:g}/s"
    return f"{where} in={spec}" if spec else where


def measured_load(step: dict[str, Any], records: tuple[Any, ...]) -> MeasuredLoad:
    cond = step.get("conditions", {})
    load = cond.get("load", {})
    sm = step.get("server_metrics") or {}
    series = sm.get("series") or {}
    running, waiting = series.get("running") or [], series.get("waiting") or []
    busy = [r[1] for r, w in zip(running, waiting, strict=False) if w[1] > 0]
    kv = [v for _, v in series.get("kv_usage") or []]
    network = (sm.get("decomposition") or {}).get("network_and_client_ms")
    start_ns = int((cond.get("clock") or {}).get("perf_ns") or 0)
    kv_samples = tuple(
        (start_ns + round(t * 1e9), float(v)) for t, v in (series.get("kv_usage") or []) if v is not None
    )
    return MeasuredLoad(
        label=load_label(cond),
        records=records,
        concurrency=load.get("concurrency") if load.get("rate") is None else None,
        rate=load.get("rate"),
        server_running_when_waiting=tuple(float(v) for v in busy[:MAX_KV_SAMPLES] if v is not None),
        server_max_kv_usage=max(kv) if kv else None,
        server_network_ms=float(network) if network is not None else None,
        kv_samples=kv_samples[:MAX_KV_SAMPLES] if start_ns else (),
    )


class NotWritten(ValueError):
    """The fit failed its quality gate and --force was not given: no profile was written."""


@dataclass(frozen=True, slots=True)
class Calibration:
    profile: Profile
    fit: EngineFit
    problems: tuple[str, ...]  # the fit-quality gate's: the engine model does not describe this engine
    refused: tuple[str, ...]  # steps not used, each with its reason
    written: bool


def calibrate(
    paths: list[str], out: str, max_num_seqs: int | None = None, force: bool = False
) -> Calibration:
    """Fit and build the profile; write it unless its fit fails the quality gate (then only with
    `force`, and marked: every prediction from it is undecided)."""
    runs = load_runs(paths)
    refused = tuple(line for run in runs for line in run.refused)
    loads = [ld for run in runs for ld in run.loads]
    if not loads:
        raise ValueError("no usable step to calibrate from: " + "; ".join(refused))
    fit = fit_engine(
        loads, max_num_seqs=max_num_seqs, revisits=[pair for run in runs for pair in run.revisits]
    )
    fit = replace(fit, holds=(*fit.holds, *(note for run in runs for note in run.notes)))
    problems = tuple(fit_problems(fit.residuals, prefill_table=bool(fit.prefill_table)))
    engines = sorted({r.engine for r in runs if r.engine})
    model = next((r.model for r in runs if r.model), "calibrated")
    provenance = {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": ", ".join(engines) or "unknown (no server metrics scraped)",
        "model": model,
        "runs": [f"{r.path} ({r.ident}: {', '.join(ld.label for ld in r.loads)})" for r in runs],
        "refused": list(refused),
        "method": "tokenpace sim --calibrate: step-cost fit to the client's records (docs/sim.md)",
        "fit_quality": {
            "verdict": "poor" if problems else "ok",
            "bound": f"{FIT_RESIDUAL_BOUND:.0%} relative RMS",
            "problems": list(problems),
        },
        **fit_provenance(fit),
    }
    profile = calibrated_profile(fit, Path(out).stem, model, provenance)
    if problems and not force:
        return Calibration(profile, fit, problems, refused, written=False)
    header = (
        "tokenpace engine profile, calibrated by `tokenpace sim --calibrate` from measured runs.\n"
        "An effective engine: its roofline reproduces the fitted step costs (see [provenance]);\n"
        "what it predicts is a prediction. Serve it with `tokenpace sim --profile THIS.toml`."
    )
    if problems:
        header += (
            "\nMARKED: its fit failed the quality gate ([provenance.fit_quality]); predictions are undecided."
        )
    try:
        write_atomic(Path(out), profile_to_toml(profile, header).encode())
    except OSError as e:
        raise ValueError(f"cannot write {out}: {e.strerror or e}") from None
    return Calibration(profile, fit, problems, refused, written=True)


def profile_named(name: str) -> Profile:
    """A shipped profile by name, or a profile file (ProfileError, a ValueError, when neither)."""
    return get_profile(name)
