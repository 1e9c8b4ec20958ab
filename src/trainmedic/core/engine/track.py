"""What the engine keeps per watched job (its current attempt, evidence, pending anomalies)
and what it hands back (:class:`Finding`), with the windows that scope node evidence."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from trainmedic.core.detect.anomaly import Anomaly, Trigger
from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.detect.state import JobDetectorState
from trainmedic.core.engine.epoch_bar import EpochBarClock
from trainmedic.core.logparse.scan import FileScan, LineScanner
from trainmedic.core.model import Event, Verdict
from trainmedic.core.observations import CheckpointSaved, Progress
from trainmedic.core.states import JobState

# Evidence kept per job and per node: enough for any real failure burst, bounded memory.
MAX_JOB_EVENTS = 2000
MAX_NODE_EVENTS = 500
# Node evidence this long before an attempt started still counts (a GPU that fell off the bus
# just before the job landed on it).
NODE_EVIDENCE_LOOKBACK_S = 10.0
# After a restart, the log lines read this soon after meeting a new attempt are the backlog
# the stored offsets left to read again (they lag a few cycles), not news.
BACKLOG_READ_S = 30.0
# A node death reported this long after Slurm requeued the job still belongs to the lost attempt.
REQUEUE_GRACE_S = 120.0
# Job states in which the current attempt still holds its nodes: running, or on its way out
# because Slurm is requeueing it (a node death seen in one of these is the attempt's).
ON_ITS_NODES = frozenset(
    {JobState.RUNNING, JobState.COMPLETING, JobState.REQUEUED, JobState.NODE_FAIL}
)


@dataclass(frozen=True, slots=True)
class Finding:
    """An anomaly and what attribution made of it."""

    job_id: str
    attempt: int
    anomaly: Anomaly
    verdict: Verdict
    evidence: tuple[Event, ...]
    iteration: int | None
    nodes: tuple[str, ...]
    # Iterations one progress report of the job moves on (ReportCadence.interval_steps).
    report_interval_steps: int | None = None


@dataclass(frozen=True, slots=True)
class EndedAttempt:
    """An attempt that ended, as a store keeps it: what a finding about it that is made
    after the next attempt began (the node death Slurm requeued the job for) rests on."""

    attempt: int
    nodes: tuple[str, ...]
    ended_at: float  # when the service saw it replaced or over
    # Its nodes whose death an incident already holds (not raised again after a restart).
    died: frozenset[str] = frozenset()


class JobTrack:
    def __init__(self, job_id: str, config: DetectorConfig) -> None:
        self.detector = JobDetectorState(job_id, config)
        # The scheduler's word about the job (NODE_FAIL, PREEMPTED ...) in this attempt.
        self.events: deque[Event] = deque(maxlen=MAX_JOB_EVENTS)
        # Per job log, the scan of the lines read in this attempt: the same scan ``analyze``
        # makes of a file, so the evidence and facts attribution gets are the same.
        self.scanners: dict[str, LineScanner] = {}
        self.last_line_at: float | None = None  # when the last line of a job log was read
        # Events of each job log read since the last evaluation, for the detector: a restart
        # line further down the same read (a log read from its start after a service
        # restart) makes them an earlier attempt's, and they never reach it.
        self.fresh: dict[str, list[tuple[Event, float]]] = {}
        self.attempt_started: float | None = None
        # When a service (re)started met this attempt already begun; None: seen starting.
        self.met_at: float | None = None
        self.log_attempt: int | None = None  # from the last attempt banner in the logs
        self.pending: list[tuple[Anomaly, int]] = []  # with the attempt it belongs to
        # The previous attempt's nodes: Slurm requeues a --requeue job by itself when a node
        # dies, so the dead node is already gone from the job when the node state arrives.
        self.previous_nodes: tuple[str, ...] = ()
        self.previous_attempt = 0
        self.attempt_changed_at: float | None = None
        self.node_failures: set[tuple[int, str]] = set()
        self.nodes: tuple[str, ...] = ()  # the nodes of the running attempt
        # The current attempt's first and latest accepted progress (for the store).
        self.first_progress: Progress | None = None
        self.last_progress: Progress | None = None
        # Places a per-epoch bar's count (Lightning after a resume) at its global step.
        self.bar = EpochBarClock()
        # The last attempt the scheduler showed RUNNING: its lines read after it ended are
        # still its own (srun holds a bar's redraws until a newline: the last of them reach
        # the file as the attempt ends, after the scheduler already says so).
        self.ran_attempt: int | None = None

    def new_attempt(self, attempt: int, time: float) -> None:
        """The scheduler reports a new attempt: what belonged to the old one is set aside."""
        self.previous_nodes = self.nodes
        self.previous_attempt = self.detector.attempt
        self.attempt_changed_at = time
        self.events.clear()
        self.scanners.clear()
        self.fresh.clear()
        # What the old attempt still had pending is the old attempt's teardown, except a node
        # death: Slurm requeues the job right after marking the node down, often between two
        # polls, and that death is the reason for the requeue.
        self.pending = [
            (a, n) for a, n in self.pending if n == attempt or a.trigger is Trigger.NODE_STATE
        ]
        self.attempt_started = time
        self.met_at = None
        self.nodes = ()
        self.first_progress = self.last_progress = None
        self.bar.new_attempt()

    def scanner(self, path: str) -> LineScanner:
        found = self.scanners.get(path)
        if found is None:
            # A job log's kernel-looking line is the application's word, never the kernel's:
            # only a node's own kernel-log source is trusted (a forged Xid drains nothing).
            found = self.scanners[path] = LineScanner(path, kernel_lines=False)
        return found

    def scans(self) -> list[FileScan]:
        """This attempt's scans, in the order ``analyze`` reads files of one directory."""
        return [self.scanners[path].result() for path in sorted(self.scanners)]

    def read_again(self, report: Progress | CheckpointSaved) -> bool:
        """A report of the attempt before the one a (re)started service met: printed well
        before the meeting and read in the backlog right after it. Counted as the new
        attempt's, it would start the new attempt's hang clock from old reports, and a
        slow start-up would read as a hang. A workload whose clock runs behind loses only
        the backlog's reports: those read later count whatever time they print."""
        if self.met_at is None:
            return False
        received = report.time if report.received is None else report.received
        return (
            received <= self.met_at + BACKLOG_READ_S
            and report.time < self.met_at - NODE_EVIDENCE_LOOKBACK_S
        )

    def stale_log(self) -> bool:
        """The log is still showing an attempt the scheduler has already replaced."""
        return self.log_attempt is not None and self.log_attempt < self.detector.attempt

    def between_attempts(self) -> bool:
        """The scheduler shows the job requeued or pending as an attempt that has not run yet,
        and its log has not announced that attempt: a progress line now is a late one of the
        attempt that ended (a tqdm bar flushed as its process was killed), never the next
        attempt's. Taken as such, the next attempt got no start-up grace and was called hung
        while it started. While the scheduler still shows the attempt that ran (failed,
        completing), a late line is that attempt's own: its last steps (the iteration the
        policy compares between attempts) are often read only then."""
        state = self.detector.state
        return (
            state is not None
            and state is not JobState.RUNNING
            and self.log_attempt != self.detector.attempt
            and self.ran_attempt != self.detector.attempt
        )


def dedupe(events: Iterable[Event]) -> tuple[Event, ...]:
    """Evidence without repeats: the line that raised an anomaly is also among the events."""
    seen: set[tuple[str, str, int, str]] = set()
    out: list[Event] = []
    for event in events:
        key = (event.signature, event.source, event.line, event.text)
        if key not in seen:
            seen.add(key)
            out.append(event)
    return tuple(out)
