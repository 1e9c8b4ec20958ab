"""Health tools' own verdicts, in the shapes real threads paste them: the failure is stated as
a field's value, not as an error line ("Pending Page Blacklist : Yes", "Link detected: no",
"HEALTH_ERR", a node row "NotReady", a Lustre target's "check error", a pod still "Pending"
after ten minutes or more, Ray's placement group that timed out). Each counts as failure
evidence of its part, and the same tools' healthy output stays "no failure".

A row of *many* nodes down at once (a fresh cluster whose slurmd cannot be reached) is not read
as one node's hardware: only a single node's "NotReady" row is.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.core.model import Category, Verdict
from trainmedic.offline.analyze import analyze_path


def _verdict(tmp_path: Path, text: str) -> Verdict:
    path = tmp_path / "tool.log"
    path.write_text(text)
    return analyze_path(path).verdict


FAILURES: dict[str, tuple[str, Category]] = {
    "nvsmi_pages_pending_retirement": (
        "    Retired Pages\n"
        "        Single Bit ECC              : 0\n"
        "        Double Bit ECC              : 12\n"
        "    Pending Page Blacklist      : Yes\n",
        Category.GPU_HARDWARE,
    ),
    "ethtool_no_link": (
        "Settings for eth2:\n\tSpeed: Unknown!\n\tDuplex: Unknown! (255)\n\tLink detected: no\n",
        Category.NETWORK_HARDWARE,
    ),
    "ceph_health_err": (
        "    health: HEALTH_ERR\n"
        "            1 full osd(s)\n"
        "            Degraded data redundancy: 1234/5678 objects degraded\n",
        Category.STORAGE,
    ),
    "kubectl_node_not_ready": (
        "NAME     STATUS     ROLES    AGE   VERSION\ngpu-3    NotReady   <none>   12d   v1.28.3\n",
        Category.NODE_HARDWARE,
    ),
    "pod_pending_for_hours": (
        "NAME      READY  STATUS   RESTARTS  AGE\ntrainer-0 0/1    Pending  0         3h12m\n",
        Category.SCHEDULER,
    ),
    "ray_placement_group_timeout": (
        "ray.util.placement_group: Placement group creation timed out. Make sure your cluster "
        "either has enough resources or use an autoscaling cluster.\n",
        Category.SCHEDULER,
    ),
    "lustre_target_check_error": (
        "scratch-OST0004-osc-ffff8a: check error: Resource temporarily unavailable\n",
        Category.STORAGE,
    ),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_tool_verdict_is_failure_evidence(tmp_path: Path, name: str) -> None:
    text, category = FAILURES[name]
    verdict = _verdict(tmp_path, text)
    assert verdict.failure, name
    assert verdict.category is category, (name, verdict.category, verdict.basis)


HEALTHY: dict[str, str] = {
    "nvsmi_no_pending_pages": (
        "    Retired Pages\n"
        "        Single Bit ECC              : 0\n"
        "        Double Bit ECC              : 0\n"
        "    Pending Page Blacklist      : No\n"
    ),
    "pod_just_created": (
        "NAME      READY  STATUS   RESTARTS  AGE\ntrainer-0 0/1    Pending  0         12s\n"
    ),
    "ethtool_link": "Settings for eth2:\n\tSpeed: 100000Mb/s\n\tLink detected: yes\n",
    "ceph_ok": "    health: HEALTH_OK\n    osd: 12 osds: 12 up, 12 in\n",
    "kubectl_nodes_ready": (
        "NAME   STATUS  ROLES   AGE  VERSION\ngpu-3  Ready   <none>  12d  v1.28.3\n"
    ),
    "lustre_servers_active": (
        "scratch-OST0004-osc-ffff8a active.\nscratch-MDT0000-mdc-ffff8a active.\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HEALTHY))
def test_healthy_tool_output(tmp_path: Path, name: str) -> None:
    verdict = _verdict(tmp_path, HEALTHY[name])
    assert not verdict.failure, (name, verdict.category, verdict.basis)


def test_many_nodes_down_at_once_is_not_one_nodes_hardware(tmp_path: Path) -> None:
    rows = "".join(
        f"compute{i:03d}      1     main*       down*   12   12:1:1  64267   0   1   (null) "
        "Not responding\n"
        for i in range(1, 6)
    )
    verdict = _verdict(
        tmp_path,
        "NODELIST    NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT FEATURES "
        "REASON\n" + rows,
    )
    assert verdict.category is not Category.NODE_HARDWARE, verdict.basis
