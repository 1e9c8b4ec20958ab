"""Mechanisms batch08 taught, each tested on lines in other tools' and stacks' wordings than
the batch's, and on the healthy output of the same tools, which must stay "no failure".

A node that cannot resolve the job's user or group (NSS, LDAP, SSSD, a container's passwd
file) is the node's software; a job held pending for a reason of the scheduler's, in Slurm's,
PBS's, LSF's, Grid Engine's or HTCondor's words, and a scheduler daemon stopping on its
configuration, are the scheduler's; request-rate throttling is named by what was throttled
(job submissions: scheduler; an object store: storage); a coordinator's heartbeat timeout
with nothing else is a low-confidence guess at the runtime's timeout; Horovod's per-rank
stall list is the job's control flow; a GPU that says it needs a reset is the GPU; EFAULT is
the software under the job; a container's own start-up OOM-killed, or a cluster component's
pod OOMKilled, is its manifest's limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "whoami_without_passwd_entry": (
        "+ whoami\nwhoami: cannot find name for user ID 40012\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "python_pwd_in_container": (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/getpass.py", line 169, in getuser\n'
        "    return pwd.getpwuid(os.getuid())[0]\n"
        "KeyError: 'getpwuid(): uid not found: 1000'\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "apptainer_user_lookup": (
        "FATAL:   Couldn't determine user account information: user: lookup userid 5512: "
        "no such file or directory\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "sssd_backend_offline": (
        "Mar 02 10:00:01 gpu-3 sssd_be[2211]: Backend is offline\n"
        "Mar 02 10:00:02 gpu-3 slurmstepd[881]: error: _get_user_env: getpwuid_r(10001): "
        "no record found\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pbs_can_never_run": (
        "Job Id: 4412.pbs01\n    job_state = Q\n"
        "    comment = Can Never Run: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 4)\n",
        Category.SCHEDULER,
    ),
    "lsf_closed_hosts": (
        "JOBID USER STAT QUEUE FROM_HOST JOB_NAME\n"
        "8812  bob  PEND gpu   login1    train\n"
        " PENDING REASONS:\n Closed by LSF administrator: 4 hosts;\n",
        Category.SCHEDULER,
    ),
    "scontrol_partition_down": (
        "JobId=77 JobName=train UserId=bob(1001) JobState=PENDING Reason=PartitionDown "
        "Dependency=(null)\n",
        Category.SCHEDULER,
    ),
    "slurmctld_config_fatal": (
        "slurmctld: error: Parse error in file /etc/slurm/slurm.conf line 42\n"
        "slurmctld: fatal: Unable to process configuration file\n",
        Category.SCHEDULER,
    ),
    "batch_service_throttled": (
        "botocore.exceptions.ClientError: An error occurred (TooManyRequestsException) when "
        "calling the SubmitJob operation: Too Many Requests\n",
        Category.SCHEDULER,
    ),
    "object_store_503_from_requests": (
        "requests.exceptions.HTTPError: 503 Server Error: Slow Down for url: "
        "https://bucket.s3.amazonaws.com/shard-000123.tar\n",
        Category.STORAGE,
    ),
    "gpu_reset_required_from_nvml": (
        "RuntimeError: CUDA error: unknown error\n"
        "Unable to determine the device handle for GPU0000:41:00.0: GPU requires reset\n",
        Category.GPU_HARDWARE,
    ),
    "efault_in_a_write": (
        "ERROR: checkpoint writer thread failed\nwrite error: errno=14 Bad address\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "horovod_stall_list_other_op": (
        "0: [DistributedAdam_Allreduce/HorovodAllreduce_gradients_dense_MatMul_grad_0]\n",
        Category.APPLICATION,
    ),
    "libfabric_mr_enomem": (
        "libfabric:881:efa:mr: fi_mr_reg failed to register memory region: "
        "Cannot allocate memory\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "helm_chart_controller_oomkilled": (
        "NAMESPACE   NAME                                  READY   STATUS      RESTARTS   AGE\n"
        "gpu-ops     gpu-feature-controller-7d9f8b6c5-x2kqz   0/1   OOMKilled   4   3m\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_in_another_shape(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis


@pytest.mark.parametrize(
    "text",
    [
        "ERROR TaskSchedulerImpl: Lost executor 3 on 10.0.0.7: Executor heartbeat timed out "
        "after 125000 ms\n",
        "distributed.scheduler - WARNING - Worker failed to heartbeat within 300 seconds. "
        "Closing: <WorkerState 'tcp://10.0.0.8:4001', status: running>\n",
        "[2022-09-16 13:13:46,502 C 2116 2116] (raylet) node_manager.cc:999: [Timeout] Exiting "
        "because this node manager has mistakenly been marked as dead by the GCS: GCS didn't "
        "receive heartbeats from this node for 30000 ms.\n",
    ],
)
def test_heartbeat_timeout_alone_is_a_guess_at_the_timeout(tmp_path: Path, text: str) -> None:
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is Category.SYSTEM_SOFTWARE
    assert verdict.confidence < 0.5, verdict.basis


def test_heartbeat_loss_after_the_task_died_names_the_death(tmp_path: Path) -> None:
    text = (
        "worker-3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "ERROR TaskSchedulerImpl: Lost executor 3 on 10.0.0.7: Executor heartbeat timed out "
        "after 125000 ms\n"
    )
    assert _verdict(tmp_path, text).category is Category.APPLICATION


def test_the_jobs_own_pod_oomkilled_stays_the_job(tmp_path: Path) -> None:
    text = (
        "NAME                READY   STATUS      RESTARTS   AGE\n"
        "pytorch-worker-0   0/1     OOMKilled   2          9m\n"
    )
    assert _verdict(tmp_path, text).category is Category.APPLICATION


def test_pending_on_scheduler_reason_is_a_hang(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "(ReqNodeNotAvail, UnavailableNodes:gpu-[01-04])\n")
    assert verdict.kind is Kind.HANG and verdict.category is Category.SCHEDULER


HEALTHY: dict[str, str] = {
    "id_output": "uid=1000(alice) gid=1000(alice) groups=1000(alice),27(sudo)\n",
    "squeue_waiting_in_line": (
        "  JOBID PARTITION  NAME  USER ST  TIME NODES NODELIST(REASON)\n"
        "  88123       gpu train alice PD  0:00     4 (Resources)\n"
        "  88124       gpu train alice PD  0:00     4 (Priority)\n"
    ),
    "pbs_job_running": (
        "Job Id: 4412.pbs01\n    job_state = R\n"
        "    comment = Job run at Mon Jan 01 at 10:00 on (gpu01:ncpus=8)\n"
    ),
    "spark_heartbeat_settings": (
        "spark.executor.heartbeatInterval=10s\nINFO heartbeat sent to master in 3 ms\n"
    ),
    "pbs_waiting_for_resources": (
        "Job Id: 4413.pbs01\n    job_state = Q\n"
        "    comment = Not Running: Insufficient amount of resource: ngpus (R: 8 A: 4 T: 64)\n"
    ),
    "lsf_waiting_for_hosts": (
        " PENDING REASONS:\n"
        " Job's requirements for reserving resource (gpu) not satisfied: 2 hosts;\n"
    ),
    "sssd_start": "sssd[881]: Starting up\nnslcd[1123]: version 0.9.10 starting\n",
    "gpu_reset_done": "GPU 00000000:41:00.0 was successfully reset.\nAll done.\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_output_of_the_same_tools_is_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, verdict.basis


def test_memory_reclaim_thread_blocked_is_the_kernel(tmp_path: Path) -> None:
    text = (
        "[77123.1] INFO: task kcompactd0:88 blocked for more than 241 seconds.\n"
        "[77123.2] INFO: task python:4411 blocked for more than 241 seconds.\n"
        "[77123.3] Call Trace:\n[77123.3]  __schedule+0x2e3/0x740\n"
    )
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is Kind.HANG and verdict.category is Category.SYSTEM_SOFTWARE
    assert verdict.confidence < 0.5 and "reclaim" in verdict.basis


_NVSMI_TEMPERATURE = (
    "==============NVSMI LOG==============\n"
    "GPU 00000000:41:00.0\n"
    "    Temperature\n"
    "        GPU Current Temp                  : {current} C\n"
    "        GPU T.Limit Temp                  : N/A\n"
    "        GPU Shutdown Temp                 : 96 C\n"
    "        GPU Slowdown Temp                 : 93 C\n"
    "        GPU Max Operating Temp            : {limit} C\n"
    "        GPU Target Temperature            : N/A\n"
)


def test_gpu_temperature_limit_set_low_is_a_configured_straggler(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, _NVSMI_TEMPERATURE.format(current=64, limit=65))
    assert verdict.failure and verdict.kind is Kind.STRAGGLER
    assert verdict.category is Category.SYSTEM_SOFTWARE and verdict.confidence < 0.5


@pytest.mark.parametrize(("current", "limit"), [(64, 88), (41, 65)])
def test_gpu_temperature_at_default_limit_or_cool_is_no_failure(
    tmp_path: Path, current: int, limit: int
) -> None:
    verdict = _verdict(tmp_path, _NVSMI_TEMPERATURE.format(current=current, limit=limit))
    assert not verdict.failure, verdict.basis


def test_free_space_check_that_needs_an_unknown_size_is_the_check(tmp_path: Path) -> None:
    text = "RuntimeError: Not enough free disk space: needed 0 bytes, available 0 bytes on /mnt/x\n"
    verdict = _verdict(tmp_path, text)
    assert verdict.category is Category.SYSTEM_SOFTWARE and verdict.confidence < 0.5


def test_free_space_check_with_a_size_is_storage(tmp_path: Path) -> None:
    text = "OSError: Not enough disk space. Needed: 142.58 GiB (download: 60.0 GiB)\n"
    assert _verdict(tmp_path, text).category is Category.STORAGE
