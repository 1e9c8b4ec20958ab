"""The service's HTTP API (FastAPI): ``create_app(store, config, now=time.time)``.

Endpoints (JSON; OpenAPI at ``/openapi.json``):

=======================================  ====  ===============================================
GET  /healthz                                  liveness, mode, number of jobs
GET  /jobs                                     watched jobs
GET  /jobs/{job_id}                            one job with its attempts
POST /jobs                               auth  register a job to watch (log paths, kernel
                                               logs, checkpoint dir, nodes, policy overrides)
GET  /incidents?job_id=                        incidents (verdict + evidence), oldest first
GET  /incidents/{id}                           one incident
GET  /advice?job_id=&active=true               advice; ``active``: pending or applying
GET  /advice/{id}                              one advice
POST /advice/{id}/reconciliation         auth  an external executor's claim / steps / status
GET  /nodes                                    nodes with their history
GET  /metrics                                  Prometheus text (see ``trainmedic.api.metrics``)
=======================================  ====  ===============================================

Accounting, node history, cluster summary and the scorecard are documented in
``trainmedic.api.accounting_routes``; the web pages (``/ui``) in ``trainmedic.api.web``.

Serve it with uvicorn: ``uvicorn.run(create_app(store, config), host=..., port=...)``.
"""

from __future__ import annotations

from trainmedic.api.app import create_app

__all__ = ["create_app"]
