"""The HTTP API: ``create_app(store, config)`` builds a FastAPI app over one store.

Every endpoint but ``/healthz`` needs a bearer token (``trainmedic.api.guards``): reads the
read token ``service.api_read_token`` or the write token, mutations the write token
``service.api_token`` (401 without credentials, 403 with a wrong token or when none is
configured). ``POST /jobs`` accepts only the paths, partitions and jobs ``[api]`` allows.
Request bodies over ``[api] max_body_bytes`` are refused (413) before they are parsed.

Every error answer is JSON ``{"detail": "<one line>"}`` naming the field or object at fault,
and no bad request stops the server. A store failure is answered with a generic message
(500, or 409 for a conflict) and a reference; the store's own message, which may quote SQL,
goes to the service log under that reference only. Endpoints are sync functions: FastAPI
runs them in its thread pool, which suits the blocking store.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from trainmedic import __version__
from trainmedic.api import accounting_routes, web
from trainmedic.api.guards import admit_registration, check_token
from trainmedic.api.limits import BodyLimit
from trainmedic.api.metrics import make_registry
from trainmedic.api.models import (
    BreakerAnswer,
    Health,
    JobDetail,
    JobRegistration,
    NodeSummary,
    Reconciliation,
)
from trainmedic.core.errors import ConfigError, StoreError
from trainmedic.core.logparse.declared import compile_progress_regex
from trainmedic.core.policy.overrides import job_policy
from trainmedic.service.config import Config
from trainmedic.service.discovery import check_kernel_logs
from trainmedic.service.source_status import SourceBoard
from trainmedic.store import (
    AdviceRecord,
    AdviceStatus,
    IncidentRecord,
    InvalidTransition,
    JobRecord,
    JobSpec,
    NodeEvent,
    NotFound,
    Store,
)
from trainmedic.store.base import DuplicateKey

log = logging.getLogger(__name__)
_bearer = HTTPBearer(
    auto_error=False, description="service.api_read_token (reads) or service.api_token"
)
_error_refs = itertools.count(1)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _one_line(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error.get("loc", ()))
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts).replace("\n", " ")


def _install_error_handlers(app: FastAPI) -> None:
    def detail(status: int, message: str) -> JSONResponse:
        return JSONResponse({"detail": message.replace("\n", " ")}, status_code=status)

    async def on_validation(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return detail(422, _one_line(exc))

    async def on_not_found(_request: Request, exc: Exception) -> JSONResponse:
        return detail(404, str(exc))

    async def on_transition(_request: Request, exc: Exception) -> JSONResponse:
        return detail(409, str(exc))

    async def on_store(request: Request, exc: Exception) -> JSONResponse:
        # The store's message may quote SQL or a table: logged here, never answered.
        ref = next(_error_refs)
        log.error("API %s %s: store error (ref %d): %s", request.method, request.url.path, ref, exc)
        if isinstance(exc, DuplicateKey):
            return detail(409, f"conflict with stored data (ref {ref}; see the service log)")
        return detail(500, f"store error (ref {ref}; see the service log)")

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        ref = next(_error_refs)
        log.error(
            "API %s %s: internal error (ref %d)",
            request.method,
            request.url.path,
            ref,
            exc_info=exc,
        )
        return detail(500, f"internal error (ref {ref}; see the service log)")

    async def on_too_deep(_request: Request, _exc: Exception) -> JSONResponse:
        return detail(422, "request body nested too deeply")

    async def on_config(_request: Request, exc: Exception) -> JSONResponse:
        return detail(422, str(exc))

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(NotFound, on_not_found)
    app.add_exception_handler(InvalidTransition, on_transition)
    app.add_exception_handler(StoreError, on_store)
    app.add_exception_handler(ConfigError, on_config)
    app.add_exception_handler(RecursionError, on_too_deep)
    app.add_exception_handler(Exception, on_unexpected)


def create_app(
    store: Store,
    config: Config,
    *,
    now: Callable[[], float] = time.time,
    sources: SourceBoard | None = None,
    collectors: Sequence[Collector] = (),
) -> FastAPI:
    """The API over ``store``; ``now`` is the clock for the timestamps it writes; ``sources``
    the running service's source status (``Service.sources``), when it runs in this process;
    ``collectors`` add the process's own metrics (the webhook notifier's) to /metrics."""
    app = FastAPI(
        title="trainmedic",
        version=__version__,
        description="Jobs, incidents, advice and nodes of the trainmedic recovery service.",
    )
    _install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.api.max_body_bytes)
    registry = make_registry(store, now, sources, extra=collectors)
    write_tokens = tuple(t for t in (config.service.api_token,) if t)
    read_tokens = tuple(t for t in (config.service.api_read_token, *write_tokens) if t)

    def require_write(credentials: Credentials) -> None:
        check_token(credentials, write_tokens, "mutating endpoints")

    def require_read(credentials: Credentials) -> None:
        check_token(credentials, read_tokens, "reads")

    authorised = [Depends(require_write)]
    readers = [Depends(require_read)]

    @app.get("/healthz", response_model=Health)
    def healthz() -> Health:
        breaker = store.breaker_state()
        return Health(
            status="ok",
            mode=config.service.mode,
            time=now(),
            jobs=len(store.list_jobs()),
            drain_breaker="tripped" if breaker.tripped else "closed",
            drain_breaker_since=breaker.tripped_at,
        )

    @app.get("/breaker", response_model=BreakerAnswer, dependencies=readers)
    def breaker_state() -> BreakerAnswer:
        state = store.breaker_state()
        return BreakerAnswer(state=state, advice_only=state.tripped)

    @app.post("/breaker/reset", response_model=BreakerAnswer, dependencies=authorised)
    def reset_breaker() -> BreakerAnswer:
        """The operator's reset of a tripped drain circuit breaker (drains resume)."""
        was, state = store.reset_breaker(now=now(), by="api")
        return BreakerAnswer(state=state, advice_only=state.tripped, was_tripped=was)

    @app.get("/jobs", response_model=list[JobRecord], dependencies=readers)
    def list_jobs() -> list[JobRecord]:
        return store.list_jobs()

    @app.get("/jobs/{job_id}", response_model=JobDetail, dependencies=readers)
    def get_job(job_id: str) -> JobDetail:
        job = store.get_job(job_id)
        if job is None:
            raise HTTPException(404, f"unknown job {job_id!r}")
        return JobDetail(
            job=job,
            attempts=store.list_attempts(job_id),
            sources=sources.of_job(job_id) if sources is not None else [],
        )

    @app.post("/jobs", response_model=JobRecord, status_code=201, dependencies=authorised)
    def register_job(body: JobRegistration) -> JobRecord:
        admit_registration(body, config.api)
        # Validate the overrides now, so a bad policy is refused here, not at the incident.
        job_policy(config.policy, body.policy, source="policy")
        if body.progress_regex:
            compile_progress_regex(body.progress_regex)
        check_kernel_logs(
            body.kernel_logs, body.log_paths, config.scheduler.slurm.kernel_log_template
        )
        spec = JobSpec(
            log_paths=tuple(body.log_paths),
            kernel_logs=dict(body.kernel_logs),
            checkpoint_dir=body.checkpoint_dir,
            nodes=tuple(body.nodes),
            partition=body.partition,
            user=body.user,
            policy=dict(body.policy),
            progress_regex=body.progress_regex,
        )
        return store.register_job(body.job_id, body.scheduler, now=now(), name=body.name, spec=spec)

    @app.get("/incidents", response_model=list[IncidentRecord], dependencies=readers)
    def list_incidents(job_id: str | None = None) -> list[IncidentRecord]:
        return store.list_incidents(job_id)

    @app.get("/incidents/{incident_id}", response_model=IncidentRecord, dependencies=readers)
    def get_incident(incident_id: int) -> IncidentRecord:
        return store.get_incident(incident_id)

    @app.get("/advice", response_model=list[AdviceRecord], dependencies=readers)
    def list_advice(
        job_id: str | None = None,
        active: Annotated[bool, Query(description="only pending or applying")] = False,
    ) -> list[AdviceRecord]:
        return store.list_advice(job_id, active_only=active)

    @app.get("/advice/{advice_id}", response_model=AdviceRecord, dependencies=readers)
    def get_advice(advice_id: int) -> AdviceRecord:
        return store.get_advice(advice_id)

    @app.post(
        "/advice/{advice_id}/reconciliation", response_model=AdviceRecord, dependencies=authorised
    )
    def reconcile(advice_id: int, body: Reconciliation) -> AdviceRecord:
        current = store.get_advice(advice_id)
        executor = body.executor_id
        if body.status == "applying":
            if not executor:
                raise HTTPException(422, "executor_id: required to claim advice (applying)")
            if not store.claim_advice(advice_id, executor):
                owner = current.claimed_by or "nobody"
                raise HTTPException(
                    409,
                    f"advice {advice_id} is {current.status.value} (claimed by {owner}); "
                    "cannot claim it",
                )
        elif executor and current.claimed_by not in (None, executor):
            raise HTTPException(409, f"advice {advice_id} is claimed by {current.claimed_by}")
        for step in body.steps_done:
            store.mark_step_done(advice_id, step)
        if body.applied:
            store.mark_applied(advice_id, now=now())
        if body.status != "applying" or body.note is not None:
            store.set_advice_status(advice_id, AdviceStatus(body.status), now=now(), note=body.note)
        return store.get_advice(advice_id)

    @app.get("/nodes", response_model=list[NodeSummary], dependencies=readers)
    def list_nodes() -> list[NodeSummary]:
        by_node: dict[str, list[NodeEvent]] = {}
        for event in store.node_history():
            by_node.setdefault(event.node, []).append(event)
        return [
            NodeSummary(
                node=node,
                incidents=sum(1 for e in events if e.incident_id is not None),
                strong_evidence=sum(1 for e in events if e.strong),
                drains=sum(1 for e in events if e.drained),
                last_seen=max(e.time for e in events),
                history=events,
            )
            for node, events in sorted(by_node.items())
        ]

    accounting_routes.register(app, store, now, read=readers, write=authorised)
    web.register(app, store, config, now)

    @app.get("/metrics", response_class=Response, dependencies=readers)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return app
