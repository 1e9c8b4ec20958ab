"""Mechanisms read after batch50's first sight (batch schedulers and launchers): each a family
of messages (other tools' and versions' wordings of the same failure) with healthy or
differently-caused counter-cases, never one log's lines (the batch's own logs are scored by
test_attr_realworld's floors). A scheduler's message is often the messenger: these read the
cause it reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # HTCondor holding a job over the memory it requested: the job's memory
    "htcondor_cgroup_memory_hold": (
        "-- Schedd: ap40.uw.osg-htc.org : <128.105.68.62:9618?... @ 06/11/24 09:12:44\n"
        " ID         OWNER   HELD_SINCE  HOLD_REASON\n"
        "8812.0     alice   6/11 09:01  Job has gone over cgroup memory limit of 2048 megabytes. "
        "Peak usage: 2519 megabytes.\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "htcondor_request_memory_hold": (
        "012 (177.003.000) 2024-02-20 14:03:11 Job was held.\n"
        "\tmemory usage exceeded request_memory\n"
        "\tCode 34 Subcode 0\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a node that rebooted without Slurm asking: the node went down under the job
    "slurmctld_node_rebooted": (
        "[2024-06-03T02:11:40.512] validate_node_specs: Node gpu-a17 unexpectedly rebooted "
        "boot_time=1717380655 last response=1717380590\n"
        "[2024-06-03T02:11:40.513] requeue job JobId=55120 due to failure of node gpu-a17\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "scontrol_reason_rebooted": (
        "NodeName=dgx04 Arch=x86_64 CoresPerSocket=64\n"
        "   State=DOWN+NOT_RESPONDING ThreadsPerCore=2\n"
        "   Reason=Node unexpectedly rebooted [slurm@2024-11-21T08:44:02]\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    "sinfo_reason_cut_to_twenty": (
        "$ sinfo -R\n"
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "Node unexpectedly re slurm     2025-03-02T17:20:09 h100-[3,5]\n",
        Category.NODE_HARDWARE,
        Kind.CRASH,
    ),
    # the controller failing to write the job's script: its state file system
    "submitit_sbatch_write_error": (
        "submitit.core.utils.FailedJobError: sbatch: error: Batch job submission failed: I/O "
        "error writing script/environment to file\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "slurmctld_state_dir_full": (
        "[2023-09-14T10:00:01.221] error: Error writing file "
        "/var/spool/slurm/statesave/hash.2/job.90412/environment, No space left on device\n"
        "[2023-09-14T10:00:01.221] _slurm_rpc_submit_batch_job: I/O error writing "
        "script/environment to file\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # the container runtime refused its seccomp filter: the node's kernel or runtime
    "runc_seccomp_errno": (
        "docker: Error response from daemon: failed to create task for container: failed to "
        "create shim task: OCI runtime create failed: runc create failed: unable to start "
        "container process: unable to init seccomp: error loading seccomp filter into kernel: "
        "error loading seccomp filter: errno 524: unknown.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "pyxis_seccomp_then_spank": (
        "slurmstepd: error: pyxis: seccomp filter failed\n"
        "slurmstepd: error: spank: required plugin spank_pyxis.so: user_init() failed with "
        "rc=-1\n"
        "srun: error: gpu-b02: task 3: Exited with exit code 1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "podman_seccomp_kernel": (
        "Error: seccomp is not enabled in your kernel, cannot run a custom seccomp profile\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "htcondor_memory_request_table": (
        "005 (311.000.000) 2024-03-01 18:22:40 Job terminated.\n"
        "\t(1) Normal termination (return value 0)\n"
        "\tPartitionable Resources :    Usage  Request Allocated\n"
        "\t   Memory (MB)          :     1880      2048      2048\n"
    ),
    "slurm_reboot_asked_for": (
        "REASON               USER      TIMESTAMP           NODELIST\n"
        "Reboot ASAP : reboot slurm     2025-03-02T17:20:09 h100-[3,5]\n"
    ),
    "docker_info_seccomp": (
        " Security Options:\n  apparmor\n  seccomp\n   Profile: builtin\n  cgroupns\n"
    ),
}

# A scheduler's message whose cause is its own, beside each family: these keep their verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, str, Category]] = {
    "htcondor_hold_for_a_permission": (
        "Hold reason: Error from slot1_2@node9: Failed to execute '/home/b/run.sh': "
        "(errno=13: 'Permission denied')\n",
        "htcondor.job_memory_limit",
        Category.SCHEDULER,
    ),
    "sbatch_refused_for_the_account": (
        "sbatch: error: Batch job submission failed: Invalid account or account/partition "
        "combination specified\n",
        "slurm.controller_script_write_failed",
        Category.SCHEDULER,
    ),
    "required_spank_plugin_failing_alone": (
        "srun: error: spank: required plugin auks.so: init() failed with rc=-1\n",
        "container.seccomp_filter_failed",
        Category.SCHEDULER,
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_the_schedulers_own_causes_stay_its(tmp_path: Path, name: str) -> None:
    text, signature, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.category is category, (name, verdict)
    assert signature not in verdict.basis, (name, verdict)


@pytest.mark.parametrize(
    "name",
    ["slurmctld_node_rebooted", "scontrol_reason_rebooted", "submitit_sbatch_write_error"],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """An operator's manual reboot, a state directory's permissions: the usual cause, not the
    only one, so the policy restarts and never stops or drains on it."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, verdict


def test_a_slurm_oom_kill_keeps_its_attribution(tmp_path: Path) -> None:
    """The scheduler's own OOM kill is read as before (the job's memory)."""
    text = (
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7731.batch. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.\n"
    )
    verdict = verdict_of(tmp_path, text)
    assert verdict.category is Category.APPLICATION, verdict
    assert "htcondor" not in verdict.basis, verdict


def test_an_htcondor_job_ending_non_zero_stays_a_failure(tmp_path: Path) -> None:
    """The terminated event is healthy only with return value 0 (the healthy case above)."""
    text = (
        "005 (4410.002.000) 2025-01-17 03:40:09 Job terminated.\n"
        "\t(1) Normal termination (return value 137)\n"
    )
    assert verdict_of(tmp_path, text).failure
