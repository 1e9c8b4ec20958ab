"""The pages: cluster (``/ui``), job (``/ui/jobs/{id}``), node (``/ui/nodes/{node}``), and the
scorecard form (``POST /ui/advice/{id}/feedback``). Server-rendered with Jinja2; charts are
drawn by the vendored Chart.js from JSON the page embeds, and every figure is also in a table,
so the page reads without JavaScript."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from trainmedic.api import accounting
from trainmedic.api.accounting_routes import ACTIONS_TAKEN
from trainmedic.api.web import auth, format
from trainmedic.api.web.timeline import job_timeline
from trainmedic.core.accounting import CAUSES, Part
from trainmedic.core.errors import StoreError
from trainmedic.service.config.sections import Config
from trainmedic.store import NotFound, Store

HERE = Path(__file__).resolve().parent
MAX_FORM_BYTES = 16_384


def templates() -> Jinja2Templates:
    engine = Jinja2Templates(directory=str(HERE / "templates"))
    engine.env.filters.update(
        dur=format.duration, pct=format.percent, clock=format.clock, label=format.label
    )
    engine.env.globals.update(parts=[p.value for p in Part], causes=CAUSES)
    return engine


def register(app: FastAPI, store: Store, config: Config, now: Callable[[], float]) -> None:
    pages = templates()
    app.mount("/ui/static", StaticFiles(directory=str(HERE / "static")), name="ui-static")

    def render(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
        page = {"title": "trainmedic", "mode": config.service.mode, "now": now()}
        if not auth.may_read(request, config):
            page["title"] = "trainmedic: token needed"
            return pages.TemplateResponse(request, "login.html", page, status_code=401)
        context = {**page, **context}
        response = pages.TemplateResponse(request, name, context, status_code=status)
        query_token = request.query_params.get("token")
        if query_token and auth.may_read(request, config):
            response.set_cookie(auth.COOKIE, query_token, httponly=True, samesite="strict")
        return response

    def not_found(request: Request, what: str) -> Response:
        return render(request, "missing.html", {"title": "not found", "what": what}, 404)

    @app.get("/", include_in_schema=False)
    def root() -> Response:
        return RedirectResponse("/ui", status_code=307)

    @app.get("/ui", response_class=HTMLResponse, include_in_schema=False)
    def cluster_page(request: Request) -> Response:
        summary, _accounts = accounting.cluster(store, now())
        card = accounting.store_scorecard(store)
        data = accounting.cluster_json(summary, card)
        chart = {w["name"]: w["badput_by_cause"] for w in data["windows"]}
        return render(
            request,
            "cluster.html",
            {"s": data, "chart_json": json.dumps({"causes": list(CAUSES), "windows": chart})},
        )

    @app.get("/ui/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(request: Request, job_id: str) -> Response:
        return job_view(request, job_id)

    def job_view(request: Request, job_id: str, error: str = "", status: int = 200) -> Response:
        job = store.get_job(job_id)
        if job is None:
            return not_found(request, f"job {job_id}")
        _facts, account = accounting.job_account(store, job_id, now())
        data = accounting.accounting_json(account)
        incidents = store.list_incidents(job_id)
        advice = store.list_advice(job_id)
        feedback = [f for f in store.list_feedback() if f.advice_id in {a.id for a in advice}]
        timeline = job_timeline(account, incidents, advice, feedback)
        chart = {
            "parts": data["by_part"],
            "gantt": [
                {"label": _gap_label(g), "phases": phases}
                for g, phases in zip(data["interruptions"], timeline.phases, strict=True)
            ],
        }
        return render(
            request,
            "job.html",
            {
                "title": f"trainmedic: job {job_id}",
                "job": job,
                "a": data,
                "t": timeline,
                "actions_taken": ACTIONS_TAKEN,
                "answered": request.query_params.get("answered", ""),
                "error": error,
                "chart_json": json.dumps(chart),
            },
            status,
        )

    @app.get("/ui/nodes/{node}", response_class=HTMLResponse, include_in_schema=False)
    def node_page(request: Request, node: str) -> Response:
        try:
            record = accounting.node_history(store, node)
        except NotFound:
            return not_found(request, f"history of node {node}")
        return render(request, "node.html", {"title": f"trainmedic: node {node}", "n": record})

    @app.post("/ui/advice/{advice_id}/feedback", include_in_schema=False)
    async def feedback_form(request: Request, advice_id: int) -> Response:
        body = (await request.body())[:MAX_FORM_BYTES].decode("utf-8", errors="replace")
        form = {k: v[0] for k, v in parse_qs(body).items()}
        try:
            advice = await run_in_threadpool(store.get_advice, advice_id)
        except NotFound:
            return not_found(request, f"advice {advice_id}")
        job_id = advice.job_id
        error = _form_error(form, config)
        if error:
            status = 403 if "token" in error else 422
            return await run_in_threadpool(job_view, request, job_id, error, status)
        try:
            await run_in_threadpool(
                lambda: store.add_feedback(
                    advice_id,
                    agree=form["agree"] == "yes",
                    action_taken=form["action_taken"],
                    note=form.get("note", "")[:2000],
                    by=form.get("by", "")[:128],
                    now=now(),
                )
            )
        except StoreError as exc:
            return await run_in_threadpool(job_view, request, job_id, str(exc), 503)
        target = f"/ui/jobs/{job_id}?answered={advice_id}#advice-{advice_id}"
        return RedirectResponse(target, status_code=303)


def _gap_label(gap: dict[str, Any]) -> str:
    after = gap["next_attempt"]
    return f"attempt {gap['attempt']} -> {after if after is not None else 'end'}"


def _form_error(form: dict[str, str], config: Config) -> str:
    """One line saying what is wrong with a scorecard answer, or ""."""
    if not config.service.api_token:
        return "answers are disabled: no api_token configured"
    if not auth.same(form.get("api_token", ""), config.service.api_token):
        return "the write token (api_token) is missing or wrong"
    if form.get("agree") not in ("yes", "no"):
        return "agree: choose yes or no"
    if form.get("action_taken") not in ACTIONS_TAKEN:
        return f"action taken: one of {', '.join(ACTIONS_TAKEN)}"
    return ""
