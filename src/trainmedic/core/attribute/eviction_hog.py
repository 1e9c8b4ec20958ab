"""A disk-pressure eviction whose evicted container itself filled the node, having asked for none.

The kubelet's node-pressure eviction names the resource, the node's threshold (what it keeps
free) and, for each container it ranks first, what the container used against its request:
"The node was low on resource: ephemeral-storage. Threshold quantity: 10120387530, available:
9702960Ki. Container main was using 26498512Ki, request is 0, has larger consumption of
ephemeral-storage." When the containers evicted used little, something else filled the node's
disk (images, logs, other pods): the node's storage, as ``k8s.evicted_disk_pressure`` reads it.
But a container with no ephemeral-storage request that alone used more than the whole reserve
the node keeps free is what filled it: the scheduler placed a pod that writes tens of GiB
locally on a node without reserving the disk, as a memory eviction of a pod that requested no
memory is read (``k8s.evicted_pressure``: the scheduler's). A guess (0.45): restart, and the
request, not the node, is what to change.
"""

from __future__ import annotations

import re

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Event, Kind

CONFIDENCE = 0.45
"""A guess: the request is the usual cure, a node with too small a disk another."""

DISK_EVICTION = "k8s.evicted_disk_pressure"

_QUANTITY = r"\d+(?:\.\d+)?(?:[KMGTPE]i|[kKMGTPE])?"
_THRESHOLD = re.compile(rf"Threshold quantity: ({_QUANTITY})\b")
# "was using U, request is R, has larger consumption" (kubelet 1.17 on) and the older
# "was using U, which exceeds its request of R."
_CONTAINER = re.compile(
    rf"Container (\S+) was using ({_QUANTITY}), "
    rf"(?:request is ({_QUANTITY})\b|which exceeds its request of ({_QUANTITY})\b)"
)
_PARTS = re.compile(r"(\d+(?:\.\d+)?)([KMGTPE]i|[kKMGTPE])?")
_UNIT = {
    "": 1,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def quantity_bytes(text: str) -> float:
    """A Kubernetes quantity ("9702960Ki", "10Gi", "10120387530") in bytes."""
    parts = _PARTS.fullmatch(text)
    if parts is None:  # not a quantity: no size to compare
        return float("nan")
    return float(parts.group(1)) * _UNIT[parts.group(2) or ""]


def unreserved_disk_hog(root: Event) -> PhaseFinding | None:
    """The scheduler's finding when ``root`` is a disk eviction whose container, requesting
    no ephemeral storage, used more than the node's eviction threshold by itself."""
    if root.signature != DISK_EVICTION:
        return None
    threshold = _THRESHOLD.search(root.text)
    if threshold is None:
        return None
    reserve = quantity_bytes(threshold.group(1))
    for name, used, request, older in _CONTAINER.findall(root.text):
        if quantity_bytes(request or older) == 0 and quantity_bytes(used) > reserve:
            return PhaseFinding(
                Category.SCHEDULER,
                Kind.CRASH,
                CONFIDENCE,
                f"the evicted container {name} requested no ephemeral storage and alone used "
                f"{used}, more than the {threshold.group(1)} the node keeps free: the pod was "
                "placed without reserving the local disk it writes (its request)",
            )
    return None
