"""From a finding to stored incident and advice: the policy step of the service.

The policy (``trainmedic.core.policy.decide``) is pure; this reads the history it needs from the
store (earlier attempts, node history, budgets), applies a job's own policy overrides, stores
the verdict as an incident and the advice as the next generation for the job's attempt, and
records in their history the implicated nodes that the cluster's own evidence names (never a
node named only by the job's output: ``core.policy.trust``). The incident, its advice and the
nodes' history are written in one transaction, and everything is idempotent per incident, so
a service restarted after ``kill -9`` that re-derives a finding changes nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from trainmedic.core.engine.engine import Finding
from trainmedic.core.errors import ConfigError
from trainmedic.core.policy.config import PolicyConfig
from trainmedic.core.policy.context import PolicyContext
from trainmedic.core.policy.decide import decide
from trainmedic.core.policy.overrides import job_policy
from trainmedic.core.policy.trust import node_charges
from trainmedic.schedulers.base import ClusterSnapshot
from trainmedic.service.attribution_hook import AttributionHook
from trainmedic.service.config.sections import Config
from trainmedic.service.policy_context import build_context
from trainmedic.store import AdviceMode, AdviceRecord, Store

log = logging.getLogger(__name__)

# Evidence lines kept with an incident: the root cause is among the last ones attribution saw.
MAX_STORED_EVIDENCE = 50


@dataclass(frozen=True, slots=True)
class Decision:
    """A finding as stored: its incident and its advice."""

    finding: Finding
    incident_id: int
    advice: AdviceRecord
    new: bool  # False when a restarted service re-derived an incident it already had


class DecisionRecorder:
    def __init__(self, config: Config, store: Store) -> None:
        self.config = config
        self.store = store
        # An external second opinion, asked with a bounded wait before the policy runs.
        self.hook = (
            AttributionHook(config.attribution_hook) if config.attribution_hook.enabled else None
        )

    def policy_for(self, job_id: str) -> PolicyConfig:
        """``[policy]`` tightened by the job's own overrides (its registration or Slurm
        comment); checked again here, so a stored policy that loosens is never applied."""
        job = self.store.get_job(job_id)
        if job is None or not job.spec.policy:
            return self.config.policy
        try:
            return job_policy(self.config.policy, job.spec.policy, f"job {job_id}")
        except ConfigError as exc:
            log.warning("%s; using the configured policy", exc)
            return self.config.policy

    def mode_for(self, job_id: str) -> AdviceMode:
        job = self.store.get_job(job_id)
        partition = job.spec.partition if job else ""
        if self.config.acts_on(job_id, partition=partition):
            return AdviceMode.ACTION
        return AdviceMode.MONITOR

    def new_checkpoint(self, finding: Finding, newest: int | None) -> bool:
        """A checkpoint newer than the one the failing attempt resumed from (the trainer
        resumes from checkpoint N at iteration N + 1)."""
        first = next(
            (
                a.first_iteration
                for a in self.store.list_attempts(finding.job_id)
                if a.attempt == finding.attempt
            ),
            None,
        )
        return newest is not None and first is not None and newest >= first

    def record(
        self, finding: Finding, snapshot: ClusterSnapshot, now: float, newest: int | None
    ) -> Decision:
        context = build_context(
            self.store,
            finding,
            snapshot,
            self.policy_for(finding.job_id),
            now=now,
            new_checkpoint=self.new_checkpoint(finding, newest),
            resumed_at=newest,
        )
        verdict = finding.verdict
        if self.hook is not None and verdict.failure:
            verdict = self.hook.review(finding.job_id, finding.attempt, verdict, finding.evidence)
            finding = replace(finding, verdict=verdict)
        advice = decide(verdict, context)
        fault_time = verdict.root_cause.timestamp if verdict.root_cause else None
        stored = self.store.record_decision(
            finding.job_id,
            finding.attempt,
            verdict,
            advice,
            mode=self.mode_for(finding.job_id),
            now=now,
            detected_at=finding.anomaly.detected_at,
            fault_time=fault_time if fault_time is not None else finding.anomaly.since,
            evidence=finding.evidence[-MAX_STORED_EVIDENCE:],
            charges=node_charges(verdict, context),
        )
        incident_id, new = stored.incident_id, stored.new
        if new and advice.breaker_trip:
            self._trip_breaker(finding, context, incident_id, now)
        if new:
            log.info(
                "incident %s job %s: %s/%s -> %s (%s)",
                incident_id,
                finding.job_id,
                verdict.kind.value,
                verdict.category.value,
                advice.action.value,
                advice.basis,
            )
        return Decision(finding, incident_id, stored.advice, new)

    def _trip_breaker(
        self, finding: Finding, context: PolicyContext, incident_id: int, now: float
    ) -> None:
        cfg = context.config
        reason = (
            f"incident {incident_id} of job {finding.job_id} would drain past "
            f"{cfg.max_drain_fraction:.0%} of {context.cluster_size} nodes in "
            f"{cfg.drain_window_s:g} s ({context.recent_drains} already drained)"
        )
        state = self.store.trip_breaker(now=now, reason=reason)
        log.warning(
            "drain circuit breaker tripped (%s): drains are advice only until an operator "
            "resets it (POST /breaker/reset or `trainmedic breaker reset`)",
            state.reason,
        )
