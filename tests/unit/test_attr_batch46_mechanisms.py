"""Mechanisms read after batch46..batch47's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with near-misses that must stay apart,
never one log's lines (the batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind

_LOCAL_ONLY = (
    "[WARNING] [runner.py:212:fetch_hostfile] Unable to find hostfile, will proceed with "
    "training with local resources only.\n"
)


def _cut_in(*frames: str) -> str:
    """A traceback that the excerpt lost before its exception line, ending in ``frames``."""
    head = (
        "Traceback (most recent call last):\n"
        '  File "/opt/job/pretrain.py", line 44, in <module>\n'
        "    main(cfg)\n"
    )
    return head + "".join(frames)


_TORCH_INIT = (
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/c10d_logger.py", line 79, '
    "in wrapper\n"
    "    return func(*args, **kwargs)\n"
    '  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", '
    "line 1305, in init_process_group\n"
    "    store, rank, world_size = next(rendezvous_iterator)\n"
)
_DS_INIT = (
    '  File "/opt/conda/lib/python3.11/site-packages/deepspeed/comm/comm.py", line 670, in '
    "init_distributed\n"
    "    cdb = TorchBackend(dist_backend, timeout, init_method, rank, world_size)\n"
    '  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/rendezvous.py", '
    "line 246, in _env_rendezvous_handler\n"
    "    store = _create_c10d_store(master_addr, master_port, rank, world_size, timeout)\n"
)


def _dcgmi(first: int, second: int) -> str:
    """`dcgmi diag` output whose link test failed, listing NVLink links down."""
    return (
        "+-----  Integration  -------+------------------------------------------------+\n"
        "| PCIe                      | Fail - GPU: 2                                  |\n"
        f"| Warning                   | GPU 2's NvLink link {first} is currently down    |\n"
        "|                           | Run a field diagnostic on the GPU.             |\n"
        f"|                           | GPU 2's NvLink link {second} is currently down    |\n"
        "|                           | Run a field diagnostic on the GPU.             |\n"
    )


_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a pod listed as refused by the kubelet's admission (its device accounting)
    "pod_unexpected_admission": (
        "$ kubectl get pods -n train\n"
        "NAME                READY   STATUS                     RESTARTS   AGE\n"
        "llm-worker-0        1/1     Running                    0          14m\n"
        "llm-worker-1        0/1     UnexpectedAdmissionError   0          9m\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "pod_unexpected_admission_restarts": (
        "bench-gpu-5c7d9   0/2   UnexpectedAdmissionError   2 (40s ago)   3m1s\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a GPU reset (MIG mode change, nvidia-smi -r) refused: something holds the device
    "reset_in_use_by_client": (
        'time=2025-02-10T08:00:03Z level=error msg="The following GPUs could not be reset:"\n'
        "  GPU 00000000:1B:00.0: In use by another client\n"
        "  GPU 00000000:3D:00.0: In use by another client\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "reset_devices_used_by_processes": (
        "$ sudo nvidia-smi -r\n"
        "1 device is currently being used by one or more other processes (e.g., Fabric "
        "Manager, CUDA application, graphics application such as an X server, or a monitoring "
        "application such as another instance of nvidia-smi). Please first kill all processes "
        "using this device and all compute applications running in the system.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the Slurm autoscaler counting no GPUs for a GPU VM size
    "azslurm_nd_without_gpus": (
        "NODEARRAY PLACEMENT_GROUP VM_SIZE VCPU_COUNT PCPU_COUNT MEMORY AVAILABLE_COUNT NCPUS "
        "PCPUS NGPUS MEMGB CCNODEID SLURM_MEMORY\n"
        "gpu  Standard_ND96amsr_A100_v4  96  96  1900.00g  6  96  96  0  1900.00g    1805.00g\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "azslurm_nc_without_gpus_no_pcpu": (
        "a100  Standard_NC48ads_A100_v4  48  440.00g  3  48  0  440.00g  418.00g\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the health check timing out without naming a failed check
    "nhc_script_timed_out": (
        "Jan 14 02:00:41 node112 nhc[5512]: Health check failed:  Script timed out while "
        'executing "check_hw_ib 100".\n',
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "slurmd_killed_health_check": (
        "[2024-08-30T17:45:05.002] error: health_check: timeout after 45000 ms: killing pgid "
        "2230\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # a local-only launch, then the process group's set-up failing
    "local_only_then_torch_init": (
        _LOCAL_ONLY + _cut_in(_TORCH_INIT),
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "local_only_then_deepspeed_init": (
        _LOCAL_ONLY + _cut_in(_DS_INIT),
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a link test failing on NVLink listed down from link 0 in a row: links never trained
    "dcgmi_links_never_trained": (_dcgmi(0, 1), Category.SYSTEM_SOFTWARE, Kind.CRASH),
}

_HEALTHY: dict[str, str] = {
    # one machine on purpose: the local-only notice is the default, and the run goes on
    "local_only_single_node": (
        _LOCAL_ONLY + "[INFO] [launch.py:146:main] WORLD INFO DICT: {'localhost': [0, 1, 2, 3]}\n"
        "iteration       10/    1000 | elapsed time per iteration (ms): 812.3 | lm loss: "
        "9.1E+00 |\n"
    ),
    "pods_completed": (
        "cuda-sample-8k2xz   0/1     Completed   0          4s\n"
        "cuda-sample-q7w1d   0/1     Completed   0          53s\n"
    ),
    "gpu_reset_ok": "GPU 00000000:41:00.0 was successfully reset.\nAll done.\n",
    "azslurm_gpus_counted": (
        "hpc  Standard_ND96isr_H100_v5  96  96  1900.00g  2  96  96  8  1900.00g  1805.00g\n"
        "htc  Standard_F2s_v2  2  1  4.00g  10  2  1  0  4.00g  3.00g\n"
    ),
    "health_check_ran": (
        "[2024-10-07T11:00:01.001] debug:  attempting to run health_check [/usr/sbin/nhc]\n"
        "[2024-10-07T11:00:02.310] debug2: health_check success rc:0 output:\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_FAILURES))
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """Each reading names the usual cause of its lines, not the only one: never above 0.5,
    so the policy restarts and never stops or drains on it."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, verdict


def test_a_cut_in_init_without_the_local_only_notice_stays_unknown(tmp_path: Path) -> None:
    """The same cut with no fallback launch before it: the error came from elsewhere."""
    verdict = verdict_of(tmp_path, _cut_in(_TORCH_INIT))
    assert verdict.category is Category.UNKNOWN, verdict


def test_the_notice_before_a_cut_outside_init_is_not_this_rule(tmp_path: Path) -> None:
    """A local-only launch whose traceback stops in the data loader is the loader's failure."""
    frames = '  File "/opt/job/data.py", line 88, in __getitem__\n    sample = self.records[idx]\n'
    verdict = verdict_of(tmp_path, _LOCAL_ONLY + _cut_in(frames))
    assert "hostfile" not in verdict.basis, verdict


def test_a_link_down_away_from_link_zero_stays_the_gpu(tmp_path: Path) -> None:
    """Links 5 and 9 down is links lost in service, not links that never trained."""
    verdict = verdict_of(tmp_path, _dcgmi(5, 9))
    assert verdict.category is Category.GPU_HARDWARE, verdict


def test_a_failed_check_is_not_a_timed_out_check(tmp_path: Path) -> None:
    """NHC naming the check that failed says what the node lacks, not that NHC stalled."""
    text = (
        "Mar 02 04:10:11 gpu017 nhc[88213]: Health check failed:  check_fs_mount:  /scratch "
        "not mounted\n"
    )
    assert "health_check_timed_out" not in verdict_of(tmp_path, text).basis
