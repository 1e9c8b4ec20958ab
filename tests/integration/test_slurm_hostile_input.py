"""Hostile job fields on the real lab cluster (22.05): what a user can put in a job's name,
comment and output path reaches trainmedic through real ``squeue --json`` and
``scontrol -o show job`` output, and must never be read as another field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmedic.core.errors import SchedulerError
from trainmedic.core.states import JobState
from trainmedic.lab import SlurmCluster
from trainmedic.schedulers.slurm.runner import LocalRunner
from trainmedic.schedulers.slurm.scheduler import SlurmScheduler

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

SLEEP = "#!/bin/bash\nsleep 300\n"


@pytest.fixture
def lab(slurm_cluster: SlurmCluster, tmp_path: Path) -> Iterator[tuple[SlurmCluster, Path]]:
    script = tmp_path / "sleep.sh"
    script.write_text(SLEEP)
    yield slurm_cluster, script
    slurm_cluster.run(["scancel", "--name=hostile"], check=False)
    slurm_cluster.run(["scancel", "--name=hostile JobState=COMPLETED"], check=False)


def _running(slurm: SlurmScheduler, job: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        snap = slurm.poll([job])
        if snap.jobs and snap.jobs[0].state is JobState.RUNNING:
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} did not start: {slurm.poll([job])}")


def test_field_text_in_a_real_comment_stays_in_the_comment(
    lab: tuple[SlurmCluster, Path], tmp_path: Path
) -> None:
    cluster, script = lab
    slurm = SlurmScheduler(LocalRunner(slurm_conf=str(cluster.conf_path)))
    comment = "note JobState=COMPLETED NodeList=node9 Restarts=7 ExcNodeList=node1"
    out = tmp_path / "c.out"
    job = cluster.sbatch(["-J", "hostile", f"--comment={comment}", f"--output={out}", str(script)])
    _running(slurm, job)
    details = slurm.job_details(job)
    assert details.comment == comment
    assert (details.state, details.attempt, details.excluded_nodes) == (JobState.RUNNING, 0, ())
    assert details.nodes and "node9" not in details.nodes
    assert details.stdout_path == str(out)


def test_a_real_record_that_reads_two_ways_is_refused_and_polling_goes_on(
    lab: tuple[SlurmCluster, Path], tmp_path: Path
) -> None:
    cluster, script = lab
    slurm = SlurmScheduler(LocalRunner(slurm_conf=str(cluster.conf_path)))
    out = tmp_path / "d.out"
    job = cluster.sbatch(
        ["-J", "hostile", "--comment=x StdOut=/etc/shadow", f"--output={out}", str(script)]
    )
    named = cluster.sbatch(["-J", "hostile JobState=COMPLETED", f"--output={out}", str(script)])
    _running(slurm, job)
    for one in (job, named):
        with pytest.raises(SchedulerError, match="ambiguous"):
            slurm.job_details(one)
    snap = slurm.poll([job, named])  # squeue's JSON view stays, with squeue's own paths
    assert not snap.stale
    by_id = {j.job_id: j for j in snap.jobs}
    assert by_id[job].stdout_path == str(out) and by_id[job].comment == "x StdOut=/etc/shadow"
