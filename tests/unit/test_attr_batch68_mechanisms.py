"""Mechanisms read after batch68's first sight (compilers and graphs inside distributed training
and serving: kernel caches on shared file systems, CUDA/HIP graph capture, collectives of
tensor-parallel engines): each a family of messages (other tools', versions' and engines'
wordings of the same failure) with near-misses that must stay apart, never one log's lines (the
batch's own logs are scored by test_attr_realworld's floors). Each is a guess (restart): the
lines show where the failure happened, the thread's finding only usually follows from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import family_test, healthy_test, lookalike_test, verdict_of

from trainmedic.core.attribute.culprit import one_sequence
from trainmedic.core.model import Category, Kind

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a compiler cache's artifact vanished, busy or stale while ranks published it: the cache
    # on a file system without local-disk rename semantics
    "triton_temp_rename_vanished": (
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.11/site-packages/triton/runtime/cache.py", line 123, in '
        "put\n"
        "    os.replace(temp_path, filepath)\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/home/bob/.triton/cache/"
        "51ac0e/_fwd_kernel.cubin.tmp.pid_2290_77131' -> '/home/bob/.triton/cache/51ac0e/"
        "_fwd_kernel.cubin'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "inductor_busy_shared_object": (
        "[rank3]: torch._inductor.exc.InductorError: OSError: [Errno 16] Device or resource "
        "busy: '/mnt/shared/triton-cache/QWE1/tmp.pid_811_a1b2/__triton_launcher.so' -> "
        "'/mnt/shared/triton-cache/QWE1/__triton_launcher.so'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "fresh_kernel_missing_on_read": (
        "[rank5]: torch._inductor.exc.InductorError: FileNotFoundError: [Errno 2] No such file "
        "or directory: '/gpfs/u/triton_cache_9731/ZZ9/triton_per_fused_mul_sum_1.hsaco'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    "jax_cache_stale_handle": (
        "OSError: [Errno 116] Stale file handle: '/lustre/team/jax_compilation_cache/"
        "jit__step-3f9a1c'\n",
        Category.STORAGE,
        Kind.CRASH,
    ),
    # the process group's watchdog refused by the runtime's capture rules while another thread
    # captured a graph: the framework against the runtime
    "watchdog_capture_unsupported_cuda": (
        "[rank1]:[E1202 10:00:00.000000 4242 ProcessGroupNCCL.cpp:1800] [PG ID 0 PG GUID "
        "0(default_pg) Rank 1] Process group watchdog thread terminated with exception: CUDA "
        "error: operation not permitted when stream is capturing\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "watchdog_capture_invalidated_hip": (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [PG ID 3 PG GUID 12 Rank 6] Process group watchdog thread terminated with "
        "exception: HIP error: operation failed due to a previous error during capture\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # an inference engine's collectives timing out in different groups (counters far apart):
    # no desync of the user's program, the engine's own stack
    "engine_groups_far_apart": (
        "(RayWorkerWrapper pid=901) [rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=4410, OpType=ALLREDUCE, "
        "NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600105 milliseconds before "
        "timing out.\n"
        "(RayWorkerWrapper pid=877) [rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog "
        "caught collective operation timeout: WorkNCCL(SeqNum=98765, OpType=BROADCAST, "
        "NumelIn=12, NumelOut=12, Timeout(ms)=600000) ran for 600230 milliseconds before "
        "timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # an inference engine's start-up that ends inside its graph capture
    "sglang_capture_then_registering": (
        "[2025-03-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several "
        "minutes. avail mem=12.50 GB\n"
        "[2025-03-01 10:00:00 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 32]\n"
        "[2025-03-01 10:00:04 TP1] Registering 96 cuda graph addresses\n"
        "[2025-03-01 10:00:04 TP0] Registering 96 cuda graph addresses\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "vllm_capture_bar_stuck": (
        "(VllmWorkerProcess pid=312) INFO 05-02 11:00:00 model_runner.py:1400] Capturing "
        "cudagraphs for decoding. This may lead to unexpected consequences if the model is not "
        "static.\n"
        "Capturing CUDA graph shapes:  43%|####3     | 29/67 [00:07<00:09,  4.02it/s]\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    # the capture that ended, in each engine's words
    "sglang_capture_ended": (
        "[2025-03-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several "
        "minutes. avail mem=12.50 GB\n"
        "[2025-03-01 10:00:04 TP0] Registering 96 cuda graph addresses\n"
        "[2025-03-01 10:00:05 TP0] Capture cuda graph end. Time elapsed: 5.02 s. mem "
        "usage=0.61 GB. avail mem=11.89 GB.\n"
    ),
    "vllm_capture_finished": (
        "INFO 05-02 11:00:00 model_runner.py:1400] Capturing the model for CUDA graphs. This "
        "may lead to unexpected consequences if the model is not static.\n"
        "INFO 05-02 11:00:09 custom_all_reduce.py:200] Registering 2275 cuda graph addresses\n"
        "INFO 05-02 11:00:09 model_runner.py:1528] Graph capturing finished in 9 secs.\n"
    ),
    # a capture bar at 100 %: the capture itself ended
    "vllm_capture_bar_complete": (
        "INFO 05-02 11:00:00 gpu_model_runner.py:2400] Capturing cudagraphs for decoding.\n"
        "Capturing CUDA graphs (decode, FULL): 100%|##########| 67/67 [00:04<00:00, 15.1it/s]\n"
    ),
    # the engine served requests after the capture began (its end line cut from the excerpt)
    "engine_served_after_capture": (
        "[2025-03-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several "
        "minutes. avail mem=12.50 GB\n"
        "[2025-03-01 10:00:09 TP0] The server is fired up and ready to roll!\n"
    ),
    # a temp-file rename into a compiler cache that succeeded, logged by a debug hook
    "cache_put_logged": (
        "DEBUG triton.runtime.cache: put /home/bob/.triton/cache/51ac0e/_fwd_kernel.cubin "
        "(tmp.pid_2290_77131 -> _fwd_kernel.cubin)\n"
    ),
}

test_mechanism_family = family_test(_FAILURES)

test_healthy_counter_case = healthy_test(_HEALTHY)


# Lines that look alike but carry another cause: they must not be read as these mechanisms.
_NOT_THIS: dict[str, tuple[str, Category]] = {
    # another user's cache directory refused: a permission, the set-up, not the file system
    "cache_permission_denied": (
        "PermissionError: [Errno 13] Permission denied: '/tmp/triton/8c1f2e.lock'\n",
        Category.STORAGE,
    ),
    # the job's own data file missing: its configuration
    "dataset_file_missing": (
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/cache/val-00001.arrow'\n",
        Category.STORAGE,
    ),
    # the compiler's bundled tool missing: the installation, not the cache
    "bundled_ptxas_missing": (
        "FileNotFoundError: [Errno 2] No such file or directory: '/opt/conda/lib/python3.10/"
        "site-packages/triton/backends/nvidia/bin/ptxas'\n",
        Category.STORAGE,
    ),
    # the job's own code synchronising inside its capture: its own mistake
    "capture_error_in_the_jobs_code": (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 88, in <module>\n'
        "    loss.item()\n"
        "RuntimeError: CUDA error: operation not permitted when stream is capturing\n",
        Category.SYSTEM_SOFTWARE,
    ),
    # the watchdog brought down by a device fault, not by a capture
    "watchdog_illegal_address": (
        "[PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with "
        "exception: CUDA error: an illegal memory access was encountered\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


test_lookalikes_keep_another_reading = lookalike_test(_NOT_THIS)


def test_one_groups_desync_is_still_the_application(tmp_path: Path) -> None:
    """Ranks of one group (SeqNums a step apart) in different collectives stay a desync."""
    verdict = verdict_of(
        tmp_path,
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1201, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600011 milliseconds before timing out.\n"
        "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1201, OpType=BROADCAST, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n",
    )
    assert verdict.category is Category.APPLICATION, verdict
    assert "different collectives" in verdict.basis, verdict


@pytest.mark.parametrize(
    ("seqnums", "one"),
    [((7, 7), True), ((120, 123), True), ((4410, 98765), False), ((3, 500), False)],
)
def test_seqnums_far_apart_are_different_groups(seqnums: tuple[int, int], one: bool) -> None:
    assert one_sequence(list(seqnums)) is one


@pytest.mark.parametrize(
    "name",
    [
        "triton_temp_rename_vanished",
        "watchdog_capture_unsupported_cuda",
        "engine_groups_far_apart",
        "sglang_capture_then_registering",
    ],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A user emptying the cache, a torch version's capture mode, an excerpt cut while a healthy
    capture ran read the same: restart, never stop or drain on these."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.failure, (name, verdict)
    assert verdict.confidence < 0.5, (name, verdict)
