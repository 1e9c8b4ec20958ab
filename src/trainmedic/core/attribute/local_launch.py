"""A multi-node launch that fell back to this node alone, then failed to form its process group.

Launchers that spread a job over nodes read the node list from a hostfile (DeepSpeed's
``runner.py``, the gpt-neox ``deepy.py`` wrapper around it, MPI-style launchers). When none is
found they say so and start the job on the local node only ("Unable to find hostfile, will
proceed with training with local resources only"). On one machine that is the intended
default and no finding. But when the same log then shows the process-group set-up failing
(a traceback through ``init_process_group`` / ``init_distributed`` / a rendezvous handler /
Megatron's ``_initialize_distributed``), the job was configured for more ranks or nodes than
the local-only launch started, so the group could not form: the launch configuration the
job's own scripts build (a hostfile not written or not passed), i.e. the application, as a
guess (0.3): a rendezvous can also fail for its own reasons.

Read only where nothing above spoke and the traceback lost its exception line (an exception
line is read by the signatures and the evidence layer). Reads the sample of the input's lines
``analyze`` passes (``JobFacts.text``); the live engine passes none and it is silent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.3
"""A guess: the local-only fallback is the usual cause, a rendezvous that failed by itself
another."""

# The launcher's notice that it found no node list and runs on this node alone.
_LOCAL_ONLY = re.compile(
    r"(?i)\b(?:unable to|could not|cannot|can't|did not) find (?:a |the |any )?host ?file\b"
    r".{0,80}?\blocal(?:host)?\b"
    r"|\bno host ?file (?:found|given|provided|specified)\b"
    r".{0,80}?\b(?:local(?:host)?|single[- ]node)\b"
)
# Frames of the process-group set-up: torch's, DeepSpeed's and Megatron's initialisation.
_INIT_FRAME = re.compile(
    r"\b(?:init_process_group|init_distributed|_initialize_distributed|initialize_model_parallel"
    r"|rendezvous_iterator|_\w+_rendezvous_handler)\b"
)


def init_without_hostfile(
    text: Sequence[str], timelines: Sequence[Timeline]
) -> PhaseFinding | None:
    notice = next((line for line in text if _LOCAL_ONLY.search(line)), None)
    if notice is None:
        return None
    for tl in timelines:
        if tl.cut_traceback_line is None:
            continue
        if not any(_INIT_FRAME.search(frame) for frame in tl.cut_traceback):
            continue
        where = f"{tl.source or 'line'}:{tl.cut_traceback_line}"
        return PhaseFinding(
            Category.APPLICATION,
            Kind.CRASH,
            CONFIDENCE,
            f"the launcher found no hostfile and ran on local resources only "
            f"({notice.strip()[:100]!r}); the traceback at {where} stops in the process "
            "group's set-up: the job expected more ranks or nodes than the local-only launch "
            "started (the hostfile the job's launch scripts should write or pass)",
        )
    return None
