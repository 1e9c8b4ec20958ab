"""Prometheus metrics computed at scrape time from the store (no counters kept in memory).

A custom collector reads the store on every scrape, so metrics survive a service restart,
agree with the API, and a fresh ``CollectorRegistry`` per app (or per test) holds no global
state. Latencies are only observed where both ends are known: an incident without a
``fault_time`` is "not measured", which is left out of the histogram, never counted as 0.

==========================================  =========  ========================================
metric                                      type       meaning
==========================================  =========  ========================================
trainmedic_detection_latency_seconds{kind}  histogram  incident detected_at - fault_time
trainmedic_detection_latency_unmeasured_total{kind}
                                            counter    incidents with no known fault time
trainmedic_action_latency_seconds           histogram  advice applied_at (all scheduler steps
                                                       issued) - its incident's detected_at
trainmedic_recovery_latency_seconds         histogram  advice converged_at (scheduler shows it
                                                       done) - its incident's detected_at
trainmedic_incidents_total{category,kind}   counter    incidents stored
trainmedic_restarts_total                   counter    restart advice carried out (converged)
trainmedic_stops_total                      counter    stop advice carried out (converged)
trainmedic_drains_total                     counter    node drains recorded in node history
trainmedic_advice{status,action}            gauge      advice rows by status and action
trainmedic_job_goodput_ratio{job_id}        gauge      see ``job_goodput``
trainmedic_jobs_watched                     gauge      registered jobs
trainmedic_bad_input_total{kind}            counter    records, lines or files refused or
                                                       skipped by this process (see
                                                       ``trainmedic.core.badinput``)
==========================================  =========  ========================================

The bad-input counts are the one exception to "computed from the store": they are the
process's own tally, so they restart at 0 with the process (a Prometheus counter reset).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from trainmedic.core.badinput import BAD_INPUT, BadInputTally
from trainmedic.core.goodput import goodput
from trainmedic.core.model import Action
from trainmedic.core.states import JobState
from trainmedic.store import (
    AdviceRecord,
    AdviceStatus,
    AttemptRecord,
    IncidentRecord,
    JobRecord,
    Store,
)

DETECTION_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
ACTION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0)
_RESTARTS = (Action.RESTART, Action.RESTART_EXCLUDING)


def job_goodput(job: JobRecord, attempts: Sequence[AttemptRecord], now: float) -> float | None:
    """``core.goodput`` over the job's life: from registration to its end (the last
    attempt's ``ended_at`` once the job is in a terminal scheduler state, else ``now``)."""
    end = now
    if _is_terminal(job.state) and attempts and attempts[-1].ended_at is not None:
        end = attempts[-1].ended_at
    return goodput(progress_spans(attempts), job.registered_at, end)


def progress_spans(attempts: Sequence[AttemptRecord]) -> list[tuple[float, float]]:
    """Each attempt's (first, last) progress time, where both were seen."""
    return [
        (a.first_progress_at, a.last_progress_at)
        for a in attempts
        if a.first_progress_at is not None and a.last_progress_at is not None
    ]


def _is_terminal(state: str) -> bool:
    try:
        return JobState(state).is_terminal()
    except ValueError:
        return False


def _histogram(
    name: str,
    doc: str,
    series: dict[str, list[float]],
    buckets: Sequence[float],
    label: str | None = None,
) -> HistogramMetricFamily:
    """One histogram family; ``series`` maps a label value ("" when unlabelled) to values."""
    family = HistogramMetricFamily(name, doc, labels=[label] if label else None)
    for label_value, values in sorted(series.items()):
        counts = [(str(b), sum(1 for v in values if v <= b)) for b in buckets]
        counts.append(("+Inf", len(values)))
        family.add_metric([label_value] if label else [], counts, sum(values))
    return family


def latency_families(
    incidents: Sequence[IncidentRecord], advice: Sequence[AdviceRecord]
) -> list[Metric]:
    detection: dict[str, list[float]] = {}
    unmeasured = CounterMetricFamily(
        "trainmedic_detection_latency_unmeasured",
        "Incidents whose fault time is unknown (left out of the detection histogram)",
        labels=["kind"],
    )
    for incident in incidents:
        values = detection.setdefault(incident.kind.value, [])
        if incident.fault_time is not None:
            values.append(incident.detected_at - incident.fault_time)
    for kind, values in sorted(detection.items()):
        unmeasured.add_metric(
            [kind], sum(1 for i in incidents if i.kind.value == kind) - len(values)
        )
    detected_at = {i.id: i.detected_at for i in incidents}
    applied: list[float] = []
    converged: list[float] = []
    for a in advice:
        start = detected_at.get(a.incident_id) if a.incident_id is not None else None
        if start is None:
            continue
        if a.applied_at is not None:
            applied.append(a.applied_at - start)
        if a.converged_at is not None:
            converged.append(a.converged_at - start)
    return [
        _histogram(
            "trainmedic_detection_latency_seconds",
            "Fault to detection, for incidents whose fault time is known",
            detection,
            DETECTION_BUCKETS,
            label="kind",
        ),
        unmeasured,
        _histogram(
            "trainmedic_action_latency_seconds",
            "Detection to every scheduler step of the advice issued",
            {"": applied},
            ACTION_BUCKETS,
        ),
        _histogram(
            "trainmedic_recovery_latency_seconds",
            "Detection to the scheduler showing the advice done",
            {"": converged},
            ACTION_BUCKETS,
        ),
    ]


def count_families(
    incidents: Sequence[IncidentRecord], advice: Sequence[AdviceRecord], drains: int
) -> list[Metric]:
    by_cause = CounterMetricFamily(
        "trainmedic_incidents", "Incidents stored", labels=["category", "kind"]
    )
    for (category, kind), count in sorted(
        Counter((i.category.value, i.kind.value) for i in incidents).items()
    ):
        by_cause.add_metric([category, kind], count)
    done = [a for a in advice if a.status is AdviceStatus.CONVERGED]
    restarts = CounterMetricFamily("trainmedic_restarts", "Restart advice carried out")
    restarts.add_metric([], sum(1 for a in done if a.action in _RESTARTS))
    stops = CounterMetricFamily("trainmedic_stops", "Stop advice carried out")
    stops.add_metric([], sum(1 for a in done if a.action is Action.STOP))
    drained = CounterMetricFamily("trainmedic_drains", "Node drains recorded")
    drained.add_metric([], drains)
    by_status = GaugeMetricFamily(
        "trainmedic_advice", "Advice rows by status and action", labels=["status", "action"]
    )
    for (status, action), count in sorted(
        Counter((a.status.value, a.action.value) for a in advice).items()
    ):
        by_status.add_metric([status, action], count)
    return [by_cause, restarts, stops, drained, by_status]


def job_families(
    jobs: Sequence[JobRecord], attempts: Sequence[AttemptRecord], now: float
) -> list[Metric]:
    per_job: dict[str, list[AttemptRecord]] = {}
    for attempt in attempts:
        per_job.setdefault(attempt.job_id, []).append(attempt)
    goodput = GaugeMetricFamily(
        "trainmedic_job_goodput_ratio",
        "Productive time over wall time since registration",
        labels=["job_id"],
    )
    for job in jobs:
        ratio = job_goodput(job, per_job.get(job.job_id, []), now)
        if ratio is not None:
            goodput.add_metric([job.job_id], ratio)
    watched = GaugeMetricFamily("trainmedic_jobs_watched", "Registered jobs")
    watched.add_metric([], len(jobs))
    return [goodput, watched]


class StoreCollector(Collector):
    """Reads the store at each scrape; ``now`` is injected so tests control the clock."""

    def __init__(self, store: Store, now: Callable[[], float] = time.time) -> None:
        self._store = store
        self._now = now

    def describe(self) -> Iterator[Metric]:
        # The families without data: registering the collector does not touch the store.
        yield from latency_families([], [])
        yield from count_families([], [], 0)
        yield from job_families([], [], 0.0)

    def collect(self) -> Iterator[Metric]:
        store = self._store
        incidents = store.list_incidents()
        advice = store.list_advice()
        drains = sum(1 for event in store.node_history() if event.drained)
        yield from latency_families(incidents, advice)
        yield from count_families(incidents, advice, drains)
        yield from job_families(store.list_jobs(), store.list_attempts(), self._now())


class BadInputCollector(Collector):
    """``trainmedic_bad_input_total{kind}`` from the process's bad-input tally."""

    def __init__(self, tally: BadInputTally = BAD_INPUT) -> None:
        self._tally = tally

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "trainmedic_bad_input",
            "Records, lines or files refused or skipped as bad input, by kind",
            labels=["kind"],
        )
        for kind, count in self._tally.snapshot().items():
            family.add_metric([kind.value], count)
        yield family


def make_registry(store: Store, now: Callable[[], float] = time.time) -> CollectorRegistry:
    """A fresh registry holding trainmedic's store and bad-input collectors."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(StoreCollector(store, now))
    registry.register(BadInputCollector())
    return registry
