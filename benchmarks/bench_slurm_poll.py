"""One Slurm poll cycle at scale: a generated 10,000-node / 2,000-job ``squeue --json -t all``
and ``sinfo --json`` (each record shaped like the ones recorded from the real 22.05 lab
cluster in tests/data/slurm/), parsed by SlurmScheduler.poll through the runner seam and
turned into JobStatus / NodeStatus observations.

    .venv/bin/python benchmarks/bench_slurm_poll.py [--nodes 10000] [--jobs 2000] [--repeat 5]

Prints the baseline (json.loads of both documents: the floor any parser pays), the ratio,
CPU time, and as its last line ``poll_cycle_s=<seconds>``: the best wall time of the repeats
(as timeit reports; the machine is shared, the median is printed too). Goal: <= 1 s.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path
from typing import Any

from trainmedic.core.observations import JobStatus, NodeStatus, Observation
from trainmedic.schedulers.slurm.runner import FakeRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "slurm"
WIDTH = 5  # node-name digits: node00001


def _templates() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    squeue = json.loads((DATA / "squeue_mixed_states.json").read_text())
    sinfo = json.loads((DATA / "sinfo_idle_alloc_drain_down.json").read_text())
    job = next(j for j in squeue["jobs"] if j["job_state"] == "RUNNING")
    return squeue, job, sinfo["nodes"][0]


def _hostlist(first: int, count: int) -> str:
    if count == 1:
        return f"node{first:0{WIDTH}d}"
    return f"node[{first:0{WIDTH}d}-{first + count - 1:0{WIDTH}d}]"


def generate(n_nodes: int, n_jobs: int) -> tuple[str, str]:
    squeue, job_t, node_t = _templates()
    per_job = max(1, n_nodes // n_jobs)
    alloc_t = job_t["job_resources"]["allocated_nodes"][0]
    jobs = []
    for i in range(n_jobs):
        j = copy.deepcopy(job_t)
        first = 1 + (i * per_job) % n_nodes
        names = _hostlist(first, per_job)
        kind = i % 50
        j.update(job_id=1000 + i, name=f"train-{i}", restart_cnt=i % 3, node_count=per_job)
        j["comment"] = f'{{"trainmedic": {{"checkpoint_dir": "/ckpt/{i}"}}}}' if i % 2 else ""
        j["standard_output"] = f"/scratch/u{i % 40}/train-%j.out"
        if kind < 40:
            j.update(job_state="RUNNING", nodes=names, batch_host=f"node{first:0{WIDTH}d}")
        elif kind < 45:
            j.update(job_state="PENDING", nodes="", batch_host="", state_reason="Priority")
            j["excluded_nodes"] = _hostlist(first, 2)
        elif kind < 47:
            j.update(job_state="COMPLETED", nodes=names, exit_code=0)
        elif kind < 49:
            j.update(job_state="FAILED", nodes=names, exit_code=768, state_reason="NonZeroExitCode")
        else:
            j.update(job_state="NODE_FAIL", nodes=names, exit_code=15, state_reason="NodeDown")
        j["job_resources"] = {
            "nodes": names,
            "allocated_cores": per_job,
            "allocated_hosts": per_job,
            "allocated_nodes": [
                dict(copy.deepcopy(alloc_t), nodename=f"node{first + k:0{WIDTH}d}")
                for k in range(per_job)
            ],
        }
        jobs.append(j)
    nodes = []
    for i in range(1, n_nodes + 1):
        n = copy.deepcopy(node_t)
        n.update(name=f"node{i:0{WIDTH}d}", state="allocated", state_flags=[], reason="")
        kind = i % 100
        if kind == 1:
            n["state"] = "idle"
        elif kind == 2:
            n.update(state_flags=["DRAIN"], reason="NHC: check_hw_eth failed")
        elif kind == 3:
            n.update(state="down", reason="Not responding")
        elif kind == 4:
            n.update(state="idle", state_flags=["NOT_RESPONDING"])
        nodes.append(n)
    squeue_doc = {"meta": squeue["meta"], "errors": [], "jobs": jobs}
    sinfo_doc = {"meta": squeue["meta"], "errors": [], "nodes": nodes}
    # Slurm prints indented JSON: keep the real byte volume.
    return json.dumps(squeue_doc, indent=2), json.dumps(sinfo_doc, indent=2)


def poll_cycle(slurm: SlurmScheduler) -> list[Observation]:
    snap = slurm.poll(())
    assert not snap.stale, snap.error
    out: list[Observation] = [
        JobStatus(snap.time, j.job_id, j.state, j.nodes, j.attempt, j.exit_code, j.reason)
        for j in snap.jobs
    ]
    out.extend(NodeStatus(snap.time, n.name, n.state, n.reason) for n in snap.nodes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    squeue_text, sinfo_text = generate(args.nodes, args.jobs)
    fake = FakeRunner()
    fake.add(["squeue", "--json"], squeue_text)
    fake.add(["sinfo", "--json"], sinfo_text)
    slurm = SlurmScheduler(fake)
    print(
        f"squeue --json: {len(squeue_text) / 1e6:.1f} MB, {args.jobs} jobs; "
        f"sinfo --json: {len(sinfo_text) / 1e6:.1f} MB, {args.nodes} nodes"
    )
    cycles, floors, cpu = [], [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        json.loads(squeue_text)
        json.loads(sinfo_text)
        floors.append(time.perf_counter() - t0)
        t0, c0 = time.perf_counter(), time.process_time()
        observations = poll_cycle(slurm)
        cycles.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    assert len(observations) == args.jobs + args.nodes
    cycle, floor = min(cycles), min(floors)
    print(f"baseline json.loads only: best {floor:.3f} s, median {statistics.median(floors):.3f} s")
    print(
        f"poll cycle (parse + JobInfo/NodeInfo + observations): best {cycle:.3f} s, "
        f"median {statistics.median(cycles):.3f} s, CPU {min(cpu):.3f} s"
    )
    print(f"ratio cycle/baseline: {cycle / floor:.2f}")
    print(f"poll_cycle_s={cycle:.3f}")


if __name__ == "__main__":
    main()
