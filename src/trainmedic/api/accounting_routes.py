"""API endpoints of the accounting and the monitor-mode scorecard.

=======================================  ====  ===============================================
GET  /jobs/{job_id}/accounting                 where the job's wall time went: goodput,
                                               badput by part and by cause, attempts, each
                                               interruption's figures (``?segments=true``
                                               adds the labelled time segments)
GET  /nodes/{node}/history                     the node across jobs: incidents, categories,
                                               drains, MTBI, its history entries
GET  /cluster/summary                          jobs with goodput, open incidents, advice
                                               waiting for an answer, drained and suspect
                                               nodes, badput by cause (last day and week),
                                               the scorecard
GET  /scorecard                                agreement per category and per action
GET  /advice/{id}/feedback                     operators' answers about one advice
POST /advice/{id}/feedback               auth  record an answer: agree or not, the action
                                               the operator actually took, a note
=======================================  ====  ===============================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, get_args

from fastapi import FastAPI, Path, Query
from fastapi.params import Depends
from pydantic import BaseModel, ConfigDict, Field

from trainmedic.api import accounting
from trainmedic.api.models import NODE_PATTERN
from trainmedic.store import FeedbackRecord, Store

ActionTaken = Literal["restart", "restart_excluding", "stop", "none", "drain_only", "other"]
"""What an operator may say they did: an advice action, a drain alone, or something else."""
ACTIONS_TAKEN: tuple[str, ...] = get_args(ActionTaken)


class Feedback(BaseModel):
    """``POST /advice/{id}/feedback``: what the operator thought and did about the advice."""

    model_config = ConfigDict(extra="forbid")

    agree: bool = Field(description="the advice was right")
    action_taken: ActionTaken = Field(description="what the operator actually did")
    note: str = Field(default="", max_length=2000)
    by: str = Field(default="", max_length=128, description="who answered")


def register(
    app: FastAPI,
    store: Store,
    now: Callable[[], float],
    *,
    read: Sequence[Depends] = (),
    write: Sequence[Depends] = (),
) -> None:
    """Add the endpoints; ``read`` / ``write`` are the dependencies that authenticate them."""
    readers, writers = list(read), list(write)

    @app.get("/jobs/{job_id}/accounting", dependencies=readers)
    def job_accounting(
        job_id: str,
        segments: Annotated[bool, Query(description="add the labelled time segments")] = False,
    ) -> dict[str, Any]:
        _facts, account = accounting.job_account(store, job_id, now())
        return accounting.accounting_json(account, segments=segments)

    @app.get("/nodes/{node}/history", dependencies=readers)
    def node_history(node: Annotated[str, Path(pattern=NODE_PATTERN)]) -> dict[str, Any]:
        return accounting.node_json(accounting.node_history(store, node))

    @app.get("/cluster/summary", dependencies=readers)
    def cluster_summary() -> dict[str, Any]:
        summary, _accounts = accounting.cluster(store, now())
        return accounting.cluster_json(summary, accounting.store_scorecard(store))

    @app.get("/scorecard", dependencies=readers)
    def get_scorecard() -> dict[str, Any]:
        return accounting.scorecard_json(accounting.store_scorecard(store))

    @app.get(
        "/advice/{advice_id}/feedback", response_model=list[FeedbackRecord], dependencies=readers
    )
    def list_feedback(advice_id: int) -> list[FeedbackRecord]:
        store.get_advice(advice_id)  # 404 for an unknown advice
        return store.list_feedback(advice_id)

    @app.post(
        "/advice/{advice_id}/feedback",
        response_model=FeedbackRecord,
        status_code=201,
        dependencies=writers,
    )
    def add_feedback(advice_id: int, body: Feedback) -> FeedbackRecord:
        return store.add_feedback(
            advice_id,
            agree=body.agree,
            action_taken=body.action_taken,
            note=body.note,
            by=body.by,
            now=now(),
        )
