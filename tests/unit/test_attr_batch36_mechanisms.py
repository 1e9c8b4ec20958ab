"""Mechanisms read after batch36/37's first sight: each a family of messages (other tools' and
versions' wordings of the same failure) with healthy counter-cases, never one log's lines (the
batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import assert_healthy, assert_mechanism, verdict_of

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
}

_HEALTHY: dict[str, str] = {
    # a launcher reporting the capacity it found is no failure
    "capacity_reported": (
        "2024-03-01 10:00:01 startnode INFO gpu-a100-0002: host capacity check passed, "
        "launching instance\n"
        "2024-03-01 10:02:11 startnode INFO gpu-a100-0002: instance RUNNING\n"
    ),
}


@pytest.mark.parametrize("name", sorted(_FAILURES))
def test_failure_families(tmp_path: Path, name: str) -> None:
    assert_mechanism(tmp_path, name, _FAILURES[name])


@pytest.mark.parametrize("name", sorted(_HEALTHY))
def test_healthy_counter_cases(tmp_path: Path, name: str) -> None:
    assert_healthy(tmp_path, name, _HEALTHY[name])


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
