"""Mechanisms read after batch51..batch52's first sight (managed cloud ML platforms, scientific
ML on clusters): each a family of messages (other tools' and versions' wordings of the same
failure) with near-misses that must stay apart, never one log's lines (the batches' own logs
are scored by test_attr_realworld's floors). Most are a failure whose usual owner is the
job's code, read where the software stack itself ran the failing code."""

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
    # an illegal address in a kernel XLA generated and ran: the compiler/runtime/CUDA stack
    "xla_fusion_launch_illegal_address": (
        "2023-11-02 18:40:01.502211: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:"
        "2469] Execution of replica 0 failed: INTERNAL: Failed to launch CUDA kernel: "
        "input_reduce_fusion_17 with block dimensions: 256x1x1 and grid dimensions: 80x1x1: "
        "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "jax_xla_runtime_error": (
        "Traceback (most recent call last):\n"
        '  File "/work/fold/predict.py", line 88, in <module>\n'
        "    out = model.apply(params, key, batch)\n"
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime "
        "executable: run time error: custom call 'xla.gpu.func.launch' failed: Failed to "
        "launch CUDA kernel: wrapped_slice_fusion_3: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal "
        "memory access was encountered.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "stream_executor_event_poll": (
        "2021-09-14 07:12:33.882100: E tensorflow/stream_executor/cuda/cuda_driver.cc:1163] "
        "failed to synchronize the stop event: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory "
        "access was encountered\n"
        "2021-09-14 07:12:33.882190: E tensorflow/stream_executor/gpu/gpu_timer.cc:55] "
        "Internal: Error destroying CUDA event: CUDA_ERROR_ILLEGAL_ADDRESS\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # an illegal address caught in a CUDA source compiled into a binary package
    "conda_feedstock_kernel": (
        "ERROR on proc 0: DeePMD-kit C API Error: CUDA Runtime library throws an error: an "
        "illegal memory access was encountered, in file /home/conda/feedstock_root/"
        "build_artifacts/libdeepmd_1712000000000/work/source/lib/src/gpu/tabulate.cu: 811\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "pip_built_wheel_kernel": (
        "RuntimeError: CUDA error: an illegal memory access was encountered (at "
        "/tmp/pip-req-build-k2x9w1/csrc/flash_attn/src/flash_bwd_launch_template.cuh:104)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # an out-of-memory raised inside NCCL's bootstrap remote allocator serving a peer
    "nccl_remote_allocator_oom": (
        "gpu-3:4121:4180 [0] bootstrap.cc:262 NCCL WARN [Rem Allocator] Allocation failed "
        "(segment 1, fd 57)\n"
        "gpu-3:4121:4180 [0] include/alloc.h:41 NCCL WARN Cuda failure 'out of memory'\n"
        "gpu-3:4121:4180 [0] NCCL INFO bootstrap.cc:214 -> 1\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "nccl_remote_allocator_after_closed_peer": (
        "w-0:51:70 [2] include/socket.h:409 NCCL WARN Net : Connection closed by remote peer "
        "172.16.4.9<41022>\n"
        "w-0:51:70 [2] NCCL INFO bootstrap.cc:225 -> 2\n"
        "w-0:51:70 [2] include/alloc.h:52 NCCL WARN Cuda failure 'out of memory'\n"
        "w-0:51:70 [2] bootstrap.cc:271 NCCL WARN [Rem Allocator] Allocation failed (segment "
        "0, fd 44)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # NCCL 2.19 on prints the CUDA error number before its text
    "nccl_remote_allocator_oom_numbered": (
        "n7:880:902 [1] bootstrap.cc:262 NCCL WARN [Rem Allocator] Allocation failed "
        "(segment 2, fd 61)\n"
        "n7:880:902 [1] include/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    # JAX probing the backends it knows and logging the ones that did not load, then running
    "jax_backend_probe_glog": (
        "I0412 08:00:01.120334 140234 xla_bridge.py:884] Unable to initialize backend 'tpu': "
        "INTERNAL: Failed to open libtpu.so: libtpu.so: cannot open shared object file: No "
        "such file or directory\n"
        "I0412 08:00:01.120871 140234 xla_bridge.py:884] Unable to initialize backend 'rocm': "
        'NOT_FOUND: Could not find registered platform with name: "rocm"\n'
        "Running model model_1_pred_0 on 8 devices\n"
    ),
    "jax_backend_probe_python_logging": (
        "INFO:jax._src.xla_bridge:Unable to initialize backend 'rocm': NOT_FOUND: Could not "
        'find registered platform with name: "rocm". Available platform names are: CUDA\n'
        "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': module could not be "
        "loaded: libtpu.so: cannot open shared object file: No such file or directory\n"
        "step 100 | loss 2.3104\n"
    ),
}

# Lines that look alike but whose cause is the job's own (or a library the job asked for that
# is missing): these keep their verdict.
_DIFFERENT_CAUSE: dict[str, tuple[str, str, Category]] = {
    "pytorch_illegal_access": (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n",
        "illegal_address_in",
        Category.APPLICATION,
    ),
    "framework_sync_point_in_a_cpp": (
        "amrex::Abort::3::CUDA error 700 in file /home/u/src/sim/build/_deps/fetchedamrex-src/"
        "Src/Base/AMReX_GpuDevice.cpp line 598: an illegal memory access was encountered !!!\n",
        "illegal_address_in",
        Category.APPLICATION,
    ),
    "own_cuda_extension": (
        "RuntimeError: CUDA error: an illegal memory access was encountered, in file "
        "/home/me/project/csrc/my_scatter.cu: 77\n",
        "illegal_address_in",
        Category.APPLICATION,
    ),
    "nccl_oom_without_remote_allocator": (
        "gpu-3:4121:4180 [0] include/alloc.h:41 NCCL WARN Cuda failure 'out of memory'\n"
        "gpu-3:4121:4180 [0] NCCL INFO transport/p2p.cc:210 -> 1\n",
        "remote allocator",
        Category.APPLICATION,
    ),
    "nccl_oom_numbered_without_remote_allocator": (
        "n7:880:902 [1] include/alloc.h:125 NCCL WARN Cuda failure 2 'out of memory'\n"
        "n7:880:902 [1] NCCL INFO transport/p2p.cc:210 -> 1\n",
        "remote allocator",
        Category.APPLICATION,
    ),
    "jax_backend_the_job_asked_for": (
        "RuntimeError: Unable to initialize backend 'cuda': INTERNAL: libcudart.so.12: cannot "
        "open shared object file: No such file or directory (set JAX_PLATFORMS='' to "
        "automatically choose an available backend)\n",
        "xla",
        Category.SYSTEM_SOFTWARE,
    ),
}


test_mechanism_family = family_test(_FAILURES)


@pytest.mark.parametrize("name", sorted(_FAILURES))
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A custom kernel under XLA, a package's kernel fed bad input, a real shortage of memory:
    the usual cause, not the only one, so the policy restarts and never stops or drains."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.confidence < 0.5, verdict


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize("name", sorted(_DIFFERENT_CAUSE))
def test_look_alikes_keep_their_verdict(tmp_path: Path, name: str) -> None:
    text, basis_word, category = _DIFFERENT_CAUSE[name]
    verdict = verdict_of(tmp_path, text)
    assert verdict.failure, (name, verdict)
    assert verdict.category is category, (name, verdict)
    assert basis_word not in verdict.basis, (name, verdict)
