"""Attribution on the reference set of system-software, storage, scheduler and application
messages (tests/data/refset_sys).

Each log holds messages in the exact shape the software prints them (CUDA runtime and driver,
NVML, NCCL, the container toolkit, the kernel, Slurm, Kubernetes, PBS/LSF, Lustre/NFS/GPFS/
Ceph/HDFS clients, object-store SDKs, PyTorch/JAX/TensorFlow/DeepSpeed/Lightning), with the
source file or documentation page it was taken from, and a few healthy lines around it; the
``h*`` logs are healthy output of the same tools. Scored at first sight (before any rule was
changed for it) at 172/186 with 3 healthy logs called failures (``FIRST_SIGHT.txt``); the
floors below sit a little under what attribution reaches since, so a change that loses a
family of messages fails here and names the file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.unit.labelled_sets import assert_well_formed

from trainmedic.offline.evaluate import Summary, evaluate, format_summary, read_labels, summary

REFSET = Path(__file__).resolve().parents[1] / "data" / "refset_sys"
FLOOR = 0.97
"""Category accuracy on high+medium labels (186/186 after the family fixes)."""
CATEGORY_FLOOR = 0.9


@pytest.fixture(scope="module")
def refset() -> Summary:
    return summary(evaluate(REFSET, read_labels(REFSET)))


def test_refset_labels_are_well_formed() -> None:
    assert_well_formed(REFSET, 150, max_lines=16)


def test_refset_category_accuracy_floor(refset: Summary) -> None:
    hit, total = refset.high_medium
    assert total > 0
    wrong = [
        f"{o.label.file}: label {o.label.category}, predicted {o.category}"
        for o in refset.outcomes
        if not o.category_ok
    ]
    assert hit / total >= FLOOR, "\n".join([*wrong, format_summary(refset)])


@pytest.mark.parametrize(
    "category", ["system_software", "storage", "application", "scheduler", "node_hardware"]
)
def test_refset_every_category_mostly_right(refset: Summary, category: str) -> None:
    """No family may collapse into another even while the overall floor still holds."""
    hit, total = refset.per_category[category]
    assert total >= 4
    assert hit / total >= CATEGORY_FLOOR, format_summary(refset)


def test_refset_healthy_logs_stay_healthy(refset: Summary) -> None:
    """Normal output of the same tools (NCCL set-up chatter, sacct/squeue listings, boot
    messages with mounts, running pods, fp16 overflow skips that recover, quota and df
    listings) is no failure."""
    healthy = [o for o in refset.outcomes if o.label.category == "none"]
    assert len(healthy) >= 8
    called = [f"{o.label.file}: {o.category}" for o in healthy if o.category != "none"]
    assert not called, called


def test_refset_safety(refset: Summary) -> None:
    """No application log is advised to drain; no stop or drain rests on a guess."""
    safety = refset.safety or {}
    assert safety["application_logs_drained"] == 0
    assert safety["stop_or_drain_below_confidence_0_5"] == 0
