"""The service's state: jobs, attempts, incidents, advice, holds, node history and where
the service left each log file it follows.

``Store(url)`` works on SQLite (default; WAL, shared by several processes) and PostgreSQL
(``postgresql://...``, through psycopg 3). All timestamps are Unix-seconds floats chosen by
the caller. Every database error surfaces as ``trainmedic.core.errors.StoreError`` (``NotFound``
and ``InvalidTransition`` are subclasses).

Importing this package imports SQLAlchemy: keep it out of anything ``analyze`` imports.
"""

from __future__ import annotations

from trainmedic.store.accounting import (
    AccountingRepository,
    CheckpointRecord,
    CheckpointSeen,
    FeedbackRecord,
)
from trainmedic.store.base import InvalidTransition, NotFound, normalise_url, redact_url
from trainmedic.store.decisions import DecisionsRepository, StoredDecision
from trainmedic.store.jobs import JobsRepository
from trainmedic.store.jobstates import JobStatesRepository
from trainmedic.store.nodes import NodesRepository
from trainmedic.store.offsets import OffsetsRepository
from trainmedic.store.records import (
    ADVICE_TRANSITIONS,
    AdviceMode,
    AdviceRecord,
    AdviceStatus,
    AttemptRecord,
    BreakerState,
    FollowerOffset,
    HoldRecord,
    IncidentRecord,
    JobRecord,
    JobSpec,
    JobStateChange,
    NodeEvent,
    NodeHistoryEntry,
    ProgressWrite,
)


class Store(
    JobsRepository,
    JobStatesRepository,
    DecisionsRepository,
    NodesRepository,
    AccountingRepository,
    OffsetsRepository,
):
    """Every repository over one engine: ``Store("sqlite:///path/state.db")``."""


def sqlite_url(path: str) -> str:
    """The SQLAlchemy URL of an SQLite file."""
    return f"sqlite:///{path}"


__all__ = [
    "ADVICE_TRANSITIONS",
    "AdviceMode",
    "AdviceRecord",
    "AdviceStatus",
    "AttemptRecord",
    "BreakerState",
    "CheckpointRecord",
    "CheckpointSeen",
    "FeedbackRecord",
    "FollowerOffset",
    "HoldRecord",
    "IncidentRecord",
    "InvalidTransition",
    "JobRecord",
    "JobSpec",
    "JobStateChange",
    "NodeEvent",
    "NodeHistoryEntry",
    "NotFound",
    "ProgressWrite",
    "Store",
    "StoredDecision",
    "normalise_url",
    "redact_url",
    "sqlite_url",
]
