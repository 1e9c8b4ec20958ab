"""Mechanisms read after batch29..batch31's first sight: each a family of messages (other
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
    # a loss printed as a quoted string: a metrics dict formatted before it was printed
    "paddle_quoted_nan": (
        "2021-01-04 10:00:00,000-INFO: iter: 2400, lr: 0.010000, 'loss_xy': 'nan', "
        "'loss_wh': 'nan', 'loss': 'nan', eta: 2:00:01, batch_cost: 0.51 sec\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "json_quoted_inf": (
        '{"epoch": 3, "step": 1200, "train_loss": "inf", "lr": 0.0003}\n',
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a worker pool's memory monitor restarting a worker over its limit: the job's memory
    "dask_nanny_old": (
        "distributed.nanny - WARNING - Worker exceeded 95% memory budget. Restarting\n"
        "distributed.nanny - WARNING - Restarting worker\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    "dask_nanny_new": (
        "2024-05-08 16:43:36,648 - distributed.nanny.memory - WARNING - Worker "
        "tcp://10.1.2.3:40211 (pid=5512) exceeded 95% memory budget. Restarting...\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # ... and over a threshold of 0 %: the configuration, every worker restarts at once
    "dask_terminate_zero": (
        "distributed.nanny - WARNING - Worker exceeded 0% memory budget. Restarting\n"
        "distributed.nanny - WARNING - Restarting worker\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # over the spill threshold with nothing to spill: the tasks' own memory climbing (a guess)
    "dask_unspillable": (
        "distributed.worker - WARNING - Memory use is high but worker has no data to store to "
        "disk.  Perhaps some other process is leaking memory?  Process memory: 3.70 GB -- "
        "Worker memory limit: 4.00 GB\n",
        Category.APPLICATION,
        Kind.CRASH,
    ),
    # a library error after the framework warned that library is not the version it was
    # built with: the installation
    "paddle_cuda_runtime_warned": (
        "W0101 12:00:00.000 device_context.cc:252] The installed Paddle is compiled with CUDA "
        "10.2, but CUDA runtime version in your machine is 10.1, which may cause serious "
        "incompatible bug. Please recompile or reinstall Paddle with compatible CUDA version.\n"
        "ExternalError: Cublas error, CUBLAS_STATUS_NOT_SUPPORTED at "
        "(/paddle/paddle/fluid/operators/math/blas_impl.cu.h:35)\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "tensorrt_linked_against": (
        "[W] [TRT] TensorRT was linked against cuDNN 8.2.1 but loaded cuDNN 8.0.5\n"
        "RuntimeError: cuDNN error: CUDNN_STATUS_BAD_PARAM\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}


test_mechanism_family = family_test(_FAILURES)


_HEALTHY: dict[str, str] = {
    "quoted_finite_loss": "iter: 20, lr: 0.0100, 'loss_cls': '0.3120', 'loss': '1.0042', "
    "eta: 2:00:01\n" + _STEPS,
    "loss_information_quoted": '{"loss": "information", "note": "logged every 20 steps"}\n'
    + _STEPS,
    "dask_worker_start": "distributed.worker - INFO -       Start worker at:  tcp://10.0.0.5:34437\n"
    "distributed.worker - INFO -                Memory:                    3.00 GB\n"
    "distributed.worker - WARNING - Worker is at 62% memory usage. Resuming worker. "
    "Process memory: 2.70 GB -- Worker memory limit: 4.29 GB\n" + _STEPS,
    # the version warning alone, the framework running on: no failure
    "paddle_version_warning_alone": "W0101 device_context.cc:262] WARNING: device: 0. The "
    "installed Paddle is compiled with CUDNN 7.6, but CUDNN version in your machine is 7.3, "
    "which may cause serious incompatible bug. Please recompile or reinstall Paddle with "
    "compatible CUDNN version.\n" + _STEPS,
    "tensorrt_warning_alone": "[W] [TRT] TensorRT was linked against cuDNN 8.2.1 but loaded "
    "cuDNN 8.0.5\n" + _STEPS,
}


test_healthy_counter_case = healthy_test(_HEALTHY)


def test_library_error_without_the_warning_stays_where_it_was(tmp_path: Path) -> None:
    """The same cuDNN error with no version warning beside it is not made the installation."""
    verdict = verdict_of(
        tmp_path,
        "ExternalError: Cudnn error, CUDNN_STATUS_BAD_PARAM at "
        "(/paddle/paddle/fluid/operators/batch_norm_op.cu:319)\n",
    )
    assert verdict.failure
    assert verdict.category is not Category.SYSTEM_SOFTWARE, verdict


def test_the_version_rule_stays_a_guess_on_an_evidence_line(tmp_path: Path) -> None:
    text, _, _ = _FAILURES["tensorrt_linked_against"]
    verdict = verdict_of(tmp_path, text)
    assert verdict.confidence < 0.5, verdict
