"""Mechanisms read after batch48..batch49's first sight (non-NVIDIA accelerators, storage and
data paths): each a family of messages (other tools' and versions' wordings of the same
failure) with near-misses that must stay apart, never one log's lines (the batches' own logs
are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.attribute.eviction_hog import quantity_bytes
from trainmedic.core.model import Category, Kind


def _lock(state: str, path: str, n: int = 139872) -> str:
    """One of filelock's debug lines about lock ``n`` on ``path``."""
    return f"2024-06-02 10:11:12,001 - DEBUG - filelock - Lock {n} {state} on {path}"


def _evicted(threshold: str, used: str, request: str) -> str:
    """The kubelet's disk-pressure eviction message for one container."""
    return (
        "  Warning  Evicted  2m  kubelet  The node was low on resource: ephemeral-storage. "
        f"Threshold quantity: {threshold}, available: 1021344Ki. Container trainer was using "
        f"{used}, request is {request}, has larger consumption of ephemeral-storage.\n"
    )


_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # an accelerator runtime refusing a device an earlier process still holds
    "ascend_hccp_last_process": (
        "EJ0001: [PID: 48812] 2025-01-09-08:00:01.120.004 Failed to initialize the HCCP "
        "process. Reason: Maybe the last training process is running.\n"
        "        Solution: Wait for 10s after killing the last training process and try again.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "libtpu_in_use": (
        "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use "
        "by process with pid 771. Not attempting to load libtpu.so in this process.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "neuron_cores_taken": (
        "2024-Nov-11 03:04:05.0678 2211:2211 ERROR  NRT:nrt_allocate_neuron_cores  "
        "Logical NeuronCore(s) not available - Requested:lnc0-lnc7 Available:0\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # XLA's compiler report of a program bigger than the device's memory, without the prefix
    "xla_compile_oom_hbm": (
        "Compilation failure: Ran out of memory in memory space hbm. Used 17.21G of 15.75G "
        "hbm. Exceeded hbm capacity by 1.46G.\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "xla_compile_oom_vmem": (
        "E0601 12:00:00.000 pjrt: ran out of memory in memory space vmem. Used 24.50M of "
        "16.00M vmem.\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # the fabric control plane finding fewer chips than its mesh
    "tt_edge_short_north_south": (
        "RuntimeError: TT_FATAL @ tt_metal/fabric/control_plane.cpp:301: "
        "physical_chip_ids.size() == mesh_ns_size\ninfo:\n"
        "Did not find edge with expected number of North-South chips 4\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "tt_mesh_position_empty": (
        "critical | Always | TT_FATAL @ control_plane.cpp:330: found_chip\n"
        "Did not find chip for mesh row 1 and column 3\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # an object store throttling writes to one object
    "gcs_bucket_change_rate": (
        "google.api_core.exceptions.TooManyRequests: 429 PATCH "
        "https://storage.googleapis.com/storage/v1/b/ckpts/o/latest: The rate of change "
        "requests to the object ckpts/latest exceeds the rate limit.\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "tf_gcs_http_429": (
        "tensorflow.python.framework.errors_impl.UnavailableError: All 5 retry attempts "
        "failed. The last failure: Error executing an HTTP request: HTTP response code 429 "
        "with body 'Too Many Requests'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # HDF5's lock refused because another opener holds the file
    "hdf5_lock_held_stack": (
        "  #008: H5FDsec2.c line 1002 in H5FD__sec2_lock(): unable to lock file, errno = 11, "
        "error message = 'Resource temporarily unavailable'\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "hdf5_lock_held_macos": (
        "BlockingIOError: [Errno 35] Unable to create file (unable to lock file, errno = 35, "
        "error message = 'Resource temporarily unavailable')\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # writes to a block device whose size is now 0: the volume left under its mount
    "volume_gone_old_kernel": (
        "[ 9120.55] attempt to access beyond end of device\n"
        "[ 9120.55] xvdf: rw=1, want=41943048, limit=0\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "volume_gone_new_kernel": (
        "[  81.0] EXT4-fs warning (device sdc): ext4_end_bio:342: I/O error 10 writing to "
        "inode 12 starting block 99328)\n"
        "[  81.0] jbd2/sdc-8: attempt to access beyond end of device\n"
        "          sdc: rw=2049, sector=794624, nr_sectors = 8 limit=0\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # the kubelet evicting a pod over its own local-disk limits
    "own_limit_container": (
        "Status:  Failed\nReason:  Evicted\n"
        'Message: Container trainer exceeded its local ephemeral storage limit "20Gi".\n',
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "own_limit_empty_dir": (
        '  Warning  Evicted  40s  kubelet  Usage of EmptyDir volume "scratch" exceeds the '
        'limit "8Gi".\n',
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a disk eviction whose container, requesting none, used more than the node keeps free
    "unreserved_hog_binary_units": (
        _evicted("10Gi", "41Gi", "0"),
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "unreserved_hog_older_wording": (
        "message: 'The node was low on resource: ephemeral-storage. Threshold quantity: "
        "5368709120, available: 4100Mi. Container worker was using 31457280Ki, which exceeds "
        "its request of 0.'\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a log ending on a wait for a lock on a FUSE-mounted object store
    "lock_wait_on_gcs_mount": (
        _lock("not acquired", "/gcs/team-bucket/hf/datasets/_gcs_c4_en.lock,") + " waiting "
        "0.05 seconds ...\n",
        Category.STORAGE,
        Kind.HANG,
    ),
    "lock_wait_on_gcsfuse_mount": (
        _lock("acquired", "/mnt/cache/a.lock")
        + "\n"
        + _lock("not acquired", "/home/u/gcsfuse-data/hf/models--x.lock,", 2211)
        + " waiting 0.05 seconds ...\n",
        Category.STORAGE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    "lock_wait_then_acquired_on_dbfs": (
        _lock("not acquired", "/dbfs/cache/x.lock,")
        + " waiting 0.05 seconds ...\n"
        + _lock("acquired", "/dbfs/cache/x.lock")
        + "\n"
    ),
    "lock_wait_on_local_disk": (
        _lock("not acquired", "/root/.cache/huggingface/x.lock,") + " waiting 0.05 seconds\n"
    ),
    "xla_memory_summary": "Total hbm usage >= 7.91G:\n    reserved        530.00M\n",
    "hccl_ready": "[INFO] HCCL init comm success, HCCP process ready\n",
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


_GUESSES = [
    n
    for n in _FAILURES
    if n.startswith(("ascend", "libtpu", "neuron", "tt_", "hdf5", "volume", "unreserved", "lock"))
]


@pytest.mark.parametrize("name", sorted(_GUESSES))
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """Each reading names the usual cause of its lines, not the only one: never above 0.5,
    so the policy restarts and never stops or drains on it."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, verdict


def test_neuron_cores_fewer_than_asked_are_not_held(tmp_path: Path) -> None:
    """Cores available but fewer than requested is the request, not a holder."""
    text = (
        "ERROR  NRT:nrt_allocate_neuron_cores  NeuronCore(s) not available - "
        "Requested:nc0-nc31 Available:2\n"
    )
    assert "device_held_by_earlier_process" not in verdict_of(tmp_path, text).basis


def test_hbm_ecc_stays_the_gpu(tmp_path: Path) -> None:
    """HBM named in a hardware error is the device's memory, not a program too big for it."""
    text = "habanalabs hl2: Received H/W interrupt 296, HBM0 ECC DERR, reset is required\n"
    assert verdict_of(tmp_path, text).category is Category.GPU_HARDWARE


def test_a_chip_missing_from_the_mapping_is_not_a_missing_chip(tmp_path: Path) -> None:
    """A chip id the control plane's mapping lacks is the mapping's state (software)."""
    text = (
        "critical | Always | TT_FATAL: Physical chip id 0 not found in control plane chip "
        "mapping. You are calling for a chip outside of the fabric cluster.\n"
    )
    assert "tt.fabric_chip_not_found" not in verdict_of(tmp_path, text).basis


def test_the_hub_rate_limit_is_not_the_object_store(tmp_path: Path) -> None:
    """A 429 from the model hub's API is not a storage bucket's mutation limit."""
    text = (
        "requests.exceptions.HTTPError: 429 Client Error: Too Many Requests for url: "
        "https://huggingface.co/api/models/org/model/revision/main\n"
    )
    assert verdict_of(tmp_path, text).category is not Category.STORAGE


@pytest.mark.parametrize("errno", [524, 38])
def test_a_file_system_without_locks_stays_storage(tmp_path: Path, errno: int) -> None:
    """ENOTSUPP / ENOSYS is the file system refusing locks, not another opener."""
    text = f"H5FDsec2.c line 940 in H5FD_sec2_lock(): unable to lock file, errno = {errno}\n"
    assert verdict_of(tmp_path, text).category is Category.STORAGE


def test_a_device_that_still_has_a_size_is_not_a_detached_volume(tmp_path: Path) -> None:
    """A file system past the end of a device that has a size is the disk's layout."""
    text = "attempt to access beyond end of device\nsdb1: rw=0, want=7814037168, limit=7814035120\n"
    assert verdict_of(tmp_path, text).category is not Category.SCHEDULER


def test_the_node_short_of_disk_stays_storage(tmp_path: Path) -> None:
    """An eviction for the node's disk, not the pod's own limit: the node's storage."""
    text = (
        "Reason:  Evicted\nMessage: The node was low on resource: ephemeral-storage. "
        "Threshold quantity: 2146223340, available: 1181292Ki.\n"
    )
    assert verdict_of(tmp_path, text).category is Category.STORAGE


@pytest.mark.parametrize(("used", "asked"), [("73712Ki", "0"), ("41Gi", "50Gi"), ("9Gi", "0")])
def test_a_small_or_requested_user_is_not_the_hog(tmp_path: Path, used: str, asked: str) -> None:
    """Containers that used little, or asked for what they used, did not fill the node alone."""
    verdict = verdict_of(tmp_path, _evicted("10Gi", used, asked))
    assert verdict.category is Category.STORAGE, verdict


def test_kubernetes_quantities() -> None:
    assert quantity_bytes("10Gi") == 10 * 2**30
    assert quantity_bytes("9702960Ki") == 9702960 * 1024
    assert quantity_bytes("10120387530") == 10120387530
    assert quantity_bytes("1.5G") == 1.5e9
