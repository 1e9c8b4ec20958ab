"""Mechanisms batch11 taught, each tested on lines in other tools' and stacks' wordings than
the batch's, and on healthy lines of the same kind, which must stay as they were.

A part that overheated is the server's (a state word, "Overheated", from a BMC, a service
processor or a thermal daemon); a tool or monitor that says the CPUs throttled because they
ran hot names a slow node (cooling); a NIC driver's firmware command refused on a resource
limit or a malformed request is the driver's configuration, not the card; ROCm's GPU memory
access fault is read in its older wording (no agent handle) as in its newer one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "bmc_sensor_overheated": (
        "ipmi: sensor CPU2 Temp: Overheated, system powered off by the BMC\n",
        Category.NODE_HARDWARE,
    ),
    "service_processor_state_overheating": (
        "sp: thermal loop state -> OVERHEATING, requesting power down of the host\n",
        Category.NODE_HARDWARE,
    ),
    "gpu_overheated_stays_the_gpu": (
        "nvml: GPU 2 overheated, clocks reduced to protect it\n",
        Category.GPU_HARDWARE,
    ),
    "monitor_says_processors_throttled": (
        "node-monitor: processors thermally throttled for 120 s on this host\n",
        Category.NODE_HARDWARE,
    ),
    "harness_says_cpu_throttled_hot": (
        "Warning: CPU 3 was throttled because of high temperature (97 C); timings are off\n",
        Category.NODE_HARDWARE,
    ),
    "mlx5_create_qp_bad_resource_state": (
        "[ 811.2] mlx5_core 0000:3b:00.0: mlx5_cmd_check:810:(pid 2241): CREATE_QP(0x500) "
        "op_mod(0x0) failed, status bad resource state(0x9), syndrome (0x1b2f41)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "mlx5_alloc_pd_limits": (
        "mlx5_core 0000:af:00.1: mlx5_cmd_out_err:838:(pid 911): mlx5_cmd_check ALLOC_PD(0x800) "
        "op_mod(0x0) failed, status limits exceeded(0x8), syndrome (0x2a1f3c)\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "rocm_old_memory_access_fault": (
        "step 200 loss 2.31\n"
        "Memory access fault by GPU node-3 on address 0x7f00a000. Reason: Page not present or "
        "supervisor privilege.\n",
        # Real threads about this fault (r11003, r11004, r15019, r16008) all concluded the
        # ROCm stack (an unsupported GPU target, a runtime bug): its likely category.
        Category.SYSTEM_SOFTWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failure_is_named(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.kind is not Kind.NONE, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


def test_throttled_cpu_is_a_straggler(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "node-monitor: processors thermally throttled for 120 s\n")
    assert verdict.kind is Kind.STRAGGLER, verdict.basis


def test_a_firmware_command_the_card_failed_is_not_configuration(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path,
        "mlx5_core 0000:3b:00.0: mlx5_cmd_check:810:(pid 2241): CREATE_MKEY(0x200) op_mod(0x0) "
        "failed, status internal err(0x1), syndrome (0x6f2b1)\n",
    )
    assert verdict.category is not Category.SYSTEM_SOFTWARE, verdict.basis


HEALTHY = {
    "fan_boost_to_prevent_overheating": "thermald: enabling fan boost to prevent overheating\n",
    "overheat_protection_setting": "Overheat protection : enabled\n",
    "throttling_policy": "CPU throttling policy: thermal\n",
    "throttling_disabled": "cpu governor set to performance; thermal throttling disabled in BIOS\n",
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_stays_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert verdict.kind is Kind.NONE, (name, verdict.category, verdict.basis)


def test_a_controller_record_names_its_subsystem_by_message_id(tmp_path: Path) -> None:
    # (retraining the learned layer with batch11 moved the written reference record
    # hw_idrac_cpu0000 to the scheduler; the record's own id names the part)
    verdict = _verdict(
        tmp_path,
        "Severity: Critical\nMessage ID: MEM0001\nMessage: Multi-bit memory errors detected.\n",
    )
    assert verdict.category is Category.NODE_HARDWARE, verdict.basis
    quiet = _verdict(
        tmp_path, "Severity: Informational\nMessage ID: PSU0800\nMessage: PSU 1 is present.\n"
    )
    assert quiet.kind is Kind.NONE, quiet.basis
