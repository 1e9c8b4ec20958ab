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
trainmedic_job_productive_seconds{job_id}   gauge      productive time (``core.accounting``)
trainmedic_job_downtime_seconds{job_id,part}
                                            gauge      non-productive time by part: checkpoint,
                                                       lost_work, detection, decision_action,
                                                       human_wait, restart, startup, other
trainmedic_badput_seconds{category}         gauge      downtime + lost work of interruptions,
                                                       by cause (8 categories, unattributed)
trainmedic_interruptions_total{category}    counter    interruptions of training by cause
trainmedic_node_incidents{node}             gauge      incidents implicating the node
trainmedic_node_mtbi_seconds{node}          gauge      mean time between the node's incidents
                                                       (nodes with two or more only)
trainmedic_node_drained{node}               gauge      1 when trainmedic drained the node
trainmedic_advice_feedback{category,action,agree}
                                            gauge      operators' latest answers to advice
trainmedic_jobs_watched                     gauge      registered jobs
trainmedic_drain_breaker_tripped            gauge      1: the drain circuit breaker is tripped,
                                                       drains are advice only until reset
trainmedic_source_up{job_id,source}         gauge      1 while the job's source can be read, 0
                                                       while it is unknown (a vanished log, a
                                                       failed scheduler poll, a dead DCGM
                                                       endpoint); only with a service in-process
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

from trainmedic.core.accounting import (
    CAUSES,
    FeedbackFacts,
    JobFacts,
    NodeEventFacts,
    Part,
    account_job,
    account_nodes,
)
from trainmedic.core.accounting.scorecard import latest_answers
from trainmedic.core.badinput import BAD_INPUT, BadInputTally
from trainmedic.core.model import Action
from trainmedic.service.source_status import SourceBoard
from trainmedic.store import AdviceRecord, AdviceStatus, IncidentRecord, Store
from trainmedic.store.facts import feedback_facts, load_job_facts, load_node_events

DETECTION_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
ACTION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0)
_RESTARTS = (Action.RESTART, Action.RESTART_EXCLUDING)


def job_goodput(facts: JobFacts, now: float) -> float | None:
    """``core.goodput`` over the job's life, as the accounting computes it: from registration
    to its end (its last attempt's stop once the scheduler shows it finished, else ``now``)."""
    return account_job(facts, now).goodput


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


def job_families(jobs: Sequence[JobFacts], now: float) -> list[Metric]:
    goodput = GaugeMetricFamily(
        "trainmedic_job_goodput_ratio",
        "Productive time over wall time since registration (core.goodput)",
        labels=["job_id"],
    )
    downtime = GaugeMetricFamily(
        "trainmedic_job_downtime_seconds",
        "A job's wall time that was not productive, by part (checkpoint, lost_work, "
        "detection, decision_action, human_wait, restart, startup, other)",
        labels=["job_id", "part"],
    )
    productive = GaugeMetricFamily(
        "trainmedic_job_productive_seconds", "A job's productive time", labels=["job_id"]
    )
    badput = GaugeMetricFamily(
        "trainmedic_badput_seconds",
        "Time interruptions cost (downtime and lost work), by the cause's category",
        labels=["category"],
    )
    interruptions = CounterMetricFamily(
        "trainmedic_interruptions", "Interruptions of training, by category", labels=["category"]
    )
    causes = dict.fromkeys(CAUSES, 0.0)
    counted: Counter[str] = Counter()
    for facts in jobs:
        account = account_job(facts, now)
        if account.goodput is not None:
            goodput.add_metric([facts.job_id], account.goodput)
        productive.add_metric([facts.job_id], account.productive_s)
        for part, seconds in account.by_part().items():
            if part != Part.PRODUCTIVE.value:
                downtime.add_metric([facts.job_id, part], seconds)
        for cause, seconds in account.by_cause().items():
            causes[cause] += seconds
        counted.update(gap.category for gap in account.interruptions)
    for cause in CAUSES:
        badput.add_metric([cause], causes[cause])
        interruptions.add_metric([cause], counted[cause])
    watched = GaugeMetricFamily("trainmedic_jobs_watched", "Registered jobs")
    watched.add_metric([], len(jobs))
    return [goodput, downtime, productive, badput, interruptions, watched]


def node_families(events: Sequence[NodeEventFacts]) -> list[Metric]:
    incidents = GaugeMetricFamily(
        "trainmedic_node_incidents", "Incidents that implicated the node", labels=["node"]
    )
    mtbi = GaugeMetricFamily(
        "trainmedic_node_mtbi_seconds",
        "Mean time between the node's incidents (only nodes with two or more)",
        labels=["node"],
    )
    drained = GaugeMetricFamily(
        "trainmedic_node_drained", "1 when trainmedic drained the node", labels=["node"]
    )
    for node in account_nodes(events):
        incidents.add_metric([node.node], node.incidents)
        drained.add_metric([node.node], 1.0 if node.drained else 0.0)
        if node.mtbi_s is not None:
            mtbi.add_metric([node.node], node.mtbi_s)
    return [incidents, mtbi, drained]


def feedback_families(feedback: Sequence[FeedbackFacts]) -> list[Metric]:
    answers = GaugeMetricFamily(
        "trainmedic_advice_feedback",
        "Operators' latest answers to advice (monitor-mode scorecard)",
        labels=["category", "action", "agree"],
    )
    counts: Counter[tuple[str, str, str]] = Counter(
        (
            f.category.value if f.category else "unknown",
            f.advised_action.value if f.advised_action else "unknown",
            "true" if f.agree else "false",
        )
        for f in latest_answers(feedback)
    )
    for labels, count in sorted(counts.items()):
        answers.add_metric(list(labels), count)
    return [answers]


def breaker_family(tripped: bool) -> Metric:
    gauge = GaugeMetricFamily(
        "trainmedic_drain_breaker_tripped",
        "1 while the drain circuit breaker is tripped (drains are advice only until reset)",
    )
    gauge.add_metric([], 1.0 if tripped else 0.0)
    return gauge


class StoreCollector(Collector):
    """Reads the store at each scrape; ``now`` is injected so tests control the clock."""

    def __init__(self, store: Store, now: Callable[[], float] = time.time) -> None:
        self._store = store
        self._now = now

    def describe(self) -> Iterator[Metric]:
        # The families without data: registering the collector does not touch the store.
        yield from latency_families([], [])
        yield from count_families([], [], 0)
        yield from job_families([], 0.0)
        yield from node_families([])
        yield from feedback_families([])
        yield breaker_family(False)

    def collect(self) -> Iterator[Metric]:
        store = self._store
        incidents = store.list_incidents()
        advice = store.list_advice()
        events = load_node_events(store)
        drains = sum(1 for event in events if event.drained)
        yield from latency_families(incidents, advice)
        yield from count_families(incidents, advice, drains)
        yield from job_families(load_job_facts(store), self._now())
        yield from node_families(events)
        yield from feedback_families(feedback_facts(store.list_feedback(), advice, incidents))
        yield breaker_family(store.breaker_state().tripped)


class SourceCollector(Collector):
    """``trainmedic_source_up`` from the running service's source board."""

    def __init__(self, board: SourceBoard) -> None:
        self._board = board

    def describe(self) -> Iterator[Metric]:
        yield source_family(SourceBoard())

    def collect(self) -> Iterator[Metric]:
        yield source_family(self._board)


def source_family(board: SourceBoard) -> Metric:
    up = GaugeMetricFamily(
        "trainmedic_source_up",
        "1 while the job's source can be read, 0 while it is unknown (never a failure)",
        labels=["job_id", "source"],
    )
    for job_id in board.jobs():
        for status in board.of_job(job_id):
            up.add_metric([job_id, status.source], 1.0 if status.status == "up" else 0.0)
    return up


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


def make_registry(
    store: Store,
    now: Callable[[], float] = time.time,
    sources: SourceBoard | None = None,
    extra: Sequence[Collector] = (),
) -> CollectorRegistry:
    """A fresh registry holding trainmedic's store collector, the source collector when the
    service runs in this process, the bad-input tally, and ``extra`` collectors of the
    process (the webhook notifier's failures)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(StoreCollector(store, now))
    registry.register(BadInputCollector())
    if sources is not None:
        registry.register(SourceCollector(sources))
    for collector in extra:
        registry.register(collector)
    return registry
