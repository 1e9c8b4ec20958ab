"""The engine: the pure stages wired for every watched job (detect -> attribute).

It holds state but reads no clock and does no I/O: the service hands it observations and the
time, and gets back :class:`Finding` values (an anomaly with its verdict and evidence). The
policy step (``trainmedic.core.policy.decide``) needs history from the store, so the shell runs it.

Evidence per job: the current attempt's own log lines, scanned line by line with the
``LineScanner`` that ``trainmedic analyze`` runs over a file (tracebacks with their frames,
torchrun's failure table, progress, restart lines), combined into events and facts by the
same ``combine_scans``; plus the scheduler's word about the job and the kernel-log and
telemetry events of the nodes the attempt runs on. The same lines give the live verdict
and ``analyze``'s.

A finding waits ``settle_s`` after its anomaly, and until the job's logs have been quiet for
``settle_s`` (at most ``max_settle_s``), before it is attributed: the lines that trail the
first symptom (the kernel's Xid a moment after the app's CUDA error, the failing rank's
traceback and the other ranks' cascades, torchrun's failure table) are in the evidence. The
detection time stays the anomaly's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import replace

from trainmedic.core.attribute.smells import smells
from trainmedic.core.attribute.verdict import attribute
from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.detect.state import JobDetectorState
from trainmedic.core.engine.evidence import combine_scans
from trainmedic.core.engine.signals import (
    NodeDebounce,
    NodeStateFilter,
    job_status_event,
    node_status_event,
    verdict_for_anomaly,
)
from trainmedic.core.engine.track import (
    BACKLOG_READ_S,
    MAX_NODE_EVENTS,
    NODE_EVIDENCE_LOOKBACK_S,
    ON_ITS_NODES,
    REQUEUE_GRACE_S,
    EndedAttempt,
    Finding,
    JobTrack,
    dedupe,
)
from trainmedic.core.logparse.attempts import ATTEMPT_BANNER
from trainmedic.core.model import Event, EvidenceSource, Kind, LinePrefix
from trainmedic.core.observations import (
    CheckpointSaved,
    JobStatus,
    LogLine,
    NodeStatus,
    Observation,
    Progress,
    ProgressRun,
    TelemetrySample,
)
from trainmedic.core.signatures.matcher import Matcher, default_matcher
from trainmedic.core.states import JobState
from trainmedic.core.telemetry import telemetry_to_events

__all__ = ["EndedAttempt", "Engine", "Finding"]


class Engine:
    def __init__(
        self,
        detector_config: DetectorConfig | None = None,
        *,
        matcher: Matcher | None = None,
        settle_s: float = 0.5,
        max_settle_s: float = 5.0,
        node_debounce: NodeDebounce | None = None,
    ) -> None:
        self.detector_config = detector_config or DetectorConfig()
        self.matcher = matcher or default_matcher()
        self.settle_s = settle_s
        self.max_settle_s = max(settle_s, max_settle_s)
        self._jobs: dict[str, JobTrack] = {}
        self._node_events: dict[str, deque[Event]] = {}
        self._telemetry: dict[tuple[str, str, str], float] = {}
        self._node_filter = NodeStateFilter(node_debounce)
        self._used: set[Event] = set()  # node events an earlier finding was based on
        # Nodes whose kernel log the service follows and can read (set by the service each
        # cycle): attribution may rule the OOM killer out on them (JobFacts.kernel_logs).
        self.kernel_log_nodes: frozenset[str] = frozenset()

    # -- watching ------------------------------------------------------------------------

    def watch(self, job_id: str) -> None:
        if job_id not in self._jobs:
            self._jobs[job_id] = JobTrack(job_id, self.detector_config)

    def resume(
        self,
        job_id: str,
        attempt: int,
        started_at: float,
        nodes: tuple[str, ...],
        *,
        previous: EndedAttempt | None = None,
        died: Iterable[str] = (),
        met_at: float | None = None,
    ) -> None:
        """Start a fresh engine where a stored attempt stands (a service restarted after
        ``kill -9``): its nodes and start time scope the node evidence exactly as before the
        restart, even when the scheduler already reports the attempt over (a FAILED job no
        longer counts as running on its nodes), so the restarted service reaches the same
        verdict and the store's idempotency keys find the incident it already has.

        ``previous``: the attempt before it. Slurm requeues a job by itself when a node dies,
        and the new attempt is stored at once, while the lost attempt's finding waits for
        the node's death and its settle time: a service killed in between must still blame
        the lost attempt's node. ``died``: this attempt's nodes whose death an incident
        already holds (``previous.died`` for the lost attempt's), not raised again.
        ``met_at``: when this service met the attempt: the reports it reads again right
        after (stored offsets lag, and are held back while a finding waits) that were printed
        before are an earlier attempt's, not this one's progress (``JobTrack.read_again``)."""
        self.watch(job_id)
        track = self._jobs[job_id]
        if track.detector.state is not None:
            return  # already fed by the scheduler: its word stands
        track.detector.attempt = attempt
        track.attempt_started = started_at
        track.nodes = nodes
        track.met_at = met_at
        track.node_failures.update((attempt, node) for node in died)
        if previous is not None:
            track.previous_attempt = previous.attempt
            track.previous_nodes = previous.nodes
            track.attempt_changed_at = previous.ended_at
            track.node_failures.update((previous.attempt, node) for node in previous.died)

    def unwatch(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)

    @property
    def jobs(self) -> tuple[str, ...]:
        return tuple(self._jobs)

    @property
    def settling(self) -> bool:
        """An anomaly is waiting for its settle time: the lines it came from are not yet
        part of a finding (a service must not record them as read for good)."""
        return any(track.pending for track in self._jobs.values())

    def settles(self, job_id: str) -> bool:
        """``settling``, for one job."""
        track = self._jobs.get(job_id)
        return track is not None and bool(track.pending)

    def detector(self, job_id: str) -> JobDetectorState:
        return self._jobs[job_id].detector

    def progress_of(self, job_id: str) -> tuple[Progress | None, Progress | None]:
        """The current attempt's first and latest progress that the engine accepted (lines a
        replaced attempt printed late are left out)."""
        track = self._jobs[job_id]
        return track.first_progress, track.last_progress

    # -- feeding -------------------------------------------------------------------------

    def observe(self, obs: Observation, now: float) -> None:
        if isinstance(obs, ProgressRun):
            self._observe_run(obs, now)
        elif isinstance(obs, LogLine):
            self._observe_line(obs, now)
        elif isinstance(obs, TelemetrySample):
            self._observe_telemetry(obs, now)
        elif isinstance(obs, NodeStatus):
            # Only a change of state is news (a DOWN node is reported at every poll), and a
            # NOT_RESPONDING blip only once it held (signals.NodeStateFilter).
            confirmed = self._node_filter.observe(obs)
            event = node_status_event(confirmed) if confirmed is not None else None
            if event is not None:
                self._add_node_event(obs.node, event, now)
        else:
            track = self._jobs.get(getattr(obs, "job_id", None) or "")
            if track is None:
                return
            if isinstance(obs, (Progress, CheckpointSaved)) and (
                track.stale_log() or track.read_again(obs)
            ):
                return  # the lost attempt's last lines: not progress of the new one
            if isinstance(obs, Progress) and (track.between_attempts() or track.bar.stale(obs)):
                return
            if isinstance(obs, CheckpointSaved) and not obs.in_progress:
                track.bar.checkpoint(obs.iteration)
            if isinstance(obs, Progress):
                step = track.bar.step(obs)
                if step != obs.iteration:
                    obs = replace(obs, iteration=step)  # a bar's count, placed (epoch_bar)
                if track.first_progress is None:
                    track.first_progress = obs
                if track.last_progress is None or obs.iteration >= track.last_progress.iteration:
                    track.last_progress = obs
            if isinstance(obs, JobStatus) and obs.attempt != track.detector.attempt:
                # Seen live, the new attempt started about now; first seen after a restart,
                # it started some time while the service was away: unknown.
                seen_live = track.detector.state is not None
                track.new_attempt(obs.attempt, obs.time)
                if not seen_live:
                    track.attempt_started = None
                    track.met_at = obs.time
            if isinstance(obs, JobStatus):
                if obs.state is JobState.RUNNING:
                    track.ran_attempt = obs.attempt
                if obs.state is JobState.RUNNING and obs.nodes:
                    # Only a running job's nodes are its own (a requeued job still lists the
                    # old nodes while it completes), and an attempt keeps every node it ran
                    # on: Slurm drops a dead node from the list before it bumps the attempt.
                    track.nodes = tuple(dict.fromkeys(track.nodes + obs.nodes))
                event = job_status_event(obs)
                if event is not None and track.detector.state is not obs.state:
                    track.events.append(event)
            track.detector.observe(obs)

    def observe_all(self, observations: Iterable[Observation], now: float) -> None:
        for obs in observations:
            self.observe(obs, now)

    def _events_of(self, line: LogLine) -> list[Event]:
        hits = self.matcher.match(line.text)
        if not hits:
            return []
        prefix = LinePrefix(rank=line.rank, node=line.node, timestamp=line.time)
        events = [
            self.matcher.to_event(
                hit,
                line=line.line_no,
                text=line.text,
                source=line.path,
                evidence=line.source,
                prefix=prefix,
            )
            for hit in hits
        ]
        if line.source is EvidenceSource.KERNEL_LOG and line.node is not None:
            # A node's kernel speaks for that node, whatever host name the text carries.
            events = [replace(e, node=line.node) if e.node != line.node else e for e in events]
        return events

    def _observe_line(self, line: LogLine, now: float) -> None:
        if line.source is EvidenceSource.KERNEL_LOG or line.job_id is None:
            if line.node is not None:
                for event in self._events_of(line):
                    self._add_node_event(line.node, event, now)
            return
        track = self._jobs.get(line.job_id)
        if track is None:
            return
        banner = ATTEMPT_BANNER.search(line.text)
        if banner is not None:
            # The log says a new attempt starts here: evidence before it belongs to an
            # earlier attempt (a service reading a log from its start after a restart).
            track.log_attempt = int(banner.group(1))
            track.scanners.clear()
            track.fresh.clear()
        if track.stale_log():
            return  # lines of an attempt that is already over
        track.last_line_at = now
        if _predates(track, line.time):
            return  # written before this attempt started: not evidence against it
        scanner = track.scanner(line.path)
        began, steps = scanner.attempt_line, scanner.steps
        events = scanner.feed(line.text, line.line_no)
        fresh = track.fresh.setdefault(line.path, [])
        if scanner.attempt_line != began:
            # The workload announced a restart: what this log said before is an earlier
            # attempt's, and so are the steps it reported (a log read from its start).
            fresh.clear()
            if steps:
                track.first_progress = track.last_progress = None
        fresh.extend((event, now) for event in events)

    def _observe_run(self, run: ProgressRun, now: float) -> None:
        """A run of plain progress lines, to the same effect as each line's ``Progress`` and
        ``LogLine`` in turn: neither part of a plain line changes what the other reads (it is
        no attempt banner or restart line), so the run's progress is taken first, then its
        lines. The rare run this cannot shortcut (lines read again after a restart, lines
        from before the attempt started) is taken line by line."""
        track = self._jobs.get(run.job_id)
        if track is None:
            return
        started, met, oldest = track.attempt_started, track.met_at, min(run.times)
        if (started is not None and oldest < started - NODE_EVIDENCE_LOOKBACK_S) or (
            met is not None
            and run.received <= met + BACKLOG_READ_S
            and oldest < met - NODE_EVIDENCE_LOOKBACK_S
        ):  # some line predates the attempt, or may be read again (JobTrack.read_again)
            for obs in run.expand():
                self.observe(obs, now)
            return
        if track.stale_log():
            return  # lines of an attempt that is already over: neither progress nor evidence
        if not track.between_attempts():
            self._run_progress(track, run)
        track.last_line_at = now
        scanner = track.scanner(run.path)
        began, steps = scanner.attempt_line, scanner.steps
        events = scanner.feed_run(run.texts, run.first_line_no, run.points())
        fresh = track.fresh.setdefault(run.path, [])
        if scanner.attempt_line != began:
            fresh.clear()
            if steps:
                track.first_progress = track.last_progress = None
        fresh.extend((event, now) for event in events)

    def _run_progress(self, track: JobTrack, run: ProgressRun) -> None:
        iterations = run.iterations
        track.bar.passed(max(iterations))
        first = None
        if track.first_progress is None:
            first = track.first_progress = run.progress_at(0)
        last = track.last_progress
        top = None if last is None else last.iteration
        # The last report at or past the furthest yet: the last of the run's highest, if that
        # is at or past ``top`` (what taking them one by one, ``>=``, ends on).
        highest, best = max(iterations), -1
        if top is None or highest >= top:
            best = len(iterations) - 1 - iterations[::-1].index(highest)
        if best == 0 and first is not None:
            track.last_progress = first
        elif best >= 0:
            track.last_progress = run.progress_at(best)
        track.detector.observe_run(run)

    def _observe_telemetry(self, sample: TelemetrySample, now: float) -> None:
        key = (sample.node, sample.gpu, sample.metric)
        previous = self._telemetry.get(key)
        self._telemetry[key] = sample.value
        for event in telemetry_to_events([sample], {key: previous} if previous is not None else {}):
            self._add_node_event(sample.node, event, now)

    def _add_node_event(self, node: str, event: Event, now: float) -> None:
        stamped = event if event.timestamp is not None else replace(event, timestamp=now)
        self._node_events.setdefault(node, deque(maxlen=MAX_NODE_EVENTS)).append(stamped)
        for track in self._jobs.values():
            if stamped.evidence is EvidenceSource.SCHEDULER:
                self._node_failure(track, node, stamped, now)  # one anomaly per node death
            elif node in track.nodes and not _predates(track, stamped.timestamp):
                track.detector.observe_event(stamped, now)

    def _node_failure(self, track: JobTrack, node: str, event: Event, now: float) -> None:
        """The scheduler says a node of this job (now, or of the attempt it just lost) died."""
        if node in track.nodes and track.detector.state in ON_ITS_NODES:
            attempt = track.detector.attempt
        elif (
            node in track.previous_nodes
            and track.attempt_changed_at is not None
            and now - track.attempt_changed_at <= REQUEUE_GRACE_S
        ):
            attempt = track.previous_attempt
        else:
            return
        if (attempt, node) in track.node_failures:
            return
        track.node_failures.add((attempt, node))
        anomaly = Anomaly(
            kind=Kind.CRASH,
            job_id=track.detector.job_id,
            detected_at=now,
            since=event.timestamp if event.timestamp is not None else now,
            trigger=Trigger.NODE_STATE,
            basis=f"scheduler: node {node} of the job is unhealthy ({event.text})",
            nodes=(node,),
            evidence=(event,),
            category=event.category,
            iteration=track.detector.iteration,
        )
        track.pending.append((anomaly, attempt))

    # -- evaluating ----------------------------------------------------------------------

    def evaluate(self, now: float) -> list[Finding]:
        """Findings whose settle time has passed; each anomaly yields one finding."""
        findings: list[Finding] = []
        for job_id, track in self._jobs.items():
            for fresh in track.fresh.values():
                for event, seen in fresh:
                    track.detector.observe_event(event, seen)
            track.fresh.clear()
            attempt = track.detector.attempt
            node_died = any(n == attempt for n, _ in track.node_failures)
            track.pending.extend(
                (a, attempt)
                for a in track.detector.check(now)
                # A dead node already explains this attempt's crash: one incident, not two.
                if not (node_died and a.kind is Kind.CRASH)
            )
            ready = [p for p in track.pending if self._settled(track, p[0], now)]
            if not ready:
                continue
            track.pending = [p for p in track.pending if p not in ready]
            for anomaly, of_attempt in ready:
                findings.append(self._finding(job_id, track, anomaly, of_attempt))
        return findings

    def _settled(self, track: JobTrack, anomaly: Anomaly, now: float) -> bool:
        """The anomaly's trailing lines are in: ``settle_s`` after it and after the job's
        last line (a straggler's job goes on printing: only the first), or ``max_settle_s``."""
        if now < anomaly.detected_at + self.settle_s:
            return False
        if anomaly.kind is Kind.STRAGGLER or now >= anomaly.detected_at + self.max_settle_s:
            return True
        return track.last_line_at is None or now >= track.last_line_at + self.settle_s

    def _node_evidence(self, track: JobTrack, attempt: int) -> list[Event]:
        """Kernel, telemetry and scheduler events of the attempt's nodes, from shortly before
        it started, that no earlier finding has used: one Xid explains one incident, not
        every later one on a node the job still runs on."""
        if attempt == track.detector.attempt:
            nodes, since = track.nodes, track.attempt_started
        else:  # the attempt Slurm requeued by itself when a node died
            nodes = track.previous_nodes
            since = (track.attempt_changed_at or 0.0) - REQUEUE_GRACE_S
        start = (since or 0.0) - NODE_EVIDENCE_LOOKBACK_S
        return [
            event
            for node in nodes
            for event in self._node_events.get(node, ())
            if event not in self._used and (event.timestamp is None or event.timestamp >= start)
        ]

    def _finding(self, job_id: str, track: JobTrack, anomaly: Anomaly, attempt: int) -> Finding:
        node_events = self._node_evidence(track, attempt)
        self._used.update(node_events)
        if len(self._used) > 4 * MAX_NODE_EVENTS:  # forget events the node buffers dropped
            kept = {e for events in self._node_events.values() for e in events}
            self._used &= kept
        job = combine_scans(track.scans())
        nodes = track.nodes if attempt == track.detector.attempt else track.previous_nodes
        # The kernel logs of the attempt's nodes are read as analyze reads <node>/kern.log.
        facts = replace(
            job.facts, kernel_logs=frozenset(n for n in nodes if n in self.kernel_log_nodes)
        )
        # System evidence first: on equal timestamps the kernel's word outranks app lines.
        evidence = tuple(node_events) + tuple(track.events) + job.events + anomaly.evidence
        verdict = verdict_for_anomaly(anomaly, attribute(evidence, facts=facts), smells(evidence))
        named = verdict.implicated.nodes
        if nodes and any(n not in nodes for n in named):
            # A host the logs name that is none of the attempt's nodes (torchrun's failure
            # table says "localhost" when every rank of a node talks over loopback) is no
            # node the scheduler could exclude or drain.
            ours = tuple(n for n in named if n in nodes)
            verdict = replace(verdict, implicated=replace(verdict.implicated, nodes=ours))
        return Finding(
            job_id=job_id,
            attempt=attempt,
            anomaly=anomaly,
            verdict=verdict,
            evidence=dedupe(evidence),
            iteration=track.detector.iteration,
            nodes=nodes,
            report_interval_steps=track.detector.cadence.interval_steps,
        )


def _predates(track: JobTrack, t: float | None) -> bool:
    """``t`` is before the track's attempt started (with the tolerance node evidence gets):
    what was written then is no evidence against this attempt."""
    started = track.attempt_started
    return t is not None and started is not None and t < started - NODE_EVIDENCE_LOOKBACK_S
