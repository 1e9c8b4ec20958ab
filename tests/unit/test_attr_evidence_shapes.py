"""The evidence layer on mechanisms first met in real batch04, each written here in other
shapes than the batch's (other tools, drivers and wordings of the same mechanism): metrics and
retries that are no failure, bus errors, physical-link errors and failed power supplies."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.attribute.evidence import EVIDENCE_CONFIDENCE
from trainmedic.core.logparse.evidence import is_failure_text
from trainmedic.core.model import Category
from trainmedic.offline.analyze import analyze_path


@pytest.mark.parametrize(
    "line",
    [
        "Epoch 3 | train_loss 0.41 | val error rate 0.087",
        "top1_err: 23.41  top5_err: 6.92",
        "{'eval_wer': 0.21, 'eval_error_rate': 0.04, 'epoch': 2.0}",
        "[val] CharErrorRate=0.031 WordErrorRate=0.118",
        "upload to the tracking server failed (503), retrying in 10 seconds",
        "Checkpoint shard 3 could not be written yet, will retry (attempt 2/5)",
        "comet_ml: Connection error (ReadTimeout), entering retry loop.",
        "Epoch 7: train_error=0.0812 val_error: 0.1034",
        "Retrying (Retry(total=3, connect=None, read=None)) after connection broken by "
        "'ProtocolError'",
        "rendezvous: node gpu-9 failed to join round 2, retrying",
        "E0000 00:00:1714550400.1 4412 cuda_fft.cc:485] Unable to register cuFFT factory: "
        "Attempting to register factory for plugin cuFFT when one has already been registered",
        "ERROR: ld.so: object 'libtcmalloc.so.4' from LD_PRELOAD cannot be preloaded "
        "(cannot open shared object file): ignored.",
        "wandb: ERROR Error while calling W&B API: context deadline exceeded (<Response [500]>)",
        "mlflow: Failed to log metrics batch, status 503",
    ],
)
def test_metrics_named_error_and_pending_retries_are_not_evidence(line: str) -> None:
    assert not is_failure_text(line)


@pytest.mark.parametrize(
    "line",
    [
        "Upload failed after 5 retries, giving up",
        "RuntimeError: error rate of the data pipeline exceeded its budget",  # a real exception
        "Error: 404 not found",
        "Upload failed after retrying 5 times",
        "RuntimeError: Error: 3.5 GiB requested, 1.2 GiB free",  # the exception still counts
    ],
)
def test_retries_that_gave_up_and_real_errors_stay_evidence(line: str) -> None:
    assert is_failure_text(line)


def _analyze(tmp_path: Path, text: str) -> tuple[Category | None, float]:
    path = tmp_path / "job.log"
    path.write_text(text)
    verdict = analyze_path(path).verdict
    return (verdict.category if verdict.failure else None), verdict.confidence


def test_healthy_run_with_error_metrics_and_a_retried_upload_is_no_failure(
    tmp_path: Path,
) -> None:
    text = "".join(
        f"Epoch {i} | train loss {1.0 / (i + 1):.3f} | valid ErrorRate {0.3 / (i + 1):.3f}\n"
        for i in range(12)
    )
    text += "neptune: Connection error, retrying in 5 seconds\nTraining finished.\n"
    assert _analyze(tmp_path, text) == (None, 0.0)


def test_bus_error_in_a_communication_library_is_the_software_stack(tmp_path: Path) -> None:
    text = (
        "[gpu-h12:77123] *** Process received signal ***\n"
        "[gpu-h12:77123] Signal: Bus error (7)\n"
        "[gpu-h12:77123] Signal code:  (128)\n"
        "[gpu-h12:77123] [ 0] /usr/lib/libpthread.so.0(+0x12cf0)[0x7f1]\n"
        "[gpu-h12:77123] [ 1] /opt/ucx/lib/libuct_sm.so.0(uct_mm_ep_put_short+0x21)[0x7f2]\n"
        "[gpu-h12:77123] *** End of error message ***\n"
    )
    category, confidence = _analyze(tmp_path, text)
    assert category is Category.SYSTEM_SOFTWARE and confidence <= EVIDENCE_CONFIDENCE


@pytest.mark.parametrize(
    "text",
    [
        # another driver's link flapping
        "".join(
            f"[{t}.000] mlx5_core 0000:3b:00.0 ens1f0: Link down\n"
            f"[{t + 40}.000] mlx5_core 0000:3b:00.0 ens1f0: Link up\n"
            for t in range(100, 600, 100)
        ),
        # a switch port's receive counters
        "Port 17 (gpu-rack3):\n  rx_crc_errors: 912\n  rx_frame_errors: 27\n  tx_errors: 0\n",
    ],
)
def test_physical_link_errors_are_the_network(tmp_path: Path, text: str) -> None:
    assert _analyze(tmp_path, text)[0] is Category.NETWORK_HARDWARE


def test_a_failed_power_supply_in_a_bmc_sensor_list_is_the_node(tmp_path: Path) -> None:
    text = (
        "PS1 Status       | 0x00   | ok  | 10.1 | Presence detected\n"
        "PS2 Status       | 0x00   | ok  | 10.2 | Presence detected, Failure detected\n"
    )
    assert _analyze(tmp_path, text)[0] is Category.NODE_HARDWARE


def test_healthy_nic_counters_and_link_up_are_no_failure(tmp_path: Path) -> None:
    text = (
        "ens1f0: Link up 100 Gbps Full Duplex\n"
        "  rx_crc_errors: 0\n  rx_frame_errors: 0\n  tx_errors: 0\n  rx_packets: 88123\n"
    )
    assert _analyze(tmp_path, text) == (None, 0.0)


def test_a_lone_exception_line_is_failure_evidence(tmp_path: Path) -> None:
    """An excerpt that kept only the exception line (no traceback above it) still failed."""
    text = "step 1 loss 2.0\nrecipes.errors.StageError: stage 3 returned no batches\n"
    category, confidence = _analyze(tmp_path, text)
    assert category is Category.APPLICATION and confidence <= EVIDENCE_CONFIDENCE


def test_an_exception_line_the_job_trained_past_is_not(tmp_path: Path) -> None:
    steps = "".join(f"step {i} loss {2.0 - i / 100:.3f}\n" for i in range(40))
    text = "KeyError: 'optional_metric'\n" + steps
    assert _analyze(tmp_path, text) == (None, 0.0)


@pytest.mark.parametrize(
    "line",
    [
        "libfabric:4412:1714550400::verbs:core:vrb_poll_cq():512<warn> TX error, rc: LINK_DOWN",
        "rx_symbol_errors: 88",
    ],
)
def test_link_words_of_other_fabrics_are_the_network(tmp_path: Path, line: str) -> None:
    assert _analyze(tmp_path, line + "\n")[0] is Category.NETWORK_HARDWARE


def test_an_accelerator_heartbeat_lost_is_the_device(tmp_path: Path) -> None:
    text = "neuron-rt: device 2 heartbeat lost, resetting device\n"
    assert _analyze(tmp_path, text)[0] is Category.GPU_HARDWARE


def test_a_kubernetes_warning_event_is_evidence_a_library_warning_is_not() -> None:
    assert is_failure_text(
        "  Warning  BackOff  40s (x7 over 3m)  kubelet  Back-off restarting failed container"
    )
    assert not is_failure_text("Warning: failed to import optional module apex, using native")


def test_a_bare_eviction_whose_message_says_local_disk_is_storage(tmp_path: Path) -> None:
    text = (
        "Status:    Failed\n"
        "Reason:    Evicted\n"
        "Message:   The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
        "available: 812Mi.\n"
    )
    # (the pod over its own limit is the job's: test_attr_batch48_mechanisms)
    assert _analyze(tmp_path, text)[0] is Category.STORAGE
