"""Who may read the pages and who may answer advice.

Reading: open while no read token is configured (as the JSON API's reads are); once one is
(``service.read_token``, added by the API hardening), a page needs it, from a ``token``
cookie, ``?token=`` (which also sets the cookie, so links keep working) or a bearer header.
The write token (``service.api_token``) is typed into the scorecard form, never stored in a
cookie: answering advice stays an explicit act.
"""

from __future__ import annotations

import secrets

from fastapi import Request

from trainmedic.service.config.sections import Config

COOKIE = "token"


def read_token(config: Config) -> str:
    # getattr: the read token is another change's field; until it exists reading is open.
    token = getattr(config.service, "read_token", "")
    return token if isinstance(token, str) else ""


def presented_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.query_params.get("token") or request.cookies.get(COOKIE) or ""


def same(presented: str, expected: str) -> bool:
    return bool(expected) and secrets.compare_digest(presented.encode(), expected.encode())


def may_read(request: Request, config: Config) -> bool:
    expected = read_token(config)
    if not expected:
        return True
    presented = presented_token(request)
    # The write token reads too: whoever may act may look.
    return same(presented, expected) or same(presented, config.service.api_token)
