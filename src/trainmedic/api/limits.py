"""Request bodies are size-limited before anything parses them.

``BodyLimit`` is plain ASGI middleware around the app: a ``Content-Length`` over the limit
is answered 413 without reading a byte of the body; a body without a length (chunked) is
counted as it arrives and answered 413 the moment it passes the limit. Either way the JSON
parser never sees more than ``max_bytes``, and the refusal is counted as ``api_body`` bad
input.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from trainmedic.core.badinput import BAD_INPUT, BadInput

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``: FastAPI passes an HTTPException from the body read through
    to the app's handlers (any other exception there becomes a 400)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body over {max_bytes} bytes")


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"request body over {self.max_bytes} bytes"
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or len(declared) > 18:
                await _answer(send, 400, "invalid Content-Length")
                return
            if int(declared) > self.max_bytes:
                BAD_INPUT.count(BadInput.API_BODY)
                await _answer(send, 413, too_large)
                return
        received = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    BAD_INPUT.count(BadInput.API_BODY)
                    raise _BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:  # read by something other than a FastAPI route
            if not started:
                await _answer(send, 413, too_large)
