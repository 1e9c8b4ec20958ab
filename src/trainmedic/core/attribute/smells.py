"""Configuration smells: settings a job's output shows that are known to break distributed
training, yet printed by healthy jobs too (pure).

The catalogue matches them (``sig_config_smells.toml``, ids ``smell.*``) as context events:
a kilobyte locked-memory limit (RDMA cannot pin its buffers), a container's /dev/shm of tens of
megabytes (NCCL's shared-memory transport, the DataLoader's workers), NCCL choosing a
container or libvirt bridge for its sockets. A healthy job that needs none of these prints
them too, so on their own they are never a failure: ``analyze`` lists them as suspects beside
its verdict. What an on-call engineer does with them once a job is known to have failed,
the service does too: when its detector saw the job crash or hang and attribution found no
failure line at all, the first smell names the category, as a guess (``SMELL_CONFIDENCE``,
below the stop threshold: the job is restarted, never stopped, no node drained on it).
"""

from __future__ import annotations

from collections.abc import Sequence

from trainmedic.core.model import Event, Implicated, Kind, Verdict

SMELL_PREFIX = "smell."
SMELL_CONFIDENCE = 0.3
"""A guess from the configuration alone: below the stop threshold and under a failure line's."""


def smells(events: Sequence[Event]) -> tuple[Event, ...]:
    """The first event of each configuration smell among ``events``, in their order."""
    seen: set[str] = set()
    found = []
    for event in events:
        if event.signature.startswith(SMELL_PREFIX) and event.signature not in seen:
            seen.add(event.signature)
            found.append(event)
    return tuple(found)


def smell_verdict(found: Sequence[Event], kind: Kind, implicated: Implicated) -> Verdict | None:
    """A detected failure (``kind``) that no failure line explains, named by its first smell;
    ``None`` without one."""
    if not found:
        return None
    first = found[0]
    others = f" (and {', '.join(e.signature for e in found[1:])})" if len(found) > 1 else ""
    return Verdict(
        failure=True,
        kind=kind,
        category=first.category,
        confidence=SMELL_CONFIDENCE,
        root_cause=first,
        implicated=implicated,
        basis=f"configuration smell: {first.signature} at {first.source or 'line'}:{first.line}"
        f"{others}; no failure line, so the configuration is the likeliest suspect (a guess)",
    )
