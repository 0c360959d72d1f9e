"""A sweep's capacity plan as sentences for people: which steps the figures rest on, the knee, the
SLO verdicts, the figures, the drift check and the warnings (console, Markdown and HTML alike)."""

from __future__ import annotations

from typing import Any

from tokenpace.adapters.report.tables import fmt, renumber, step_numbers


def _steps_basis(a: dict[str, Any], numbers: dict[int, int]) -> list[str]:
    used = a.get("used_steps")
    if used is None:  # a sweep file from before steps were left out
        return []
    out = [
        f"Figures rest on step(s) {', '.join(str(numbers.get(s, s)) for s in used)}"
        if used
        else "No usable step: no figure"
    ]
    for item in a.get("left_out_steps") or []:
        out.append(f"Left out: step {item['step']} ({', '.join(item['reasons'])})")
    return out


def _knee_line(a: dict[str, Any]) -> str:
    knee = a.get("knee")
    if not knee:
        reason = (a.get("knee_ttft_p95") or {}).get("reason", "no analysis").removeprefix("no knee: ")
        return f"Knee: none — {reason}"
    line = (
        f"Knee: {knee['load_rps']:.3g} req/s ({knee['metric']} {knee['latency_ms']:.0f} ms, "
        f"step {knee['index'] + 1}); method: Kneedle on P95 latency vs achieved load"
    )
    if knee.get("at_highest_load"):
        line += "; it is the highest load tried: extend the sweep"
    return line


def _slo_line(slo: dict[str, Any]) -> str:
    limits = ", ".join(f"{k[:-3]} <= {v:g} ms" for k, v in slo["slo"].items())
    basis = " from the scheduled time" if slo.get("latency_from") == "scheduled" else ""
    what = f"{slo['percentile'].upper()} {limits}{basis}"
    if slo.get("max_load_rps") is None:
        return f"SLO ({what}) held at no usable step"
    if slo.get("lower_bound_why"):  # an open loop's: the true maximum lies above it
        return (
            f"Max load under the SLO ({what}): at least {slo['max_load_rps']:.3g} req/s (step {slo['step']}; "
            f"{slo['lower_bound_why']}), goodput {fmt(slo.get('goodput_rps'), 2)} req/s"
        )
    if slo.get("ceiling_reached") is False:
        return (
            f"SLO ({what}) held up to the highest load tried ({slo['max_load_rps']:.3g} req/s, step "
            f"{slo['step']}); the ceiling is above it: extend the sweep"
        )
    broken = f", broken at step {slo['broken_at_step']}" if slo.get("broken_at_step") else ""
    return (
        f"Max load under the SLO ({what}): {slo['max_load_rps']:.3g} req/s (step {slo['step']}{broken}), "
        f"goodput {fmt(slo.get('goodput_rps'), 2)} req/s"
    )


def _plan_figures(p: dict[str, Any]) -> list[str]:
    out = []
    bound = bool(p.get("ceiling_is_lower_bound"))
    if p.get("watermark_rps_per_replica") is not None:
        step = f", step {p['ceiling_step']}" if p.get("ceiling_step") else ""
        ceiling = "a lower bound of the ceiling" if bound else "the ceiling"
        line = (
            f"Safe watermark per replica: {'at least ' if bound else ''}"
            f"{p['watermark_rps_per_replica']:.3g} req/s ({p['headroom']:.0%} headroom under {ceiling} "
            f"({p['ceiling_from'].replace('_', ' ')}{step}) of {p['ceiling_rps_per_replica']:.3g} req/s)"
        )
        if p.get("watermark_in_flight_per_replica") is not None:
            line += f", about {p['watermark_in_flight_per_replica']:.1f} requests in flight"
        out.append(line)
    if p.get("replicas") is not None:
        line = f"Replicas for a peak of {p['peak_rps']:g} req/s: {p['replicas']}"
        out.append(line + (" at most (the ceiling is a lower bound)" if bound else ""))
    return out


def _span(v: list[float] | None, digits: str = ".3g") -> str | None:
    if not v:
        return None
    lo, hi = f"{v[0]:{digits}}", f"{v[1]:{digits}}"
    return lo if lo == hi else f"{lo}-{hi}"


def _interval_lines(iv: dict[str, Any] | None) -> list[str]:
    """The figures' 95 % intervals from resampling each step's records."""
    if not iv or not iv.get("resamples"):
        return []
    parts = []
    if knee := _span(iv.get("knee_load_rps_95")):
        shares = sorted((iv.get("knee_step_shares") or {}).items(), key=lambda kv: -kv[1])
        where = ", ".join(f"step {k} in {v:.0%}" for k, v in shares)
        none = f", no knee in {iv['no_knee_share']:.0%}" if iv.get("no_knee_share") else ""
        parts.append(f"knee {knee} req/s ({where}{none})")
    if ceiling := _span(iv.get("ceiling_rps_95")):
        parts.append(f"ceiling {ceiling} req/s")
    if watermark := _span(iv.get("watermark_rps_95")):
        parts.append(f"watermark {watermark} req/s")
    if replicas := _span(iv.get("replicas_95"), "d"):
        parts.append(f"replicas {replicas}")
    if not parts:
        return []
    return [f"95 % intervals ({iv['resamples']} resamples of each step's records): {'; '.join(parts)}"]


def plan_lines(sweep: dict[str, Any]) -> list[str]:
    """The capacity conclusions in sentences, each with the step it rests on."""
    a = sweep.get("analysis") or {}
    p = sweep.get("plan") or {}
    numbers = step_numbers(sweep)
    out = [f"Caveat (every figure): {c}" for c in p.get("caveats") or []]
    out += _steps_basis(a, numbers)
    out.append(_knee_line(a))
    ms = a.get("max_sustainable") or {}
    if ms.get("load_rps") is not None:
        at_least = "at least " if ms.get("lower_bound") else ""
        why = f"; {ms['lower_bound_why']}" if ms.get("lower_bound_why") else ""
        out.append(
            f"Max sustainable throughput: {at_least}{ms['load_rps']:.3g} req/s (step {ms['step']}, "
            f"errors <= {ms['max_error_rate']:.0%}{why})"
        )
    drifting = bool((a.get("drift") or {}).get("latency_moved_with_time"))
    if (
        a.get("slo_capacity") and drifting
    ):  # a step's verdict stands (the table); a load read from them does not
        out.append("SLO: each step's verdict is in the table; no SLO load is read from a sweep that drifted")
    elif a.get("slo_capacity"):
        out.append(_slo_line(a["slo_capacity"]))
    out += _plan_figures(p)
    out += _interval_lines(p.get("intervals"))
    out += _drift_lines(a)
    out += _scale_out_lines(p.get("scale_out"))
    little = a.get("littles_law") or {}
    if little:
        checked = little.get("checked_steps")
        if checked == []:
            out.append("Little's law (in flight = rate x latency): no step could be checked")
        elif little.get("consistent"):
            where = f"step(s) {', '.join(map(str, checked))}" if checked else "every checked step"
            out.append(f"Little's law (in flight = rate x latency): consistent at {where}")
        for c in little.get("steps", []):
            if c["status"] in ("inconsistent", "overloaded"):
                out.append(f"Little's law, step {c['step']} {c['status']}: {c['note']}")
    shown_above = ("SLO held up", "left out", "latency moved with time")
    out += [f"Warning: {w}" for w in p.get("warnings") or [] if not w.startswith(shown_above)]
    # the analysis counts curve places; people read the numbers of the progress lines and files
    kept = ("Figures rest on", "Caveat")
    return [line if line.startswith(kept) else renumber(line, numbers) for line in out]


def _scale_out_lines(signal: dict[str, Any] | None) -> list[str]:
    """The article's leading indicators: GPU utilisation past its line, the queue climbing, the knee."""
    if not signal:
        return []
    lines = [f"Scale-out signal: {line}" for line in signal.get("lines") or []]
    knee = (signal.get("signal_vs_knee") or {}).get("text")
    return lines + ([knee] if knee else [])


def _drift_lines(a: dict[str, Any]) -> list[str]:
    drift = a.get("drift")
    if not drift:  # a sweep file from before the drift check
        return []
    return _drift_verdict(drift) + _noise_lines(drift)


def _drift_verdict(drift: dict[str, Any]) -> list[str]:
    if drift.get("latency_moved_with_time"):
        return [f"Drift: latency moved with time ({'; '.join(drift['reasons'])})"]
    revisit = drift.get("revisit")
    if revisit:
        change = revisit.get("largest_change")
        seen = f" beyond its noise (largest P50 change {change:.0%})" if change else ""
        return [f"Drift check: step {revisit['step']} revisited at the end, latency unchanged{seen}"]
    if drift.get("revisit_not_compared"):
        return [
            f"Drift check: no revisit compared: {drift['revisit_not_compared']}; trends inside steps only"
        ]
    return ["Drift check: no step revisited (sweep --revisit, 3 steps or more); trends inside steps only"]


def _noise_lines(drift: dict[str, Any]) -> list[str]:
    """Trends seen inside steps that the host's noise explains, and every other trend a step flagged
    that moves no figure: said, each with why, not a verdict."""
    noise = drift.get("noise") or {}
    within = noise.get("trends_within_noise") or []
    out = [f"Not drift, within the host's noise: {'; '.join(within)}"] if within else []
    return out + [f"Drift seen, the figures stand: {d}" for d in drift.get("detected_figures_stand") or []]
