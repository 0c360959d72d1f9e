"""The store's tables (current version). Changing a table means a new step in ``migrations``."""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 8

metadata = sa.MetaData()

schema_version = sa.Table(
    "tokenpace_schema",
    metadata,
    sa.Column("version", sa.Integer, nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # bench, sweep step, ab arm, import
    sa.Column("started_at", sa.String(40), nullable=False),  # ISO 8601, UTC
    sa.Column("started_unix", sa.Float, nullable=False, index=True),
    sa.Column("stored_unix", sa.Float, nullable=False),
    sa.Column("model", sa.String(300)),
    sa.Column("endpoint", sa.String(1000)),
    sa.Column("tool_version", sa.String(40)),
    sa.Column("interrupted", sa.Boolean, nullable=False, default=False),
    sa.Column("valid", sa.Boolean, nullable=False, default=True),
    sa.Column("stop_reason", sa.Text),
    sa.Column("record_count", sa.Integer, nullable=False),
    sa.Column("conditions", sa.JSON, nullable=False),
    sa.Column("summary", sa.JSON, nullable=False),
    sa.Column("extra", sa.JSON),  # warnings, invalid reasons, client health
)

run_labels = sa.Table(
    "run_labels",
    metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.String(1000), nullable=False),
)

records = sa.Table(
    "records",
    metadata,
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),  # order the run finished them in
    sa.Column("request_id", sa.String(300), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("warmup", sa.Boolean, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),  # RequestRecord.to_dict()
)

# Added in schema version 2.
baselines = sa.Table(
    "baselines",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("set_unix", sa.Float, nullable=False),
)

# Added in schema version 3: business outcomes reported to the gateway (POST /tokenpace/events),
# joined to the arm of their request or user. No foreign key: an event may name a request id the
# gateway did not know (arm "unknown"); ``tokenpace arms`` joins it to a stored record later.
outcome_events = sa.Table(
    "outcome_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session", sa.String(64)),  # the gateway session that received it
    sa.Column("unix_s", sa.Float, nullable=False, index=True),
    sa.Column("event", sa.String(64), nullable=False),
    sa.Column("arm", sa.String(200), nullable=False),
    sa.Column("upstream", sa.String(200)),
    sa.Column("request_id", sa.String(300), index=True),
    sa.Column("user_hash", sa.String(64)),  # a hash of the sticky key, never the key
    sa.Column("value", sa.Float),
)

# Added in schema version 4: runs repeated under the same conditions (``bench --repeat K``) and what
# each group taught about the noise between runs of an unchanged server (``compare``, ``check``,
# ``history`` read it). Bounded by the runs: one group row, K member rows and one noise row per
# metric percentile (5 metrics x 4 percentiles) per group.
repeat_groups = sa.Table(
    "repeat_groups",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("stored_unix", sa.Float, nullable=False),
    sa.Column("model", sa.String(300)),
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("conditions", sa.JSON, nullable=False),  # the first run's
)

repeat_runs = sa.Table(
    "repeat_runs",
    metadata,
    sa.Column("group_id", sa.String(64), sa.ForeignKey("repeat_groups.id"), primary_key=True),
    sa.Column("run_id", sa.String(64), primary_key=True, index=True),  # no FK: a run may be deleted
    sa.Column("position", sa.Integer, nullable=False),
)

run_noise = sa.Table(
    "run_noise",
    metadata,
    sa.Column("group_id", sa.String(64), sa.ForeignKey("repeat_groups.id"), primary_key=True),
    sa.Column("key", sa.String(64), primary_key=True),  # metric.percentile: tpot.p95
    sa.Column("runs", sa.Integer, nullable=False),
    sa.Column("rel_var", sa.Float, nullable=False),  # between-run variance of log value, sampling removed
    sa.Column("within_se", sa.Float, nullable=False),  # mean relative sampling SE of one run
    sa.Column("level", sa.Float, nullable=False),  # mean of the runs' values
)

# Added in schema version 5: each change of a running gateway's configuration (a reload, a move of
# the split by ``tokenpace arms --apply``): who, when, from what to what. ``tokenpace arms`` judges
# the window since the last one. One row per change: bounded by what operators do.
config_changes = sa.Table(
    "config_changes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("session", sa.String(64), nullable=False, index=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("unix_s", sa.Float, nullable=False, index=True),
    sa.Column("who", sa.String(300), nullable=False),
    sa.Column("changed", sa.JSON, nullable=False),
    sa.Column("before", sa.JSON, nullable=False),
    sa.Column("after", sa.JSON, nullable=False),
)

# Added in schema version 6: a fleet's desired configuration (gateway replicas sharing this store):
# one row per fleet name, its epoch raised by one per change, compare-and-set (``adapters/store/
# fleet.py``). ``desired`` holds the live settings without any credential. Bounded by the fleets.
fleet_configs = sa.Table(
    "fleet_configs",
    metadata,
    sa.Column("fleet", sa.String(200), primary_key=True),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("unix_s", sa.Float, nullable=False),
    sa.Column("desired", sa.JSON, nullable=False),
)

# Added in schema version 7: a run in progress and its figures so far (``diagnosis/live_figures.py``), one
# row per run, rewritten in place at most once a second by the run itself and marked ended (its final
# state) when it stops; rows not written for ``live.KEEP_ENDED_S`` are removed by the next run that
# starts. A row whose ``updated_unix`` stops moving while not ended is a run that died (killed).
live_runs = sa.Table(
    "live_runs",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),  # bench, sweep (a sweep's step)
    sa.Column("started_unix", sa.Float, nullable=False),
    sa.Column("updated_unix", sa.Float, nullable=False, index=True),
    sa.Column("state", sa.String(300), nullable=False),  # running, or how it ended
    sa.Column("ended", sa.Boolean, nullable=False),
    sa.Column("labels", sa.JSON, nullable=False),  # the run's labels, its sweep and step
    sa.Column("figures", sa.JSON, nullable=False),  # LiveSnapshot.to_dict()
)

# Added in schema version 8 (one new table; nothing else changes): each run's percentiles with their
# bootstrap SEs, effective sizes and counts (``comparison/stored_levels.py``), computed when the run
# was saved, so that a comparison can stand on them without reading records. Bounded by the runs:
# 5 metrics x 4 percentiles a run. No foreign key: written after the run, removed with it.
run_levels = sa.Table(
    "run_levels",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("key", sa.String(64), primary_key=True),  # metric.percentile: ttft.p95
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("se", sa.Float),  # None: too few samples for one
    sa.Column("n_eff", sa.Float, nullable=False),
)
