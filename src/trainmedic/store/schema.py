"""The store's tables (SQLAlchemy Core), portable between SQLite and PostgreSQL.

Only portable types: ``Double`` for Unix timestamps, ``JSON`` for structured values, plain
strings. Uniqueness that guards against duplicates after a crash lives in the schema, not in
code, so two processes racing on the same insert cannot both win:

- ``incidents``: one row per (job, attempt, kind, root signature); ``root_signature`` is ""
  when there is none, because NULLs never collide in a unique constraint;
- ``advice``: one row per (job, attempt, generation);
- ``attempts``: one row per (job, attempt);
- ``follower_offsets``: one row per followed path (where the service left each log file).
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 1

metadata = sa.MetaData()

meta = sa.Table(
    "trainmedic_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(256), nullable=False),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("scheduler", sa.String(32), nullable=False),
    sa.Column("name", sa.String(256), nullable=False, server_default=""),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("registered_at", sa.Double, nullable=False),
    sa.Column("state", sa.String(32), nullable=False, server_default=""),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_progress_at", sa.Double),
    sa.Column("last_iteration", sa.BigInteger),
    sa.Column("last_checkpoint_iteration", sa.BigInteger),
    sa.Column("last_checkpoint_at", sa.Double),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("job_id", sa.String(128), sa.ForeignKey("jobs.job_id"), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("started_at", sa.Double, nullable=False),
    sa.Column("ended_at", sa.Double),
    sa.Column("nodes", sa.JSON, nullable=False),
    sa.Column("end_state", sa.String(32), nullable=False, server_default=""),
    sa.Column("first_iteration", sa.BigInteger),
    sa.Column("last_iteration", sa.BigInteger),
    sa.Column("first_progress_at", sa.Double),
    sa.Column("last_progress_at", sa.Double),
)

incidents = sa.Table(
    "incidents",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(128), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("category", sa.String(32), nullable=False),
    sa.Column("confidence", sa.Double, nullable=False),
    sa.Column("fault_time", sa.Double),
    sa.Column("detected_at", sa.Double, nullable=False),
    sa.Column("root_signature", sa.String(128), nullable=False),
    sa.Column("root_cause", sa.JSON),
    sa.Column("implicated", sa.JSON, nullable=False),
    sa.Column("evidence", sa.JSON, nullable=False),
    sa.Column("cascades", sa.JSON, nullable=False),
    sa.Column("basis", sa.Text, nullable=False),
    sa.UniqueConstraint("job_id", "attempt", "kind", "root_signature", name="uq_incident_key"),
)

advice = sa.Table(
    "advice",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(128), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("incident_id", sa.Integer, sa.ForeignKey("incidents.id")),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("exclude_nodes", sa.JSON, nullable=False),
    sa.Column("drain_nodes", sa.JSON, nullable=False),
    sa.Column("basis", sa.Text, nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("applied_at", sa.Double),
    sa.Column("converged_at", sa.Double),
    sa.Column("claimed_by", sa.String(128)),
    sa.Column("steps_done", sa.JSON, nullable=False),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.UniqueConstraint("job_id", "attempt", "generation", name="uq_advice_generation"),
)

holds = sa.Table(
    "holds",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(128), nullable=False, index=True),
    sa.Column("held_at", sa.Double, nullable=False),
    sa.Column("released_at", sa.Double),
    sa.Column("by", sa.String(128), nullable=False),
)

node_history = sa.Table(
    "node_history",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("node", sa.String(128), nullable=False, index=True),
    sa.Column("time", sa.Double, nullable=False),
    sa.Column("job_id", sa.String(128)),
    sa.Column("incident_id", sa.Integer),
    sa.Column("category", sa.String(32)),
    sa.Column("strong", sa.Boolean, nullable=False),
    sa.Column("drained", sa.Boolean, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
)

# The drain circuit breaker (core.policy.breaker): one row per trip; the breaker is tripped
# while a row has no reset_at. Kept in the store so a restarted service stays tripped.
drain_breaker = sa.Table(
    "drain_breaker",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tripped_at", sa.Double, nullable=False),
    sa.Column("reason", sa.Text, nullable=False, server_default=""),
    sa.Column("reset_at", sa.Double),
    sa.Column("reset_by", sa.String(128), nullable=False, server_default=""),
)

# Accounting (trainmedic.core.accounting): each checkpoint write seen, per attempt, so the
# time training was blocked saving and the work a failure threw away can be measured; and
# what operators answered about advice (the monitor-mode scorecard).
checkpoints = sa.Table(
    "checkpoints",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True),
    sa.Column("iteration", sa.BigInteger, primary_key=True),
    sa.Column("begun_at", sa.Double),
    sa.Column("saved_at", sa.Double),
)

advice_feedback = sa.Table(
    "advice_feedback",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("advice_id", sa.Integer, sa.ForeignKey("advice.id"), nullable=False, index=True),
    sa.Column("time", sa.Double, nullable=False),
    sa.Column("agree", sa.Boolean, nullable=False),
    sa.Column("action_taken", sa.String(32), nullable=False),
    sa.Column("note", sa.Text, nullable=False, server_default=""),
    sa.Column("by", sa.String(128), nullable=False, server_default=""),
)

follower_offsets = sa.Table(
    "follower_offsets",
    metadata,
    # Paths can outgrow an index entry (PostgreSQL's btree limit): the key is their hash.
    sa.Column("path_key", sa.String(64), primary_key=True),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("device", sa.BigInteger, nullable=False),
    sa.Column("inode", sa.BigInteger, nullable=False),
    sa.Column("head_len", sa.Integer, nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
    sa.Column("offset", sa.BigInteger, nullable=False),
    sa.Column("line_no", sa.BigInteger, nullable=False),
    sa.Column("saved_at", sa.Double, nullable=False),
)
