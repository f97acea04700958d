"""A bound on what one request may send: a body past MAX_BODY_BYTES is refused with 413 and a message, before Gradio
reads it (what a refused large text cost the server without it: docs/reliability.md, "What the server keeps per
visitor"). The app takes no uploads.

FastAPI's own `max_body_size` does the same job but answers "Content Too Large" alone; this one says the limit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 256 * 1024  # a request's body at most: an event's inputs are a few kB (a text of 500 characters,
                             # heads off of 4,000), so this refuses no page's request and bounds what one can send


class BodyLimit:
    """An ASGI middleware that refuses a request whose body is larger than `limit` with 413 and a message."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send, int(declared))
            return
        messages: list[Message] = []
        size = 0
        while True:  # the body as it comes (a few kB), kept to hand on; refused past the limit
            message = await receive()
            messages.append(message)
            size += len(message.get("body", b""))
            if size > self.limit:
                await self._refuse(scope, receive, send, size)
                return
            if message["type"] != "http.request" or not message.get("more_body"):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: int) -> None:
        answer = JSONResponse({"detail": f"Request too large: {size:,} bytes or more; at most {self.limit:,}. "
                                         "A text is at most 500 characters."}, status_code=413)
        await answer(scope, receive, send)
