"""The service as a Slurm site runs it, for the framework end-to-end tests.

Unlike ``test_slurm_e2e`` (which registers the example trainer itself), the service here
finds each job as a Slurm user leaves it: through the job's ``--comment`` opt-in (discovery,
``[scheduler] kind = "slurm"``), with every node's kernel log from the config's template.
One service watches every framework's job at once, as a site's service does. Every command
that changes the cluster is recorded; timings come from the workload's trace.

The test config departs from the defaults where a CI machine needs it, as an operator may:
``hang_floor_s`` 30 s and ``startup_grace_s`` 120 s (the defaults, 300 s and 30 min, are for
real jobs and would make each hang cost minutes), ``max_drain_fraction`` 0.5 (four
frameworks each drain a node within the hour on this 16-node lab cluster).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmedic.core.model import Kind
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import CompletedCommand
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.schedulers.slurm.scontrol import JobDetails
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import AdviceRecord, IncidentRecord, Store, sqlite_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workloads"))
from tests.slurm_lab import RecordingRunner
from workload_job import Attempt, WorkloadJob, read_trace

TIMINGS_ENV = "TRAINMEDIC_FRAMEWORK_TIMINGS"  # a JSONL file the measured timings go to
# Diagnosis only, never for the verdict of these tests: "hang_floor_s=40,startup_grace_s=120"
# overrides [detect] defaults, to see what a framework's run does past a detector default.
DETECT_ENV = "TRAINMEDIC_FRAMEWORK_DETECT"


def detect_overrides() -> dict[str, float]:
    pairs = [p.split("=", 1) for p in os.environ.get(DETECT_ENV, "").split(",") if "=" in p]
    return {k.strip(): float(v) for k, v in pairs}


class Notices(logging.Handler):
    """The service's warnings (e.g. the unknown-progress-format message), kept for asserts."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def wait(what: str, check: Callable[[], Any], timeout: float, every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """A job's files as they stood when the service acted on it (before the command ran)."""

    taken_at: float
    command: tuple[str, ...]
    files: tuple[Path, ...]
    kernel_logs: dict[str, Path]


class SnapshotRunner(RecordingRunner):
    """The recording runner that also copies a job's logs and the nodes' kernel logs right
    before the service requeues or cancels it: the files as the live verdict found them,
    before the teardown the service's own command causes (slurmstepd's "CANCELLED ... DUE TO
    JOB REQUEUE", the ranks' SIGTERM tracebacks)."""

    ACTS = (("scontrol", "requeuehold"), ("scancel",))

    def __init__(self, slurm_conf: str, lab: FrameworkLab) -> None:
        super().__init__(slurm_conf)
        self.lab = lab
        self.snapshots: dict[str, list[Snapshot]] = {}

    def run(self, argv: list[str], timeout: float) -> CompletedCommand:
        if any(tuple(argv[: len(act)]) == act for act in self.ACTS):
            self._snapshot(argv[-1], tuple(argv))
        return super().run(argv, timeout)

    def _snapshot(self, job_id: str, command: tuple[str, ...]) -> None:
        job = self.lab.store.get_job(job_id)
        if job is None:
            return
        taken = self.snapshots.setdefault(job_id, [])
        folder = self.lab.tmp / "snapshots" / job_id / str(len(taken))
        (folder / "kernel").mkdir(parents=True)
        files = []
        for name in job.spec.log_paths:
            source = Path(name)
            if source.exists():
                files.append(Path(shutil.copy(source, folder / source.name)))
        kernels = {}
        for node in self.lab.cluster.nodes:
            source = self.lab.cluster.kernel_log(node)
            if source.exists():
                kernels[node] = Path(shutil.copy(source, folder / "kernel" / f"{node}.log"))
        taken.append(Snapshot(time.time(), command, tuple(files), kernels))


class FrameworkLab:
    """One test's service (own SQLite store, discovery on) on the session's cluster."""

    def __init__(self, cluster: SlurmCluster, tmp: Path) -> None:
        self.cluster = cluster
        self.tmp = tmp
        self.runner = SnapshotRunner(str(cluster.conf_path), self)
        self.slurm = SlurmScheduler(self.runner)
        self.store = Store(sqlite_url(str(tmp / "state.db")))
        base = default_config()
        kernel = str(cluster.base / "nodes" / "{node}" / "kern.log")
        config = dataclasses.replace(
            base,
            service=dataclasses.replace(base.service, mode="action", poll_interval_s=0.5),
            policy=dataclasses.replace(base.policy, stop_enforcement=True, max_drain_fraction=0.5),
            detect=dataclasses.replace(
                base.detect,
                **{"hang_floor_s": 30.0, "startup_grace_s": 120.0, **detect_overrides()},  # type: ignore[arg-type]
            ),
            scheduler=dataclasses.replace(
                base.scheduler,
                kind="slurm",
                slurm=dataclasses.replace(
                    base.scheduler.slurm, kernel_log_template=kernel, discovery_interval_s=1.0
                ),
            ),
        )
        self.service = Service(config, self.store, self.slurm, executor_id="frameworks")
        self.notices = Notices()
        logging.getLogger("trainmedic").addHandler(self.notices)
        self.jobs: list[str] = []
        self.jobs_framework: dict[str, str] = {}
        self.xid_nodes: set[str] = set()  # nodes whose kernel log a test wrote an Xid to
        # Each incident's live verdict beside analyze's (test_frameworks_e2e.live_and_offline).
        self.live_offline: list[dict[str, Any]] = []
        self._submit = threading.Lock()
        # Rendezvous ports of this session's jobs: 2000 from a base no other session is
        # likely to use (below the ephemeral range, away from torch's 29500).
        self.port_base = random.Random().randrange(10000, 28000, 2000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self.service.run, args=(self._stop,), daemon=True)
        self._thread.start()

    def submit(self, framework: str, label: str = "", **options: Any) -> tuple[str, WorkloadJob]:
        label = label or framework
        job = WorkloadJob(framework, self.tmp / label, port_base=self.port_base, **options)
        with self._submit:
            job_id = self.cluster.sbatch(job.sbatch_args(f"fw-{label}"))
            self.jobs.append(job_id)
            self.jobs_framework[job_id] = label
        wait(f"job {job_id} discovered", lambda: self.store.get_job(job_id), 60)
        return job_id, job

    def changes_to(self, job_id: str) -> list[tuple[str, ...]]:
        """The commands the service issued about this job (requeue, hold, cancel, ...)."""
        return [c for c in list(self.runner.changes) if any(job_id in arg for arg in c)]

    def drains(self) -> set[str]:
        """The nodes the service drained."""
        return {
            arg.split("=", 1)[1]
            for c in list(self.runner.changes)
            if any("State=DRAIN" in a for a in c)
            for arg in c
            if arg.startswith("NodeName=")
        }

    def details(self, job_id: str) -> JobDetails:
        return self.slurm.job_details(job_id)

    def attempt(self, job: WorkloadJob, number: int) -> Attempt:
        return read_trace(job.run_dir).get(number) or Attempt(number)

    def steady(
        self, job_id: str, job: WorkloadJob, number: int = 0, checkpoints: int = 1
    ) -> Attempt:
        """The attempt trains and has saved ``checkpoints`` checkpoints; an interruption the
        service reports meanwhile (nothing was injected since the call) fails here,
        described."""
        known = {i.id for i in self.interruptions(job_id)}

        def ready() -> Attempt | None:
            found = [i for i in self.interruptions(job_id) if i.id not in known]
            assert not found, f"before any fault, in attempt {number}: {describe(found[0])}"
            a = self.attempt(job, number)
            return a if a.first_step is not None and len(a.checkpoints) >= checkpoints else None

        return wait(  # type: ignore[no-any-return]
            f"job {job_id} attempt {number} training with {checkpoints} checkpoint(s)", ready, 240
        )

    def interruptions(self, job_id: str) -> list[IncidentRecord]:
        """Crashes and hangs; a straggler report on this shared 2-core machine is noise."""
        return [i for i in self.store.list_incidents(job_id) if i.kind is not Kind.STRAGGLER]

    def incident(self, job_id: str, number: int = 1, timeout: float = 180) -> IncidentRecord:
        found: list[IncidentRecord] = wait(
            f"incident {number} of job {job_id}",
            lambda: len(f := self.interruptions(job_id)) >= number and f,
            timeout,
        )
        return found[number - 1]

    def advice(self, incident: IncidentRecord, final: bool = True) -> AdviceRecord:
        def of_incident() -> AdviceRecord | None:
            for advice in self.store.list_advice(incident.job_id):
                if advice.incident_id == incident.id and (not final or advice.status.is_terminal()):
                    return advice
            return None

        found: AdviceRecord = wait(f"advice for incident {incident.id}", of_incident, 120)
        return found

    def drained(self, node: str) -> bool:
        return {n.name: n for n in self.slurm.poll(()).nodes}[node].drain

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        logging.getLogger("trainmedic").removeHandler(self.notices)
        if self.jobs:
            self.cluster.run(["scancel", *self.jobs], check=False)
        self.store.close()


def describe(incident: IncidentRecord) -> str:
    """An incident in one line, for assertion messages (what the service concluded)."""
    root = incident.root_cause.text[:160] if incident.root_cause else None
    return (
        f"incident {incident.id} attempt {incident.attempt} {incident.kind} "
        f"{incident.category} conf={incident.confidence:.2f} nodes={incident.implicated.nodes} "
        f"ranks={incident.implicated.ranks} basis={incident.basis!r} root={root!r}"
    )


def record_timing(framework: str, scenario: str, **values: float | None) -> None:
    """Print the timing and append it to ``$TRAINMEDIC_FRAMEWORK_TIMINGS`` when set."""
    row = {"framework": framework, "scenario": scenario, **values}
    print(f"TIMING {json.dumps(row)}")
    path = os.environ.get(TIMINGS_ENV)
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")


def resume_node(cluster: SlurmCluster, node: str) -> None:
    """An operator's repair: the node back in service (its kernel log is left as it is: the
    service follows it, and an attempt's earlier lines are never evidence)."""
    cluster.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
