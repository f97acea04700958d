"""How the server answers a page opening: Gradio's fixed files from memory, and the page itself compressed.

Opening the page asks the server for the page (GET /: the HTML with the whole app's config inlined) and ~85 files:
Gradio's scripts and styles under /assets/ (their names carry a hash of their content), its fonts and helper
scripts under /static/, and /theme.css?v=<hash>. Two ASGI middlewares:

- StaticCache (in front of the whole app, Gradio's CORS and Brotli middleware included: files_first) keeps the
  first complete answer to each of Gradio's fixed files (status, headers, body) and sends later ones from memory
  without calling Gradio's routes, which do work for every file (path checks, a file read in a worker thread).
  Only files that cannot change while the server runs are kept; a range or conditional request, a cross-origin
  one, an error, a large file or anything past the cap goes to Gradio as before. Requests for a file that arrive
  while its first is with Gradio wait for that one's answer: a class arriving at a server that has not served the
  page yet asks Gradio for each file once, not once per student (300 students: ~20,000 file reads in worker
  threads, tens of seconds of one core).
  Files named by a hash of their content (/assets/, the theme) are also marked for browsers to keep for good
  (`Cache-Control: immutable`; Gradio sends none), so a returning student's browser asks for none of them.
  A kept script or style goes out compressed as Gradio would compress it (Brotli, else gzip), from a copy made
  once per file and encoding, instead of compressing the same file again for every student.
- PageCompression (the FastAPI app's own middleware: server/http.py) answers the page and /config from the first
  answer Gradio built for the same address and config (Gradio builds each anew for every request: a deep copy of
  the whole config), and compresses them, which Gradio does not (its compression goes by file extension): Brotli
  where the browser accepts it, else gzip, once per encoding. A kept answer carries an ETag of its content and
  `Cache-Control: no-cache`, so a browser opening the page again asks with If-None-Match and gets a 304, no body
  (the page with its config inlined is ~100 kB compressed; the files around it are kept by the browser already).

    demo.launch(..., app_kwargs=http.server_app_kwargs(views.runs.catalog))
    files_first(app)   (the app launch returned)

What each part saves: docs/benchmarks.md ("What made it fast": a page opening on the server).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from attention_viz.server import gradio_internals as gradio
from attention_viz.server.gradio_internals import GRADIO_COMPRESSES, GRADIO_MIN_BYTES

try:  # Gradio's own dependency (its Brotli middleware); gzip alone where it is missing
    import brotli
except ImportError:  # pragma: no cover
    brotli = None

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIXES = ("/assets/", "/static/")  # Gradio's own front end: files of the installed package, fixed while it runs
THEME = "/theme.css"                 # kept only when asked for with its ?v=<hash of the theme>
MAX_FILE_BYTES = 4 << 20             # a larger file is answered by Gradio every time
MAX_BYTES = 32 << 20                 # all kept copies together (the page's files are ~1 MB)
KEPT_HEADERS = {b"content-type", b"content-length", b"etag", b"last-modified", b"accept-ranges", b"cache-control"}
# files named by a hash of their content (Gradio's /assets/, the theme's ?v=): a browser may keep them for good
IMMUTABLE = (b"cache-control", b"public, max-age=31536000, immutable")
PASS_HEADERS = {b"range", b"if-none-match", b"if-modified-since", b"if-range",  # answers that depend on more,
                b"origin"}  # and a cross-origin request, which Gradio's CORS middleware answers


def files_first(app: Any) -> StaticCache:
    """Put StaticCache in front of the running app's whole middleware stack (Gradio's compression and CORS
    included), so a kept file is sent without passing through them (docs/benchmarks.md, a page opening on the
    server). Until this runs, Gradio answers every file."""
    return gradio.put_in_front(app, StaticCache)


def _named_by_content(scope: Scope) -> bool:
    path = scope.get("path", "")
    return (path.startswith("/assets/") and not scope.get("query_string")) or (
        path == THEME and scope.get("query_string", b"").startswith(b"v="))


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


def _kept_for_good(send: Send) -> Send:
    """`send` with a 200 answer marked for browsers to keep for good (where Gradio says nothing about caching)."""
    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start" and message.get("status") == 200:
            headers = list(message.get("headers", ()))
            if not any(bytes(name).lower() == b"cache-control" for name, _ in headers):
                message = {**message, "headers": headers + [IMMUTABLE]}
        await send(message)
    return marked


class StaticCache:
    """An ASGI middleware that keeps Gradio's fixed front-end files in memory after their first answer."""

    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.kept: dict[tuple[str, bytes], tuple[list[tuple[bytes, bytes]], bytes]] = {}
        self.packed: dict[tuple[tuple[str, bytes], str], bytes] = {}  # (key, "br" | "gzip") -> the body compressed
        self.asked: dict[tuple[str, bytes], asyncio.Future] = {}  # key -> done once Gradio's first answer is in
        self.bytes = 0
        self.hits = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _named_by_content(scope):
            send = _kept_for_good(send)
        if not _keepable(scope):
            await self.app(scope, receive, send)
            return
        # one entry for the theme whatever its ?v= says (Gradio's route reads no query): made-up queries fill nothing
        key = (scope["path"], b"" if scope["path"] == THEME else scope.get("query_string", b""))
        kept = self.kept.get(key)
        waited = kept is None and key in self.asked
        if waited:  # another request is fetching it from Gradio: its answer is this one's
            await asyncio.shield(self.asked[key])
            kept = self.kept.get(key)
        if kept is not None:
            self.hits += 1
            headers, body = self._compressed(key, kept, _accepted(scope))
            await send({"type": "http.response.start", "status": 200, "headers": list(headers)})
            await send({"type": "http.response.body", "body": body})
            return
        if waited:  # that answer was not kept (an error, too large): Gradio answers this one too
            await self._from_gradio(key, scope, receive, send)
            return
        fetched = self.asked[key] = asyncio.get_running_loop().create_future()
        try:
            await self._from_gradio(key, scope, receive, send)
        finally:
            del self.asked[key]
            fetched.set_result(None)

    async def _from_gradio(self, key: tuple[str, bytes], scope: Scope, receive: Receive, send: Send) -> None:
        # Gradio's answer in full, uncompressed (its compression is inside: asked for none), then from the kept copy
        start: Message = {}
        chunks: list[bytes] = []

        async def hold(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message, headers=list(message.get("headers", ())))
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))

        plain = {**scope, "headers": [(name, value) for name, value in scope.get("headers", ())
                                      if name.lower() != b"accept-encoding"]}
        await self.app(plain, receive, hold)
        self._keep(key, start, chunks)
        kept = self.kept.get(key)
        if kept is None:  # not kept (an error, too large, past the cap): Gradio's answer as it gave it
            await send({"type": "http.response.start", "status": start.get("status", 500),
                        "headers": start.get("headers", [])})
            await send({"type": "http.response.body", "body": b"".join(chunks)})
            return
        headers, body = self._compressed(key, kept, _accepted(scope))
        await send({"type": "http.response.start", "status": 200, "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})

    def _compressed(self, key: tuple[str, bytes], kept: tuple[list[tuple[bytes, bytes]], bytes],
                    encoding: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """The kept answer compressed as the request accepts and Gradio would compress it (by the file's extension,
        from 400 bytes), once per file and encoding.
        Where the caps leave no room for the copy, the answer goes as it is (Gradio compresses it)."""
        headers, body = kept
        if not encoding or len(body) < GRADIO_MIN_BYTES or not key[0].lower().endswith(GRADIO_COMPRESSES):
            return headers, body
        packed = self.packed.get((key, encoding))
        if packed is None:
            if self.bytes + len(body) > self.max_bytes:  # no room for a copy: not compressed here on every request
                return headers, body
            packed = compress(body, encoding)
            if self.bytes + len(packed) > self.max_bytes:
                return headers, body
            self.packed[(key, encoding)] = packed
            self.bytes += len(packed)
        headers = [(name, value) for name, value in headers if name != b"content-length"]
        return headers + [(b"content-encoding", encoding.encode()), (b"content-length", str(len(packed)).encode()),
                          (b"vary", b"Accept-Encoding")], packed

    def _keep(self, key: tuple[str, bytes], start: Message, chunks: list[bytes]) -> None:
        """Keep a complete 200 answer of a size within the caps; anything else is not kept."""
        if key in self.kept or start.get("status") != 200:
            return
        body = b"".join(chunks)
        if len(body) > MAX_FILE_BYTES or self.bytes + len(body) > self.max_bytes:
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


PAGES = ("/", "/config")  # answered by Gradio in full, never streamed
COMPRESSIBLE = (b"text/html", b"application/json")
MIN_BYTES = 1024
BROTLI_QUALITY = 4  # as Gradio's own middleware: 370 kB in ~4 ms
GZIP_LEVEL = 6


def _accepted(scope: Scope) -> str:
    """br or gzip, as the request accepts them (br first), else ""."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"accept-encoding":
            accepted = {part.split(";")[0].strip() for part in value.decode("latin-1").lower().split(",")}
            return "br" if "br" in accepted and brotli is not None else ("gzip" if "gzip" in accepted else "")
    return ""


def compress(body: bytes, encoding: str) -> bytes:
    return brotli.compress(body, quality=BROTLI_QUALITY) if encoding == "br" else gzip.compress(body, GZIP_LEVEL)


ORIGIN_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-gradio-server")  # what Gradio's root URL
MAX_ORIGINS = 8  # kept pages per path: one per address the app is reached by (a proxy's, the Space's, loopback)


def _origin(scope: Scope) -> tuple:
    """What Gradio builds the page's root URL from (route_utils.get_root_url): the URL's scheme, server and root path,
    and the headers that name another host or scheme."""
    headers = tuple((name.lower(), value) for name, value in scope.get("headers", ())
                    if name.lower() in ORIGIN_HEADERS)
    return scope.get("scheme"), scope.get("server"), scope.get("root_path", ""), tuple(sorted(headers))


def _validated(scope: Scope, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request's If-None-Match names the kept answer's ETag (or "*")."""
    etag = dict(headers).get(b"etag")
    for name, value in scope.get("headers", ()):
        if name.lower() == b"if-none-match" and etag is not None:
            asked = {tag.strip() for tag in value.split(b",")}
            return b"*" in asked or etag in asked or etag.removeprefix(b"W/") in asked
    return False


def _config_of(scope: Scope) -> object | None:
    """The app's config object where the page is the same for every visitor (no login), else None."""
    app = scope.get("app")
    return None if app is None else gradio.page_config(app)


class PageCompression:
    """An ASGI middleware for the page and /config: Gradio builds both anew for every request (a deep copy of the
    app's whole config, its API description, the template) and sends them uncompressed. A plain
    request (no query, no login) is answered from the answer Gradio gave the first time for the same address and
    config, compressed as accepted (each encoding once); anything else is Gradio's answer, compressed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.last: dict[tuple[str, str], tuple[bytes, bytes]] = {}  # (path, encoding) -> (digest, compressed)
        # (path, origin) -> (the config it was built from, headers, body, {encoding: compressed body})
        self.kept: dict[tuple[str, tuple], tuple[object, list[tuple[bytes, bytes]], bytes, dict[str, bytes]]] = {}
        self.hits = 0
        self.not_modified = 0  # of the hits, answered 304 (the browser had the page)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (scope.get("type") == "http" and scope.get("method") == "GET" and scope.get("path") in PAGES):
            await self.app(scope, receive, send)
            return
        encoding = _accepted(scope)
        config = None if scope.get("query_string") else _config_of(scope)
        key = (scope["path"], _origin(scope))
        kept = self.kept.get(key) if config is not None else None
        if kept is not None and kept[0] is config:
            self.hits += 1
            await self._send_kept(kept, encoding, send, scope)
            return
        if not encoding and config is None:
            await self.app(scope, receive, send)
            return
        start: Message = {}
        chunks: list[bytes] = []

        async def hold(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body"):
                    body = b"".join(chunks)
                    if config is not None and self._keep(key, config, start, body):
                        await self._send_kept(self.kept[key], encoding, send, scope)
                    else:
                        await self._send(scope["path"], start, body, encoding, send)
            else:
                await send(message)

        await self.app(scope, receive, hold)

    def _keep(self, key: tuple[str, tuple], config: object, start: Message, body: bytes) -> bool:
        """Keep a complete 200 HTML or JSON answer that sets no cookie and is not compressed; whether it was kept."""
        headers = [(bytes(name).lower(), bytes(value)) for name, value in start.get("headers", ())]
        names = {name for name, _ in headers}
        if (start.get("status") != 200 or not dict(headers).get(b"content-type", b"").startswith(COMPRESSIBLE)
                or b"content-encoding" in names or b"set-cookie" in names):
            return False
        if key not in self.kept and sum(k[0] == key[0] for k in self.kept) >= MAX_ORIGINS:
            return False  # a client inventing Host headers fills nothing
        headers = [(name, value) for name, value in headers
                   if name not in (b"content-length", b"vary", b"etag", b"cache-control")]
        # named by its content, and to be asked again each time (the page changes with the app): a reopening's browser
        # sends the name back and gets 304 (nothing) where it has this page already
        digest = hashlib.blake2b(body, digest_size=16).hexdigest()
        headers += [(b"etag", f'W/"av-{digest}"'.encode()), (b"cache-control", b"no-cache")]
        self.kept[key] = (config, headers, body, {})
        return True

    async def _send_kept(self, kept: tuple, encoding: str, send: Send, scope: Scope) -> None:
        _, headers, body, packed = kept
        if _validated(scope, headers):  # the browser's copy is this page: nothing to send again
            self.not_modified += 1
            await send({"type": "http.response.start", "status": 304, "headers": [
                (name, value) for name, value in headers if name in (b"etag", b"cache-control")]
                + [(b"vary", b"Accept-Encoding")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if encoding and len(body) >= MIN_BYTES:
            if encoding not in packed:
                packed[encoding] = compress(body, encoding)
            body = packed[encoding]
            headers = headers + [(b"content-encoding", encoding.encode()), (b"vary", b"Accept-Encoding")]
        else:
            headers = headers + [(b"vary", b"Accept-Encoding")]
        await send({"type": "http.response.start", "status": 200,
                    "headers": headers + [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _send(self, path: str, start: Message, body: bytes, encoding: str, send: Send) -> None:
        headers = [(bytes(name).lower(), bytes(value)) for name, value in start.get("headers", ())]
        kind = dict(headers).get(b"content-type", b"")
        if (start.get("status") != 200 or len(body) < MIN_BYTES or not kind.startswith(COMPRESSIBLE)
                or any(name == b"content-encoding" for name, _ in headers)):
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        digest = hashlib.blake2b(body, digest_size=16).digest()
        kept = self.last.get((path, encoding))
        if kept is not None and kept[0] == digest:  # the same page as last time: compressed once
            packed = kept[1]
        else:
            packed = compress(body, encoding)
            self.last[(path, encoding)] = (digest, packed)
        headers = [(name, value) for name, value in headers if name not in (b"content-length", b"vary")]
        headers += [(b"content-encoding", encoding.encode()), (b"content-length", str(len(packed)).encode()),
                    (b"vary", b"Accept-Encoding")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": packed})
