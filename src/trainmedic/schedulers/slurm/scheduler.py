"""The Slurm adapter: observe with one ``squeue --json`` and one ``sinfo --json`` per cycle,
act through ``scontrol`` / ``scancel``. All commands go through one CommandRunner (local CLI,
SSH to a head node, or a fake), always as argument lists with validated ids and names.

Recovery on 22.05 (see SLURM_LAB.md): job fields change only while pending, so a requeue is
``scontrol requeuehold`` -> ``scontrol update JobId=… ExcNodeList=…`` -> ``scontrol release``.
ExcNodeList persists across requeues, so each requeue plans it (``plan_exclusion``).
"""

from __future__ import annotations

import logging
import re
import shlex
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace

from trainmedic.core.errors import JobNotRequeueable, SchedulerError
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import DRAIN_REASON_PREFIX, ClusterSnapshot, JobInfo
from trainmedic.schedulers.slurm.hostlist import join_hostlist, validate_node_name
from trainmedic.schedulers.slurm.parse import parse_sinfo_json, parse_sinfo_nodes, parse_squeue_json
from trainmedic.schedulers.slurm.policy import ExclusionPlan, plan_exclusion
from trainmedic.schedulers.slurm.runner import CommandRunner, CompletedCommand
from trainmedic.schedulers.slurm.scontrol import (
    JobDetails,
    NodeDetails,
    parse_scontrol_job,
    parse_scontrol_node,
)

log = logging.getLogger(__name__)

# Reasons slurmctld sets by itself: not another owner's drain, so trainmedic may drain over them.
SLURM_AUTOMATIC_REASONS = frozenset({"Not responding"})
_JOB_ID = re.compile(r"\d{1,12}(?:_\d{1,9})?")
_UNKNOWN_JOB = "Invalid job id specified"  # scontrol's words for a job it no longer knows
# Requeuing these would revive a job that is over: done, or stopped by its user.
ENDED_FOR_GOOD = frozenset({JobState.COMPLETED, JobState.CANCELLED})


def validate_job_id(job_id: str) -> str:
    """``123`` or an array task ``123_4``; SchedulerError for anything else."""
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise SchedulerError(f"invalid Slurm job id {job_id!r}: expected digits, optional _N")
    return job_id


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]


def is_foreign_reason(reason: str) -> bool:
    """A node reason another owner set (NHC, an admin, another tool)."""
    return (
        bool(reason)
        and not reason.startswith(DRAIN_REASON_PREFIX)
        and (reason not in SLURM_AUTOMATIC_REASONS)
    )


class SlurmScheduler:
    """SchedulerAdapter for Slurm. ``poll(())`` returns every job; ``poll(ids)`` those jobs,
    with output paths from ``scontrol show job`` (fetched once per job and attempt)."""

    name = "slurm"

    def __init__(
        self,
        runner: CommandRunner,
        *,
        timeout: float = 15.0,
        clock: Callable[[], float] = time.time,
        details_cache_size: int = 4096,
        details_per_poll: int = 16,
    ) -> None:
        self.runner = runner
        self.timeout = timeout
        self.clock = clock
        self._details: OrderedDict[tuple[str, int], JobDetails] = OrderedDict()
        self._cache_size = details_cache_size
        # Bounds one cycle's extra scontrol calls (over SSH each is a connection): the rest
        # keep squeue's expanded paths until a later cycle.
        self.details_per_poll = details_per_poll
        self._details_budget = 0
        self.last_plan: ExclusionPlan | None = None

    # -- observe ----------------------------------------------------------------------------

    def poll(self, job_ids: Sequence[str] = ()) -> ClusterSnapshot:
        now = self.clock()
        try:
            jobs = parse_squeue_json(self._check(["squeue", "--json", "-t", "all"]).stdout)
            nodes = parse_sinfo_json(self._check(["sinfo", "--json"]).stdout)
        except SchedulerError as err:  # includes SchedulerUnavailable: data unknown, not bad
            return ClusterSnapshot(time=now, stale=True, error=_one_line(str(err)))
        if job_ids:
            wanted = set(job_ids)
            self._details_budget = self.details_per_poll
            jobs = tuple(self._with_details(j) for j in jobs if j.job_id in wanted)
        return ClusterSnapshot(time=now, jobs=jobs, nodes=nodes)

    def job_details(self, job_id: str) -> JobDetails:
        """``scontrol -o show job ID`` now (not cached)."""
        argv = ["scontrol", "-o", "show", "job", validate_job_id(job_id)]
        return parse_scontrol_job(self._check(argv).stdout)

    def node_details(self, node: str) -> NodeDetails:
        argv = ["scontrol", "-o", "show", "node", validate_node_name(node)]
        return parse_scontrol_node(self._check(argv).stdout)

    def _with_details(self, job: JobInfo) -> JobInfo:
        key = (job.job_id, job.attempt)
        details = self._details.get(key)
        if details is None:
            if self._details_budget <= 0:
                return job
            self._details_budget -= 1
            try:
                details = self.job_details(job.job_id)
            except SchedulerError as err:
                log.debug("scontrol show job %s: %s (keeping squeue's paths)", job.job_id, err)
                return job
            self._details[key] = details
            while len(self._details) > self._cache_size:
                self._details.popitem(last=False)
        if not details.stdout_path:
            return job
        return replace(
            job,
            stdout_path=details.stdout_path,
            stderr_path=details.stderr_path or details.stdout_path,
        )

    # -- act --------------------------------------------------------------------------------

    def requeue(self, job_id: str, exclude_nodes: Sequence[str]) -> None:
        self.requeue_excluding(job_id, exclude_nodes)

    def requeue_excluding(self, job_id: str, exclude_nodes: Sequence[str]) -> ExclusionPlan:
        """Hold the job (requeuing it if it runs), set a schedulable ExcNodeList, release it.
        Returns the exclusion plan (also kept as ``last_plan``): what was set and dropped."""
        validate_job_id(job_id)
        requested = [validate_node_name(n) for n in exclude_nodes]
        details = self._requeueable(job_id)
        plan = self._plan(details, requested)
        if plan.note:
            log.warning("job %s: %s", job_id, plan.note)
        self._hold(details)
        update = []
        if plan.required is not None:
            update.append(f"ReqNodeList={join_hostlist(plan.required)}")
        if plan.required is not None or set(plan.exclude) != set(details.excluded_nodes):
            update.append(f"ExcNodeList={join_hostlist(plan.exclude)}")
        if update:
            try:
                self._check(["scontrol", "update", f"JobId={job_id}", *update])
            except SchedulerError:
                self.release(job_id)  # fail open: never leave the job held by us
                raise
        self.release(job_id)
        self.last_plan = plan
        return plan

    def _plan(self, details: JobDetails, requested: Sequence[str]) -> ExclusionPlan:
        nodes = parse_sinfo_nodes(self._check(["sinfo", "--json"]).stdout)
        partitions = set(details.partition.split(",")) if details.partition else set()
        candidates = [
            n.info for n in nodes if not partitions or partitions.intersection(n.partitions)
        ]
        return plan_exclusion(
            details.excluded_nodes,
            requested,
            max(details.node_count, 1),
            candidates,
            required=details.required_nodes,
        )

    def hold(self, job_id: str) -> None:
        self._hold(self._requeueable(validate_job_id(job_id)))

    def _requeueable(self, job_id: str) -> JobDetails:
        """The job's details, checked right before acting: Slurm requeues a finished batch
        job as readily as a running one, so a job that completed, or that its user
        cancelled since the last poll, is refused here (JobNotRequeueable)."""
        try:
            details = self.job_details(job_id)
        except SchedulerError as err:
            if _UNKNOWN_JOB in str(err):
                raise JobNotRequeueable(f"job {job_id} is unknown to Slurm") from None
            raise
        if details.state in ENDED_FOR_GOOD:
            raise JobNotRequeueable(f"job {job_id} is {details.state.value}: not revived")
        return details

    def _hold(self, details: JobDetails) -> None:
        if details.held:
            return
        if details.state is JobState.PENDING:
            self._check(["scontrol", "hold", details.job_id])
        else:
            self._check(["scontrol", "requeuehold", details.job_id])

    def release(self, job_id: str) -> None:
        self._check(["scontrol", "release", validate_job_id(job_id)])

    def cancel(self, job_id: str, reason: str) -> None:
        validate_job_id(job_id)
        note = f"{DRAIN_REASON_PREFIX} {_one_line(reason, 200)}"
        try:
            self._check(["scontrol", "update", f"JobId={job_id}", f"AdminComment={note}"])
        except SchedulerError as err:  # a finished job takes no comment; cancel it anyway
            log.debug("job %s: admin comment not set: %s", job_id, err)
        self._check(["scancel", job_id])

    def drain(self, node: str, reason: str) -> bool:
        current = self.node_details(validate_node_name(node))
        if is_foreign_reason(current.reason):
            log.info("node %s: not draining, reason owned elsewhere: %s", node, current.reason)
            return False
        if current.drain and current.reason.startswith(DRAIN_REASON_PREFIX):
            return True
        text = _one_line(reason, 200)
        if not text.startswith(DRAIN_REASON_PREFIX):
            text = f"{DRAIN_REASON_PREFIX} {text}"
        self._check(["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason={text}"])
        return True

    def resume_node(self, node: str) -> None:
        """Undo a trainmedic drain; a node drained by another owner is left alone."""
        current = self.node_details(validate_node_name(node))
        if not current.reason.startswith(DRAIN_REASON_PREFIX):
            if current.drain:
                log.info("node %s: not resuming, drain owned elsewhere: %s", node, current.reason)
            return
        if current.drain or current.state.is_unhealthy():
            self._check(["scontrol", "update", f"NodeName={node}", "State=RESUME"])

    # -- the seam ---------------------------------------------------------------------------

    def _check(self, argv: list[str]) -> CompletedCommand:
        done = self.runner.run(argv, self.timeout)
        if not done.ok:
            raise SchedulerError(
                f"{shlex.join(argv)}: exit {done.returncode}: "
                f"{_one_line(done.stderr or done.stdout) or 'no output'}"
            )
        return done
