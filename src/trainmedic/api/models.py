"""Request and response bodies of the HTTP API.

Responses reuse the store's frozen records (``JobRecord``, ``IncidentRecord``, ...) as their
schema, so the API, the store and the OpenAPI document describe one shape; the models here
are the bodies the API adds: requests, and records grouped for one endpoint.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from trainmedic.service.source_status import SourceStatus
from trainmedic.store.records import AttemptRecord, BreakerState, JobRecord, NodeEvent

JOB_ID_PATTERN = r"^[A-Za-z0-9_.:@+-]{1,128}$"
NODE_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"
MAX_ITEMS = 4096  # nodes or log files of one job
NodeName = Annotated[str, StringConstraints(pattern=NODE_PATTERN)]
FilePath = Annotated[str, StringConstraints(max_length=4096)]


class JobRegistration(BaseModel):
    """``POST /jobs``: start watching a job (registering again updates its spec)."""

    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(pattern=JOB_ID_PATTERN, description="the scheduler's job id")
    scheduler: Literal["local", "slurm"] = "local"
    name: str = Field(default="", max_length=256)
    log_paths: list[FilePath] = Field(
        default_factory=list,
        max_length=MAX_ITEMS,
        description="the job's own log files (under [api] allowed_roots)",
    )
    kernel_logs: dict[NodeName, FilePath] = Field(
        default_factory=dict,
        max_length=MAX_ITEMS,
        description="node name -> that node's kernel-log file (under [api] allowed_roots)",
    )
    checkpoint_dir: FilePath = ""
    nodes: list[NodeName] = Field(default_factory=list, max_length=MAX_ITEMS)
    partition: str = Field(default="", max_length=128)
    user: str = Field(default="", max_length=128)
    policy: dict[str, Any] = Field(
        default_factory=dict,
        description="overrides of the [policy] config section, e.g. "
        '{"stop_enforcement": true, "retry_budget": {"hardware": 2}}',
    )
    progress_regex: str = Field(
        default="",
        max_length=500,
        description="the job's progress lines as a regex with named groups iter (required), "
        "loss and step_time (optional), when trainmedic does not know its format",
    )


class Reconciliation(BaseModel):
    """``POST /advice/{id}/reconciliation``: what an external executor did with advice.

    ``status = "applying"`` claims the advice for ``executor_id`` (409 if another executor
    holds it); ``steps_done`` records scheduler steps issued; ``applied`` marks every step
    issued; ``converged`` / ``abandoned`` / ``pending`` move the advice along its life cycle.
    """

    model_config = ConfigDict(extra="forbid")

    status: Literal["pending", "applying", "converged", "abandoned"]
    executor_id: str = Field(default="", max_length=128)
    steps_done: list[Annotated[str, StringConstraints(max_length=128)]] = Field(
        default_factory=list, max_length=64
    )
    applied: bool = False
    note: str | None = Field(default=None, max_length=2000)


class JobDetail(BaseModel):
    """``GET /jobs/{id}``: the job, its attempts (oldest first) and whether each of its
    sources can be read now."""

    job: JobRecord
    attempts: list[AttemptRecord]
    sources: list[SourceStatus] = Field(
        default_factory=list,
        description='each source of the job ("log:<path>", "checkpoints:<dir>", "scheduler", '
        '"kernel:<node>", "dcgm:<node>"): "up", or "unknown" (cannot be read: never taken '
        "for a failure) since when and why; empty when this API runs without the service",
    )


class NodeSummary(BaseModel):
    """``GET /nodes``: one node as trainmedic remembers it."""

    node: str
    incidents: int = Field(description="history entries tied to an incident")
    strong_evidence: int = Field(description="entries with strong hardware evidence")
    drains: int
    last_seen: float
    history: list[NodeEvent]


class Health(BaseModel):
    status: Literal["ok"]
    mode: str
    time: float
    jobs: int
    drain_breaker: Literal["closed", "tripped"] = Field(
        default="closed",
        description="tripped: drains are advice only until an operator resets the breaker "
        "(POST /breaker/reset)",
    )
    drain_breaker_since: float | None = Field(default=None, description="when it tripped")


class BreakerAnswer(BaseModel):
    """``GET /breaker``, ``POST /breaker/reset``: the drain circuit breaker."""

    state: BreakerState
    advice_only: bool = Field(description="true while tripped: no node is drained")
    was_tripped: bool | None = Field(default=None, description="reset only: it was tripped")
