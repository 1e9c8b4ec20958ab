"""The accounting as the API, the CLI report and the web view show it: read the store, run the
pure accounting (``trainmedic.core.accounting``), and shape plain JSON.

Every figure keeps the accounting's meaning: ``null`` is "not measured", never 0.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainmedic.core.accounting import (
    ClusterSummary,
    Interruption,
    JobAccounting,
    JobFacts,
    NodeAccount,
    Scorecard,
    account_job,
    account_node,
    account_nodes,
    cluster_summary,
    scorecard,
)
from trainmedic.core.accounting.scorecard import Agreement
from trainmedic.store import NotFound, Store
from trainmedic.store.facts import load_feedback, load_job_facts, load_node_events


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def job_account(store: Store, job_id: str, now: float) -> tuple[JobFacts, JobAccounting]:
    facts = load_job_facts(store, job_id)
    if not facts:
        raise NotFound(f"unknown job {job_id!r}")
    return facts[0], account_job(facts[0], now)


def interruption_json(gap: Interruption) -> dict[str, Any]:
    data = dataclasses.asdict(gap)
    data["downtime_s"] = _r(gap.downtime_s)
    data["badput_s"] = _r(gap.badput_s())
    data["slices"] = [
        {"part": part.value, "start": start, "end": end, "seconds": _r(end - start)}
        for part, (start, end) in gap.slices
    ]
    for key in ("lost_work_s", "step_time_s"):
        data[key] = _r(data[key], 4)
    return data


def accounting_json(account: JobAccounting, *, segments: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "job_id": account.job_id,
        "start": account.start,
        "end": account.end,
        "ongoing": account.ongoing,
        "wall_s": _r(account.wall_s),
        "productive_s": _r(account.productive_s),
        "goodput": _r(account.goodput, 4),
        "checkpoint_s": _r(account.checkpoint_s),
        "checkpoints_measured": account.checkpoints_measured,
        "checkpoints_unmeasured": account.checkpoints_unmeasured,
        "lost_work_s": _r(account.lost_work_s),
        "by_part": {k: _r(v) for k, v in account.by_part().items()},
        "badput_by_cause": {k: _r(v) for k, v in account.by_cause().items()},
        "attempts": [dataclasses.asdict(a) for a in account.attempts],
        "interruptions": [interruption_json(g) for g in account.interruptions],
    }
    if segments:
        data["segments"] = [
            {"start": s.start, "end": s.end, "part": s.part.value, "cause": s.cause}
            for s in account.segments
        ]
    return data


def node_json(node: NodeAccount, *, history: bool = True) -> dict[str, Any]:
    data = dataclasses.asdict(node)
    data["mtbi_s"] = _r(node.mtbi_s)
    if not history:
        data.pop("events")
    return data


def node_history(store: Store, node: str) -> NodeAccount:
    events = load_node_events(store, node)
    if not events:
        raise NotFound(f"no history for node {node!r}")
    return account_node(node, events)


def _agreement_json(a: Agreement) -> dict[str, Any]:
    return {
        "key": a.key,
        "answered": a.answered,
        "agreed": a.agreed,
        "same_action": a.same_action,
        "agreement": _r(a.agreement, 4),
        "action_match": _r(a.action_match, 4),
    }


def scorecard_json(card: Scorecard) -> dict[str, Any]:
    return {
        "answered": card.answered,
        "overall": _agreement_json(card.overall),
        "by_category": [_agreement_json(a) for a in card.by_category],
        "by_action": [_agreement_json(a) for a in card.by_action],
    }


def store_scorecard(store: Store) -> Scorecard:
    return scorecard(load_feedback(store))


def cluster(store: Store, now: float) -> tuple[ClusterSummary, list[JobAccounting]]:
    facts = load_job_facts(store)
    accounts = [account_job(f, now) for f in facts]
    nodes = account_nodes(load_node_events(store))
    answered = {f.advice_id for f in store.list_feedback()}
    return cluster_summary(list(zip(facts, accounts, strict=True)), nodes, answered, now), accounts


def cluster_json(summary: ClusterSummary, card: Scorecard) -> dict[str, Any]:
    return {
        "time": summary.time,
        "jobs": [dataclasses.asdict(j) | {"goodput": _r(j.goodput, 4)} for j in summary.jobs],
        "open_incidents": [
            {"job_id": job_id, **dataclasses.asdict(i)} for job_id, i in summary.open_incidents
        ],
        "advice_waiting": [
            {"job_id": job_id, **dataclasses.asdict(a)} for job_id, a in summary.advice_waiting
        ],
        "drained_nodes": [node_json(n, history=False) for n in summary.drained_nodes],
        "suspect_nodes": [node_json(n, history=False) for n in summary.suspect_nodes],
        "windows": [
            {
                "name": w.name,
                "start": w.start,
                "end": w.end,
                "wall_s": _r(w.wall_s),
                "productive_s": _r(w.productive_s),
                "goodput": _r(w.goodput, 4),
                "badput_by_cause": {k: _r(v) for k, v in w.badput_by_cause.items()},
                "badput_by_part": {k: _r(v) for k, v in w.badput_by_part.items()},
            }
            for w in summary.windows
        ],
        "scorecard": scorecard_json(card),
    }
