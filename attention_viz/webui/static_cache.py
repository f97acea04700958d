"""Gradio's front-end files from memory: each read and routed once by Gradio, then answered from a kept copy.

Opening the page asks the server for ~85 files: Gradio's scripts and styles under /assets/ (their names carry a
hash of their content), its fonts and helper scripts under /static/, and /theme.css?v=<hash>. Gradio answers
each through its routes (path checks, a file response read from disk in a worker thread): ~0.3 s of the
server's CPU per opening, on the two cores a free Space shares between a class's openings and its runs.
StaticCache keeps the first complete answer to each such path (status, headers, body) and sends later ones from
memory without calling Gradio. Only files that cannot change while the server runs are kept; a range or
conditional request, an error, a large file or anything past the cap goes to Gradio as before.

    demo.launch(..., app_kwargs=server_app_kwargs())   # FastAPI(middleware=[StaticCache]) inside Gradio's

It sits inside Gradio's own middleware (its Brotli compression and CORS wrap it), so every answer is still
compressed and checked as Gradio does. Measured (docs/benchmarks.md, the page complete): the server's CPU per
opening 230-360 -> 120-140 ms, the page complete 66 ms sooner paired.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware import Middleware

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIXES = ("/assets/", "/static/")  # Gradio's own front end: files of the installed package, fixed while it runs
THEME = "/theme.css"                 # kept only when asked for with its ?v=<hash of the theme>
MAX_FILE_BYTES = 4 << 20             # a larger file is answered by Gradio every time
MAX_BYTES = 32 << 20                 # all kept copies together (the page's files are ~4 MB)
KEPT_HEADERS = {b"content-type", b"content-length", b"etag", b"last-modified", b"accept-ranges"}
PASS_HEADERS = {b"range", b"if-none-match", b"if-modified-since", b"if-range"}  # answers that depend on more


def server_app_kwargs() -> dict:
    """Gradio's launch(app_kwargs=...) for the app: its FastAPI app with StaticCache as its own middleware."""
    return {"middleware": [Middleware(StaticCache)]}


def _keepable(scope: Scope) -> bool:
    """A GET for one of Gradio's fixed files whose answer depends on its path alone."""
    if scope.get("type") != "http" or scope.get("method") != "GET":
        return False
    if any(name.lower() in PASS_HEADERS for name, _ in scope.get("headers", ())):
        return False
    path, query = scope.get("path", ""), scope.get("query_string", b"")
    if path.startswith(PREFIXES):
        return not query and ".." not in path
    return path == THEME and query.startswith(b"v=")


class StaticCache:
    """An ASGI middleware that keeps Gradio's fixed front-end files in memory after their first answer."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.kept: dict[tuple[str, bytes], tuple[list[tuple[bytes, bytes]], bytes]] = {}
        self.bytes = 0
        self.hits = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _keepable(scope):
            await self.app(scope, receive, send)
            return
        key = (scope["path"], scope.get("query_string", b""))
        kept = self.kept.get(key)
        if kept is not None:
            self.hits += 1
            headers, body = kept
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        start: Message = {}
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
            await send(message)

        await self.app(scope, receive, keep)
        self._keep(key, start, chunks)

    def _keep(self, key: tuple[str, bytes], start: Message, chunks: list[bytes]) -> None:
        """Keep a complete 200 answer of a size within the caps; anything else is not kept."""
        body = b"".join(chunks)
        if key in self.kept or start.get("status") != 200 or len(body) > MAX_FILE_BYTES or self.bytes + len(body) > self.max_bytes:
            return
        headers = [(bytes(name).lower(), bytes(value)) for name, value in start.get("headers", ())]
        if any(name == b"content-encoding" for name, _ in headers):
            return  # compressed below this middleware: not what Gradio's files look like here
        length = dict(headers).get(b"content-length")
        if length is not None and length != str(len(body)).encode():
            return  # an answer cut short
        headers = [(name, value) for name, value in headers if name in KEPT_HEADERS]
        if length is None:
            headers.append((b"content-length", str(len(body)).encode()))
        self.kept[key] = (headers, body)
        self.bytes += len(body)
