"""The Slurm demo job's pure parts: batch script, sbatch options, master port, log reading."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainmedic.demo.slurm_job import (
    TrainerJob,
    attempts_in_log,
    batch_script,
    master_port,
    master_port_expr,
    sbatch_args,
)
from trainmedic.schedulers.slurm.policy import parse_job_policy


def _job(tmp_path: Path) -> TrainerJob:
    return TrainerJob(run_dir=tmp_path / "run", nodes_dir=tmp_path / "lab" / "nodes")


def _bash(script: str, **env: str) -> str:
    done = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_master_port_differs_per_job_and_attempt_and_matches_the_shell() -> None:
    expr = f"echo {master_port_expr()}"
    assert _bash(expr, SLURM_JOB_ID="7") == str(master_port(7, 0))  # first run: no count
    assert _bash(expr, SLURM_JOB_ID="7", SLURM_RESTART_COUNT="2") == str(master_port(7, 2))
    ports = {master_port(job, restart) for job in range(1, 50) for restart in range(16)}
    assert len(ports) == 49 * 16
    assert all(20000 <= p < 30000 for p in ports)  # below the ephemeral range


def test_batch_script_runs_one_torchrun_per_node(tmp_path: Path) -> None:
    job = _job(tmp_path)
    script = batch_script(job)
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)  # valid bash
    (srun,) = [line for line in script.splitlines() if line.startswith("srun ")]
    assert srun.startswith("srun --ntasks-per-node=1 ")
    for part in (
        f"{sys.executable} -m torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=2",
        "--node_rank=$SLURM_NODEID",
        "--master_addr=127.0.0.1",
        "--master_port=$TM_MASTER_PORT",
        f"TRAINMEDIC_KERNEL_LOG={job.nodes_dir}/$SLURMD_NODENAME/kern.log",
        f"-m trainmedic.demo.trainer.cli --run-dir {job.run_dir}",
    ):
        assert part in srun, part


def test_sbatch_args_requeue_append_and_opt_in(tmp_path: Path) -> None:
    job = _job(tmp_path)
    args = sbatch_args(job)
    for flag in ("--requeue", "--open-mode=append", "-N2", f"--output={job.output}"):
        assert flag in args
    assert f"--error={job.errors}" in args
    (comment,) = [a.removeprefix("--comment=") for a in args if a.startswith("--comment=")]
    assert parse_job_policy(comment) == {"checkpoint_dir": str(job.checkpoint_dir)}
    script = Path(args[-1])
    assert script == job.script_path and script.read_text() == batch_script(job)


LOG = """\
batch start job=3 restart=0 nodes=node[1-2] port=20048
2026-11-29T09:00:15.646Z [rank0] node=node1 trainer start attempt=0 node=node1 world_size=4
2026-11-29T09:00:15.687Z [rank2] node=node2 trainer start attempt=0 node=node2 world_size=4
2026-11-29T09:00:16.000Z [rank0] node=node1 iter=1 loss=0.9 step_s=0.01 compute_s=0.01 \
wait_s=0.0 samples_per_s=1.0
2026-11-29T09:00:17.000Z [rank0] node=node1 checkpoint saved iter=25 path=/x/ckpt_25.pt
2026-11-29T09:00:18.000Z [rank0] node=node1 iter=30 loss=0.9 step_s=0.01 compute_s=0.01 \
wait_s=0.0 samples_per_s=1.0
slurmstepd-node1: error: *** STEP 3.0 ON node1 CANCELLED AT 2026-11-29T09:00:32 ***
batch start job=3 restart=1 nodes=node[3-4] port=20049
2026-11-29T09:00:45.000Z [rank0] node=node3 trainer start attempt=1 node=node3 world_size=4
2026-11-29T09:00:47.000Z [rank0] node=node3 resumed from checkpoint iter=25
2026-11-29T09:00:47.500Z [rank0] node=node3 iter=26 loss=0.9 step_s=0.01 compute_s=0.01 \
wait_s=0.0 samples_per_s=1.0
"""


def test_attempts_in_log_reads_the_ranks_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "job.out"
    path.write_text(LOG.replace("\\\n", ""))
    attempts = attempts_in_log(path)
    assert sorted(attempts) == [0, 1]
    first, second = attempts[0], attempts[1]
    assert first.nodes == {"node1", "node2"} and first.checkpoints == [25]
    assert (first.first_iteration, first.last_iteration, first.resumed_from) == (1, 30, None)
    assert second.nodes == {"node3"} and second.resumed_from == 25
    assert second.first_iteration == 26
    assert second.first_progress_at == 1795942847.5  # 2026-11-29T09:00:47.500Z
    assert attempts_in_log(tmp_path / "missing.out") == {}
