"""Every console page, in menu order: one line each (see the room's docstring)."""

from __future__ import annotations

from tokenpace.app.console.compare_page import compare_charts, compare_data
from tokenpace.app.console.history_chart import history_charts
from tokenpace.app.console.history_page import history_data
from tokenpace.app.console.live_page import live_data, live_run_charts, live_run_data
from tokenpace.app.console.page import Page
from tokenpace.app.console.rollouts_page import rollout_charts, rollout_data, session_stamp, sessions_data
from tokenpace.app.console.run_page import run_charts, run_data
from tokenpace.app.console.runs_page import runs_data
from tokenpace.app.console.sweeps_page import sweep_charts, sweep_data, sweeps_data

PAGES: list[Page] = [
    Page("runs", "/runs", "runs.html", runs_data, "Runs"),
    Page("run", "/runs/{run_id}", "run.html", run_data, "", run_charts),
    Page("compare", "/compare", "compare.html", compare_data, "Compare", compare_charts, cached=True),
    Page("history", "/history", "history.html", history_data, "History", history_charts, cached=True),
    Page("live", "/live", "live.html", live_data, "Live"),
    Page("live_run", "/live/{run_id}", "live_run.html", live_run_data, "", live_run_charts),
    Page("sweeps", "/sweeps", "sweeps.html", sweeps_data, "Sweeps"),
    Page("sweep", "/sweeps/{sweep_id}", "sweep.html", sweep_data, "", sweep_charts),
    Page("rollouts", "/rollouts", "rollouts.html", sessions_data, "Gateway"),
    Page(
        "rollout",
        "/rollouts/{session}",
        "rollout.html",
        rollout_data,
        "",
        rollout_charts,
        cached=True,
        stamp=session_stamp,
    ),
]
