"""When two attempts failed "at the same iteration" (the deterministic-error stop rule).

What the policy compares is the last iteration each attempt *reported* before it failed, not
the step it failed at: a job reports every N steps (Megatron's ``--log-interval``, HF's
``logging_steps``, a tqdm bar whose redraws are throttled), so its last report before a crash
at step X lies anywhere in ``(X - N, X]``, and two attempts failing at X may report two
different iterations up to N apart. The job's own cadence explains that much lag and no
more: two failure points count as the same iteration when they differ by at most the job's
observed report interval in steps (``ReportCadence.interval_steps``: the most iterations one
report moved on, among the job's recent reports), and by at most ``FLOOR_STEPS`` while that
interval is not known yet (ranks printing the same step to different files are read a step
apart). The window is never wider than what the job showed it reports at.

A job reporting every 100 iterations whose failures were read at 1000 and 1050 failed at the
same iteration; at 1000 and 1500 it did not.
"""

from __future__ import annotations

FLOOR_STEPS = 1
"""The tolerance while the job's report interval is unknown, and its least value."""


def iteration_tolerance(report_interval_steps: int | None) -> int:
    """The most two failure points of one job may differ and still be the same iteration."""
    if report_interval_steps is None or report_interval_steps < FLOOR_STEPS:
        return FLOOR_STEPS
    return report_interval_steps


def same_iteration(first: int, second: int, report_interval_steps: int | None) -> bool:
    """``first`` and ``second`` (last reported iterations of two failed attempts) are the same
    failure point, given the job's report interval in steps (None: not known)."""
    return abs(first - second) <= iteration_tolerance(report_interval_steps)
