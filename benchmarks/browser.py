"""One browser page over the app's protocol, at little cost to the machine that simulates the class: the one client
of the app that every benchmark and test of its protocol uses (benchmarks.students puts a student on it).

`Page`: its own session and pool of keep-alive connections; it opens the page (the HTML, its files, its config) and
calls an event as the browser's client does (join the queue, read the event stream, fetch the answer's files).
`elem_ids`, `opening_values` and `dependency` read a page's config. The files: a browser with an empty cache asks
for a page's files over six keep-alive connections, each request sent once the one before it on that connection has
been answered. `fetch_files` does the same over raw asyncio streams: an opening's ~70 files cost the client ~5 ms of CPU here, against ~25 ms through aiohttp's client (its request and
response objects) and ~80 ms through httpx's, so a class of hundreds arriving at once measures the server, not the
simulator. Bodies are read, never decoded; every answer must be 200 and complete (Content-Length or chunked).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import uuid
from urllib.parse import urlsplit

from .common import EventStream

ACCEPT = {"Accept-Encoding": "gzip, deflate, br, zstd"}  # what Chromium sends
HTTP_TIMEOUT_S = 120.0
API = "/gradio_api"
CONNECTIONS = 6     # what a browser keeps open to one host over HTTP/1.1
KEEP_ALIVE_S = 4.0  # an idle connection is closed after this (by default: under uvicorn's own 5 s; a class can keep
                    # them as long as a browser or proxy does: classroom --keep-alive-s)
MAX_LINE = 1 << 31  # an event stream's line (one message: a long text's run is megabytes) read whole up to this; aiohttp's
                    # own iteration refuses a line past twice its read buffer (512 KiB)


class FetchError(RuntimeError):
    """A file that did not come back whole with a 200."""


async def fetch_files(base: str, paths: tuple[str, ...], headers: dict[str, str], connections: int = CONNECTIONS,
                      timeout_s: float = 120.0) -> None:
    """GET every path from `base` over `connections` keep-alive connections (each sends its next request once its
    last is answered); FetchError on any answer but a whole 200."""
    if not paths:
        return
    url = urlsplit(base)
    host, port = url.hostname, url.port or 80
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    waiting = list(reversed(paths))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while waiting:
                path = waiting.pop()
                writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{extra}\r\n".encode("latin-1"))
                await _answer(reader, path)
        finally:
            writer.close()

    try:
        await asyncio.wait_for(asyncio.gather(*(connection() for _ in range(min(connections, len(paths))))), timeout_s)
    except (asyncio.IncompleteReadError, ConnectionError) as error:
        raise FetchError(f"the server closed the connection: {type(error).__name__}") from error
    except asyncio.TimeoutError as error:
        raise FetchError(f"no answer in {timeout_s:.0f} s") from error


async def _answer(reader: asyncio.StreamReader, path: str) -> None:
    """Read one whole answer (its body discarded)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        raise FetchError(f"{path}: {lines[0].decode('latin-1')}")
    fields = dict(line.lower().split(b": ", 1) for line in lines[1:] if b": " in line)
    if b"content-length" in fields:
        await reader.readexactly(int(fields[b"content-length"]))
    elif fields.get(b"transfer-encoding") == b"chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        raise FetchError(f"{path}: an answer of unknown length")


def elem_ids(config: dict) -> dict[str, int]:
    """A page's config: elem_id -> component id."""
    return {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}


def opening_values(config: dict) -> dict[int, object]:
    """A page's config: component id -> the value the page opens with."""
    return {c["id"]: c.get("props", {}).get("value") for c in config["components"]}


def dependency(config: dict, api_name: str) -> dict | None:
    """A page's config: the event named `api_name`."""
    return next((d for d in config["dependencies"] if d.get("api_name") == api_name), None)


class Refused(RuntimeError):
    """The queue refused to take an event (its join answered with an HTTP error): `detail` says why."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"join: HTTP {status}: {detail}")
        self.status, self.detail = status, detail


_CONFIGS: dict[bytes, dict] = {}  # the config's bytes as sent (compressed) -> the config; read, never changed


def _parsed(body: bytes, encoding: str) -> dict:
    """The config from its bytes as sent (Content-Encoding br, gzip or none): decoded and parsed once for the class
    (a class's pages get the same bytes; ~10 ms of the client's CPU each)."""
    config = _CONFIGS.get(body)
    if config is None:
        if len(_CONFIGS) > 8:
            _CONFIGS.clear()
        plain = body
        if encoding == "gzip":
            plain = gzip.decompress(body)
        elif encoding == "br":
            import brotli

            plain = brotli.decompress(body)
        config = _CONFIGS[body] = json.loads(plain)
    return config


class Page:
    """One browser page over the browser's protocol, asynchronously (one event loop drives the whole class): its own
    session, and a pool of CONNECTIONS keep-alive connections to the server, as a browser keeps per host.

    Opening (`open`): GET /, then the page's files with an empty cache over six connections (fetch_files: each
    sends its next request once the last is answered), then its config. An event (`call`), as the browser's
    client does it: POST /queue/join, GET /queue/data (server-sent events) until the event's answer, then every file
    the answer names. Bodies of files are read, never decoded (the client's CPU is the server's to measure); a
    request sent on a kept-alive connection the server closed meanwhile (uvicorn closes one idle for 5 s, the app for
    75) is sent again once on a new one (counted in .resent), as a browser does: a GET whatever the failure, any request the server closed before a
    byte of answer. patience_s: give up on an event whose answer has not come this long after joining (checked at
    each message of the stream; Gradio sends a heartbeat every 15 s); None waits as long as the stream stays open."""

    def __init__(self, base: str, patience_s: float | None = None, timeout_s: float = HTTP_TIMEOUT_S,
                 keep_alive_s: float = KEEP_ALIVE_S) -> None:
        import aiohttp

        self.base, self.patience_s = base, patience_s
        self.resent = 0  # requests sent again on a new connection: the server closed a kept one as it was used
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, keepalive_timeout=keep_alive_s),
            timeout=aiohttp.ClientTimeout(total=timeout_s), auto_decompress=False,
            cookie_jar=aiohttp.CookieJar(unsafe=True))  # keeps a sticky proxy's cookie from 127.0.0.1, as a browser
        self.session_hash = uuid.uuid4().hex[:11]
        self.config: dict = {}
        self.estimations: list[dict] = []  # the last call's queue estimations (rank, queue_size, rank_eta), in order

    async def close(self) -> None:
        await self.http.close()

    async def _send(self, method: str, url: str, **kwargs):
        """The response (its body unread: the caller reads it inside `async with`), sent again once where a browser
        would."""
        import aiohttp

        try:
            return await self.http.request(method, url, **kwargs)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):  # before any byte of answer
            self.resent += 1
            return await self.http.request(method, url, **kwargs)

    async def get(self, path: str, decoded: bool = False, headers: dict = ACCEPT) -> bytes:
        """GET a path (or a whole URL): its body, as sent (`decoded`: uncompressed); a non-200 raises."""
        async with await self._send("GET", path if "://" in path else self.base + path, headers=headers,
                                    auto_decompress=decoded) as response:
            body = await response.read()
            if response.status != 200:
                raise FetchError(f"{path}: HTTP {response.status}")
            return body

    async def open(self, files: tuple[str, ...] = ()) -> None:
        """GET / (the HTML), then its files over the pool of CONNECTIONS, then the config."""
        await self.get("/")
        await fetch_files(self.base, files, ACCEPT)
        async with await self._send("GET", self.base + "/config", headers=ACCEPT, auto_decompress=False) as response:
            body = await response.read()
            if response.status != 200:
                raise FetchError(f"/config: HTTP {response.status}")
            self.config = _parsed(body, response.headers.get("Content-Encoding", ""))

    async def beside(self, component_id: int, fn_name: str, data: object) -> object:
        """A gr.HTML's server function asked as the page's client does (POST /component_server/, no queue): its
        answer, or None where the server gave none (an HTTP error, as the client's console.warn)."""
        body = {"data": data, "component_id": component_id, "fn_name": fn_name, "session_hash": self.session_hash}
        async with await self._send("POST", self.base + API + "/component_server/", json=body,
                                    auto_decompress=True) as response:
            return await response.json(content_type=None) if response.status == 200 else None

    async def call(self, dependency: dict, values: dict[int, object], trigger_id: int | None) -> tuple[float, dict]:
        """Seconds from joining the queue to the last file of the answer fetched, and the completed message."""
        body = {"data": [values[i] for i in dependency["inputs"]], "event_data": None, "fn_index": dependency["id"],
                "trigger_id": trigger_id, "session_hash": self.session_hash}
        t0 = time.perf_counter()
        async with await self._send("POST", self.base + API + "/queue/join", json=body,
                                    auto_decompress=True) as joined:
            answer = await joined.json(content_type=None)
            if joined.status != 200:
                raise Refused(joined.status, str(answer.get("detail", answer) if isinstance(answer, dict) else answer))
        reader = EventStream(answer.get("event_id"), t0, self.patience_s)
        self.estimations = reader.estimations
        async with await self._send("GET", self.base + API + "/queue/data", params={"session_hash": self.session_hash},
                                    auto_decompress=True) as stream:
            while raw := await stream.content.readuntil(b"\n", max_size=MAX_LINE):
                if reader.read(raw):
                    break
        completed = reader.answer()
        await asyncio.gather(*(self.get(item["url"]) for item in completed["output"]["data"]
                               if isinstance(item, dict) and item.get("url")))
        return time.perf_counter() - t0, completed
