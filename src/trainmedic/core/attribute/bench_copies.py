"""A collective benchmark that ran as several independent copies instead of one job.

nccl-tests and rccl-tests print one result row per (message size, data type, reduction op,
root) of a run, each once. When a multi-process launcher (``mpirun``, ``srun``) starts a
binary built without MPI support (nccl-tests' ``MPI=1``), or one per rank with no shared
communicator, every process runs a whole single-rank test of its own and all of them write
to the same stream: the same row appears again on the very next line (timings differing a
little), and each copy prints its own "Avg bus bandwidth". Every copy measures only itself,
so the bandwidth reads as a slow fabric while the launch is what is wrong: the job's own
configuration (application), a straggler-looking result, not a failure of the network.

Runs pasted one after another (before and after a fix) never repeat a row on the next line:
each run's summary and header come between them. Used only when no failure line was found,
as a low-confidence verdict: restart advice at most, never a stop or a drain.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainmedic.core.attribute.phase import PhaseFinding
from trainmedic.core.logparse.timeline import Timeline
from trainmedic.core.model import Category, Kind

REPEATS_MIN = 1
"""Rows repeated on the next line that show copies running side by side."""
CONFIDENCE = 0.35


def benchmark_copies(timelines: Sequence[Timeline]) -> PhaseFinding | None:
    """The first file whose benchmark rows repeat line after line (see the module doc)."""
    for tl in timelines:
        if tl.bench_repeats < REPEATS_MIN:
            continue
        where = f" in {tl.source}" if tl.source else ""
        return PhaseFinding(
            Category.APPLICATION,
            Kind.STRAGGLER,
            CONFIDENCE,
            f"{tl.bench_repeats} benchmark result row(s){where} repeat the row on the line "
            "before (same size, type and op): independent single-process copies of the test "
            "wrote to one stream (a binary without MPI support under a multi-process "
            "launcher), each measuring only itself: the launch, not the fabric",
        )
    return None
