"""webui.static_cache: Gradio's fixed front-end files kept after their first answer, everything else passed on."""

from __future__ import annotations

import asyncio
import re
import socket

import httpx
import pytest

from attention_viz.webui import static_cache
from attention_viz.webui.static_cache import StaticCache, server_app_kwargs


class Files:
    """A stand-in ASGI app: answers every path with its own body, counting the calls."""

    def __init__(self, status: int = 200, chunks: int = 1, length: int | None = None, encoding: bytes | None = None):
        self.calls: list[str] = []
        self.status, self.chunks, self.length, self.encoding = status, chunks, length, encoding

    async def __call__(self, scope, receive, send):
        self.calls.append(scope["path"] + ("?" + scope["query_string"].decode() if scope.get("query_string") else ""))
        body = f"body of {scope['path']}".encode() * 3
        headers = [(b"content-type", b"application/javascript"), (b"etag", b'"x"'), (b"x-other", b"1")]
        headers.append((b"content-length", str(self.length if self.length is not None else len(body)).encode()))
        if self.encoding:
            headers.append((b"content-encoding", self.encoding))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        step = -(-len(body) // self.chunks)
        for i in range(self.chunks):
            await send({"type": "http.response.body", "body": body[i * step:(i + 1) * step],
                        "more_body": i < self.chunks - 1})


def get(app, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict, bytes]:
    """One request through the ASGI app: status, headers, body."""
    path, _, query = path.partition("?")
    scope = {"type": "http", "method": method, "path": path, "query_string": query.encode(),
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


def test_a_fixed_file_is_answered_once_by_gradio_then_from_memory():
    files = Files(chunks=3)
    cache = StaticCache(files)
    first = get(cache, "/assets/index-abc.js")
    second = get(cache, "/assets/index-abc.js")
    assert files.calls == ["/assets/index-abc.js"] and cache.hits == 1
    assert second[0] == 200 and second[2] == first[2] == b"body of /assets/index-abc.js" * 3
    assert second[1][b"content-type"] == b"application/javascript" and second[1][b"etag"] == b'"x"'
    assert second[1][b"content-length"] == str(len(first[2])).encode() and b"x-other" not in second[1]
    get(cache, "/static/fonts/a.woff2"), get(cache, "/static/fonts/a.woff2")
    get(cache, "/theme.css?v=123"), get(cache, "/theme.css?v=123")
    assert files.calls == ["/assets/index-abc.js", "/static/fonts/a.woff2", "/theme.css?v=123"]
    assert cache.bytes == sum(len(body) for _, body in cache.kept.values())


@pytest.mark.parametrize("path, method, headers", [
    ("/", "GET", {}),                                      # the page: holds the session's config
    ("/config", "GET", {}),
    ("/gradio_api/info", "GET", {}),
    ("/gradio_api/file=/etc/passwd", "GET", {}),           # a user's path: never ours to keep
    ("/assets/x.js?v=2", "GET", {}),                       # a query: not the fixed file alone
    ("/assets/../../secret.js", "GET", {}),
    ("/theme.css", "GET", {}),                             # the theme without its hash
    ("/assets/x.js", "POST", {}),
    ("/assets/x.js", "GET", {"Range": "bytes=0-3"}),       # part of a file
    ("/assets/x.js", "GET", {"If-None-Match": '"x"'}),     # a conditional request: Gradio answers 304 or 200
    ("/assets/x.js", "GET", {"If-Modified-Since": "Sun, 22 Nov 2026 15:33:15 GMT"}),
])
def test_everything_else_goes_to_gradio_every_time(path, method, headers):
    files = Files()
    cache = StaticCache(files)
    for _ in range(3):
        get(cache, path, method, headers)
    assert len(files.calls) == 3 and cache.hits == 0 and not cache.kept


@pytest.mark.parametrize("files", [Files(status=404), Files(status=500), Files(length=10_000),  # cut short
                                   Files(encoding=b"br")])
def test_an_error_a_short_answer_or_a_compressed_one_is_not_kept(files):
    cache = StaticCache(files)
    get(cache, "/assets/x.js"), get(cache, "/assets/x.js")
    assert len(files.calls) == 2 and not cache.kept


def test_the_caps_hold(monkeypatch):
    files = Files()
    body = len(get(StaticCache(Files()), "/assets/a.js")[2])
    cache = StaticCache(files, max_bytes=2 * body + 1)  # room for two of these files
    for name in ("a", "b", "c", "a", "b", "c"):
        get(cache, f"/assets/{name}.js")
    assert sorted(files.calls) == ["/assets/a.js", "/assets/b.js", "/assets/c.js", "/assets/c.js"]
    assert cache.bytes == 2 * body
    monkeypatch.setattr(static_cache, "MAX_FILE_BYTES", body - 1)
    small = StaticCache(Files())
    get(small, "/assets/a.js")
    assert not small.kept


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_app_serves_its_front_end_from_the_cache(runs):
    """The app launched as main() launches it: Gradio's files come back the same from the cache, still compressed
    by Gradio when asked, and the page itself is Gradio's every time."""
    from attention_viz.service.views import Views
    from attention_viz.webui import page

    demo = page.build_app(Views(runs))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                app_kwargs=server_app_kwargs())
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=30) as client:
            html = client.get(base + "/").text
            assets = sorted(set(re.findall(r"/assets/[A-Za-z0-9_.-]+\.(?:js|css)", html)))
            assert assets
            plain = [client.get(base + a, headers={"Accept-Encoding": "identity"}) for a in assets]
            again = [client.get(base + a, headers={"Accept-Encoding": "identity"}) for a in assets]
            packed = client.get(base + assets[0], headers={"Accept-Encoding": "br"})
        for a, b in zip(plain, again, strict=True):
            assert a.status_code == b.status_code == 200 and a.content == b.content
            assert a.headers["content-type"] == b.headers["content-type"]
        assert packed.headers.get("content-encoding") == "br" and packed.content == plain[0].content  # decoded
        cache = demo.server_app.middleware_stack
        while not isinstance(cache, StaticCache):
            cache = cache.app
        assert cache.hits >= len(assets) + 1 and set(assets) <= {path for path, _ in cache.kept}
    finally:
        demo.close()
