"""Mechanisms read after batch26..batch28's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy counter-cases, never one log's
lines (the batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.model import Category, Kind

_STEPS = "".join(f"step {i} | loss {2.0 - i / 100:.3f}\n" for i in range(1, 6))

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a memory region the HCA refused to register, in RDMA stacks' own words: the locked-memory
    # limit or the peer-memory module, not the process's heap (its ENOMEM is no MemoryError)
    "pslite_memory_region": (
        "[09:12:40] src/./rdma_utils.h:119: Check failed: mr = ibv_reg_mr(pd_\n"
        ", p, size, IBV_ACCESS_LOCAL_WRITE) Failed to register the memory region: "
        "Cannot allocate memory, sa.size()=4718592\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "libfabric_mr_reg": (
        "server: fi_mr_reg failed, ret is:-12, Cannot allocate memory\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "peer_memory_register": (
        "Failed to register memory 0x7f1cbac200: Bad address [14]\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ofi_mr_registration_hmem": (
        "[0000] WARN:  transport_ofi.c:810: allocate_recv_cntr_mr\n"
        "[0000]        OFI MR registration with HMEM failed\n"
        "[0000] ERROR: init.c:421: shmem_internal_heap_postinit\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # a container runtime that could not set up the job's container: its configuration
    "pyxis_import_permission": (
        "slurmstepd: pyxis: importing docker image ...\n"
        "slurmstepd: error: pyxis: child 3311 failed with error code: 1\n"
        "slurmstepd: error: pyxis: failed to import docker image\n"
        "slurmstepd: error: pyxis:     mkdir: cannot create directory '/run/enroot': "
        "Permission denied\n"
        "slurmstepd: error: spank: required plugin spank_pyxis.so: "
        "task_init_privileged() failed with rc=-1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "enroot_user_namespace": (
        "slurmstepd: error: pyxis: container start failed with error code: 1\n"
        "slurmstepd: error: pyxis:     enroot-nsenter: failed to create user namespace: "
        "No space left on device\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "enroot_switchroot": (
        "$ enroot start pytorch\n"
        "enroot-switchroot: failed to switch root: /data/enroot/pytorch: Invalid argument\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "runc_pivot_root_strace": (
        'pivot_root(".", ".")                    = -1 EINVAL (Invalid argument)\n',
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "apptainer_creation": (
        "FATAL:   container creation failed: mount /proc/self/fd/3->/var/apptainer/mnt/"
        "session/rootfs error: while mounting image: failed to find loop device\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # ENOSPC while the runtime writes the image into its own scratch (a small /run tmpfs)
    "pyxis_squashfs_no_space": (
        "slurmstepd: error: pyxis:     Write failed because No space left on device\n"
        "slurmstepd: error: pyxis:     FATAL ERROR:Failed to write to output filesystem\n"
        "slurmstepd: error: pyxis:     Creating 4.0 filesystem on "
        "/run/pyxis/2001/12.0.squashfs, block size 131072.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # UCX selecting its transports at context creation: its configuration
    "ucx_transports_devices_limit": (
        "[1574370360.48] [dgx2:63952:0]    ucp_context.c:1004 UCX  ERROR exceeded "
        "transports/devices limit (71 requested, up to 64 are supported)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ucx_resources_limit": (
        "[dgx2:4411:0] ucp_context.c:1203 UCX  ERROR Exceeded resources limit "
        "(66 requested, up to 64 are supported)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "ucx_no_usable_transports": (
        "[node7:4411:0] ucp_context.c:1108 UCX  ERROR no usable transports/devices "
        "(asked rc_x on network:mlx5_4:1)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # srun's launch request to an allocated node lost: the cluster's Slurm set-up (a guess)
    "srun_launch_socket_timeout": (
        "srun: error: slurm_receive_msgs: [[cn12]:6818] failed: Socket timed out on "
        "send/recv operation\n"
        "srun: error: Task launch for StepId=812.0 failed on node cn12: Socket timed out "
        "on send/recv operation\n"
        "srun: error: Application launch failed: Socket timed out on send/recv operation\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "srun_launch_zero_bytes": (
        "srun: error: Task launch for 77.0 failed on node gpu-4: Zero Bytes were "
        "transmitted or received\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "memory_region_registered": _STEPS
    + "[17:31:13] src/./rdma_van.h:512: Registered memory region of 2359296 bytes\n",
    "pyxis_import_progress": "slurmstepd: pyxis: importing docker image ...\n"
    "slurmstepd: pyxis: creating container filesystem ...\n"
    "slurmstepd: pyxis: starting container ...\n" + _STEPS,
    "ucx_transport_info": "[node7:4411:0] ucp_context.c:1004 UCX  INFO  using 12 "
    "transports/devices (limit 64)\n" + _STEPS,
}


test_failure_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


def test_srun_launch_lost_is_a_guess(tmp_path: Path) -> None:
    """Named as the usual cause, never a drain: below 0.5, so the policy only restarts."""
    verdict = verdict_of(tmp_path, _FAILURES["srun_launch_socket_timeout"][0])
    assert verdict.confidence < 0.5


def test_no_space_on_the_data_volume_stays_storage(tmp_path: Path) -> None:
    """ENOSPC writing a checkpoint, with no container runtime around it, is the volume."""
    verdict = verdict_of(
        tmp_path, _STEPS + "OSError: [Errno 28] No space left on device: '/ckpt/step_900.pt'\n"
    )
    assert verdict.category is Category.STORAGE
