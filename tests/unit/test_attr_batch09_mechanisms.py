"""Mechanisms batch09 taught, each tested on lines in other tools' and stacks' wordings than
the batch's, and on the healthy output of the same tools, which must stay "no failure".

The cloud's own notice that it takes a spot or preemptible instance back is the scheduler's;
an NVIDIA kernel module that never bound the GPUs is the host's driver setup; a GPU whose
driver says it needs a reset explains the CUDA errors beside it; a management controller's
corrected-error logging limit stands for the recurring errors of a part; a TPU runtime that
fails to set the chips up is the runtime's state; a bare "step value" series that turns
non-finite for good is a diverged loss; a traceback an excerpt cut inside a standard-library
file-system call (header cut off too, or not) is the file system refusing the call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "aws_spot_termination_notice": (
        "2024-03-02T10:00:01Z worker-3 agent: Spot Instance Termination Notice received\n"
        "2024-03-02T10:02:00Z worker-3 systemd[1]: Stopping trainer.service...\n",
        Category.SCHEDULER,
    ),
    "azure_scheduled_preempt_event": (
        '{"DocumentIncarnation":3,"Events":[{"EventId":"B7","EventType":"Preempt",'
        '"ResourceType":"VirtualMachine","Resources":["gpu-vm-2"],"EventStatus":"Scheduled"}]}\n',
        Category.SCHEDULER,
    ),
    "nvidia_release_does_not_support_the_card": (
        "[    9.114201] NVRM: The NVIDIA GPU 0000:01:00.0 (PCI ID: 10de:1db4) installed in "
        "this system is\n"
        "[    9.114203] NVRM: not supported by the 390.157 NVIDIA driver release.\n"
        "[    9.114305] NVRM: None of the NVIDIA devices were initialized.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "nvidia_probe_not_called": (
        "[   12.004411] NVRM: The NVIDIA probe routine was not called for 1 device(s).\n"
        "[   12.004420] NVRM: vfio-pci was loaded and obtained ownership of the NVIDIA "
        "device(s).\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "cuda_busy_on_a_gpu_that_needs_reset": (
        "Traceback (most recent call last):\n"
        '  File "bench.py", line 4, in <module>\n'
        "    torch.zeros(1, device='cuda:3')\n"
        "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable\n"
        "Mar 02 10:00:01 gpu-7 nv-hostengine: Unable to determine the device handle for "
        "GPU0000:41:00.0: GPU requires reset\n",
        Category.GPU_HARDWARE,
    ),
    "ipmitool_ecc_logging_limit": (
        "  4f | 03/12/2024 | 10:00:01 | Memory #0x87 | Correctable ECC logging limit reached "
        "| Asserted\n",
        Category.NODE_HARDWARE,
    ),
    "xcc_memory_logging_limit": (
        "2024-03-12 10:00:01 Warning Memory Logging Limit Reached for DIMM 4 on Subsystem "
        "System Memory.\n",
        Category.NODE_HARDWARE,
    ),
    "tpu_system_init_failed": (
        "RuntimeError: Failed to initialize TPU system: UNAVAILABLE: failed to connect to all "
        "addresses\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "tf_configure_tpu_op": (
        "tensorflow.python.framework.errors_impl.InternalError: topology mismatch\n"
        "\t [[{{node configure_distributed_tpu/_0}}]]\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "tab_separated_series_turns_inf": (
        "100\t3.21\n200\t3.02\n300\t2.95\n400\t2.91\n500\tinf\n600\tinf\n",
        Category.APPLICATION,
    ),
    "headless_traceback_in_shutil": (
        '  File "train.py", line 88, in save\n'
        "    shutil.copyfile(tmp, final)\n"
        '  File "/usr/lib/python3.10/shutil.py", line 256, in copyfile\n'
        "    with open(src, 'rb') as fsrc:\n",
        Category.STORAGE,
    ),
    "cut_traceback_in_pathlib": (
        "Traceback (most recent call last):\n"
        '  File "ckpt.py", line 12, in <module>\n'
        "    Path(out).mkdir(parents=True, exist_ok=True)\n"
        '  File "/usr/lib/python3.11/pathlib.py", line 1116, in mkdir\n'
        "    os.mkdir(self, mode)\n",
        Category.STORAGE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_is_named(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is not Kind.NONE, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


HEALTHY: dict[str, str] = {
    "instance_action_none": '{"action": "none"}\nstep 100 loss 2.31\n',
    "nvidia_module_loads": (
        "[    5.321110] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 "
        "18:56:32 UTC 2023\n"
        "[    5.402281] nvidia-nvlink: Nvlink Core is being initialized, major device number 239\n"
    ),
    "tpu_system_initialised": (
        "INFO:tensorflow:Initializing the TPU system: grpc://10.0.0.2:8470\n"
        "INFO:tensorflow:Finished initializing TPU system.\n"
    ),
    "bmc_memory_presence": (
        "  1a | 03/12/2024 | 10:00:01 | Memory #0x87 | Presence detected | Asserted\n"
    ),
    "bare_series_healthy": "100 3.21\n200 3.02\n300 2.95\n400 2.90\n500 2.88\n",
    "table_with_one_missing_cell": "0 1.5\n1 2.3\n2 NaN\n3 2.9\n4 3.1\n",
    "bandwidth_table": (
        "1024 0.52\n2048 1.01\n4096 2.05\n65536 30.2\n1048576 150.2\n8388608 180.9\n"
    ),
    "one_nan_at_the_start_only": "10 nan\n20 nan\n",
    "headless_traceback_that_ends_in_a_handled_frame": (
        '  File "train.py", line 88, in save\n'
        "    shutil.copyfile(tmp, final)\n"
        "saved checkpoint to /ckpt/step_100\n"
        "step 101 loss 2.30\n"
    ),
    # settings echoed by a manifest or a config dump: a key named after a failure, a number
    "manifest_grace_period": (
        "spec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: trainer\n"
    ),
    "probe_thresholds": "    failureThreshold: 3\n    timeoutSeconds: 5\n    killAfter=10s\n",
    # a command someone typed (shell prompt, Python REPL) is input; its output speaks for it
    "typed_metadata_query": (
        '$ curl "http://metadata.google.internal/computeMetadata/v1/instance/preempted" '
        '-H "Metadata-Flavor: Google"\nFALSE\n'
    ),
    "typed_repl_call": ">>> trainer.fit(model, ckpt_path='last')  # resume after the preemption\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_stays_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert verdict.kind is Kind.NONE, (name, verdict.category, verdict.basis)
