"""Mechanisms read after batch33..batch35's first sight: each a family of messages (other
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
from trainmedic.offline.analyze import analyze_path

_STEPS = "".join(f"step {i} | loss {2.0 - i / 100:.3f}\n" for i in range(1, 6))

_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # a kubelet refusing at admission a pod the scheduler placed on its node: the devices or
    # resources the scheduler counted as free were not there (its accounting was stale)
    "kubelet_device_count_describe": (
        "Status:         Failed\n"
        "Reason:         UnexpectedAdmissionError\n"
        "Message:        Pod Allocate failed due to requested number of devices unavailable "
        "for amd.com/gpu. Requested: 2, Available: 1, which is unexpected\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "kubelet_device_count_event": (
        "Events:\n"
        "  Type     Reason                    Age   From     Message\n"
        "  Warning  UnexpectedAdmissionError  40s   kubelet  Allocate failed due to requested "
        "number of devices unavailable for volcano.sh/vgpu-number. Requested: 1, Available: 0, "
        "which is unexpected\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "kubelet_predicate_out_of_gpu": (
        "Status:         Failed\n"
        "Reason:         OutOfnvidia.com/gpu\n"
        "Message:        Pod Node didn't have enough resource: nvidia.com/gpu, requested: 1, "
        "used: 8, capacity: 8\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "kubelet_predicate_pod_list": (
        "NAME               READY   STATUS     RESTARTS   AGE\n"
        "trainer-worker-0   1/1     Running    0          2m\n"
        "trainer-worker-1   0/1     OutOfcpu   0          2m\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "kubelet_predicate_affinity": (
        "Status:         Failed\n"
        "Reason:         NodeAffinity\n"
        "Message:        Pod Predicate NodeAffinity failed\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "gpu_extender_mismatch": (
        "E0414 16:15:05.112233   2231 server.go:301] Nvidia node mismatch for pod "
        "trainer-0(trainer-0), pick up:/dev/nvidia3  predicate: /dev/nvidia1, which is "
        "unexpected.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a GPU peer-memory client meeting a freed or refused GPU mapping: the GPU driver's known
    # defect in GPUDirect RDMA's free path (a guess: the driver stack, not the GPU or the NIC)
    "peermem_invalid_context": (
        "[1974787.691563] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid "
        "context, skipping further processing\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "nv_peer_mem_invalid_page_table": (
        "Mar  3 10:11:12 gpu-17 kernel: nv_mem nv_get_p2p_free_callback:144 "
        "nv_get_p2p_free_callback -- invalid page_table\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "gdrdrv_pin_refused": (
        "[61024.799569] gdrdrv:invoking nvidia_p2p_get_pages(va=0x2305ba0000 len=4194304 "
        "p2p_tok=0 va_tok=0)\n"
        "[61024.799746] gdrdrv:nvidia_p2p_get_pages(va=2305ba0000 len=4194304 p2p_token=0 "
        "va_space=0) failed [ret = -22]\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # the same run failing with one version of a platform component and passing with another:
    # the version is the variable the log shows (a regression in the stack)
    "version_table_markdown": (
        "| torch==2.3.1 | FAIL: RuntimeError in backward |\n| torch==2.2.2 | PASS |\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "version_arrows": (
        "jaxlib 0.4.31 -> segfault at step 0\njaxlib 0.4.30 -> ok\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "version_with_hang": (
        "with deepspeed==0.14.2: hangs in the first allreduce\nwith deepspeed==0.14.0: works\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "version_rccl_timeout": (
        "RCCL 2.20.5: timed out after 600 s\n"
        "RCCL 2.18.3: completed\n"
        "[rank0]: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 "
        "milliseconds before timing out.\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
}

_HEALTHY: dict[str, str] = {
    "pods_running": "NAME               READY   STATUS    RESTARTS   AGE\n"
    "trainer-worker-0   1/1     Running   0          2m\n"
    "trainer-worker-1   1/1     Running   0          2m\n" + _STEPS,
    "pod_scheduled_and_started": "Events:\n"
    "  Normal  Scheduled  20s  default-scheduler  Successfully assigned default/trainer-0 to "
    "gpu-3\n"
    "  Normal  Started    15s  kubelet            Started container trainer\n" + _STEPS,
    # a peer-memory client pinning GPU memory, as it does at every registration
    "gdrdrv_pinning": "[61024.799569] gdrdrv:invoking nvidia_p2p_get_pages(va=0x2305ba0000 "
    "len=4194304 p2p_tok=0 va_tok=0)\n" + _STEPS,
    # versions that all pass, a pip listing: no failure
    "version_table_all_pass": "NCCL 2.21.5: passed\nNCCL 2.23.4: passed\n" + _STEPS,
    "pip_freeze": "torch==2.3.1\njaxlib==0.4.31\ndeepspeed==0.14.2\n" + _STEPS,
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


def test_a_device_plugin_that_failed_is_not_the_scheduler(tmp_path: Path) -> None:
    """Admission refused because the device plug-in's RPC failed (it crashed, a GPU was lost)
    is the plug-in's or the device's, not stale scheduler accounting."""
    for message in (
        "Allocate failed due to rpc error: code = Unavailable desc = error reading from "
        "server: EOF, which is unexpected",
        "Pod Allocate failed due to device plugin GetPreferredAllocation rpc failed with err: "
        "rpc error: code = Unknown desc = Unable to retrieve list of available devices: error "
        "creating nvml.Device 3: nvml: GPU is lost, which is unexpected",
    ):
        verdict = verdict_of(
            tmp_path, f"  Warning  UnexpectedAdmissionError  10s  kubelet  {message}\n"
        )
        assert verdict.failure
        assert verdict.category is not Category.SCHEDULER, verdict


def test_a_peer_memory_message_stays_a_guess(tmp_path: Path) -> None:
    """Its maintainers call the invalid-context line a mitigation: restart, never stop."""
    text, _, _ = _FAILURES["peermem_invalid_context"]
    verdict = verdict_of(tmp_path, text)
    assert verdict.confidence < 0.5, verdict


def test_versions_of_two_components_are_no_regression(tmp_path: Path) -> None:
    """One component failing and another passing compares nothing: not the version rule."""
    verdict = verdict_of(tmp_path, "NCCL 2.30.7: killed after 180s\nCUDA 12.4: passed\n")
    assert "mechanism (version)" not in verdict.basis, verdict


def test_one_version_both_failing_and_passing_is_no_regression(tmp_path: Path) -> None:
    """A flaky version (failed once, passed once) next to a passing one shows no version."""
    verdict = verdict_of(
        tmp_path, "torch 2.3.1: failed\ntorch 2.3.1: passed\ntorch 2.2.2: passed\n"
    )
    assert "mechanism (version)" not in verdict.basis, verdict


def test_a_version_regression_stays_a_guess(tmp_path: Path) -> None:
    text, _, _ = _FAILURES["version_arrows"]
    assert verdict_of(tmp_path, text).confidence < 0.5


def test_the_version_rule_is_a_rule_layer(tmp_path: Path) -> None:
    """It reads the line sample with the learned layer off too (crossval's rules alone)."""
    text, category, _ = _FAILURES["version_arrows"]
    path = tmp_path / "job.log"
    path.write_text(text)
    verdict = analyze_path(path, learned=False).verdict
    assert verdict.category is category, verdict
    assert "learned" not in verdict.basis
