"""Mechanisms read after batch42..batch43's first sight: each a family of messages (other
tools' and versions' wordings of the same failure) with healthy counter-cases, never one log's
lines (the batches' own logs are scored by test_attr_realworld's floors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.log_verdict import (
    family_test,
    healthy_test,
    verdict_of,
)

from trainmedic.core.logparse.evidence import is_failure_text
from trainmedic.core.model import Category, Kind


def _completion(status: str, local: str, remote: str) -> str:
    """NCCL's IB plug-in on a failed work completion, naming both GIDs (NCCL 2.19+)."""
    return (
        f"gpu-b07:4411:4590 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
        f"from peer 172.16.4.21<41822> with {status}, opcode 1, len 0, vendor err 129 (Send) "
        f"localGid {local} remoteGid {remote}\n"
    )


_FAILURES: dict[str, tuple[str, Category, Kind]] = {
    # `ray status`: a task waiting while every resource it asks for is free (in its placement
    # groups' reservation when it runs in one): the scheduler not placing it
    "ray_status_total_usage": (
        "======== Autoscaler status: 2024-06-01 10:00:00.000000 ========\n"
        "Resources\n"
        "---------------------------------------------------------------\n"
        "Total Usage:\n"
        " 4.0/96.0 CPU\n"
        " 1.0/8.0 GPU\n"
        " 0B/512.00GiB memory\n"
        " 0B/186.26GiB object_store_memory\n"
        "\n"
        "Total Constraints:\n"
        " (no request_resources() requests)\n"
        "Total Demands:\n"
        " {'GPU': 2.0, 'CPU': 1.0}: 1+ pending tasks/actors\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    "ray_status_placement_group_cpu": (
        "Usage:\n"
        " 2.0/16.0 CPU (2.0 used of 6.0 reserved in placement groups)\n"
        " 0.0/2.0 GPU\n"
        " 0.00/58.500 GiB memory\n"
        "\n"
        "Demands:\n"
        " {'CPU': 2.0}: 3+ pending tasks/actors (3+ using placement groups)\n",
        Category.SCHEDULER,
        Kind.HANG,
    ),
    # a managed Kubernetes refusing the pod spec at admission (GKE Autopilot's own policy)
    "autopilot_warden": (
        'Error from server (Forbidden): error when creating "raycluster.yaml": admission '
        'webhook "warden-validating.common-webhooks.networking.gke.io" denied the request: GKE '
        "Warden rejected the request because it violates one or more constraints.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "autopilot_not_allowed": (
        "2024-02-11T09:14:02Z ERROR controllers.RayCluster Failed to create worker Pod "
        '{"error": "pods \\"rc-worker-x7\\" is forbidden: hostPath volume /var/log/ray in '
        'container worker is not allowed in Autopilot"}\n',
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # a launcher's cloud refusing to provision the cluster in a region
    "skypilot_acquire_failed": (
        "I 05-14 11:02:30 cloud_vm_ray_backend.py:1410] Launching on AWS us-east-1 "
        "(us-east-1a)\n"
        "W 05-14 11:04:02 cloud_vm_ray_backend.py:1101] Failed to acquire resources in "
        "us-east-1a for {AWS(g5.48xlarge)}. Trying other locations (if any).\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    "azure_template_refused": (
        "Launching on Azure westeurope ()\n"
        "HttpResponseError: (InvalidTemplateDeployment) The template deployment "
        "'cluster-7f-head' is not valid according to the validation procedure. See inner "
        "errors for details.\n",
        Category.SCHEDULER,
        Kind.CRASH,
    ),
    # an Xid with MIG on: the GPU instance beside the address, read by the same table
    "xid_94_mig_instance": (
        "[81234.55] NVRM: Xid (PCI:0000:41:00 GPU-I:03): 94, pid=55120, name=python3, "
        "Contained: SM (0x1). RST: No, D-RST: No\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    "xid_48_mig_instance": (
        "kernel: NVRM: Xid (PCI:0000:c1:00 GPU-I:11): 48, pid=912, An uncorrectable double "
        "bit error (DBE) has been detected on GPU in the framebuffer\n",
        Category.GPU_HARDWARE,
        Kind.CRASH,
    ),
    # mlx5's health poll quoted without the driver's device prefix
    "mlx5_miss_count_bare": (
        "[Tue Mar  4 02:11:09 2025] poll_health:802:(pid 0): device's health compromised - "
        "reached miss count\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    "mlx5_fatal_error_bare": (
        "mlx5_health_check_fatal_sensors:76:(pid 0): Fatal error 2 detected\n"
        "poll_health:790:(pid 0): Fatal error 2 detected\n",
        Category.NETWORK_HARDWARE,
        Kind.CRASH,
    ),
    # retries run out between two link-local RoCE GIDs (fe80:: from a MAC): the GID index
    "retry_link_local_gids": (
        _completion("error 12", "fe80::1270:fdff:fe0c:41a0", "fe80::e42:a1ff:fe9f:3b1c"),
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
    "retry_link_local_gids_status": (
        _completion("status=12", "fe80::5eff:35ff:fe77:b2", "fe80::5eff:35ff:fe77:1c4"),
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
    ),
}

_HEALTHY: dict[str, str] = {
    # evaluation and benchmark summaries whose tally of bad outcomes came out zero
    "eval_zero_invalid": (
        "Accuracy: 0.812\nInvalid: 0.000\nLatency: 52.4 s\nOutput throughput: 1432.1 token/s\n"
    ),
    "eval_zero_invalid_answers": (
        "gsm8k | exact_match 0.771 | invalid answers: 0 | invalid_rate=0.0\n"
        "Timed out requests = 0.0 %\nAborted: 0\n"
    ),
    # a cluster full (the demand exceeds what is free): the autoscaler's queue, not a fault
    "ray_status_capacity_wait": (
        "Usage:\n 8.0/8.0 GPU\n 12.0/96.0 CPU\n 0B/512.00GiB memory\n\n"
        "Demands:\n {'GPU': 1.0}: 4+ pending tasks/actors\n"
    ),
    "ray_status_no_demands": (
        "Total Usage:\n 0.0/8.0 CPU\n 0B/20.09GiB memory\n\nTotal Demands:\n"
        " (no resource demands)\n"
    ),
    # a placement group's bundles must each fit on one node: the totals cannot tell
    "ray_status_pending_placement_group": (
        "Usage:\n 0.0/32.0 CPU\n 0.0/4.0 GPU\n\nDemands:\n"
        " {'GPU': 1.0, 'CPU': 4.0} * 4 (STRICT_PACK): 1+ pending placement groups\n"
    ),
    "autopilot_statement": (
        "GPUs are supported in Autopilot clusters running GKE version 1.29 and later.\n"
        "Created Autopilot cluster ml-train in us-central1\n"
    ),
    # Autopilot's mutating webhook adjusting a spec it admits
    "autopilot_defaulted_resources": (
        "Warning: autopilot-default-resources-mutator:Autopilot updated RayCluster "
        "default/rc: defaulted unspecified 'memory' resource for containers [ray-head] (see "
        "http://g.co/gke/autopilot-defaults).\n"
        "raycluster.ray.io/rc created\n"
    ),
    "launcher_up": (
        "I 02-27 08:18:29 cloud_vm_ray_backend.py:682] Launching on Azure eastus ()\n"
        "I 02-27 08:22:41 cloud_vm_ray_backend.py:1023] Successfully provisioned or found "
        "existing VM.\n"
    ),
}


test_mechanism_family = family_test(_FAILURES)


test_healthy_counter_case = healthy_test(_HEALTHY)


@pytest.mark.parametrize(
    "line",
    ["Invalid: 3", "Invalid: 0.125", "Aborted requests: 2", "Error: invalid argument: 0"],
)
def test_a_non_zero_tally_stays_evidence(line: str) -> None:
    """Only a zero clears a tally: some invalid outcomes, or an error about a value of 0, are
    still lines that say something went wrong."""
    assert is_failure_text(line)


@pytest.mark.parametrize(
    "name",
    ["ray_status_total_usage", "skypilot_acquire_failed", "retry_link_local_gids"],
)
def test_these_readings_stay_guesses(tmp_path: Path, name: str) -> None:
    """A snapshot taken as the task was submitted, a launcher that fails over to another
    region, a flaky link on a flat L2 fabric: each reads the same, so never above 0.5."""
    text, _, _ = _FAILURES[name]
    assert verdict_of(tmp_path, text).confidence < 0.5


@pytest.mark.parametrize(
    ("local", "remote"),
    [
        # InfiniBand: the subnet prefix and the port's GUID (no MAC inside)
        ("fe80::ec0d:9a03:a6:4f2c", "fe80::ec0d:9a03:a6:50e8"),
        # RoCE with routable IPv4-mapped GIDs
        ("::ffff:10.1.4.9", "::ffff:10.1.4.17"),
    ],
)
def test_retry_exceeded_on_other_gids_stays_the_fabric(
    tmp_path: Path, local: str, remote: str
) -> None:
    verdict = verdict_of(tmp_path, _completion("error 12", local, remote))
    assert verdict.category is Category.NETWORK_HARDWARE, verdict


def test_a_protection_error_between_link_local_gids_is_not_this_rule(tmp_path: Path) -> None:
    """Status 4 (local protection) is memory registration whatever the GIDs: its own entry."""
    text = _completion("error 4", "fe80::1270:fdff:fe0c:41a0", "fe80::e42:a1ff:fe9f:3b1c")
    verdict = verdict_of(tmp_path, text)
    assert "link_local" not in verdict.basis, verdict


def test_a_demand_beyond_the_free_reservation_is_no_finding(tmp_path: Path) -> None:
    """Inside placement groups only the reservation's free share counts: a cluster with free
    GPUs outside it does not make the task placeable there."""
    text = (
        "Usage:\n 1.0/8.0 GPU (1.0 used of 1.0 reserved in placement groups)\n\n"
        "Demands:\n {'GPU': 1.0}: 1+ pending tasks/actors (1+ using placement groups)\n"
    )
    assert "raystatus" not in verdict_of(tmp_path, text).basis
