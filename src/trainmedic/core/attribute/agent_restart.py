"""An elastic agent that failed in its own restart of the worker group.

torchrun's agent (TorchElastic, and launchers built on it: DLRover, NVRx's wrapper) restarts
the worker group after a worker fails: "[default] Worker group FAILED. 2/3 attempts left; will
restart worker group", then "Rendezvous'ing worker group" to re-form it. A worker that fails is
what that loop exists to absorb: the group had formed once, so the launch configuration worked.
When the agent itself then fails while re-forming (its own traceback, from the launcher's entry
point or its agent / rendezvous modules, or the rendezvous "closed" / "state" / "connection"
error it raises), no worker ran again: the elastic runtime could not recover (a rendezvous
backend that closed the round when another agent left, an agent shut down in the wrong order).
That is the platform's software (system_software, a crash), said as a guess at 0.4: restart,
never stop or drain.

No finding when the re-rendezvous completed or a worker group started again (a later failure is
the workers' own), when the restarts ran out (torchrun's closing ChildFailedError: the workers
failed every attempt, which is theirs), or on a rendezvous *timeout* (a node that never came
back is what that says). Reads the line sample ``analyze`` passes (``JobFacts.text``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.4
"""A guess: restart advice at most, never a stop or a drain."""

FRAME_WINDOW = 3
"""Lines after a "Traceback" header in which its outermost frame is looked for."""

_RESTART = re.compile(r"\bwill restart worker group\b|\b[Rr]estarting (?:the )?worker group\b")
_REFORM = re.compile(r"Rendezvous'ing worker group\b|\b[Rr]e-?rendezvous(?:ing)? worker group\b")
# The group re-formed (torch's "Rendezvous complete for workers", "Starting worker group") or a
# worker failed again: whatever comes next is not the agent failing to re-form.
_BACK = re.compile(
    r"\bRendezvous complete for workers\b|\bStarting worker group\b|\b[Ss]tarted worker group\b"
    r"|\bfailed \(exitcode: -?\d+\)"
)
_OUT_OF_RESTARTS = re.compile(r"\bChildFailedError\b")
_AGENT_ERROR = re.compile(r"\bRendezvous(?:Closed|Connection|State)Error\b")
_TRACEBACK = re.compile(r"^\W*Traceback \(most recent call last\):")
_LAUNCHER_FRAME = re.compile(
    r'File "[^"]*(?:/bin/torchrun|/torch/distributed/(?:run|launch)\.py'
    r'|/torch/distributed/elastic/(?:agent|rendezvous|launcher)/[^"]*'
    r'|/dlrover/(?:python/)?(?:elastic_agent|trainer)/[^"]*)"'
)


def agent_failed_to_restart(text: Sequence[str]) -> PhaseFinding | None:
    """The agent's own failure while re-forming the group after a worker failed, if any."""
    restart: int | None = None
    reform: int | None = None
    found: tuple[int, str] | None = None
    for i, line in enumerate(text):
        if _OUT_OF_RESTARTS.search(line):
            return None
        if found is not None:
            continue
        if _RESTART.search(line):
            restart, reform = i, None
        elif restart is None:
            continue
        elif _BACK.search(line):
            restart = reform = None
        elif _REFORM.search(line):
            reform = i
        elif reform is not None and _AGENT_ERROR.search(line):
            found = (i, "raised a rendezvous error")
        elif reform is not None and _TRACEBACK.search(line):
            window = text[i + 1 : i + 1 + FRAME_WINDOW]
            if any(_LAUNCHER_FRAME.search(frame) for frame in window):
                found = (i, "failed with a traceback of its own (the launcher's frames)")
    if found is None or restart is None or reform is None:
        return None
    at, how = found
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.CRASH,
        CONFIDENCE,
        f"the elastic agent began restarting the worker group (line {restart + 1}), re-entered "
        f"the rendezvous (line {reform + 1}) and {how} at line {at + 1}, before any worker ran "
        "again: the group had formed once, so not the launch configuration; the elastic "
        "runtime could not recover from a worker's failure",
    )
