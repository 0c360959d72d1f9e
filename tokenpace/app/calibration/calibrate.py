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
    max_decoding_at_once,
    timeline,
)
from tokenpace.sim.profiles.calibrated import calibrated_profile, fit_error, fit_provenance
from tokenpace.sim.profiles.profile import Profile, get_profile
from tokenpace.sim.profiles.profile_file import profile_to_toml
from tokenpace.sim.virtual_time.replay import Prediction, predict

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
    loads = [_step_load(path, step, f"step {k + 1}") for k, step in enumerate(steps)]
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
    )


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
        server_max_running_when_waiting=max(busy) if busy else None,
        server_max_kv_usage=max(kv) if kv else None,
        server_network_ms=float(network) if network is not None else None,
        kv_samples=kv_samples[:MAX_KV_SAMPLES] if start_ns else (),
    )


def calibrate(paths: list[str], out: str, max_num_seqs: int | None = None) -> tuple[Profile, EngineFit]:
    """Fit, build and write the profile; returns it with the fit (for the report)."""
    runs = load_runs(paths)
    fit = fit_engine(
        [ld for run in runs for ld in run.loads],
        max_num_seqs=max_num_seqs,
        revisits=[pair for run in runs for pair in run.revisits],
    )
    fit = replace(fit, holds=(*fit.holds, *(note for run in runs for note in run.notes)))
    engines = sorted({r.engine for r in runs if r.engine})
    model = next((r.model for r in runs if r.model), "calibrated")
    provenance = {
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": ", ".join(engines) or "unknown (no server metrics scraped)",
        "model": model,
        "runs": [f"{r.path} ({r.ident}: {', '.join(ld.label for ld in r.loads)})" for r in runs],
        "method": "tokenpace sim --calibrate: step-cost fit to the client's records (docs/sim.md)",
        **fit_provenance(fit),
    }
    profile = calibrated_profile(fit, Path(out).stem, model, provenance)
    header = (
        "tokenpace engine profile, calibrated by `tokenpace sim --calibrate` from measured runs.\n"
        "An effective engine: its roofline reproduces the fitted step costs (see [provenance]);\n"
        "what it predicts is a prediction. Serve it with `tokenpace sim --profile THIS.toml`."
    )
    try:
        write_atomic(Path(out), profile_to_toml(profile, header).encode())
    except OSError as e:
        raise ValueError(f"cannot write {out}: {e.strerror or e}") from None
    return profile, fit


@dataclass(frozen=True, slots=True)
class Validation:
    rows: list[Prediction]
    notes: dict[str, list[str]]  # per load: where it lies outside what the profile was fitted on


def validate(profile: Profile, paths: list[str]) -> Validation:
    """The profile's predictions for every load of the given (held-out) runs, beside what was measured."""
    error = fit_error(profile)
    rows: list[Prediction] = []
    notes: dict[str, list[str]] = {}
    for run in load_runs(paths):
        for measured in run.loads:
            rows += predict(profile, measured, fit_error=error)
            notes[measured.label] = outside_the_fit(profile, measured)
    return Validation(rows, notes)


def outside_the_fit(profile: Profile, measured: MeasuredLoad) -> list[str]:
    """Where a load goes past what the calibration saw: there the model extrapolates."""
    seen = (profile.provenance.get("observed") or {}) if profile.provenance else {}
    tl = timeline(measured.records)
    out: list[str] = []
    if tl is None or not seen:
        return out
    batch = min(max_decoding_at_once(tl), profile.engine.max_num_seqs)
    fitted_batch = float((seen.get("batch") or [0, 0])[1])
    if batch > fitted_batch + 0.5:
        out.append(
            f"decodes up to {batch} at once, fitted up to {fitted_batch:.1f}: per-sequence cost extrapolated"
        )
    prompt = float(tl.prompt.max())
    fitted_prompt = float((seen.get("prompt_tokens") or [0, 0])[1])
    if prompt > fitted_prompt * 1.05:
        out.append(
            f"prompts up to {prompt:.0f} tokens, fitted up to {fitted_prompt:.0f}: prefill extrapolated"
        )
    if measured.server_max_kv_usage is not None and measured.server_max_kv_usage >= 0.9:
        out.append(
            f"KV cache at {measured.server_max_kv_usage:.0%}: near its limit, which was not calibrated"
        )
    return out


def profile_named(name: str) -> Profile:
    """A shipped profile by name, or a profile file (ProfileError, a ValueError, when neither)."""
    return get_profile(name)
