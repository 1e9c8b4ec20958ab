"""Mechanisms batch05 taught, each tested on lines in other shapes than the batch's (other
tools, drivers and wordings of the same mechanism), and on the healthy output of the same
tools, which must stay "no failure".

Cluster operations: a node rejected for a configuration mismatch, a node name the scheduler
cannot resolve, an administrator's reboot, a cloud node never provisioned (the "node failure"
it causes is the scheduler's), a coordinator the tasks cannot register with. Part health:
InfiniBand port error counters, a fabric with no active port, Ethernet CRC errors, a power
supply failed or no longer redundant (SEL, iDRAC, iLO, inventories), accelerators a node has
but no longer offers. A task the kernel reported blocked is a hang, on storage when its trace
waits in I/O.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from log_verdict import verdict_of as _verdict

from trainmedic.core.model import Category, Kind

FAILURES: dict[str, tuple[str, Category]] = {
    "slurmctld_low_memory_registration": (
        "[2024-03-01T10:00:00.123] error: Node gpu-a12 has low real_memory size "
        "(191000 < 256000)\n"
        "[2024-03-01T10:00:00.123] error: _slurm_rpc_node_registration node=gpu-a12: "
        "Invalid argument\n",
        Category.SCHEDULER,
    ),
    "scontrol_reason_low_realmemory": (
        "NodeName=gpu9 Arch=x86_64 CoresPerSocket=32\n"
        "   State=IDLE+DRAIN ThreadsPerCore=2\n"
        "   Reason=Low RealMemory [slurm@2024-05-02T10:11:12]\n",
        Category.SCHEDULER,
    ),
    "launch_failure_on_unresolvable_node": (
        "srun: error: Task launch for 88.0 failed on node gpu-17: "
        "Communication connection failure\n"
        "srun: error: Application launch failed: Communication connection failure\n"
        'slurmd: error: Unable to resolve "gpu-17": Unknown host\n',
        Category.SCHEDULER,
    ),
    "scontrol_reboot_requested": (
        "NodeName=gpu07 Arch=x86_64\n"
        "   State=DOWN+DRAIN+REBOOT_ISSUED ThreadsPerCore=2\n"
        "   Reason=firmware update : reboot requested [root@2024-01-01T00:00:00]\n",
        Category.SCHEDULER,
    ),
    "power_saved_node_not_resumed": (
        "srun: error: Node failure on g1-compute-0-3\n"
        "slurmctld: error: node g1-compute-0-3 not resumed by ResumeTimeout(300) - marking down "
        "and power_save\n",
        Category.SCHEDULER,
    ),
    "gcp_capacity_exhausted": (
        "ERROR: (gcloud.compute.instances.create) Could not fetch resource:\n"
        " - ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'projects/p/zones/us-central1-a' does not have "
        "enough resources available to fulfill the request.\n",
        Category.SCHEDULER,
    ),
    "jax_cannot_connect_to_coordinator": (
        "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: Failed to connect to coordination "
        "service. The first attempt failed at 2025-01-01T00:00:00Z.\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "tf_register_task_deadline": (
        "tensorflow.python.framework.errors_impl.DeadlineExceededError: Deadline Exceeded\n"
        "Additional GRPC error information: RPC: /tensorflow.CoordinationService/RegisterTask\n",
        Category.SYSTEM_SOFTWARE,
    ),
    "perfquery_counters": (
        "# Port counters: Lid 12 port 1 (CapMask: 0x5A00)\n"
        "PortSelect:......................1\n"
        "SymbolErrorCounter:..............65535\n"
        "LinkErrorRecoveryCounter:........255\n"
        "LinkDownedCounter:...............14\n",
        Category.NETWORK_HARDWARE,
    ),
    "ibdiagnet_counter_warning": (
        "-W- lid=0x0012 guid=0x0c42a10300a1b2c3 dev=54000 Port=1 Performance Counter: "
        "symbol_error_counter=271 (threshold=1)\n",
        Category.NETWORK_HARDWARE,
    ),
    "psm2_cannot_open_hfi": (
        "cn04.3311PSM2 can't open hfi unit: -1 (err=23)\n"
        "cn04.3311Error returned from psm2_ep_open\n",
        Category.NETWORK_HARDWARE,
    ),
    "mvapich_no_active_port": (
        "[cn12:mpi_rank_0][rdma_find_active_port] Unable to find active port\n",
        Category.NETWORK_HARDWARE,
    ),
    "ethtool_crc_counter": (
        "NIC statistics:\n     rx_packets: 88231923\n     rx_crc_errors_phy: 4412\n",
        Category.NETWORK_HARDWARE,
    ),
    "idrac_psu_no_input": (
        "2024-02-02T10:00:00-0600 PSU0003: Power supply 2 is not receiving input power.\n"
        "2024-02-02T10:00:01-0600 PSU0302: The power supplies are not redundant.\n",
        Category.NODE_HARDWARE,
    ),
    "ilo_iml_psu_failure": (
        "Critical  02/02/2024 10:00  Power Supply Failure (Bay 2, Capacity: 1600 Watts)\n",
        Category.NODE_HARDWARE,
    ),
    "sel_ps_redundancy_sensor": (
        "  5a | 03/12/2024 | 10:00:01 | PS Redundancy #0x74 | Redundancy Lost | Asserted\n",
        Category.NODE_HARDWARE,
    ),
    "omreport_psu_critical": (
        "Power Supplies Information\n\n"
        "Index                                    : 1\n"
        "Status                                   : Critical\n"
        "Location                                 : PS2 Status\n",
        Category.NODE_HARDWARE,
    ),
    "kubectl_yaml_gpu_allocatable_low": (
        "status:\n"
        "  allocatable:\n"
        '    cpu: "96"\n'
        '    nvidia.com/gpu: "7"\n'
        "  capacity:\n"
        '    cpu: "96"\n'
        '    nvidia.com/gpu: "8"\n',
        Category.GPU_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_mechanism_in_another_shape(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis


def test_coordinator_guess_stays_below_the_stop_threshold(tmp_path: Path) -> None:
    text, _ = FAILURES["tf_register_task_deadline"]
    assert _verdict(tmp_path, text).confidence < 0.5


def test_node_failure_without_provisioning_stays_the_node(tmp_path: Path) -> None:
    verdict = _verdict(tmp_path, "srun: error: Node failure on gpu-203\n")
    assert verdict.category is Category.NODE_HARDWARE


def test_hung_task_in_nfs_wait_is_a_storage_hang(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path,
        "[8123.41] INFO: task python:4411 blocked for more than 122 seconds.\n"
        "[8123.41]       Tainted: P           OE     5.15.0-91-generic\n"
        "[8123.41] Call Trace:\n"
        "[8123.41]  <TASK>\n"
        "[8123.41]  __schedule+0x2e3/0x740\n"
        "[8123.41]  schedule+0x4e/0xb0\n"
        "[8123.41]  rpc_wait_bit_killable+0x24/0xb0 [sunrpc]\n"
        "[8123.41]  __wait_on_bit+0x33/0xa0\n"
        "[8123.41]  nfs_wait_on_request+0x2c/0x40 [nfs]\n",
    )
    assert verdict.failure and verdict.kind is Kind.HANG
    assert verdict.category is Category.STORAGE and verdict.confidence < 0.5
    assert "blocked" in verdict.basis


def test_hung_task_elsewhere_is_a_hang_of_unknown_cause(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path,
        "INFO: task pt_main_thread:5123 blocked for more than 241 seconds.\n"
        "Call Trace:\n"
        " __schedule+0x2e3/0x740\n"
        " futex_wait_queue_me+0xc4/0x120\n",
    )
    assert verdict.failure and verdict.kind is Kind.HANG
    assert verdict.category is Category.UNKNOWN


HEALTHY: dict[str, str] = {
    "perfquery_all_zero": (
        "# Port counters: Lid 12 port 1 (CapMask: 0x5A00)\n"
        "SymbolErrorCounter:..............0\n"
        "LinkErrorRecoveryCounter:........0\n"
        "LinkDownedCounter:...............0\n"
        "PortXmitWait:....................88123\n"
    ),
    "ethtool_clean": "NIC statistics:\n     rx_packets: 88231923\n     rx_crc_errors: 0\n",
    "hpasmcli_ok": (
        "hpasmcli> SHOW POWERSUPPLY\nPower supply #1\n\tPresent  : Yes\n\tRedundant: Yes\n"
        "\tCondition: Ok\n\tHotplug  : Supported\n\tPower    : 135 Watts\n"
    ),
    "sel_psu_recovered": (
        "  3e | 03/12/2024 | 10:05:01 | Power Unit #0x44 | Redundancy Lost | Deasserted\n"
    ),
    "kubectl_describe_all_allocatable": (
        "Capacity:\n  cpu:                128\n  nvidia.com/gpu:     8\n"
        "Allocatable:\n  cpu:                128\n  nvidia.com/gpu:     8\n"
    ),
    "slurm_node_back": (
        "[2024-01-01T00:00:00] Node gpu3 now responding\nsrun: job 6 has been allocated resources\n"
    ),
    "jax_connected": (
        "I0101 coordination_service_agent.cc:400] Coordination agent has successfully connected.\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_output_of_the_same_tools_is_no_failure(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, verdict.basis


@pytest.mark.parametrize(
    "line",
    [
        "SymbolErrorCounter:..............0",
        "PortRcvErrors:...................0",
        "  1b | 03/12/2024 | 10:05:01 | Power Unit #0x44 | Redundancy Lost | Deasserted",
    ],
)
def test_zero_counters_and_recovered_records_are_no_failure_text(line: str) -> None:
    from trainmedic.core.logparse.evidence import is_failure_text

    assert not is_failure_text(line)


SIBLINGS: dict[str, tuple[str, Category]] = {
    "kubernetes_drain": (
        "  Normal  NodeNotSchedulable  3m  kubelet  Node gpu-node-4 status is now: "
        "NodeNotSchedulable\n",
        Category.SCHEDULER,
    ),
    "cloud_host_maintenance": (
        "Instance was terminated for host maintenance\n",
        Category.SCHEDULER,
    ),
    "opensm_link_integrity_trap": (
        "Mar 01 10:00:00 sm01 OpenSM[2211]: Reporting Generic Notice type:3 num:130 "
        "(Excessive Buffer Overrun threshold reached) from LID:44 GUID:0x0002c9030012abcd\n",
        Category.NETWORK_HARDWARE,
    ),
    "slingshot_link_down": (
        "[ 8812.1] cxi_core 0000:c1:00.0: cxi1[hsn1] CXI_EVENT_LINK_DOWN\n",
        Category.NETWORK_HARDWARE,
    ),
    "dcgm_health_failure": (
        "+---------------------------+\n| Overall Health | Failure |\n",
        Category.GPU_HARDWARE,
    ),
    "squeue_qos_reason": (
        "  4412  gpu  train  alice PD  0:00  4 (QOSMaxGRESPerUser)\n",
        Category.SCHEDULER,
    ),
    "device_plugin_xid": (
        "I0101 00:00:00.000 1 health.go:180] XidCriticalError: Xid=48 on Device=GPU-9f, "
        "uuid=GPU-9f, the device will go unhealthy.\n",
        Category.GPU_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(SIBLINGS))
def test_sibling_wordings(tmp_path: Path, name: str) -> None:
    text, category = SIBLINGS[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis


EVIDENCE_ONLY: dict[str, tuple[str, Category]] = {
    "subnet_manager_words": (
        "ERROR: subnet manager reports link integrity errors on switch port 7\n",
        Category.NETWORK_HARDWARE,
    ),
    "scheduler_config_words": (
        "error: job launch failed: node g17 rejected, check slurm.conf\n",
        Category.SCHEDULER,
    ),
    "server_part_words": (
        "FAILED: chassis fan 3 failed, system board temperature rising\n",
        Category.NODE_HARDWARE,
    ),
}


@pytest.mark.parametrize("name", sorted(EVIDENCE_ONLY))
def test_general_cues_name_unknown_lines(tmp_path: Path, name: str) -> None:
    text, category = EVIDENCE_ONLY[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure and verdict.category is category, verdict.basis
    assert verdict.confidence <= 0.45 and "evidence:" in verdict.basis


def test_uncorrectable_is_failure_text() -> None:
    from trainmedic.core.logparse.evidence import is_failure_text

    assert is_failure_text("Memory #0x87 Uncorrectable ECC on DIMM B2")
    assert is_failure_text("unrecoverable state of the accelerator")


def test_soft_lockup_alone_is_a_hang_not_no_failure(tmp_path: Path) -> None:
    verdict = _verdict(
        tmp_path, "watchdog: BUG: soft lockup - CPU#38 stuck for 23s! [python:88123]\n"
    )
    assert verdict.failure and verdict.kind is Kind.HANG and verdict.confidence < 0.5
