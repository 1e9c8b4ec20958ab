"""The local scheduler's persistent state and its pure decisions.

The state is one JSON file in the cluster directory, rewritten atomically (temp file, fsync,
``os.replace``) after every change, so a service killed with -9 finds its jobs again: which
nodes each job runs on, the pid and exit-status file of each node's torchrun wrapper, and the
launches it was stopping when it died. Node selection and exclusion relaxation are pure
functions of that state, unit-tested without processes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainmedic.core.states import JobState, NodeState
from trainmedic.schedulers.base import JobInfo, NodeInfo

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class LocalJobSpec:
    """What to run: ``command`` is torchrun's program and arguments, e.g.
    ``("-m", "trainmedic.demo.trainer.cli", "--run-dir", RUN, "--iters", "3000")``.
    Output of every attempt is appended to ``<run_dir>/job.out``; ``env`` is added to the
    service's environment; the command runs in ``cwd`` (default: the submitter's)."""

    name: str
    nnodes: int
    nproc_per_node: int
    command: tuple[str, ...]
    run_dir: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = ""


@dataclass(frozen=True, slots=True)
class Launch:
    """One node's torchrun, started through the exit-recording wrapper."""

    node: str
    node_rank: int
    marker: str  # TRAINMEDIC_LAUNCH value carried by every process of this launch
    exit_file: str
    pid: int = 0  # the wrapper's pid (= its process group); 0 while being started


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    spec: LocalJobSpec
    state: JobState = JobState.PENDING
    nodes: tuple[str, ...] = ()
    attempt: int = 0
    starts: int = 0  # how many times the job was launched; attempt = starts - 1
    excluded: tuple[str, ...] = ()  # oldest first
    held: bool = False
    exit_code: int | None = None
    reason: str = ""
    launches: tuple[Launch, ...] = ()
    stale: tuple[Launch, ...] = ()  # being stopped; must be gone before the next start
    submitted_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    drain: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ClusterState:
    nodes: tuple[NodeRecord, ...]
    jobs: Mapping[str, JobRecord] = field(default_factory=dict)
    next_job: int = 1

    def node(self, name: str) -> NodeRecord | None:
        return next((n for n in self.nodes if n.name == name), None)

    def busy_nodes(self, except_job: str | None = None) -> set[str]:
        """Nodes a running job (or one still being stopped) occupies."""
        busy: set[str] = set()
        for job in self.jobs.values():
            if job.job_id == except_job:
                continue
            if job.state is JobState.RUNNING:
                busy.update(job.nodes)
            busy.update(launch.node for launch in job.stale)
        return busy


# -- pure decisions -----------------------------------------------------------------------


def relax_exclusions(
    all_nodes: Sequence[str], drained: set[str], excluded: Sequence[str], needed: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kept, dropped): drop the oldest exclusions until enough undrained nodes remain.

    Busy nodes count as eligible (the job waits for them); drained ones never do.
    """
    kept = list(excluded)
    dropped: list[str] = []
    while kept and sum(1 for n in all_nodes if n not in drained and n not in kept) < needed:
        dropped.append(kept.pop(0))
    return tuple(kept), tuple(dropped)


def choose_nodes(
    all_nodes: Sequence[str],
    unavailable: set[str],
    excluded: Sequence[str],
    preferred: Sequence[str],
    needed: int,
) -> tuple[str, ...] | None:
    """``needed`` free nodes, the job's previous ones first (in their order), then by name
    order; None when not enough are free."""
    free = [n for n in all_nodes if n not in unavailable and n not in excluded]
    ordered = [n for n in preferred if n in free] + [n for n in free if n not in preferred]
    return tuple(ordered[:needed]) if len(ordered) >= needed else None


def launch_outcome(exit_codes: Sequence[int | None], alive: Sequence[bool]) -> JobState:
    """A job's state from its node launches. A launch that is dead without an exit code was
    killed from outside (its wrapper never wrote the file): a failure."""
    if any(not up and code is None for code, up in zip(exit_codes, alive, strict=True)):
        return JobState.FAILED
    if any(code not in (None, 0) for code in exit_codes):
        return JobState.FAILED
    if all(code == 0 for code in exit_codes):
        return JobState.COMPLETED
    return JobState.RUNNING


def job_info(job: JobRecord) -> JobInfo:
    """The scheduler-neutral view of a job record (stdout and stderr share job.out)."""
    out = str(Path(job.spec.run_dir) / "job.out")
    return JobInfo(
        job_id=job.job_id,
        state=job.state,
        name=job.spec.name,
        nodes=job.nodes,
        attempt=job.attempt,
        excluded_nodes=job.excluded,
        held=job.held,
        reason=job.reason,
        exit_code=job.exit_code,
        stdout_path=out,
        stderr_path=out,
        partition="local",
    )


def node_infos(state: ClusterState) -> tuple[NodeInfo, ...]:
    busy = state.busy_nodes()
    return tuple(
        NodeInfo(
            name=n.name,
            state=NodeState.ALLOCATED if n.name in busy else NodeState.IDLE,
            drain=n.drain,
            reason=n.reason,
        )
        for n in state.nodes
    )


# -- persistence ----------------------------------------------------------------------------


def _launch(data: Mapping[str, Any]) -> Launch:
    return Launch(**data)


def _job(data: Mapping[str, Any]) -> JobRecord:
    spec = dict(data["spec"])
    spec["command"] = tuple(spec["command"])
    fields_ = dict(data)
    fields_.update(
        spec=LocalJobSpec(**spec),
        state=JobState(data["state"]),
        nodes=tuple(data["nodes"]),
        excluded=tuple(data["excluded"]),
        launches=tuple(_launch(item) for item in data["launches"]),
        stale=tuple(_launch(item) for item in data["stale"]),
    )
    return JobRecord(**fields_)


def state_to_json(state: ClusterState) -> str:
    data = {
        "version": STATE_VERSION,
        "next_job": state.next_job,
        "nodes": [asdict(n) for n in state.nodes],
        "jobs": {job_id: asdict(job) for job_id, job in state.jobs.items()},
    }
    return json.dumps(data, indent=1, default=dict)


def state_from_json(text: str) -> ClusterState:
    """Parse the state file; KeyError/TypeError/ValueError for a file that is not ours."""
    data = json.loads(text)
    if data.get("version") != STATE_VERSION:
        raise ValueError(f"unsupported state version {data.get('version')!r}")
    return ClusterState(
        nodes=tuple(NodeRecord(**n) for n in data["nodes"]),
        jobs={job_id: _job(job) for job_id, job in data["jobs"].items()},
        next_job=int(data["next_job"]),
    )


def write_atomic(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with open(temp, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
