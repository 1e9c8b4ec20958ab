"""Mechanisms batch10 taught, each tested on lines in other tools' and stacks' wordings than
the batch's, and on the healthy output of the same tools, which must stay as it was.

A library loaded at run time that is not the version the framework was built against
(cuDNN under TensorFlow or PyTorch, NumPy's C API, the CUDA toolkit, jaxlib) is the software
installation; a traceback an excerpt cut on a source line that calls a built-in file-system
function (``open``, ``os.replace``: C code, no frame of its own) is the file system refusing the
call; a stalled collective whose missing ranks are exactly one aligned node block is the
communication between the nodes, while one missing rank stays the job's own code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "tensorflow_cudnn_loaded_older_than_built": (
        "2018-07-02 11:20:05.114: E tensorflow/stream_executor/cuda/cuda_dnn.cc:343] Loaded "
        "runtime CuDNN library: 7.0.5 but source was compiled with: 7.1.4.  CuDNN library "
        "major and minor version needs to match.\n"
        "2018-07-02 11:20:05.115: F tensorflow/core/kernels/conv_ops.cc:713] Check failed: "
        "stream->parent()->GetConvolveAlgorithms()\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "pytorch_cudnn_incompatibility": (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 40, in <module>\n'
        "    out = model(x)\n"
        "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (8, 9, 2) "
        "but found runtime version (8, 5, 0).\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "numpy_c_api_mismatch": (
        "RuntimeError: module compiled against API version 0x10 but this version of numpy is "
        "0xe\nImportError: numpy.core.multiarray failed to import\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "torch_extension_cuda_mismatch": (
        "RuntimeError: The detected CUDA version (12.1) mismatches the version that was used "
        "to compile PyTorch (11.8). Please make sure to use the same CUDA versions.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "jaxlib_newer_than_jax": (
        "RuntimeError: jaxlib version 0.4.1 is newer than and incompatible with jax version "
        "0.3.25. Please update your jax and/or jaxlib packages.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "cut_at_builtin_open_in_a_library": (
        "[2024-05-01 10:00:00] saving model to /mnt/bucket/run7/model.safetensors\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/app/train.py", line 210, in <module>\n'
        "    trainer.save_model(out_dir)\n"
        '  File "/usr/lib/python3/site-packages/safetensors/torch.py", line 281, in save_file\n'
        '    with open(filename, "wb") as fh:\n',
        Category.STORAGE,
    ),
    "cut_at_os_replace_headless": (
        '  File "/srv/job/ckpt.py", line 77, in commit\n    os.replace(tmp_path, final_path)\n',
        Category.STORAGE,
    ),
    "horovod_stall_missing_second_node_block": (
        "[1,0]<stderr>:[2023-02-01 10:00:00.000000: W horovod/common/stall_inspector.cc:107] "
        "One or more tensors were submitted to be reduced, gathered or broadcasted by subset "
        "of ranks and are waiting for remainder of ranks for more than 60 seconds.\n"
        "[1,0]<stderr>:Missing ranks:\n"
        "[1,0]<stderr>:DistributedAdam_Allreduce/HorovodAllreduce_grads_3_0 "
        "[missing ranks: 4, 5, 6, 7]\n",
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_is_named(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is not Kind.NONE, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


def test_whole_node_stall_is_a_guess_that_restarts(tmp_path: Path) -> None:
    text, _ = FAILURES["horovod_stall_missing_second_node_block"]
    assert _verdict(tmp_path, text).confidence < 0.5


# Stalls that are the code's: one rank (rank 0 validating alone), ranks scattered by their
# data, a block that is not aligned to a node, and lists that differ between ops.
APPLICATION_STALLS: dict[str, str] = {
    "one_rank_missing": "HorovodAllreduce_grad_dense_1_0 [missing ranks: 0]\n",
    "scattered_ranks": "HorovodAllreduce_grad_dense_1_0 [missing ranks: 1, 3, 6, 9]\n",
    "unaligned_block": "HorovodAllreduce_grad_dense_1_0 [missing ranks: 2, 3, 4, 5]\n",
    "two_lists_one_rank_and_a_block": (
        "HorovodAllreduce_a_0 [missing ranks: 0, 1, 2, 3]\n"
        "HorovodAllreduce_b_0 [missing ranks: 5]\n"
    ),
}


@pytest.mark.parametrize("name", sorted(APPLICATION_STALLS))
def test_stall_of_some_ranks_stays_application(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, APPLICATION_STALLS[name])
    assert verdict.category is Category.APPLICATION, (name, verdict.category, verdict.basis)


def test_cut_at_a_library_method_named_open_stays_application(tmp_path: Path) -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/app/data.py", line 31, in __getitem__\n'
        "    img = Image.open(self.paths[i])\n"
    )
    verdict = _verdict(tmp_path, text)
    assert verdict.category is Category.APPLICATION, (verdict.category, verdict.basis)


HEALTHY: dict[str, str] = {
    "xla_loaded_cudnn_version": (
        "I0000 00:00:1700000000.000000  1234 cuda_dnn.cc:529] Loaded cuDNN version 8902\n"
        "[CudaDevice(id=0), CudaDevice(id=1)]\n"
    ),
    "versions_banner": "cuDNN version: 8902, CUDA version: 12.1, NCCL version 2.18.1\nstep 1\n",
    "tensorrt_linked_warning": (
        "[W] [TRT] TensorRT was linked against cuDNN 8.2.1 but loaded cuDNN 8.0.5\n"
        "[I] [TRT] Engine built in 12.3 s\n"
    ),
    "open_in_a_handled_frame": (
        '  File "train.py", line 88, in save\n'
        '    with open(path, "wb") as f:\n'
        "saved checkpoint to /ckpt/step_100\n"
        "step 101 loss 2.30\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_stays_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert verdict.kind is Kind.NONE, (name, verdict.category, verdict.basis)
