"""A bound on what one request may send: a body past MAX_BODY_BYTES is refused with 413 and a message, before Gradio
reads it (what a refused large text cost the server without it: docs/reliability.md, "What the server keeps per
visitor"). Where the server takes uploads (a model that reads pictures or recordings), Gradio's upload route takes a
body up to `uploads` bytes (and UPLOAD_SLACK for the form around the file): streamed on as it comes, never held here,
and cut where it passes that (Gradio's own max_file_size refuses a larger file, naming the limit).

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
UPLOAD_PATH = "/gradio_api/upload"
UPLOAD_SLACK = 64 * 1024     # a multipart form's bytes besides its file (boundaries, headers)


class BodyLimit:
    """An ASGI middleware that refuses a request whose body is larger than `limit` with 413 and a message."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES, uploads: int = 0) -> None:
        self.app, self.limit, self.uploads = app, limit, uploads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if self.uploads and scope.get("path") == UPLOAD_PATH:
            await self._upload(scope, receive, send, int(declared) if declared.isdigit() else None)
            return
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

    async def _upload(self, scope: Scope, receive: Receive, send: Send, declared: int | None) -> None:
        """An upload: refused when it says it is larger than the limit, else streamed on and cut past it."""
        most = self.uploads + UPLOAD_SLACK
        if declared is not None and declared > most:
            await self._refuse(scope, receive, send, declared, f"A file is at most {self.uploads // 2**20} MiB.")
            return
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            size += len(message.get("body", b""))
            if size > most:  # a body longer than it said, or one that said nothing: ended here
                return {"type": "http.disconnect"}
            return message

        await self.app(scope, counted, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, size: int,
                      what: str = "A text is at most 500 characters.") -> None:
        most = self.uploads + UPLOAD_SLACK if what.startswith("A file") else self.limit
        answer = JSONResponse({"detail": f"Request too large: {size:,} bytes or more; at most {most:,}. {what}"},
                              status_code=413)
        await answer(scope, receive, send)
