"""Real training frameworks as workloads on the lab Slurm cluster, service in action mode.

Four workloads (tests/workloads), each with its framework's default logging, run as 2-node x
2-rank batch jobs (gloo on CPU) that opt in through their ``--comment``; the service finds
them by discovery. One job per framework goes through every fault in turn, each attempt
recovered before the next fault (a CI budget: one healthy run and five faults per framework
in one job, the four jobs at once):

1. a healthy run of ``TRAINMEDIC_HEALTHY_S`` (default 120 s) after the first checkpoint
   raises nothing and issues nothing;
2. a killed rank: a crash, restarted from the newest checkpoint, no node drained;
3. a hung rank: a hang (never reported before it fired), requeued;
4. an NVIDIA Xid printed only in the job's stdout (then the rank dies): restarted, drains
   nothing;
5. the same Xid in a node's kernel log (the rank on that node dies): that node is excluded
   and drained, the job runs again elsewhere;
6. a deterministic exception: one confirmation retry, then a stop that ends the job.

After every incident the live verdict is set beside ``trainmedic analyze`` of the job's files
(its output and error files and the kernel logs of its nodes, as they are right then):
live = offline, or the chain fails at its end naming each scenario where they differed.

A job whose progress format trainmedic does not know (the JSON-lines job without its
``progress_regex``; Lightning's real default bar with rich installed, which writes nothing to
a file until training ends) is told once how to declare it, is never called hung, and its
crash is still found from the scheduler's state.

Timings (detection latency, running again, time to productive again: the first training
step of the next attempt) are printed as ``TIMING {...}`` and appended to
``$TRAINMEDIC_FRAMEWORK_TIMINGS`` when set.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from frameworks_lab import FrameworkLab, describe, record_timing, resume_node, wait
from tests.workloads.live_offline import compare_with_analyze
from workload_job import Attempt, WorkloadJob

from trainmedic.core.model import Action, Category, Kind
from trainmedic.core.states import JobState
from trainmedic.lab import SlurmCluster
from trainmedic.store import AdviceStatus, IncidentRecord

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(1500)]

FRAMEWORKS = ["megatron", "jsonl", "lightning", "hf_trainer"]
HEALTHY_S = float(os.environ.get("TRAINMEDIC_HEALTHY_S", "120"))
VICTIM_RANK = 3  # global rank 3: local rank 1 of the job's second node
UNDECLARED = {
    # The JSON-lines job without its progress_regex: no line is progress trainmedic knows.
    "jsonl": {"declare_progress": False},
    # Lightning's real default with rich installed: RichProgressBar prints nothing to a file
    # until training ends, so the job's output holds only its start-up lines.
    "lightning": {"extra_args": ("--progress-bar", "default")},
}
CHAIN_S = 1200.0  # one framework's whole chain, all jobs running at once on 2 cores


# -- the runs, all at once --------------------------------------------------------------------


class Runs:
    """Each selected scenario runs in a thread of its own; a test waits for its own."""

    def __init__(self, lab: FrameworkLab) -> None:
        self.lab = lab
        self.errors: dict[str, str] = {}
        self.threads: dict[str, threading.Thread] = {}

    def start(self, key: str, run: Callable[[FrameworkLab], None]) -> None:
        def body() -> None:
            try:
                run(self.lab)
            except BaseException:  # reported by the test that waits for this run
                self.errors[key] = traceback.format_exc()

        self.threads[key] = thread = threading.Thread(target=body, name=key, daemon=True)
        thread.start()

    def result(self, key: str) -> None:
        thread = self.threads[key]
        thread.join(CHAIN_S)
        assert not thread.is_alive(), f"{key}: still running after {CHAIN_S:.0f} s"
        if key in self.errors:
            pytest.fail(f"{key}:\n{self.errors[key]}", pytrace=False)


def _selected(request: pytest.FixtureRequest) -> list[str]:
    keys = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.module is request.module and callspec is not None:
            keys.append(f"{item.originalname}[{callspec.id}]")
    return keys


@pytest.fixture(scope="module")
def runs(
    framework_cluster: SlurmCluster,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Runs]:
    lab = FrameworkLab(framework_cluster, tmp_path_factory.mktemp("frameworks"))
    the_runs = Runs(lab)
    try:
        for key in _selected(request):
            name, _, param = key.partition("[")
            param = param.rstrip("]")
            if name == "test_framework_job_through_every_fault":
                the_runs.start(key, lambda lab, fw=param: chain(lab, fw))
            else:
                the_runs.start(key, lambda lab, fw=param: undeclared(lab, fw))
        yield the_runs
    finally:
        lab.close()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_job_through_every_fault(runs: Runs, framework: str) -> None:
    runs.result(f"test_framework_job_through_every_fault[{framework}]")


@pytest.mark.parametrize("framework", list(UNDECLARED))
def test_unknown_progress_format_is_told_how_to_declare_and_crashes_still_count(
    runs: Runs, framework: str
) -> None:
    runs.result(
        f"test_unknown_progress_format_is_told_how_to_declare_and_crashes_still_count[{framework}]"
    )


# -- one framework's job through every fault ----------------------------------------------------


def chain(lab: FrameworkLab, framework: str) -> None:
    job_id, job = lab.submit(framework)
    healthy(lab, job_id, job)
    killed_rank(lab, job_id, job, attempt=0)
    hung_rank(lab, job_id, job, attempt=1)
    xid_only_in_stdout(lab, job_id, job, attempt=2)
    kernel_xid(lab, job_id, job, attempt=3)
    deterministic_exception(lab, job_id, job, attempt=4)
    differed = [c for c in lab.live_offline if c["job"] == job_id and not c["same"]]
    assert not differed, f"live != analyze: {differed}"


def healthy(lab: FrameworkLab, job_id: str, job: WorkloadJob) -> None:
    first = lab.steady(job_id, job)
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < HEALTHY_S:
        found = lab.interruptions(job_id)
        assert not found, f"after {elapsed:.0f} s of healthy training: {describe(found[0])}"
        time.sleep(2)
    now = lab.attempt(job, 0)
    assert (now.last_step or 0) > (first.last_step or 0)
    details = lab.details(job_id)
    assert details.state is JobState.RUNNING and details.attempt == 0, details
    assert lab.changes_to(job_id) == []
    stored = lab.store.get_job(job_id)
    assert stored is not None and stored.last_iteration is not None, "no progress read"
    told = [m for m in lab.notices.messages if f"job {job_id}:" in m and "progress_regex" in m]
    assert not told, told


def killed_rank(lab: FrameworkLab, job_id: str, job: WorkloadJob, attempt: int) -> None:
    victim_node = lab.details(job_id).nodes[1]
    job.inject([{"id": "kill", "type": "kill", "rank": VICTIM_RANK}])
    at = fault_time(lab, job, attempt)
    incident = next_incident(lab, job_id)
    live_and_offline(lab, incident, "killed_rank")
    assert incident.kind is Kind.CRASH and incident.attempt == attempt, describe(incident)
    # A rank SIGKILLed with no error line and no kernel line: no hardware, and at most a
    # guess (confidence < 0.5: "most likely the host OOM killer"), which never stops a job.
    assert incident.category is not Category.GPU_HARDWARE, describe(incident)
    assert incident.category is not Category.APPLICATION or incident.confidence < 0.5, describe(
        incident
    )
    assert victim_node in incident.implicated.nodes or VICTIM_RANK in incident.implicated.ranks, (
        describe(incident)
    )
    restarted(lab, job_id, job, incident, attempt, "killed_rank", at)


def hung_rank(lab: FrameworkLab, job_id: str, job: WorkloadJob, attempt: int) -> None:
    job.inject([{"id": "hang", "type": "hang", "rank": VICTIM_RANK}])
    at = fault_time(lab, job, attempt)
    incident = next_incident(lab, job_id)
    live_and_offline(lab, incident, "hang")
    assert incident.kind is Kind.HANG and incident.attempt == attempt, describe(incident)
    assert incident.detected_at >= at, f"hang reported before the hang: {describe(incident)}"
    restarted(lab, job_id, job, incident, attempt, "hang", at)


def xid_only_in_stdout(lab: FrameworkLab, job_id: str, job: WorkloadJob, attempt: int) -> None:
    job.inject([{"id": "xid-stdout", "type": "xid_stdout", "rank": VICTIM_RANK}])
    at = fault_time(lab, job, attempt)
    incident = next_incident(lab, job_id)
    live_and_offline(lab, incident, "xid_stdout")
    assert incident.kind is Kind.CRASH and incident.attempt == attempt, describe(incident)
    restarted(lab, job_id, job, incident, attempt, "xid_stdout", at)


def kernel_xid(lab: FrameworkLab, job_id: str, job: WorkloadJob, attempt: int) -> None:
    bad = lab.details(job_id).nodes[1]
    lab.xid_nodes.add(bad)
    at = time.time()
    write_kernel_xid(lab, bad)
    job.inject([{"id": "xid", "type": "kill", "node": bad}])  # the rank on that GPU dies
    incident = next_incident(lab, job_id)
    live_and_offline(lab, incident, "kernel_xid")
    assert (incident.kind, incident.category) == (Kind.CRASH, Category.GPU_HARDWARE), describe(
        incident
    )
    assert incident.attempt == attempt and incident.implicated.nodes == (bad,), describe(incident)
    advice = lab.advice(incident)
    assert advice.action is Action.RESTART_EXCLUDING and advice.status is AdviceStatus.CONVERGED
    assert advice.exclude_nodes == (bad,) and advice.drain_nodes == (bad,), advice
    assert lab.drained(bad)
    again = recovered(lab, job_id, job, attempt, avoid=bad)
    timings(lab, "kernel_xid", at, incident, again)
    resume_node(lab.cluster, bad)  # repaired: the other frameworks' jobs may need it
    lab.steady(job_id, job, attempt + 1)


def deterministic_exception(lab: FrameworkLab, job_id: str, job: WorkloadJob, attempt: int) -> None:
    current = lab.attempt(job, attempt)
    every = job.ckpt_every
    # A quarter interval past a checkpoint at least 20 steps ahead: the retry resumes from
    # that checkpoint, makes progress, and meets the error at the same step.
    at_iter = (((current.last_step or 0) + 20) // every + 1) * every + every // 4
    job.inject([{"id": "bug", "type": "error", "at_iter": at_iter}])
    at = fault_time(lab, job, attempt)

    confirm = next_incident(lab, job_id)
    live_and_offline(lab, confirm, "deterministic_exception")
    assert (confirm.kind, confirm.category) == (Kind.CRASH, Category.APPLICATION), describe(confirm)
    assert confirm.attempt == attempt, describe(confirm)
    retry = lab.advice(confirm)
    assert retry.action in (Action.RESTART, Action.RESTART_EXCLUDING), retry
    assert retry.status is AdviceStatus.CONVERGED and retry.drain_nodes == (), retry
    stop = next_incident(lab, job_id, timeout=300)
    live_and_offline(lab, stop, "deterministic_exception_retry")
    assert (stop.attempt, stop.category) == (attempt + 1, Category.APPLICATION), describe(stop)
    stopped = lab.advice(stop)
    read = [
        (a.attempt, a.first_iteration, a.last_iteration) for a in lab.store.list_attempts(job_id)
    ]
    assert stopped.action is Action.STOP and stopped.status is AdviceStatus.CONVERGED, (
        f"{stopped.action} {stopped.status}: {stopped.basis}; attempts read (first, last "
        f"iteration): {read}; {describe(stop)}"
    )
    final = wait("the job to end", lambda: (d := lab.details(job_id)).state.is_terminal() and d, 90)
    assert final.state in (JobState.CANCELLED, JobState.FAILED), final
    assert final.attempt == attempt + 1, final
    # Afterwards, on the files as the job left them (what its owner would hand to analyze).
    kernel = {node: lab.cluster.kernel_log(node) for node in lab.cluster.nodes}
    check = compare_with_analyze(lab.store, job_id, kernel_logs=kernel)
    row = {
        "framework": lab.jobs_framework[job_id],
        "job": job_id,
        "scenario": "after_the_end",
        "files": "final",
        "same": check.same and check.incident.id == stop.id,
        "live": list(check.live),
        "analyze": list(check.analyzed),
    }
    print(f"LIVE_OFFLINE {json.dumps(row)}")
    lab.live_offline.append(row)
    retried = lab.attempt(job, attempt + 1)
    assert (retried.resumed_from or 0) < at_iter and retried.faults, retried
    assert retried.faults[0]["iter"] == at_iter
    # Only the nodes whose kernel log held an Xid were ever drained.
    assert lab.drains() <= lab.xid_nodes, (lab.drains(), lab.xid_nodes)
    record_timing(
        lab.jobs_framework[job_id],
        "deterministic_exception",
        detection_s=round(confirm.detected_at - at, 2),
        stopped_after_s=round(stop.detected_at - at, 2),
    )


# -- a progress format trainmedic does not know ------------------------------------------------


def undeclared(lab: FrameworkLab, framework: str) -> None:
    job_id, job = lab.submit(framework, label=f"{framework}-undeclared", **UNDECLARED[framework])
    lab.steady(job_id, job)
    told = wait(
        "the unknown-format message",
        lambda: [
            m for m in lab.notices.messages if f"job {job_id}:" in m and "progress_regex" in m
        ],
        240,
    )
    assert len(told) == 1, told
    assert '--comment=\'{"trainmedic": {"progress_regex":' in told[0], told[0]
    assert "[watch] progress_regex" in told[0]
    grace = lab.service.config.detect.startup_grace_s
    running_for = time.time() - (lab.attempt(job, 0).started_at or time.time())
    time.sleep(max(0.0, grace + 15 - running_for))
    found = lab.interruptions(job_id)
    assert not found, f"a quiet job is not a hung one: {describe(found[0])}"

    job.inject([{"id": "kill", "type": "kill", "rank": VICTIM_RANK}])
    at = fault_time(lab, job, 0)
    incident = lab.incident(job_id)
    live_and_offline(lab, incident, "killed_rank")
    assert incident.kind is Kind.CRASH and incident.attempt == 0, describe(incident)
    differed = [c for c in lab.live_offline if c["job"] == job_id and not c["same"]]
    assert not differed, f"live != analyze: {differed}"
    record_timing(
        f"{framework}-undeclared", "killed_rank", detection_s=round(incident.detected_at - at, 2)
    )
    lab.cluster.run(["scancel", job_id], check=False)  # its restart would only load the CPUs


# -- helpers ------------------------------------------------------------------------------------


def live_and_offline(lab: FrameworkLab, incident: IncidentRecord, scenario: str) -> None:
    """The live verdict beside ``trainmedic analyze`` of the job's files as the service had
    them when it acted on this incident (copied right before its requeue or cancel: what the
    teardown that command causes adds is not what the verdict came from), or as they are now
    when it issued nothing; kept for the chain's end and printed as ``LIVE_OFFLINE {...}``."""
    lab.advice(incident)  # carried out: the files were copied before its command ran
    taken = [
        s
        for s in lab.runner.snapshots.get(incident.job_id, [])
        if s.taken_at >= incident.detected_at
    ]
    if taken:
        check = compare_with_analyze(
            lab.store,
            incident.job_id,
            incident,
            files=taken[0].files,
            kernel_logs=taken[0].kernel_logs,
        )
    else:
        kernel = {node: lab.cluster.kernel_log(node) for node in lab.cluster.nodes}
        check = compare_with_analyze(lab.store, incident.job_id, incident, kernel_logs=kernel)
    row = {
        "framework": lab.jobs_framework[incident.job_id],
        "job": incident.job_id,
        "scenario": scenario,
        "files": "before its command" if taken else "now",
        "same": check.same,
        "live": list(check.live),
        "analyze": list(check.analyzed),
    }
    print(f"LIVE_OFFLINE {json.dumps(row)}")
    lab.live_offline.append(row)


def next_incident(lab: FrameworkLab, job_id: str, timeout: float = 180) -> IncidentRecord:
    """The job's next crash or hang incident (the ones before it were of earlier faults)."""
    known = {i.id for i in lab.interruptions(job_id)}
    found: list[IncidentRecord] = wait(
        f"a new incident of job {job_id}",
        lambda: [i for i in lab.interruptions(job_id) if i.id not in known],
        timeout,
    )
    return found[0]


def restarted(
    lab: FrameworkLab,
    job_id: str,
    job: WorkloadJob,
    incident: IncidentRecord,
    attempt: int,
    scenario: str,
    at: float,
) -> None:
    """Restarted without a drain, resumed from the newest checkpoint, training and saving
    again before the next fault."""
    advice = lab.advice(incident)
    assert advice.action in (Action.RESTART, Action.RESTART_EXCLUDING), advice
    assert advice.status is AdviceStatus.CONVERGED and advice.drain_nodes == (), advice
    again = recovered(lab, job_id, job, attempt)
    assert not lab.drains() - lab.xid_nodes, (lab.drains(), lab.xid_nodes)
    timings(lab, scenario, at, incident, again)
    lab.steady(job_id, job, attempt + 1)


def newest_checkpoint(lab: FrameworkLab, job: WorkloadJob, up_to: int) -> int:
    saved = [c for n in range(up_to + 1) for c in lab.attempt(job, n).checkpoints]
    assert saved, "no checkpoint saved before the fault"
    return max(saved)


def recovered(
    lab: FrameworkLab, job_id: str, job: WorkloadJob, failed: int, avoid: str = ""
) -> Attempt:
    """The next attempt runs (without ``avoid``), resumes from the newest checkpoint and
    trains past it."""
    number = failed + 1
    wait(
        f"job {job_id} RUNNING as attempt {number}" + (f" without {avoid}" if avoid else ""),
        lambda: (
            (d := lab.details(job_id)).state is JobState.RUNNING
            and d.attempt >= number
            and avoid not in d.nodes
        ),
        180,
    )
    newest = newest_checkpoint(lab, job, failed)
    again: Attempt = wait(
        f"job {job_id} attempt {number} training past its checkpoint",
        lambda: (
            (a := lab.attempt(job, number)).first_step is not None
            and (a.last_step or 0) >= (a.resumed_from or 0) + 10
            and a
        ),
        240,
    )
    assert again.resumed_from == newest, (again.resumed_from, newest)
    if avoid:
        assert avoid not in again.nodes, again.nodes
    return again


def fault_time(lab: FrameworkLab, job: WorkloadJob, attempt: int) -> float:
    fired: Attempt = wait(
        f"the fault to fire in attempt {attempt}",
        lambda: (a := lab.attempt(job, attempt)).faults and a,
        180,
    )
    return float(fired.faults[0]["t"])


def timings(
    lab: FrameworkLab, scenario: str, at: float, incident: IncidentRecord, again: Attempt
) -> None:
    """Detection latency; the job RUNNING again (as the service recorded the attempt); its
    first training step again (the workload's trace: start-up included)."""
    started = {a.attempt: a.started_at for a in lab.store.list_attempts(incident.job_id)}
    running = started.get(again.number)
    record_timing(
        lab.jobs_framework[incident.job_id],
        scenario,
        detection_s=round(incident.detected_at - at, 2),
        running_again_s=round(running - at, 2) if running is not None else None,
        productive_again_s=round((again.first_step_at or at) - at, 2),
    )


def write_kernel_xid(lab: FrameworkLab, node: str) -> None:
    """What rsyslog writes to the node's kern.log when its GPU falls off the bus."""
    stamp = datetime.now(UTC).isoformat(timespec="microseconds")
    line = f"{stamp} {node} kernel: NVRM: Xid (PCI:0000:5e:00): 79, pid=4242, name=python, "
    line += "GPU has fallen off the bus.\n"
    with lab.cluster.kernel_log(node).open("a") as handle:
        handle.write(line)
