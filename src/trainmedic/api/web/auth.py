"""Who may read the pages and who may answer advice.

Reading, as the JSON API's reads: the read token (``service.api_read_token``) or the write
token, from a ``token`` cookie, ``?token=`` (which also sets the cookie, so links keep
working) or a bearer header; with neither token configured, nobody reads.
The write token (``service.api_token``) is typed into the scorecard form, never stored in a
cookie: answering advice stays an explicit act.
"""

from __future__ import annotations

import secrets

from fastapi import Request

from trainmedic.service.config.sections import Config

COOKIE = "token"


def read_token(config: Config) -> str:
    return config.service.api_read_token


def presented_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.query_params.get("token") or request.cookies.get(COOKIE) or ""


def same(presented: str, expected: str) -> bool:
    return bool(expected) and secrets.compare_digest(presented.encode(), expected.encode())


def may_read(request: Request, config: Config) -> bool:
    """As the JSON API's reads: the read token or the write token; with neither configured,
    nobody reads."""
    expected = read_token(config)
    presented = presented_token(request)
    # The write token reads too: whoever may act may look.
    return same(presented, expected) or same(presented, config.service.api_token)
