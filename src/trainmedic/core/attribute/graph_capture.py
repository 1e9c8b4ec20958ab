"""An inference engine's CUDA-graph capture that never finished: the log ends inside it.

Serving engines capture a CUDA graph per batch size when they start (SGLang's "Capture cuda
graph begin ... Capture cuda graph end. Time elapsed", vLLM's "Capturing cudagraphs for
decoding" / "Capturing CUDA graphs (...)" bars ... "Graph capturing finished in N secs"). The
capture runs the engine's own model code on every tensor-parallel rank, its collectives
included: the custom all-reduce, which ends the capture by exchanging the ranks' graph buffer
addresses ("Registering N cuda graph addresses"), and NCCL inside the graphs. The user's code
does not run there (a model name and flags). So a log whose last lines, after the last capture
start, are only the capture's own lines (the batch sizes, the ranks registering addresses, a
capture bar short of 100 %), with no "end"/"finished" line, no serving line and no error, is
the engine's start-up hanging inside its capture: the engine's collectives under capture (a
custom all-reduce swallowing an error, NCCL in graphs) or the runtime, i.e. system_software,
as a guess (0.3, restart). Any other line after the start (an error, the capture's end, a
request served) is not this finding; a capture in a training script (Megatron's, torch's
``torch.cuda.graph``) is not an engine's and is not read.

Reads the sample of the input's lines ``analyze`` passes (``JobFacts.text``); the live engine
passes none and it is silent. Used only where no failure line and no other mechanism spoke.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

CONFIDENCE = 0.3
"""A guess: an excerpt cut while a healthy capture ran reads the same."""

# The engine starting its capture: SGLang's (and its piecewise variant's) and vLLM's wordings.
_BEGIN = re.compile(
    r"Capture (?:piecewise )?cuda graph begin\b"
    r"|Capturing cudagraphs? for decoding\b"
    r"|Capturing the model for CUDA graphs\b",
    re.IGNORECASE,
)
# Lines the capture itself prints while it runs: the batch sizes it will capture, the ranks
# registering their graph buffers with the custom all-reduce, its progress bars.
_OWN = re.compile(
    r"Capture (?:piecewise )?cuda graph (?:bs|num_tokens)\b"
    r"|Registering \d+ cuda graph addresses\b",
    re.IGNORECASE,
)
# A capture bar (SGLang's "Capturing batches (bs=8 ...)", vLLM's "Capturing CUDA graph shapes",
# "Capturing CUDA graphs (decode, FULL)") and how far it got.
_BAR = re.compile(r"Capturing (?:batches|CUDA graph shapes|CUDA graphs)\b[^%]*?(\d{1,3})%")


def _capture_line(line: str) -> bool:
    """Whether ``line`` is the capture's own, printed while it still runs."""
    if not line.strip() or _OWN.search(line):
        return True
    bar = _BAR.search(line)
    return bar is not None and int(bar.group(1)) < 100


def capture_never_finished(text: Sequence[str]) -> PhaseFinding | None:
    """The engine's hang inside its graph capture, when ``text`` ends there."""
    start = next(
        (i for i in range(len(text) - 1, -1, -1) if _BEGIN.search(text[i])),
        None,
    )
    if start is None or not all(_capture_line(line) for line in text[start + 1 :]):
        return None
    registered = sum(1 for line in text[start + 1 :] if "graph addresses" in line)
    seen = f", {registered} rank(s) registering their graph addresses" if registered else ""
    return PhaseFinding(
        Category.SYSTEM_SOFTWARE,
        Kind.HANG,
        CONFIDENCE,
        f"an inference engine began capturing its CUDA graphs{seen} and the log ends inside "
        "the capture: no end of capture, no request served, no error. The engine's own "
        "collectives under capture (its custom all-reduce, NCCL in graphs) or the runtime "
        "hung its start-up, not the user's code (a guess, restart)",
    )
