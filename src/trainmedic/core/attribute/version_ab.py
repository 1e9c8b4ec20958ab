"""A run that fails with one version of a platform component and passes with another.

Reporters and CI matrices print the outcome of the same job per version of one component
("NCCL 2.30.7: killed after 180s" / "NCCL 2.31.2: passed", "| torch==2.3.1 | FAIL |" /
"| torch==2.2.2 | PASS |", "jaxlib 0.4.31 -> segfault" / "jaxlib 0.4.30 -> ok"). When the same
component appears with one version failing and another passing, that version is the only
variable the log shows: a regression (or a fix) in the component, which the labels' convention
puts on the software stack (system_software), whatever the failure looked like. A guess at the
evidence layer's confidence: the other variables of the two runs are not in the log.

Only named platform components count (``COMPONENTS``): a job's own program run at two commits
says nothing about the stack. Rows of one outcome only, two components each with one outcome,
or one version both failing and passing are no finding. Reads the sample of the input's lines
``analyze`` passes (``JobFacts.text``); the live engine passes none and the mechanism is silent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.model import Category, Kind

COMPONENTS = (
    "nccl",
    "rccl",
    "cuda",
    "cudnn",
    "cublas",
    "nvidia driver",
    "driver",
    "torch",
    "pytorch",
    "jax",
    "jaxlib",
    "tensorflow",
    "ucx",
    "open ?mpi",
    "openmpi",
    "mpich",
    "libfabric",
    "aws-ofi-nccl",
    "deepspeed",
    "triton",
    "transformers",
    "accelerate",
    "megatron-core",
    "apex",
    "libtpu",
    "rocm",
    "xla",
)
"""Platform components (libraries, drivers, frameworks) whose version a regression is read on."""

CONFIDENCE = 0.45
"""A guess: restart advice at most, never a stop or a drain."""

_ROW = re.compile(
    r"^[\s|*>-]*(?:with |using |on )?(?P<comp>"
    + "|".join(COMPONENTS)
    + r")(?:[\s=_@-]+|==)v?(?P<ver>\d+(?:\.\d+){1,3}[\w.+-]*)\s*[:|=>-]+\s*[|]?\s*(?P<out>\S.*)$",
    re.I,
)
_FAIL = re.compile(
    r"(?:fail(?:s|ed|ure)?|hang(?:s|ed)?|hung|stuck|killed|crash(?:es|ed)?|segfault(?:s|ed)?|"
    r"errors?|timed? ?out|timeout|deadlocks?|broken|nan)\b",
    re.I,
)
_HANG = re.compile(r"hang|hung|stuck|killed after|timed? ?out|timeout|deadlock", re.I)
_PASS = re.compile(
    r"(?:pass(?:es|ed)?|works?|worked|ok(?:ay)?|success(?:ful)?|succeed(?:s|ed)?|fine|"
    r"complete[sd]?|good)\b",
    re.I,
)


@dataclass(frozen=True, slots=True)
class _Row:
    component: str
    version: str
    failed: bool
    hang: bool
    line: str


def _row(line: str) -> _Row | None:
    m = _ROW.match(line)
    if m is None:
        return None
    out = m.group("out")
    failed = _FAIL.match(out) is not None
    if not failed and _PASS.match(out) is None:
        return None
    comp = re.sub(r"\s+", " ", m.group("comp").lower()).replace("pytorch", "torch")
    return _Row(comp, m.group("ver"), failed, bool(_HANG.match(out)), line.strip())


def version_regression(text: Sequence[str]) -> PhaseFinding | None:
    """The first component with a version that failed and another that passed, if any."""
    rows = [r for r in map(_row, text) if r is not None]
    for bad in rows:
        if not bad.failed:
            continue
        good = next(
            (
                r
                for r in rows
                if not r.failed and r.component == bad.component and r.version != bad.version
            ),
            None,
        )
        same = (r for r in rows if r.component == bad.component and r.version == bad.version)
        if good is None or any(not r.failed for r in same):
            continue
        return PhaseFinding(
            Category.SYSTEM_SOFTWARE,
            Kind.HANG if bad.hang else Kind.CRASH,
            CONFIDENCE,
            f"the same run failed with {bad.component} {bad.version} ({bad.line!r}) and passed "
            f"with {good.component} {good.version} ({good.line!r}): the component's version is "
            "the variable the log shows, a regression in the software stack",
        )
    return None
