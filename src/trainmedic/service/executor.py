"""The executor: carries stored advice out through a scheduler adapter, exactly once.

Advice is intent; this is actuation. In action mode one executor claims each ``pending``
advice (a compare-and-set in the store), issues its scheduler steps in order, records every
step once issued, and then watches the scheduler until it shows the intended state
(``converged``) or gives up after ``converge_timeout_s`` (``abandoned``). Monitor-mode advice
is stored as ``recorded`` and never reaches it.

Exactly once across crashes: a step is recorded after the scheduler accepted it. If the
service dies between the two, the restarted executor finds the step unrecorded and checks
the scheduler first: a requeue whose effect is visible (a later attempt) is recorded without
being issued again, unless the job is still held by the hold it began with (then the requeue
is finished: exclusions set, job released); an attempt is requeued once whatever the number
of advices for it; a drain is idempotent in every adapter.

Steps: ``drain:<node>`` for each node to drain, then ``requeue`` (restart / restart excluding)
or ``cancel`` (stop; only with ``stop_enforcement``, otherwise the stop is recorded and the
job left to its owner, as NVRx makes STOP opt-in). Whether a stop is enforced is the job's own
policy (``stop_enforced_for``: its Slurm comment or registration over ``[policy]``), the one
the policy wrote the advice under, so a job that opted in is cancelled and one that opted
out is left alone whatever the config says.

Finished jobs are not revived: a job the scheduler no longer knows, one that completed, and
one its user cancelled (the user's decision, recorded in the advice's note) is never
requeued by id; its advice is abandoned at the first check, not retried until the timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from trainmedic.core.errors import JobNotRequeueable, SchedulerError
from trainmedic.core.model import Action
from trainmedic.core.states import JobState
from trainmedic.schedulers.base import ClusterSnapshot, JobInfo, SchedulerAdapter
from trainmedic.service.holdfile import HoldFile
from trainmedic.store import AdviceRecord, AdviceStatus, NodeHistoryEntry, Store

log = logging.getLogger(__name__)

# A job in one of these states is over for good: a requeue would bring it back to life.
ENDED_FOR_GOOD = frozenset({JobState.COMPLETED, JobState.CANCELLED})


@dataclass(frozen=True, slots=True)
class ExecutorEvent:
    """Something the executor did, for the timeline and the demo report."""

    time: float
    advice_id: int
    job_id: str
    what: str  # "claimed", "step:<name>", "applied", "converged", "abandoned", "error"
    detail: str = ""


def planned_steps(advice: AdviceRecord) -> tuple[str, ...]:
    steps = tuple(f"drain:{node}" for node in advice.drain_nodes)
    if advice.action in (Action.RESTART, Action.RESTART_EXCLUDING):
        return (*steps, "requeue")
    if advice.action is Action.STOP:
        return (*steps, "cancel")
    return steps


class Executor:
    def __init__(
        self,
        store: Store,
        adapter: SchedulerAdapter,
        *,
        executor_id: str,
        stop_enforcement: bool = False,
        stop_enforced_for: Callable[[str], bool] | None = None,
        converge_timeout_s: float = 180.0,
        hold_file: HoldFile | None = None,
    ) -> None:
        """``hold_file``: the watchdog's own record of holds (it works without the store).
        ``stop_enforced_for(job_id)``: the job's own ``stop_enforcement`` (its policy
        overrides applied); without it, ``stop_enforcement`` holds for every job."""
        self.store = store
        self.adapter = adapter
        self.executor_id = executor_id
        self.stop_enforcement = stop_enforcement
        self._stop_enforced_for = stop_enforced_for
        self.converge_timeout_s = converge_timeout_s
        self.hold_file = hold_file

    def stop_enforced(self, job_id: str) -> bool:
        if self._stop_enforced_for is None:
            return self.stop_enforcement
        return self._stop_enforced_for(job_id)

    def step(self, snapshot: ClusterSnapshot, now: float) -> list[ExecutorEvent]:
        """Advance every active advice by what the scheduler allows right now."""
        events: list[ExecutorEvent] = []
        jobs = {job.job_id: job for job in snapshot.jobs}
        for advice in self.store.active_advice():
            if advice.status is AdviceStatus.PENDING:
                if not self.store.claim_advice(advice.id, self.executor_id):
                    continue  # another executor owns it
                events.append(ExecutorEvent(now, advice.id, advice.job_id, "claimed"))
                advice = self.store.get_advice(advice.id)
            elif advice.claimed_by != self.executor_id:
                continue
            try:
                self._advance(advice, jobs.get(advice.job_id), snapshot, now, events)
            except JobNotRequeueable as exc:
                # Nothing to retry: the job is over. One line in the log, not one per cycle.
                log.info("advice %s: %s", advice.id, exc)
                self.store.set_advice_status(
                    advice.id, AdviceStatus.ABANDONED, now=now, note=str(exc)
                )
                events.append(ExecutorEvent(now, advice.id, advice.job_id, "abandoned", str(exc)))
            except SchedulerError as exc:
                # The scheduler refused a step: leave it unrecorded, try again next cycle
                # (until the convergence timeout abandons the advice).
                log.warning("advice %s: %s", advice.id, exc)
                events.append(ExecutorEvent(now, advice.id, advice.job_id, "error", str(exc)))
                events.extend(self._maybe_abandon(advice, now, f"scheduler error: {exc}"))
        return events

    def _advance(
        self,
        advice: AdviceRecord,
        job: JobInfo | None,
        snapshot: ClusterSnapshot,
        now: float,
        events: list[ExecutorEvent],
    ) -> None:
        """Issue what is left of the advice; each step's event is in ``events`` as soon as
        it is recorded, even when a later step raises."""
        for step in planned_steps(advice):
            if step in advice.steps_done:
                continue
            if snapshot.stale:
                return  # never act on a view we could not refresh
            detail, history = self._issue(step, advice, job, now)
            self.store.mark_step_done(advice.id, step, history=history)
            events.append(ExecutorEvent(now, advice.id, advice.job_id, f"step:{step}", detail))
        if advice.applied_at is None:
            self.store.mark_applied(advice.id, now=now)
            events.append(ExecutorEvent(now, advice.id, advice.job_id, "applied"))
            advice = self.store.get_advice(advice.id)
        if snapshot.stale:
            return
        if job is None and advice.action in (Action.RESTART, Action.RESTART_EXCLUDING):
            raise JobNotRequeueable(f"job {advice.job_id} is no longer known to the scheduler")
        if _converged(advice, job, self.stop_enforced(advice.job_id)):
            self.store.set_advice_status(advice.id, AdviceStatus.CONVERGED, now=now)
            events.append(ExecutorEvent(now, advice.id, advice.job_id, "converged"))
        else:
            events.extend(self._maybe_abandon(advice, now, "scheduler never showed the effect"))

    def _issue(
        self, step: str, advice: AdviceRecord, job: JobInfo | None, now: float
    ) -> tuple[str, NodeHistoryEntry | None]:
        """Issue one step: (what happened, the node-history entry to store with it)."""
        if step.startswith("drain:"):
            node = step.removeprefix("drain:")
            reason = f"trainmedic: incident {advice.incident_id} of job {advice.job_id}"
            drained = self.adapter.drain(node, reason)
            history = NodeHistoryEntry(
                node,
                time=now,
                job_id=advice.job_id,
                incident_id=advice.incident_id,
                drained=drained,
                reason=reason if drained else "drain skipped: another owner's drain stands",
            )
            return ("drained" if drained else "left alone: drained by another owner"), history
        if step == "requeue":
            return self._requeue(advice, job, now), None
        if step == "cancel":
            return self._cancel(advice, job), None
        raise SchedulerError(f"unknown step {step!r} in advice {advice.id}")

    def _cancel(self, advice: AdviceRecord, job: JobInfo | None) -> str:
        if not self.stop_enforced(advice.job_id):
            return "stop recorded, not enforced (stop_enforcement = false)"
        if job is None:
            return "already gone from the scheduler"
        if job.state.is_terminal() and job.state is not JobState.FAILED:
            return f"already {job.state.value}"
        self.adapter.cancel(advice.job_id, advice.basis[:200])
        return "cancelled"

    def _requeue(self, advice: AdviceRecord, job: JobInfo | None, now: float) -> str:
        # Done before a crash. A job still held by our open hold was cut short between hold
        # and release: the requeue below finishes it (exclusions, release), and no adapter
        # starts another attempt of a held job.
        if (
            job is not None
            and job.attempt > advice.attempt
            and not (job.held and self._holds(advice.job_id))
        ):
            self._release_records(advice.job_id, now)
            return f"already requeued (attempt {job.attempt})"
        earlier = self._requeued_by(advice)
        if earlier is not None:
            # One attempt is replaced once: a second advice for it (re-derived after a
            # restart, or a later generation) must not requeue the new attempt as well,
            # even while this cycle's snapshot still shows the old one.
            return f"already requeued by advice {earlier}"
        self._check_not_over(advice, job)
        if self.hold_file is not None:
            self.hold_file.add(advice.job_id, held_at=now, by=self.executor_id)
        self.store.record_hold(advice.job_id, held_at=now, by=self.executor_id)
        try:
            self.adapter.requeue(advice.job_id, advice.exclude_nodes)
        except JobNotRequeueable:
            self._release_records(advice.job_id, now)  # refused before anything was held
            raise
        # Any other failure may come after the hold (a release refused): the hold stays
        # open, for the next cycle to finish the requeue or the watchdog to release it.
        self._release_records(advice.job_id, now)
        excluded = f" excluding {', '.join(advice.exclude_nodes)}" if advice.exclude_nodes else ""
        return f"requeued{excluded}"

    def _check_not_over(self, advice: AdviceRecord, job: JobInfo | None) -> None:
        """Raise JobNotRequeueable for a job that is gone or over for good."""
        if job is None:
            raise JobNotRequeueable(
                f"job {advice.job_id} is no longer known to the scheduler: not requeued"
            )
        if job.state is JobState.CANCELLED and not job.held:
            by_us = self.stop_enforced(advice.job_id) and self._cancelled_by_us(advice.job_id)
            who = "trainmedic" if by_us else "its user"
            raise JobNotRequeueable(
                f"job {advice.job_id} was cancelled by {who}: "
                "that decision stands, the job is not restarted"
            )
        if job.state in ENDED_FOR_GOOD and not job.held:
            raise JobNotRequeueable(
                f"job {advice.job_id} ended ({job.state.value}): not revived by a requeue"
            )

    def _cancelled_by_us(self, job_id: str) -> bool:
        return any("cancel" in other.steps_done for other in self.store.list_advice(job_id))

    def _release_records(self, job_id: str, now: float) -> None:
        self.store.release_hold(job_id, released_at=now)
        if self.hold_file is not None:
            self.hold_file.remove(job_id)

    def _holds(self, job_id: str) -> bool:
        return any(hold.job_id == job_id for hold in self.store.open_holds())

    def _requeued_by(self, advice: AdviceRecord) -> int | None:
        for other in self.store.list_advice(advice.job_id):
            if (
                other.id != advice.id
                and other.attempt == advice.attempt
                and "requeue" in other.steps_done
            ):
                return other.id
        return None

    def _maybe_abandon(self, advice: AdviceRecord, now: float, why: str) -> list[ExecutorEvent]:
        if now - advice.created_at < self.converge_timeout_s:
            return []
        self.store.set_advice_status(advice.id, AdviceStatus.ABANDONED, now=now, note=why)
        return [ExecutorEvent(now, advice.id, advice.job_id, "abandoned", why)]


def _converged(advice: AdviceRecord, job: JobInfo | None, stop_enforced: bool) -> bool:
    if advice.action is Action.STOP:
        if not stop_enforced:
            return True  # nothing to converge to: the stop was only recorded
        return job is None or job.state.is_terminal()
    if advice.action is Action.NONE:
        return True
    if job is None:
        return False
    excluded = set(advice.exclude_nodes)
    return (
        job.attempt > advice.attempt
        and job.state is JobState.RUNNING
        and not excluded.intersection(job.nodes)
    )
