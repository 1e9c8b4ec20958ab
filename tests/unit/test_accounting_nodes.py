"""The pure accounting: node records (MTBI, lemons), the scorecard, the cluster summary."""

from __future__ import annotations

import pytest

from trainmedic.core.accounting import (
    AdviceFacts,
    AttemptFacts,
    FeedbackFacts,
    IncidentFacts,
    JobFacts,
    NodeEventFacts,
    account_job,
    account_node,
    account_nodes,
    cluster_summary,
    scorecard,
)
from trainmedic.core.model import Action, Category, Kind

GPU = Category.GPU_HARDWARE


def test_node_record_counts_incidents_once_and_measures_mtbi() -> None:
    events = [
        NodeEventFacts("n2", 100.0, "j1", 1, GPU, strong=True),
        NodeEventFacts("n2", 101.0, "j1", 1, drained=True, reason="trainmedic: incident 1"),
        NodeEventFacts("n2", 400.0, "j2", 2, GPU),
        NodeEventFacts("n2", 1000.0, "j3", 3, Category.NETWORK_HARDWARE),
        NodeEventFacts("n1", 50.0, "j1", 4, Category.APPLICATION),
        NodeEventFacts("n3", 60.0, "j1", 5, GPU),
        NodeEventFacts("n3", 70.0, "j4", 6, GPU),
    ]
    lemon = account_node("n2", events)
    assert (lemon.incidents, lemon.drains, lemon.strong_evidence) == (3, 1, 1)
    assert lemon.categories == {"gpu_hardware": 2, "network_hardware": 1}
    assert lemon.mtbi_s == pytest.approx(450.0)  # gaps 300 and 600
    assert lemon.drained and not lemon.suspect
    assert lemon.jobs == ("j1", "j2", "j3")
    once = account_node("n1", events)
    assert once.mtbi_s is None  # one incident: not measured
    assert not once.suspect
    assert account_node("n3", events).suspect  # two incidents, never drained
    assert [n.node for n in account_nodes(events)] == ["n2", "n3", "n1"]


def test_scorecard_latest_answer_counts_per_category_and_action() -> None:
    restart, stop = Action.RESTART_EXCLUDING, Action.STOP
    answers = [
        FeedbackFacts(1, 10.0, False, "none", GPU, restart),
        FeedbackFacts(1, 20.0, True, "restart_excluding", GPU, restart),  # corrected
        FeedbackFacts(2, 30.0, True, "restart", GPU, restart),
        FeedbackFacts(3, 40.0, False, "restart", Category.APPLICATION, stop),
    ]
    card = scorecard(answers)
    assert card.answered == 3
    app, gpu = card.by_category  # sorted by name
    assert (gpu.key, gpu.answered, gpu.agreed, gpu.agreement) == ("gpu_hardware", 2, 2, 1.0)
    assert gpu.action_match == 0.5
    assert (app.key, app.agreement, app.action_match) == ("application", 0.0, 0.0)
    assert [a.key for a in card.by_action] == ["restart_excluding", "stop"]
    assert scorecard([]).overall.agreement is None  # nobody answered: not measured


def test_cluster_summary_windows_and_waiting_advice() -> None:
    attempt = AttemptFacts(0, 86_000.0, None, "", ("n1",), 0, 100, 86_100.0, 86_300.0)
    hang = IncidentFacts(7, 0, Kind.HANG, Category.UNKNOWN, 86_350.0, 86_300.0)
    advice = AdviceFacts(9, 0, Action.RESTART, True, "recorded", 86_350.0, 7)
    job = JobFacts("j1", 86_000.0, "RUNNING", False, (attempt,), (), (hang,), (advice,))
    now = 86_400.0 + 86_000.0  # one day after the job started
    summary = cluster_summary([(job, account_job(job, now))], [], set(), now)
    (line,) = summary.jobs
    assert line.down_since == 86_300.0
    assert [i.id for _j, i in summary.open_incidents] == [7]
    assert [a.id for _j, a in summary.advice_waiting] == [9]
    day, week = summary.windows
    assert day.wall_s == pytest.approx(86_400.0)
    assert week.wall_s == pytest.approx(86_400.0)  # the job lived one day of the week
    assert day.badput_by_cause["unknown"] == pytest.approx(86_400.0 - 300.0)
    answered = cluster_summary([(job, account_job(job, now))], [], {9}, now)
    assert answered.advice_waiting == ()


def test_the_tables_follow_the_model() -> None:
    from trainmedic.api.accounting_routes import ACTIONS_TAKEN
    from trainmedic.core.accounting import CAUSES, Part

    # An operator can say they did any action the advice can name, and the causes are the
    # eight categories (plus unattributed): a new enum value cannot be forgotten here.
    assert {a.value for a in Action} <= set(ACTIONS_TAKEN)
    assert set(CAUSES) == {c.value for c in Category} | {"unattributed"}
    assert Part.PRODUCTIVE.value == "productive" and len(set(Part)) == len(Part)
