"""Hosts of one job that loaded different NCCL network plugins.

NCCL looks for an external network plugin (``libnccl-net.so``: HPC-X's RDMA/SHARP plugin,
aws-ofi-nccl, a cloud's TCPX plugin) on each host at start and says what it found: "NET/Plugin:
Loaded net plugin NCCL RDMA Plugin (v7)", the SHARP plugin's "Plugin Path : /opt/hpcx/...",
aws-ofi-nccl's "NET/OFI Initializing aws-ofi-nccl", "Using network IBext" / "AWS Libfabric"; or
that it found none and uses its own transports: "NET/Plugin: Could not find: libnccl-net.so.
Using internal network plugin." (2.19+), "NET/Plugin : No plugin found (libnccl-net.so), using
internal implementation" (older), "Using network IB" / "Socket". Peers that speak through
different plugins do not complete their connections: the ranks wait without an error. One job
whose hosts disagree is a software stack installed on only part of the nodes (system_software,
a hang), whatever the transport: a guess at the evidence layer's confidence, since the log
cannot show that the plugin was what stalled.

Every host on the same side (all internal, all external), one host alone, a host that said both
(a plugin that loaded and then fell back), or a job that connected its rings or trained is no
finding. Reads the line sample ``analyze`` passes (``JobFacts.text``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.summary import ProgressSummary
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.4
"""A guess: restart advice at most, never a stop or a drain."""

# "host:pid:tid [dev] NCCL INFO ...", optionally behind an MPI launcher's "[rank]" prefix
_NCCL_LINE = re.compile(
    r"^\s*(?:\[\d+\]\s*)?(?P<host>[\w.-]+):\d+:\d+ \[\d+\] NCCL INFO (?P<msg>.*)$"
)
_EXTERNAL = re.compile(
    r"NET/Plugin ?: ?Loaded net plugin|Plugin Path ?: \S*libnccl-net|NET/OFI Initializing|"
    r"Using network (?:IBext|AWS Libfabric|Libfabric|GPUDirectTCPX|FasTrak)\b"
)
_INTERNAL = re.compile(
    r"Using internal network plugin|No plugin found \(\S+\), using internal implementation|"
    r"Using network (?:IB|Socket)\s*$"
)


def mixed_net_plugins(
    text: Sequence[str], timelines: Sequence[Timeline], progress: ProgressSummary | None
) -> PhaseFinding | None:
    """A host on an external NCCL net plugin and another on NCCL's internal one, if any."""
    if any(t.nccl_connected for t in timelines) or (progress is not None and progress.reports):
        return None
    sides: dict[str, set[bool]] = {}
    said: dict[tuple[str, bool], str] = {}
    for line in text:
        m = _NCCL_LINE.match(line)
        if m is None:
            continue
        msg = m.group("msg")
        for external, pattern in ((True, _EXTERNAL), (False, _INTERNAL)):
            if pattern.search(msg):
                sides.setdefault(m.group("host"), set()).add(external)
                said.setdefault((m.group("host"), external), line.strip())
    pure = {host: next(iter(s)) for host, s in sides.items() if len(s) == 1}
    ext = sorted(h for h, e in pure.items() if e)
    internal = sorted(h for h, e in pure.items() if not e)
    if not ext or not internal:
        return None
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
        CONFIDENCE,
        f"hosts of one job on different NCCL network plugins: {', '.join(ext)} an external "
        f"plugin ({said[(ext[0], True)]!r}), {', '.join(internal)} NCCL's internal one "
        f"({said[(internal[0], False)]!r}): a software stack installed on part of the nodes",
    )
