"""Recovery latency on the real Slurm lab cluster: Xid 79 faults, detected and acted on by the
real service (action mode, in this process), on the example trainer running as a 2-node
batch job (torchrun + gloo on CPU) on a 4-node lab cluster with ``cred_expire=10``.

    .venv/bin/python benchmarks/bench_slurm_recovery.py [--faults 10] [--budget-s 480]

Each round submits a fresh job watched by a fresh service (own SQLite store), waits for a
checkpoint, injects one Xid 79 on the job's second node (the rank appends the Xid line to its
node's kernel log and dies by SIGKILL), waits for trainmedic's incident, its advice to be
carried out (drain, requeuehold -> ExcNodeList -> release) and to converge (the job RUNNING
again, on nodes outside the exclusion); then the job is cancelled, the drained node resumed
and the kernel logs emptied, so every fault is a first fault on a 4-node cluster. (Faults on
one job less than 120 s apart are not independent today: the engine lends the previous
attempt's node evidence to the next attempt's incident.) Rounds stop at ``--faults`` or when
``--budget-s`` is spent (then it says so). Times per fault, from the store:

* crash detection: incident detected_at - fault time (the Xid line's own timestamp);
* actions issued: advice applied_at - detected_at (every scheduler step accepted);
* running again: advice converged_at - detected_at (RUNNING, exclusion applied).

Baselines measured in the same run on the same cluster: a bare ``scontrol requeue`` of a
2-node sleep job -> RUNNING (Slurm's requeue floor: cred_expire), and the bare command
sequence requeuehold -> update ExcNodeList -> release. The drain circuit breaker is opened
(``max_drain_fraction = 1``) so that every round drains, as the first fault on a cluster does.
Last line: ``crash_detect_p95_s=<x> actions_issued_p95_s=<y> running_again_p95_s=<z>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainmedic.core.detect.config import SMALL_JOB
from trainmedic.core.states import JobState
from trainmedic.demo.slurm_job import (
    TrainerJob,
    attempts_in_log,
    submit_trainer_job,
    trainer_job_spec,
)
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.service.config.loader import default_config
from trainmedic.service.loop import Service
from trainmedic.store import AdviceStatus, Store, sqlite_url


def wait(what: str, check: Callable[[], Any], timeout: float, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(step)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def p95(values: list[float]) -> float:
    """Nearest-rank p95 (of 10 values: the largest)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def requeue_floor(
    cluster: SlurmCluster, slurm: SlurmScheduler, out: Path, rounds: int
) -> dict[str, list[float]]:
    """Slurm alone: ``scontrol requeue`` -> RUNNING, and the hold/update/release commands."""
    job = cluster.sbatch(["--requeue", "-N2", f"--output={out}", "--wrap", "sleep 3600"])
    floor: list[float] = []
    commands: list[float] = []
    try:
        for number in range(rounds):
            wait("sleep job RUNNING", lambda: slurm.job_details(job).state is JobState.RUNNING, 60)
            node = slurm.job_details(job).nodes[number % 2]
            t0 = time.monotonic()
            if number % 2 == 0:
                cluster.run(["scontrol", "requeue", job])
            else:
                cluster.run(["scontrol", "requeuehold", job])
                cluster.run(["scontrol", "update", f"JobId={job}", f"ExcNodeList={node}"])
                cluster.run(["scontrol", "release", job])
                commands.append(time.monotonic() - t0)

            def running_again(attempt: int = number + 1) -> bool:
                details = slurm.job_details(job)
                return details.state is JobState.RUNNING and details.attempt == attempt

            wait("sleep job RUNNING again", running_again, 60)
            floor.append(time.monotonic() - t0)
    finally:
        cluster.run(["scancel", job], check=False)
    return {"requeue_to_running_s": floor, "hold_update_release_s": commands}


class Bench:
    def __init__(self, cluster: SlurmCluster, workdir: Path) -> None:
        workdir.mkdir(parents=True)
        self.cluster = cluster
        self.slurm = SlurmScheduler(LocalRunner(str(cluster.conf_path)))
        self.store = Store(sqlite_url(str(workdir / "state.db")))
        base = default_config()
        config = dataclasses.replace(
            base,
            service=dataclasses.replace(base.service, mode="action", poll_interval_s=0.2),
            policy=dataclasses.replace(base.policy, max_drain_fraction=1.0),
            detect=SMALL_JOB,  # the example trainer reports every step and starts in seconds
        )
        kernel = {n: str(cluster.kernel_log(n)) for n in cluster.nodes}
        self.service = Service(
            config, self.store, self.slurm, executor_id="bench", kernel_logs=kernel
        )
        self.job = TrainerJob(run_dir=workdir / "run", nodes_dir=cluster.base / "nodes")
        self.job_id = ""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.service.run, args=(self.stop,), daemon=True)

    def start(self) -> str:
        self.thread.start()
        self.job_id = submit_trainer_job(self.cluster, self.job)
        self.service.register(self.job_id, trainer_job_spec(self.cluster, self.job), name="bench")
        return self.job_id

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        if self.job_id:
            self.cluster.run(["scancel", self.job_id], check=False)
        self.store.close()
        for node, state in self.cluster.node_states().items():
            if state != "idle":
                self.cluster.run(
                    ["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False
                )
        for node in self.cluster.nodes:
            self.cluster.kernel_log(node).write_text("")
        self.cluster.wait_for(
            "all nodes idle", lambda: set(self.cluster.node_states().values()) == {"idle"}, 60
        )

    def steady(self, attempt: int) -> None:
        """The attempt trains and has saved a checkpoint of its own."""
        wait(
            f"attempt {attempt} checkpointing",
            lambda: (
                (a := attempts_in_log(self.job.output).get(attempt)) is not None
                and bool(a.checkpoints)
            ),
            120,
            0.2,
        )

    def round(self, number: int) -> dict[str, Any]:
        details = self.slurm.job_details(self.job_id)
        bad = details.nodes[1]
        seen = {i.id for i in self.store.list_incidents(self.job_id)}
        fault = [{"id": f"bench-{number}", "type": "xid79", "node": bad}]
        tmp = self.job.run_dir / "faults.json.tmp"
        tmp.write_text(json.dumps(fault))
        injected = time.time()
        tmp.replace(self.job.run_dir / "faults.json")
        incident = wait(
            "the incident",
            lambda: next(
                (i for i in self.store.list_incidents(self.job_id) if i.id not in seen), None
            ),
            60,
        )
        advice = wait(
            "the advice to converge",
            lambda: next(
                (
                    a
                    for a in self.store.list_advice(self.job_id)
                    if a.incident_id == incident.id and a.status.is_terminal()
                ),
                None,
            ),
            90,
            0.2,
        )
        if advice.status is not AdviceStatus.CONVERGED:
            raise RuntimeError(f"advice {advice.id} ended {advice.status.value}: {advice.note}")
        fault_time = incident.fault_time or injected
        after = self.slurm.job_details(self.job_id)
        row = {
            "round": number,
            "node": bad,
            "category": incident.category.value,
            "action": advice.action.value,
            "excluded": list(after.excluded_nodes),
            "ran_on": list(after.nodes),
            "crash_detect_s": round(incident.detected_at - fault_time, 3),
            "actions_issued_s": round((advice.applied_at or 0) - incident.detected_at, 3),
            "running_again_s": round((advice.converged_at or 0) - incident.detected_at, 3),
        }
        return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--floor-rounds", type=int, default=2)
    args = parser.parse_args()
    t0 = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="bench-slurm-") as tmp,
        SlurmCluster(Path(tmp) / "lab") as cluster,
    ):
        slurm = SlurmScheduler(LocalRunner(str(cluster.conf_path)))
        # The floor first, on an otherwise empty cluster: the trainer would compete for nodes.
        floor = requeue_floor(cluster, slurm, Path(tmp) / "sleep.out", args.floor_rounds)
        rows: list[dict[str, Any]] = []
        for number in range(1, args.faults + 1):
            if time.monotonic() - t0 > args.budget_s:
                print(f"# budget of {args.budget_s:.0f} s spent after {len(rows)} faults")
                break
            bench = Bench(cluster, Path(tmp) / f"round{number}")
            try:
                bench.start()
                bench.steady(0)
                rows.append(bench.round(number))
            finally:
                bench.close()
            print(json.dumps(rows[-1]), flush=True)
    detect = [r["crash_detect_s"] for r in rows]
    issued = [r["actions_issued_s"] for r in rows]
    running = [r["running_again_s"] for r in rows]
    floor_s = statistics.median(floor["requeue_to_running_s"])
    commands_s = statistics.median(floor["hold_update_release_s"] or [float("nan")])
    print(f"# faults injected: {len(rows)} (wall {time.monotonic() - t0:.0f} s)")
    print(
        f"# slurm requeue floor (bare scontrol requeue -> RUNNING): {floor['requeue_to_running_s']}"
    )
    print(f"# bare requeuehold+update+release commands: {floor['hold_update_release_s']}")
    for name, values, base in (
        ("crash detection", detect, None),
        ("actions issued", issued, commands_s),
        ("running again", running, floor_s),
    ):
        ratio = f", {p95(values) / base:.2f}x baseline {base:.2f} s" if base else ""
        print(
            f"# {name}: p50 {statistics.median(values):.2f} s, p95 {p95(values):.2f} s, "
            f"max {max(values):.2f} s{ratio}"
        )
    print(
        f"crash_detect_p95_s={p95(detect):.3f} actions_issued_p95_s={p95(issued):.3f} "
        f"running_again_p95_s={p95(running):.3f}"
    )


if __name__ == "__main__":
    main()
