"""Mechanisms read after batch54..batch55's first sight (checkpoint loads and data pipelines
inside frameworks; containers, devices and steps on the node): each a family of messages (other
tools' and versions' wordings of the same failure) with healthy or differently-caused
near-misses, never one log's lines (the batches' own logs are scored by test_attr_realworld's
floors)."""

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
    # srun waiting for a step inside the job's own allocation
    "srun_step_creation_temporarily_disabled": (
        "launching 4 simulations on nid001204\n"
        "srun: Job 5521 step creation temporarily disabled, retrying (Requested nodes are busy)\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "srun_step_creation_still_disabled": (
        "srun: Job 88120 step creation still disabled, retrying (Requested nodes are busy)\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # the NVIDIA devices (major 195) left with mknod-only access in a container's device cgroup
    "devices_list_mknod_only": (
        "$ cat /sys/fs/cgroup/devices/devices.list\nc 1:5 rwm\nc 195:* m\nc 136:* rwm\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "rule_trace_mknod_only": (
        "containerd, 2, c 195:0 rw, kubepods-besteffort-pod91ab.slice\n"
        "systemd, 1, c 195:* m, kubepods-besteffort-pod91ab.slice\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "runc_json_rule_mknod_only": (
        '{"allow": true, "type": "c", "major": 195, "minor": 0, "access": "m"}\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # an object-store client reporting a copy failed
    "aws_cli_download_failed": (
        "download failed: s3://shards/train/000731.tar to /scratch/000731.tar [Errno 104] "
        "Connection reset by peer\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "s5cmd_cp_failed": (
        'ERROR "cp s3://corpus/part-0019.tar -": RequestError: send request failed caused by: '
        "read: connection reset by peer\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # a verbs call pinning memory that fails with ENOMEM: the locked-memory limit
    "ucx_create_cq_enomem": (
        "[1712000000.101010] [trn-4:9120:0]        ib_iface.c:625  UCX  ERROR "
        "ibv_create_cq(cqe=4096) failed: Cannot allocate memory\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "create_qp_enomem": (
        "ERROR mlx5_3: ibv_create_qp() failed: Cannot allocate memory.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a job cancelled around a step the cgroup OOM handler killed
    "cancel_with_oom_kill_events": (
        "slurmstepd: error: *** JOB 77120 ON gpu-a3 CANCELLED AT 2024-03-03T03:03:03 ***\n"
        "slurmstepd: error: Detected 3 oom_kill events in StepId=77120.0. Some of the step "
        "tasks have been OOM Killed.\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "cancel_by_user_with_oom_kill_event": (
        "slurmstepd: error: *** JOB 912 ON cn04 CANCELLED AT 2023-10-10T10:10:10 by 5012 ***\n"
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=912.batch. Some of your "
        "processes may have been killed by the cgroup out-of-memory handler.\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a bare squashfs file name given as the container image: pulled from a registry
    "pyxis_bare_sqsh_name": (
        "pyxis: importing docker image: pytorch-24.01.sqsh\n"
        "slurmstepd: error: pyxis: child 4410 failed with error code: 1\n"
        "slurmstepd: error: pyxis: failed to import docker image\n"
        "slurmstepd: error: pyxis: printing enroot log file:\n"
        "slurmstepd: error: pyxis:     [INFO] Querying registry for permission grant\n"
        "slurmstepd: error: pyxis: couldn't start container\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "pyxis_bare_squashfs_name": (
        "pyxis: importing docker image: my_env.squashfs\n"
        "slurmstepd: error: pyxis: failed to import docker image\n"
        "slurmstepd: error: spank: required plugin spank_pyxis.so: task_init() failed with "
        "rc=-1\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a bare assert failing inside an installed framework's own code
    "bare_assert_in_site_packages": (
        "Traceback (most recent call last):\n"
        '  File "/work/run/finetune.py", line 41, in <module>\n'
        "    engine.load_checkpoint(args.ckpt)\n"
        '  File "/usr/local/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line '
        "2810, in _load_zero_checkpoint\n"
        "    assert self.zero_optimization_partition_weights() is not None\n"
        "AssertionError\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "bare_assert_in_a_framework_tree_ranks_interleaved": (
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/opt/src/accelerate/utils/fsdp_utils.py", line 190, in '
        "load_fsdp_model\n"
        "[rank3]:     Traceback (most recent call last):\n"
        "[rank3]:     assert state_dict_config is not None\n"
        "[rank3]: AssertionError\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a copied webdataset grouping function meeting the newer end-of-shard marker
    "grouping_copy_in_a_training_repo": (
        '  File "/src/open_lm/datapreprocess/wds.py", line 120, in group_by_keys_nothrow\n'
        '    fname, value = filesample["fname"], filesample["data"]\n'
        "KeyError: 'fname'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "grouping_copy_under_a_rank_prefix": (
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/opt/lavis/datasets/datasets/wds_utils.py", line 64, in '
        "group_by_keys\n"
        '[rank1]:     fname, value = filesample["fname"], filesample["data"]\n'
        '[rank1]: KeyError: "fname"\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "srun_step_created": ("srun: Step created for StepId=5521.3\nsimulation 3 finished in 412 s\n"),
    "devices_list_with_rw_access": (
        "$ cat /sys/fs/cgroup/devices/devices.list\nc 195:* rwm\nc 195:255 rwm\nc 1:3 m\n"
    ),
    "aws_cli_download_done": (
        "download: s3://shards/train/000731.tar to ./000731.tar\n"
        "upload: ckpt/step_100.pt to s3://runs/a/step_100.pt\n"
    ),
    "ucx_probe_then_results": (
        "[1712000000.1] [host:91:0]  ib_log.c:246  UCX  ERROR mlx5_1: ibv_create_cq() failed: "
        "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited'\n"
        "# OSU MPI Allreduce Latency Test v7.2\n"
        "# Size       Avg Latency(us)\n"
        "4                       1.12\n"
        "8                       1.15\n"
    ),
}

# The same lines with another cause: these keep their own verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, Category]] = {
    "cancel_without_an_oom": (
        "slurmstepd: error: *** JOB 77120 ON gpu-a3 CANCELLED AT 2024-03-03T03:03:03 ***\n",
        Category.SCHEDULER,
    ),
    "registry_image_that_fails_to_import": (
        "pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.01-py3\n"
        "slurmstepd: error: pyxis: child 4410 failed with error code: 1\n"
        "slurmstepd: error: pyxis: failed to import docker image\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "assert_in_the_jobs_own_file": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 77, in main\n'
        "    assert batch.shape[0] == cfg.batch_size\n"
        "AssertionError\n",
        Category.APPLICATION,
    ),
    "missing_key_in_the_jobs_dataset": (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/data.py", line 51, in __getitem__\n'
        '    name = record["fname"]\n'
        "KeyError: 'fname'\n",
        Category.APPLICATION,
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_other_causes_keep_their_verdict(tmp_path: Path, name: str) -> None:
    text, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert verdict.category is category, (name, verdict)


_GUESSES = (
    "srun_step_creation_temporarily_disabled",
    "aws_cli_download_failed",
    "s5cmd_cp_failed",
    "ucx_create_cq_enomem",
    "bare_assert_in_site_packages",
    "grouping_copy_in_a_training_repo",
)


@pytest.mark.parametrize("name", _GUESSES)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A step wait can end, a transfer can fail on the client's side, a library's assert can be
    tripped by odd input: restart, never stop or drain on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, (name, verdict)


def test_an_image_named_after_nccl_is_no_shared_memory_segment(tmp_path: Path) -> None:
    """NCCL's shared-memory segments are nccl-XXXXXX; an image called nccl-<word> filling the
    disk while the runtime unpacks it is not /dev/shm."""
    verdict = verdict_of(
        tmp_path,
        "$ enroot import -o nccl-allreduce-check.sqsh docker://ubuntu:22.04\n"
        "[INFO] Extracting image content...\n"
        "tar: usr/lib/libfoo.so.3: Cannot write: No space left on device\n",
    )
    assert verdict.failure
    assert "shared-memory" not in verdict.basis, verdict
    segment = verdict_of(
        tmp_path,
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Qz81aB (size 9637888)\n"
        "RuntimeError: NCCL error: unhandled system error, NCCL version 2.18.1: No space left on "
        "device\n",
    )
    assert "shared-memory" in segment.basis, segment
