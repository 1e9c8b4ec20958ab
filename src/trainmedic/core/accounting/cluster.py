"""The cluster at a glance: jobs with their goodput, what is open, what waits for a person,
which nodes are drained or suspect, and badput by cause over the last day and week."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trainmedic.core.accounting.facts import AdviceFacts, IncidentFacts, JobFacts
from trainmedic.core.accounting.job import JobAccounting, Segment, by_cause, by_part
from trainmedic.core.accounting.nodes import NodeAccount

DAY_S = 86_400.0
WINDOWS: tuple[tuple[str, float], ...] = (("day", DAY_S), ("week", 7 * DAY_S))


@dataclass(frozen=True, slots=True)
class WindowFigures:
    name: str
    start: float
    end: float
    wall_s: float  # job-seconds inside the window (jobs alive in it, added up)
    productive_s: float
    goodput: float | None
    badput_by_cause: dict[str, float]
    badput_by_part: dict[str, float]


@dataclass(frozen=True, slots=True)
class JobLine:
    job_id: str
    state: str
    ongoing: bool
    goodput: float | None
    attempts: int
    incidents: int
    down_since: float | None  # start of an open interruption


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    time: float
    jobs: tuple[JobLine, ...]
    open_incidents: tuple[tuple[str, IncidentFacts], ...]
    advice_waiting: tuple[tuple[str, AdviceFacts], ...]
    drained_nodes: tuple[NodeAccount, ...]
    suspect_nodes: tuple[NodeAccount, ...]
    windows: tuple[WindowFigures, ...]


def window_figures(
    name: str, accounts: Sequence[JobAccounting], start: float, end: float
) -> WindowFigures:
    segments: list[Segment] = [s for a in accounts for s in a.segments]
    parts = by_part(segments, start, end)
    wall = sum(parts.values())
    productive = parts.pop("productive")
    return WindowFigures(
        name=name,
        start=start,
        end=end,
        wall_s=wall,
        productive_s=productive,
        goodput=productive / wall if wall > 0 else None,
        badput_by_cause=by_cause(segments, start, end),
        badput_by_part=parts,
    )


def cluster_summary(
    jobs: Sequence[tuple[JobFacts, JobAccounting]],
    nodes: Iterable[NodeAccount],
    answered_advice: set[int],
    now: float,
) -> ClusterSummary:
    lines: list[JobLine] = []
    open_incidents: list[tuple[str, IncidentFacts]] = []
    waiting: list[tuple[str, AdviceFacts]] = []
    for facts, account in jobs:
        current = [i for i in account.interruptions if i.open]
        lines.append(
            JobLine(
                job_id=facts.job_id,
                state=facts.state,
                ongoing=account.ongoing,
                goodput=account.goodput,
                attempts=len(facts.attempts),
                incidents=len(facts.incidents),
                down_since=current[0].window[0] if current else None,
            )
        )
        open_ids = {i for gap in current for i in gap.incident_ids}
        open_incidents += [(facts.job_id, i) for i in facts.incidents if i.id in open_ids]
        waiting += [
            (facts.job_id, a)
            for a in facts.advice
            if a.monitor and a.id not in answered_advice and a.action.value != "none"
        ]
    nodes = list(nodes)
    accounts = [a for _f, a in jobs]
    return ClusterSummary(
        time=now,
        jobs=tuple(sorted(lines, key=lambda j: (not j.ongoing, j.job_id))),
        open_incidents=tuple(open_incidents),
        advice_waiting=tuple(waiting),
        drained_nodes=tuple(n for n in nodes if n.drained),
        suspect_nodes=tuple(n for n in nodes if n.suspect),
        windows=tuple(window_figures(name, accounts, now - span, now) for name, span in WINDOWS),
    )
