"""A node's software stack failing, read by mechanism in many tools' wordings: library and ABI
mismatches, driver and kernel-module versions, container runtimes, missing commands and
device files, shared memory and descriptor limits. Each must be system_software; the healthy
lines of the same tools must be no failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path

FAILING = [
    # ABI: an extension or library built against other versions
    "ImportError: /opt/venv/lib/python3.11/site-packages/xformers/_C.so: undefined symbol: "
    "_ZNK3c1010TensorImpl4sizeEv",
    "python3: symbol lookup error: /opt/hpcx/ucc/lib/libucc.so.1: undefined symbol: ucs_list_del",
    "ImportError: /lib64/libstdc++.so.6: version `GLIBCXX_3.4.29' not found",
    "error while loading shared libraries: libmpi_cxx.so.40: cannot open shared object file: "
    "No such file or directory",
    # driver user space against its kernel module
    "NVRM: API mismatch: the client has the version 545.23.08, but NVRM: this kernel module has "
    "the version 545.29.06.",
    "Failed to initialize NVML: Driver/library version mismatch",
    "modprobe: FATAL: Module nvidia_uvm not found in directory /lib/modules/6.5.0-35-generic",
    "nvidia-persistenced: Failed to open /dev/nvidiactl: No such file or directory",
    "FATAL: kernel too old",
    # container runtime and the job's environment
    "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
    "/bin/sh: 1: nvidia-smi: not found",
    # code built for another architecture, in ROCm's and CUDA's words
    "RuntimeError: HIP error: invalid device function",
    "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
    # an accelerator another process holds (a lone exception line, no traceback shown)
    "RuntimeError: failed to open /dev/accel3: Device or resource busy",
    # the MPI / PMI runtime that wires the ranks (not the dstore's lock set-up, which falls back
    # to the hash store and goes on: mpi.pmix_dstore_lock_fallback, test_attr_batch56_...)
    "[n3:2211] PMIX ERROR: UNREACHABLE in file ../../src/mca/ptl/tcp/ptl_tcp_component.c at "
    "line 1423",
    "srun: error: mpi/pmi2: failed to send temp kvs to compute nodes",
    "[gpu-4:01234] mca_base_component_repository_open: unable to open mca_btl_openib: "
    "librdmacm.so.1: cannot open shared object file",
    # the CUDA compatibility package on hardware that does not support it
    "RuntimeError: CUDA error: forward compatibility was attempted on non supported HW",
    # RDMA memory registration refused by the stack, not a disk
    "[1718000000.1] [gpu-2:91:0] ib_md.c:309 UCX ERROR ibv_reg_mr(address=0x7f2, length=65536, "
    "access=0xf) failed: Input/output error",
    # limits of the host
    "error: cgroup namespace 'memory' not mounted. aborting",
    "NET/IB : ibv_create_cq failed: Cannot allocate memory (check the locked memory limit)",
    "OSError: [Errno 24] Too many open files",
    'Thread 9 "pt_data_worker" received signal SIGBUS, Bus error.',
]

HEALTHY = [
    "NVML library version: 550.54",
    "| NVIDIA-SMI 550.54.15      Driver Version: 550.54.15      CUDA Version: 12.4     |",
    "modprobe nvidia_peermem: module loaded",
    "Loaded shared library libnccl.so.2 (version 2.21.5)",
    "ulimit -n set to 1048576",
    "nvidia_peermem: module verification failed: signature and/or required key missing - "
    "tainting kernel",
]


def _category(tmp_path: Path, line: str) -> Category | None:
    path = tmp_path / "job.log"
    path.write_text(line + "\n")
    v = analyze_path(path).verdict
    return v.category if v.failure else None


@pytest.mark.parametrize("line", FAILING)
def test_software_stack_failures_are_system_software(tmp_path: Path, line: str) -> None:
    assert _category(tmp_path, line) is Category.SYSTEM_SOFTWARE


@pytest.mark.parametrize("line", HEALTHY)
def test_the_same_tools_healthy_lines_are_no_failure(tmp_path: Path, line: str) -> None:
    assert _category(tmp_path, line) is None


def test_a_missing_python_module_stays_the_jobs_environment(tmp_path: Path) -> None:
    line = "ModuleNotFoundError: No module named 'deepspeed'"
    assert _category(tmp_path, line) is Category.APPLICATION
