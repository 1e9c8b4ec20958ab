"""The example trainer as a 2-node Slurm batch job (for the Slurm demo and end-to-end tests).

``write_batch_script`` writes a script that runs one ``srun --ntasks-per-node=1`` step, which
starts one ``torchrun`` per node (static rendezvous on 127.0.0.1: every lab node is this
host). ``sbatch_args`` gives the matching ``sbatch`` options: ``--requeue`` (Slurm requeues
the job itself on node failure) and ``--open-mode=append`` (a requeued job's output file is
otherwise truncated, and the service reads every attempt from it), and the job's opt-in
policy in its comment.

The master port is derived from the job id and ``SLURM_RESTART_COUNT``: a restarted attempt
must not meet the previous attempt's TCPStore port still in TIME_WAIT or held by a straggling
process. Each rank writes hardware faults to its node's kernel log
(``<lab>/nodes/$SLURMD_NODENAME/kern.log``), where the service tails them.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from trainmedic.demo.options import NODES, DemoOptions
from trainmedic.demo.runner import DemoRunner
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.base import SchedulerAdapter
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler
from trainmedic.store import JobSpec

# Ports 20000-29999: below Linux's ephemeral range (32768+), where the lab's own ports live.
PORT_BASE = 20000
PORT_SPAN = 10000
RESTART_SLOTS = 16  # restarts of one job before its port sequence wraps


@dataclass(frozen=True, slots=True)
class TrainerJob:
    """What to run: the example trainer on ``nnodes`` nodes of ``nproc_per_node`` ranks."""

    run_dir: Path
    nodes_dir: Path  # the lab's per-node directories: <nodes_dir>/<node>/kern.log
    iters: int = 1_000_000
    ckpt_every: int = 25
    step_sleep: float = 0.01
    nnodes: int = 2
    nproc_per_node: int = 2
    name: str = "trainmedic-demo"
    python: str = sys.executable
    comm_timeout_s: float = 300.0
    policy: Mapping[str, object] = field(default_factory=dict)
    extra_sbatch: tuple[str, ...] = ()

    @property
    def output(self) -> Path:
        return self.run_dir / "job.out"

    @property
    def errors(self) -> Path:
        """Where the job's stderr goes: torchrun's launcher chatter and slurmstepd's own
        messages. Kept out of ``output`` because the service's loose progress parser reads
        slurmstepd's ``*** STEP 1.0 ON node1 CANCELLED ...`` as "step 1" of the new attempt,
        which ends its start-up grace and makes a restarting job look hung. The trainer's
        ranks write everything (progress, checkpoints, tracebacks) to stdout."""
        return self.run_dir / "job.err"

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def script_path(self) -> Path:
        return self.run_dir / "job.sh"


def master_port_expr() -> str:
    """Shell arithmetic for the rendezvous port of this job and attempt."""
    return (
        f"$(( {PORT_BASE} + (SLURM_JOB_ID * {RESTART_SLOTS} + ${{SLURM_RESTART_COUNT:-0}}) "
        f"% {PORT_SPAN} ))"
    )


def master_port(job_id: int, restart_count: int) -> int:
    """The port ``master_port_expr`` yields (for tests and diagnostics)."""
    return PORT_BASE + (job_id * RESTART_SLOTS + restart_count) % PORT_SPAN


def trainer_argv(job: TrainerJob) -> list[str]:
    return [
        "-m",
        "trainmedic.demo.trainer.cli",
        "--run-dir",
        str(job.run_dir),
        "--iters",
        str(job.iters),
        "--ckpt-every",
        str(job.ckpt_every),
        "--step-sleep",
        str(job.step_sleep),
        "--comm-timeout",
        str(job.comm_timeout_s),
    ]


def batch_script(job: TrainerJob) -> str:
    """The batch script's text (bash). The per-node part runs under ``srun`` with
    ``$SLURM_NODEID`` and ``$SLURMD_NODENAME`` of that node, hence the inner ``bash -c``."""
    torchrun = [
        job.python,
        "-m",
        "torch.distributed.run",
        f"--nnodes={job.nnodes}",
        f"--nproc_per_node={job.nproc_per_node}",
        "--master_addr=127.0.0.1",
    ]
    nodes_dir = shlex.quote(str(job.nodes_dir))
    per_node = (
        f"export TRAINMEDIC_KERNEL_LOG={nodes_dir}/$SLURMD_NODENAME/kern.log; "
        f"exec {shlex.join(torchrun)} --node_rank=$SLURM_NODEID --master_port=$TM_MASTER_PORT "
        f"{shlex.join(trainer_argv(job))}"
    )
    return "\n".join(
        [
            "#!/bin/bash",
            "# trainmedic demo job: the example trainer, one torchrun per node",
            f"export TM_MASTER_PORT={master_port_expr()}",
            "export PYTHONUNBUFFERED=1",
            'echo "batch start job=$SLURM_JOB_ID restart=${SLURM_RESTART_COUNT:-0} '
            'nodes=$SLURM_JOB_NODELIST port=$TM_MASTER_PORT"',
            f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(per_node)}",
            "rc=$?",
            'echo "batch end job=$SLURM_JOB_ID rc=$rc"',
            "exit $rc",
            "",
        ]
    )


def job_comment(job: TrainerJob) -> str:
    """The opt-in policy (``--comment``): checkpoint dir plus the job's own overrides."""
    policy = {"checkpoint_dir": str(job.checkpoint_dir), **job.policy}
    return json.dumps({"trainmedic": policy}, separators=(",", ":"))


def write_batch_script(job: TrainerJob) -> Path:
    job.run_dir.mkdir(parents=True, exist_ok=True)
    job.script_path.write_text(batch_script(job))
    job.script_path.chmod(0o755)
    return job.script_path


def sbatch_args(job: TrainerJob, extra: Sequence[str] = ()) -> list[str]:
    """Arguments for ``sbatch`` (after ``sbatch --parsable``), script path last."""
    return [
        "--requeue",
        "--open-mode=append",
        f"-N{job.nnodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={job.nproc_per_node}",
        f"--job-name={job.name}",
        f"--output={job.output}",
        f"--error={job.errors}",
        f"--chdir={job.run_dir}",
        f"--comment={job_comment(job)}",
        *job.extra_sbatch,
        *extra,
        str(write_batch_script(job)),
    ]


def submit_trainer_job(cluster: SlurmCluster, job: TrainerJob, extra: Sequence[str] = ()) -> str:
    """Submit ``job`` to the lab cluster; its Slurm job id."""
    return cluster.sbatch(sbatch_args(job, extra))


def trainer_job_spec(cluster: SlurmCluster, job: TrainerJob) -> JobSpec:
    """How the service watches the job: its output file (every attempt, appended), its
    checkpoints, and the kernel log of every node it may land on."""
    return JobSpec(
        log_paths=(str(job.output),),
        checkpoint_dir=str(job.checkpoint_dir),
        kernel_logs={n: str(cluster.kernel_log(n)) for n in cluster.nodes},
        nodes=cluster.nodes,
    )


class SlurmDemoRunner(DemoRunner):
    """The demo on a real Slurm lab cluster (munge + slurmctld + 4 slurmd, started here and
    stopped at the end): the trainer runs as a 2-node batch job, the service acts through
    ``SlurmScheduler``; faults, timing and the report are DemoRunner's."""

    def __init__(self, options: DemoOptions, say: Callable[[str], None] = print) -> None:
        super().__init__(options, say)
        self._submitted: list[str] = []

    def _start_scheduler(self, workdir: Path) -> SchedulerAdapter:
        self.cluster = SlurmCluster(workdir / "slurm", nodes=len(NODES), cred_expire=10)
        self.timeline.say("starting the Slurm lab cluster (munge, slurmctld, 4 slurmd)")
        self.cluster.start()
        self.timeline.say(
            f"{len(self.cluster.nodes)} nodes idle in {self.cluster.start_seconds or 0:.1f} s; "
            f"SLURM_CONF={self.cluster.conf_path}"
        )
        self.slurm = SlurmScheduler(LocalRunner(str(self.cluster.conf_path)))
        return self.slurm

    def _stop_scheduler(self) -> None:
        self.cluster.run(["scancel", "--full", *self._submitted], check=False)
        self.cluster.stop()

    def _kernel_logs(self) -> dict[str, str]:
        return {n: str(self.cluster.kernel_log(n)) for n in self.cluster.nodes}

    def _job_nodes(self, job_id: str) -> tuple[str, ...]:
        return self.slurm.job_details(job_id).nodes

    def _job_finished(self, job_id: str) -> bool:
        return self.slurm.job_details(job_id).state.is_terminal()

    def _submit(self) -> str:
        job = TrainerJob(run_dir=self.run_dir, nodes_dir=self.cluster.base / "nodes")
        job_id = submit_trainer_job(self.cluster, job)
        self._submitted.append(job_id)
        self.service.register(job_id, trainer_job_spec(self.cluster, job), name=job.name)
        return job_id

    def _operator_restart(self, job_id: str) -> None:
        """Monitor mode: the operator requeues the job by hand (``scontrol requeue``)."""
        self.cluster.run(["scontrol", "requeue", job_id])
        self.timeline.say("operator: scontrol requeue (trainmedic only advised)")


# -- reading the job's own output ----------------------------------------------------------

_RANK_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \[rank(\d+)\] node=(\S+) (.*)$")
_BANNER = re.compile(r"^trainer start attempt=(\d+)")
_RESUMED = re.compile(r"^resumed from checkpoint iter=(\d+)")
_SAVED = re.compile(r"^checkpoint saved iter=(\d+)")
_PROGRESS = re.compile(r"^iter=(\d+) loss=")


@dataclass
class AttemptLog:
    """One attempt as the trainer's own lines tell it (ranks' lines only, no launcher noise)."""

    attempt: int
    nodes: set[str] = field(default_factory=set)
    resumed_from: int | None = None  # "resumed from checkpoint iter=N"
    first_iteration: int | None = None
    first_progress_at: float | None = None
    last_iteration: int | None = None
    checkpoints: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def attempts_in_log(path: Path) -> dict[int, AttemptLog]:
    """The trainer's attempts in a job output file written with ``--open-mode=append``:
    each line belongs to the attempt of the last ``trainer start attempt=N`` banner above it."""
    attempts: dict[int, AttemptLog] = {}
    current: AttemptLog | None = None
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return attempts
    for raw in text.splitlines():
        match = _RANK_LINE.match(raw)
        if match is None:
            continue
        stamp, _rank, node, body = match.groups()
        banner = _BANNER.match(body)
        if banner is not None:
            number = int(banner.group(1))
            current = attempts.setdefault(number, AttemptLog(number))
        if current is None:
            continue
        current.nodes.add(node)
        current.lines.append(body)
        if found := _RESUMED.match(body):
            current.resumed_from = int(found.group(1))
        elif found := _SAVED.match(body):
            current.checkpoints.append(int(found.group(1)))
        elif found := _PROGRESS.match(body):
            iteration = int(found.group(1))
            if current.first_iteration is None:
                current.first_iteration = iteration
                current.first_progress_at = (
                    datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
                )
            current.last_iteration = iteration
    return attempts
