"""The web view served by ``trainmedic serve`` next to the JSON API: server-rendered pages
(Jinja2) for operators and researchers, one picture of what failed, why, what was done and
what it cost. ``register(app, store, config, now)`` adds them to the API's FastAPI app."""

from __future__ import annotations

from trainmedic.api.web.pages import register

__all__ = ["register"]
