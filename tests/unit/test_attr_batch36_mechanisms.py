"""Mechanisms read after batch36/37's first sight: each a family of messages (other tools' and
versions' wordings of the same failure) with healthy counter-cases, never one log's lines (the
batches' own logs are scored by test_attr_realworld's floors)."""

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
    # a cloud provider without capacity for the instance shape: the scheduler's provisioning
    "oci_out_of_host_capacity": (
        "2024-03-01 10:00:01 startnode ERROR gpu-a100-0002: problem launching instance: "
        "{'code': 'InternalError', 'message': 'Out of host capacity.', 'status': 500}\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "oci_sdk_out_of_host_capacity": (
        "oci.exceptions.ServiceError: {'target_service': 'compute', 'status': 500, "
        "'code': 'InternalError', 'opc-request-id': 'ABC', "
        "'message': 'Out of host capacity.', 'operation_name': 'launch_instance'}\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "alibaba_no_stock": (
        "Error: [ERROR] terraform-provider-alicloud/alicloud/resource_alicloud_instance.go:  "
        "Code: OperationDenied.NoStock Message: The requested resource is sold out in the "
        "specified zone; try other types of resources or other regions and zones.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "lambda_insufficient_capacity": (
        'lambda_cloud_api error: {"error": {"code": "instance-operations/launch/'
        'insufficient-capacity", "message": "Not enough capacity to fulfill launch '
        'request.", "suggestion": "Choose an instance type with more availability."}}\n',
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # hosts of one job on different NCCL network plugins: a stack on part of the nodes
    "nccl219_plugin_on_one_host": (
        "gpu-a:1201:1290 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v7 (v7)\n"
        "gpu-b:3301:3340 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. "
        "Using internal network plugin.\n"
        "gpu-a:1201:1290 [0] NCCL INFO Using network IBext\n"
        "gpu-b:3301:3340 [0] NCCL INFO Using network IB\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "older_nccl_ofi_on_one_host": (
        "ip-10-0-1-5:412:412 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.7.4-aws\n"
        "ip-10-0-1-9:877:877 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), "
        "using internal implementation\n"
        "ip-10-0-1-9:877:877 [0] NCCL INFO NET/Socket : Using [0]ens5:10.0.1.9<0>\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    "mpirun_prefixed_networks": (
        "[1]node12:5521:5600 [0] NCCL INFO Using network IB\n"
        "[0]node11:6630:6702 [0] NCCL INFO Using network IBext\n",
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
    ),
    # a prolog/epilog that failed with the container runtime's plug-in failing in it: the
    # runtime's configuration or version on the node, not the scheduler's script
    "epilog_pyxis_cleanup": (
        "slurmd[771]: error: [job 120] epilog failed status=1:0\n"
        "spank-epilog[902]: error: pyxis: couldn't get list of existing containers\n"
        "spank-epilog[902]: error: pyxis: couldn't cleanup pyxis containers for job 120\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "prolog_enroot_mount": (
        "slurmstepd: error: prolog failed: rc:1 output:\n"
        "slurmstepd: error: pyxis:     enroot-mount: failed to mount: /run/enroot/u1000: "
        "Permission denied\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "prolog_apptainer_setup": (
        "salloc: Prolog failure on node gpu-a07\n"
        "FATAL:   container creation failed: mount /proc/self/fd/3->/var/apptainer/mnt/session/"
        "rootfs error: while mounting image: failed to find loop device\n",
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    # ... a prolog that failed alone stays the scheduler's
    "prolog_alone": (
        "slurmd[771]: error: [job 121] prolog failed status=1:0\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    "pyxis_importing": (
        "slurmstepd: pyxis: importing docker image ...\n"
        "slurmstepd: pyxis: creating container filesystem ...\n"
        "slurmstepd: pyxis: starting container ...\n"
    ),
    # every host on NCCL's own transports, or every host on the plugin: one stack
    "all_hosts_internal": (
        "gpu-a:1201:1290 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. "
        "Using internal network plugin.\n"
        "gpu-b:3301:3340 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. "
        "Using internal network plugin.\n"
        "gpu-a:1201:1290 [0] NCCL INFO Using network IB\n"
        "gpu-b:3301:3340 [0] NCCL INFO Using network IB\n"
    ),
    "all_hosts_on_the_plugin": (
        "gpu-a:1201:1290 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/"
        "libnccl-net.so\n"
        "gpu-b:3301:3340 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/"
        "libnccl-net.so\n"
        "gpu-a:1201:1290 [0] NCCL INFO Using network IBext\n"
        "gpu-b:3301:3340 [0] NCCL INFO Using network IBext\n"
    ),
    # a plugin that loaded on one host and fell back there: that host said both
    "one_host_fell_back": (
        "gpu-a:1201:1290 [0] NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v7 (v7)\n"
        "gpu-a:1201:1290 [0] NCCL INFO Using network IB\n"
        "gpu-b:3301:3340 [0] NCCL INFO Using network IB\n"
    ),
    # sides differ but the job connected and trained: no stall to explain
    "mixed_but_trained": (
        "gpu-a:1201:1290 [0] NCCL INFO Using network IBext\n"
        "gpu-b:3301:3340 [0] NCCL INFO Using network IB\n"
        "gpu-a:1201:1290 [0] NCCL INFO Connected all rings\n"
        "gpu-b:3301:3340 [0] NCCL INFO Connected all rings\n"
        "step 10 | loss 2.31\nstep 20 | loss 2.12\nstep 30 | loss 2.05\n"
    ),
    # a launcher reporting the capacity it found is no failure
    "capacity_reported": (
        "2024-03-01 10:00:01 startnode INFO gpu-a100-0002: host capacity check passed, "
        "launching instance\n"
        "2024-03-01 10:02:11 startnode INFO gpu-a100-0002: instance RUNNING\n"
    ),
}


test_failure_families = family_test(_FAILURES)


test_healthy_counter_cases = healthy_test(_HEALTHY)


_CAPACITY = (
    "oci_out_of_host_capacity",
    "oci_sdk_out_of_host_capacity",
    "alibaba_no_stock",
    "lambda_insufficient_capacity",
)


@pytest.mark.parametrize("name", _CAPACITY)
def test_capacity_refusals_are_the_catalogues(tmp_path: Path, name: str) -> None:
    """Named by the provisioning entry, not a guess of the learned layer (0.3)."""
    verdict = verdict_of(tmp_path, _FAILURES[name][0])
    assert verdict.root_cause is not None
    assert verdict.root_cause.signature == "sched.node_provisioning", (name, verdict)
