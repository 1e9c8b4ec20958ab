"""One poll showing a node NOT_RESPONDING, or the second after an operator's resume, is not a
node failure: an unhealthy state becomes evidence once it held for polls and time
(core.engine.signals.NodeStateFilter), and the engine sees nothing before that."""

from __future__ import annotations

from trainmedic.core.detect.config import DetectorConfig
from trainmedic.core.engine.engine import Engine
from trainmedic.core.engine.signals import NodeDebounce, NodeStateFilter
from trainmedic.core.model import Category
from trainmedic.core.observations import JobStatus, NodeStatus, Progress
from trainmedic.core.states import JobState, NodeState

RULE = NodeDebounce(min_polls=3, min_s=20.0, resume_grace_s=60.0)
NR, DOWN, IDLE = NodeState.NOT_RESPONDING, NodeState.DOWN, NodeState.IDLE


def _polls(states: list[tuple[float, NodeState]]) -> list[NodeStatus]:
    """Every poll's status of node n2, and what the filter made evidence of."""
    node_filter = NodeStateFilter(RULE)
    found = [node_filter.observe(NodeStatus(t, "n2", state)) for t, state in states]
    return [f for f in found if f is not None]


def test_one_not_responding_poll_is_not_evidence() -> None:
    assert _polls([(0.0, IDLE), (1.0, NR), (2.0, IDLE), (3.0, NR), (30.0, IDLE)]) == []


def test_not_responding_held_for_polls_and_time_is_evidence_from_when_it_began() -> None:
    (confirmed,) = _polls([(0.0, NR), (10.0, NR), (15.0, NR), (21.0, NR), (40.0, NR)])
    assert (confirmed.state, confirmed.time) == (NR, 0.0)
    assert _polls([(0.0, NR), (30.0, NR)]) == [], "two polls are not enough, however long"
    assert _polls([(0.0, NR), (1.0, NR), (2.0, NR), (3.0, NR)]) == [], "nor many in a moment"


def test_the_seconds_after_an_operators_resume_are_not_a_node_failure() -> None:
    # Measured on the lab cluster: DOWN, `scontrol update state=resume`, about a second of
    # idle* (NOT_RESPONDING) until slurmd registers, then idle.
    polls = [(0.0, DOWN), (5.0, DOWN), (6.0, NR), (6.5, NR), (7.0, IDLE), (8.0, IDLE)]
    (down,) = _polls(polls)
    assert (down.state, down.time) == (DOWN, 0.0), "the DOWN itself is the scheduler's word"
    # Back up, then a flap within the grace period: debounced like NOT_RESPONDING ...
    flap = [*polls, (9.0, DOWN), (9.5, IDLE)]
    assert _polls(flap) == [down]
    # ... and a node that really stays down after its resume still counts.
    stays = [*polls, (9.0, DOWN), (15.0, DOWN), (30.0, DOWN)]
    assert [(s.state, s.time) for s in _polls(stays)] == [(DOWN, 0.0), (DOWN, 9.0)]
    # Long after the resume, DOWN is immediate again.
    late = [*polls, (100.0, DOWN)]
    assert [(s.state, s.time) for s in _polls(late)] == [(DOWN, 0.0), (DOWN, 100.0)]


def _engine() -> Engine:
    engine = Engine(DetectorConfig(hang_floor_s=60.0), settle_s=0.5, node_debounce=RULE)
    engine.watch("j")
    engine.observe(JobStatus(0.0, "j", JobState.RUNNING, ("n1", "n2"), 0), 0.0)
    for i in range(1, 30):
        engine.observe(Progress(i * 0.1, "j", i, 0, "n1", 0.1), i * 0.1)
    return engine


def test_a_not_responding_blip_under_a_running_job_is_not_an_incident() -> None:
    engine = _engine()
    for t, state in ((3.0, NR), (3.5, NR), (4.0, IDLE)):
        engine.observe(NodeStatus(t, "n2", state), t)
    assert engine.evaluate(10.0) == []
    # The job later fails on its own: the blip is no evidence against n2.
    engine.observe(JobStatus(11.0, "j", JobState.FAILED, ("n1", "n2"), 0, exit_code=1), 11.0)
    (finding,) = engine.evaluate(12.0)
    assert finding.verdict.category is not Category.NODE_HARDWARE
    assert finding.verdict.implicated.nodes == ()


def test_a_node_that_stops_responding_for_good_is_the_jobs_node_failure() -> None:
    engine = _engine()
    for t in (3.0, 13.0, 24.0):
        engine.observe(NodeStatus(t, "n2", NR), t)
    (finding,) = engine.evaluate(25.0)
    assert finding.verdict.category is Category.NODE_HARDWARE
    assert finding.verdict.implicated.nodes == ("n2",)
    assert finding.anomaly.since == 3.0
