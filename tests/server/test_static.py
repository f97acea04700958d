"""server.static, server.http and server.body_limit: Gradio's fixed front-end files kept after their first answer,
the page compressed, unknown endpoints answered 404, a body past the limit refused."""

from __future__ import annotations

import asyncio
import re
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from attention_viz.server import static as static_cache
from attention_viz.server.http import server_app_kwargs
from attention_viz.server.static import PageCompression, StaticCache, files_first


class Files:
    """A stand-in ASGI app: answers every path with its own body, counting the calls."""

    def __init__(self, status: int = 200, chunks: int = 1, length: int | None = None, encoding: bytes | None = None,
                 repeat: int = 3):
        self.calls: list[str] = []
        self.status, self.chunks, self.length, self.encoding, self.repeat = status, chunks, length, encoding, repeat

    async def __call__(self, scope, receive, send):
        self.calls.append(scope["path"] + ("?" + scope["query_string"].decode() if scope.get("query_string") else ""))
        body = f"body of {scope['path']}".encode() * self.repeat
        headers = [(b"content-type", b"application/javascript"), (b"etag", b'"x"'), (b"x-other", b"1")]
        headers.append((b"content-length", str(self.length if self.length is not None else len(body)).encode()))
        if self.encoding:
            headers.append((b"content-encoding", self.encoding))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        step = -(-len(body) // self.chunks)
        for i in range(self.chunks):
            await send({"type": "http.response.body", "body": body[i * step:(i + 1) * step],
                        "more_body": i < self.chunks - 1})


def get(app, path: str, method: str = "GET", headers: dict | None = None, gradio=None) -> tuple[int, dict, bytes]:
    """One request through the ASGI app (`gradio`: the scope's "app", as Starlette sets it): status, headers, body."""
    path, _, query = path.partition("?")
    scope = {"type": "http", "method": method, "path": path, "query_string": query.encode(),
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
    if gradio is not None:
        scope["app"] = gradio
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    # in a thread of its own: the browser tests leave an event loop running in this one
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, app(scope, receive, send)).result()
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


def test_a_file_asked_for_by_many_at_once_is_asked_of_gradio_once():
    """A class arriving at a fresh server: the requests for a file that come while its first is with Gradio wait for
    that answer instead of each asking Gradio; one whose first answer is not kept (an error) is asked again."""

    class Slow(Files):
        async def __call__(self, scope, receive, send):
            await asyncio.sleep(0.05)  # the others arrive meanwhile
            await super().__call__(scope, receive, send)

    async def many(app, path: str, n: int) -> list[bytes]:
        answers = []

        async def one():
            sent = []

            async def receive():
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message):
                sent.append(message)

            await app({"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": []},
                      receive, send)
            answers.append((sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])))

        await asyncio.gather(*(one() for _ in range(n)))
        return answers

    def run(app, path, n):
        with ThreadPoolExecutor(max_workers=1) as pool:  # the browser tests leave an event loop in this thread
            return pool.submit(asyncio.run, many(app, path, n)).result()

    files = Slow()
    cache = StaticCache(files)
    answers = run(cache, "/assets/index-abc.js", 8)
    assert files.calls == ["/assets/index-abc.js"] and cache.hits == 7 and not cache.asked
    assert answers == [(200, b"body of /assets/index-abc.js" * 3)] * 8
    gone = Slow(status=404)
    answers = run(StaticCache(gone), "/assets/gone.js", 3)
    assert len(gone.calls) == 3 and {status for status, _ in answers} == {404}


def test_made_up_theme_queries_fill_no_entries():
    """The theme is one file whatever its ?v= says: a client inventing queries is answered from the one kept copy
    and adds nothing to the cache."""
    files = Files()
    cache = StaticCache(files)
    answers = [get(cache, f"/theme.css?v={i}") for i in range(300)]
    assert files.calls == ["/theme.css?v=0"] and len(cache.kept) == 1 and cache.hits == 299
    assert {body for _, _, body in answers} == {b"body of /theme.css" * 3}
    assert cache.bytes == len(b"body of /theme.css" * 3)


def test_kept_files_go_out_compressed_as_accepted_once_per_encoding(monkeypatch):
    """As Gradio would compress them (br first, else gzip; its extensions, from 400 bytes), compressed once per file and
    encoding; what Gradio does not compress goes as it is."""
    import gzip

    import brotli

    files = Files(repeat=40)  # ~1.1 kB
    cache = StaticCache(files)
    packed: list[str] = []
    compress = static_cache.compress
    monkeypatch.setattr(static_cache, "compress", lambda body, encoding: packed.append(encoding) or compress(body, encoding))
    plain = get(cache, "/assets/index-abc.js")[2]  # the first answer: Gradio's own
    decode = {"br": brotli.decompress, "gzip": gzip.decompress}
    for accept, encoding in (("gzip, deflate, br, zstd", "br"), ("gzip", "gzip"), ("br", "br"), ("gzip, br", "br"),
                             ("identity", None), ("", None)):
        status, headers, body = get(cache, "/assets/index-abc.js", headers={"Accept-Encoding": accept} if accept else {})
        assert status == 200 and headers[b"content-length"] == str(len(body)).encode()
        if encoding:
            assert headers[b"content-encoding"] == encoding.encode() and headers[b"vary"] == b"Accept-Encoding"
            assert decode[encoding](body) == plain and len(body) < len(plain)
        else:
            assert b"content-encoding" not in headers and body == plain
    assert packed == ["br", "gzip"] and files.calls == ["/assets/index-abc.js"]
    for path in ("/static/fonts/a.woff2", "/assets/tiny.js"):  # not compressed by Gradio: a font, under 400 bytes
        small = StaticCache(Files(repeat=40 if path.endswith("woff2") else 3))
        get(small, path)
        assert b"content-encoding" not in get(small, path, headers={"Accept-Encoding": "br"})[1]
    assert cache.bytes == sum(len(body) for _, body in cache.kept.values()) + sum(map(len, cache.packed.values()))


def test_files_named_by_their_content_are_kept_by_browsers_for_good():
    """/assets/ (hashed names) and the theme's ?v= are immutable, from the first answer on; /static/ is not."""
    cache = StaticCache(Files())
    for _ in range(2):
        assert get(cache, "/assets/index-abc.js")[1][b"cache-control"] == b"public, max-age=31536000, immutable"
        assert get(cache, "/theme.css?v=12")[1][b"cache-control"] == b"public, max-age=31536000, immutable"
        assert b"cache-control" not in get(cache, "/static/fonts/a.woff2")[1]
    conditional = get(cache, "/assets/index-abc.js", headers={"If-None-Match": '"x"'})  # passed on, marked too
    assert conditional[1][b"cache-control"].endswith(b"immutable")
    for other in ("/", "/config", "/assets/x.js?v=2"):
        assert b"cache-control" not in get(cache, other)[1]
    assert b"cache-control" not in get(StaticCache(Files(status=404)), "/assets/gone.js")[1]


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


class Page:
    """A stand-in for Gradio's page route: an HTML (or JSON, or event stream) body, in one or more chunks."""

    def __init__(self, body: bytes, kind: bytes = b"text/html; charset=utf-8", status: int = 200, chunks: int = 1,
                 encoding: bytes | None = None):
        self.body, self.kind, self.status, self.chunks, self.encoding = body, kind, status, chunks, encoding

    async def __call__(self, scope, receive, send):
        headers = [(b"content-type", self.kind), (b"content-length", str(len(self.body)).encode())]
        if self.encoding:
            headers.append((b"content-encoding", self.encoding))
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        step = -(-len(self.body) // self.chunks)
        for i in range(self.chunks):
            await send({"type": "http.response.body", "body": self.body[i * step:(i + 1) * step],
                        "more_body": i < self.chunks - 1})


PAGE = b"<!doctype html><script>" + b"const config = {'components': [1, 2, 3]};" * 400 + b"</script>"


@pytest.mark.parametrize("accept, encoding", [("gzip, deflate, br, zstd", "br"), ("gzip, deflate", "gzip"),
                                              ("br;q=1.0, gzip;q=0.8", "br")])
def test_the_page_is_compressed_as_the_browser_accepts(accept, encoding):
    import gzip

    import brotli

    app = PageCompression(Page(PAGE, chunks=3))
    status, headers, body = get(app, "/", headers={"Accept-Encoding": accept})
    assert status == 200 and headers[b"content-encoding"] == encoding.encode()
    assert headers[b"content-length"] == str(len(body)).encode() and headers[b"vary"] == b"Accept-Encoding"
    assert (brotli.decompress(body) if encoding == "br" else gzip.decompress(body)) == PAGE
    assert len(body) < len(PAGE) / 10
    assert get(app, "/", headers={"Accept-Encoding": accept})[2] == body  # the same page: the kept copy


def test_a_changed_page_is_compressed_again():
    import gzip

    page = Page(PAGE)
    app = PageCompression(page)
    get(app, "/config", headers={"Accept-Encoding": "gzip"})
    page.body = PAGE.replace(b"[1, 2, 3]", b"[4, 5, 6]")
    assert gzip.decompress(get(app, "/config", headers={"Accept-Encoding": "gzip"})[2]) == page.body


@pytest.mark.parametrize("app, path, accept", [
    (Page(PAGE), "/", ""),                                             # the browser takes none
    (Page(PAGE), "/", "identity"),
    (Page(PAGE), "/gradio_api/queue/data", "gzip"),                    # not the page: streams pass as they are
    (Page(PAGE, kind=b"text/event-stream"), "/", "gzip"),
    (Page(PAGE, kind=b"image/png"), "/", "gzip"),
    (Page(PAGE, status=404), "/", "gzip"),
    (Page(b"<p>short</p>"), "/", "gzip"),
    (Page(PAGE, encoding=b"br"), "/", "gzip"),                         # already compressed
])
def test_anything_else_passes_as_it_is(app, path, accept):
    status, headers, body = get(PageCompression(app), path, headers={"Accept-Encoding": accept} if accept else {})
    assert body == app.body and headers.get(b"content-encoding") == app.encoding


class Counted(Page):
    """The page route, counting its calls and the Accept-Encoding each one carried."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.accepts: list[bytes | None] = []

    async def __call__(self, scope, receive, send):
        self.accepts.append(dict(scope["headers"]).get(b"accept-encoding"))
        await super().__call__(scope, receive, send)


class GradioApp:
    """What PageCompression asks of Gradio's app: its auth settings and its Blocks' config."""

    def __init__(self, auth=None):
        self.auth, self.auth_dependency, self.config = auth, None, {"components": []}

    def get_blocks(self):
        return self


def test_the_page_is_built_once_per_address_and_config_then_sent_from_memory():
    """Gradio builds the page and /config anew for every request (a deep copy of the whole config); a plain request
    for the same address and the same config object is answered from the first answer, compressed as accepted."""
    import gzip

    import brotli

    page, gradio = Counted(PAGE), GradioApp()
    app = PageCompression(page)
    host = {"Host": "127.0.0.1:7860"}
    first = get(app, "/", headers=host | {"Accept-Encoding": "br"}, gradio=gradio)
    again = [get(app, "/", headers=host | {"Accept-Encoding": accept}, gradio=gradio) for accept in ("br", "gzip", "")]
    assert len(page.accepts) == 1 and app.hits == 3
    assert brotli.decompress(first[2]) == brotli.decompress(again[0][2]) == PAGE
    assert gzip.decompress(again[1][2]) == PAGE and again[2][2] == PAGE and b"content-encoding" not in again[2][1]
    assert all(answer[1][b"content-length"] == str(len(answer[2])).encode() for answer in again)
    get(app, "/", headers={"Host": "example.org", "Accept-Encoding": "br"}, gradio=gradio)        # another address
    get(app, "/", headers=host | {"X-Forwarded-Proto": "https"}, gradio=gradio)                  # another scheme
    get(app, "/?deep_link=abc", headers=host | {"Accept-Encoding": "br"}, gradio=gradio)         # a query: Gradio's
    assert len(page.accepts) == 4
    gradio.config = {"components": [1]}                                                       # a new config
    get(app, "/", headers=host, gradio=gradio)
    assert len(page.accepts) == 5
    get(app, "/config", headers=host, gradio=gradio), get(app, "/config", headers=host, gradio=gradio)
    assert len(page.accepts) == 6


def test_a_browser_that_has_the_page_is_told_so_with_no_body():
    """A kept page carries an ETag of its content and asks to be checked each time (no-cache); a request naming that
    ETag gets a 304 with no body (a reopening), any other the page; a new config is another page, another ETag."""
    page, gradio = Counted(PAGE), GradioApp()
    app = PageCompression(page)
    host = {"Host": "127.0.0.1:7860", "Accept-Encoding": "br"}
    status, headers, _ = get(app, "/", headers=host, gradio=gradio)
    etag = headers[b"etag"].decode()
    assert status == 200 and headers[b"cache-control"] == b"no-cache" and etag.startswith('W/"av-')
    again = get(app, "/", headers=host | {"If-None-Match": etag}, gradio=gradio)
    assert again[0] == 304 and again[2] == b"" and again[1][b"etag"] == etag.encode()
    assert get(app, "/", headers=host | {"If-None-Match": f'"other", {etag[2:]}'}, gradio=gradio)[0] == 304
    wrong = get(app, "/", headers=host | {"If-None-Match": '"other"'}, gradio=gradio)
    assert wrong[0] == 200 and wrong[1][b"etag"] == etag.encode() and wrong[2]
    assert len(page.accepts) == 1 and app.not_modified == 2
    gradio.config = {"components": [1]}  # a new config: the page built again, named by what it holds
    assert get(app, "/", headers=host | {"If-None-Match": etag}, gradio=gradio)[0] == 304 and len(page.accepts) == 2
    page.body = PAGE.replace(b"[1, 2, 3]", b"[1, 2, 4]")  # and where it holds something else, the old copy is stale
    gradio.config = {"components": [2]}
    changed = get(app, "/", headers=host | {"If-None-Match": etag}, gradio=gradio)
    assert changed[0] == 200 and changed[1][b"etag"] not in (etag.encode(), None)
    assert get(app, "/", headers=host | {"If-None-Match": etag}, gradio=GradioApp(auth=[("u", "p")]))[0] == 200


@pytest.mark.parametrize("gradio, page", [
    (GradioApp(auth=[("user", "pass")]), Counted(PAGE)),    # a login: each visitor's own page
    (None, Counted(PAGE)),                                  # not Gradio's app
    (GradioApp(), Counted(PAGE, status=404)),
    (GradioApp(), Counted(PAGE, kind=b"text/event-stream")),
])
def test_a_page_that_may_differ_is_built_every_time(gradio, page):
    app = PageCompression(page)
    for _ in range(2):
        status, _, body = get(app, "/", headers={"Accept-Encoding": "gzip"}, gradio=gradio)
    assert len(page.accepts) == 2 and app.hits == 0


def test_the_cache_in_front_asks_gradio_for_the_file_uncompressed_and_passes_cross_origin_requests():
    """In front of Gradio's compression, a file is kept as Gradio sends it uncompressed, then compressed as each
    request accepts; a request with an Origin goes to Gradio (its CORS middleware answers it)."""
    import brotli

    files = Counted(b"x = 1;" * 200, kind=b"application/javascript")
    cache = StaticCache(files)
    status, headers, body = get(cache, "/assets/a.js", headers={"Accept-Encoding": "br"})
    assert files.accepts == [None] and headers[b"content-encoding"] == b"br" and brotli.decompress(body) == files.body
    get(cache, "/assets/a.js", headers={"Origin": "https://elsewhere.example"})
    assert len(files.accepts) == 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_app_serves_its_front_end_from_the_cache_and_its_page_compressed(runs):
    """The app launched as main() launches it: Gradio's files come back the same from the cache, still compressed
    by Gradio when asked; the page itself is Gradio's every time, compressed."""
    from attention_viz.service.views import Views
    from attention_viz.webui import page

    demo = page.build_app(Views(runs))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                app_kwargs=server_app_kwargs())
    files_first(demo.server_app)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=30) as client:
            html = client.get(base + "/").text
            assets = sorted(set(re.findall(r"/assets/[A-Za-z0-9_.-]+\.(?:js|css)", html)))
            assert assets
            plain = [client.get(base + a, headers={"Accept-Encoding": "identity"}) for a in assets]
            again = [client.get(base + a, headers={"Accept-Encoding": "identity"}) for a in assets]
            packed = client.get(base + assets[0], headers={"Accept-Encoding": "br"})
            # kept answers go out through Gradio's compression again and again, whatever each browser accepts
            mixed = [client.get(base + a, headers={"Accept-Encoding": accept})
                     for accept in ("br", "gzip", "identity", "gzip, deflate, br, zstd") for a in assets]
        for a, b in zip(plain, again, strict=True):
            assert a.status_code == b.status_code == 200 and a.content == b.content
            assert a.headers["cache-control"] == b.headers["cache-control"] == "public, max-age=31536000, immutable"
            assert a.headers["content-type"] == b.headers["content-type"]
        assert packed.headers.get("content-encoding") == "br" and packed.content == plain[0].content  # decoded
        contents = {a: r.content for a, r in zip(assets, plain, strict=True)}
        for answer in mixed:
            assert answer.status_code == 200 and answer.content == contents[answer.url.path]
            accepted = answer.request.headers["accept-encoding"]
            if len(contents[answer.url.path]) >= 400:  # compressed once, by the cache or by Gradio, never twice
                assert answer.headers.get("content-encoding") == ("br" if "br" in accepted else
                                                                  "gzip" if "gzip" in accepted else None)
        cache = demo.server_app.middleware_stack
        while not isinstance(cache, StaticCache):
            cache = cache.app
        assert cache.hits >= len(assets) + 1 and set(assets) <= {path for path, _ in cache.kept}
        assert {encoding for _, encoding in cache.packed} == {"br", "gzip"}  # compressed by the cache, kept
        with httpx.Client(timeout=30) as client:  # the page itself: compressed (httpx decodes it), the same page
            raw = client.get(base + "/", headers={"Accept-Encoding": "identity"})
            packed = client.get(base + "/", headers={"Accept-Encoding": "gzip, br"})
        assert "content-encoding" not in raw.headers and packed.headers["content-encoding"] == "br"
        assert int(packed.headers["content-length"]) < len(raw.content) / 4 and packed.text == raw.text
        pages = cache.app
        while not isinstance(pages, PageCompression):
            pages = pages.app
        assert pages.hits >= 2  # Gradio built the page once (the first request here, or launch's own)
    finally:
        demo.close()


def test_a_key_error_of_anything_but_an_endpoint_stays_a_500_with_its_trace_logged(caplog):
    """unknown_endpoint answers 404 only for a name or fn_index no event has; any other KeyError is not hidden."""
    from types import SimpleNamespace

    from attention_viz.server.http import unknown_endpoint

    blocks = SimpleNamespace(fns={0: SimpleNamespace(api_name="visualize")})
    app = SimpleNamespace(get_blocks=lambda: blocks)

    def run(coroutine):  # in a thread of its own: the browser tests leave an event loop running in this one
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coroutine).result()

    def request(name: str | None) -> SimpleNamespace:
        return SimpleNamespace(path_params={} if name is None else {"api_name": name}, app=app, method="POST",
                               url=SimpleNamespace(path="/gradio_api/somewhere"))

    answer = run(unknown_endpoint(request("nope"), KeyError("/nope")))
    assert answer.status_code == 404 and b"No endpoint named 'nope'" in answer.body
    answer = run(unknown_endpoint(request("predict"), KeyError(7)))
    assert answer.status_code == 404 and b"No event with fn_index 7." in answer.body
    for name, error in ((None, KeyError("internal")), ("visualize", KeyError("internal")), ("visualize", KeyError(0))):
        caplog.clear()
        answer = run(unknown_endpoint(request(name), error))
        assert answer.status_code == 500 and answer.body == b"Internal Server Error"
        assert caplog.records and caplog.records[0].exc_info[1] is error


def test_a_body_past_the_limit_is_refused_before_the_app_reads_it():
    """body_limit.BodyLimit: a body over MAX_BODY_BYTES (declared, or sent in chunks without a length) gets 413 and a
    message, and the app never sees it; a small one reaches the app whole."""
    from attention_viz.server.body_limit import BodyLimit

    seen = []

    async def app(scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.append(len(body))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def post(chunks: list[bytes], declared: int | None) -> tuple[int, bytes]:
        headers = [(b"content-length", str(declared).encode())] if declared is not None else []
        scope = {"type": "http", "method": "POST", "path": "/gradio_api/queue/join", "headers": headers}
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        sent = []

        async def receive():
            return queue.pop(0)

        async def send(message):
            sent.append(message)

        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(asyncio.run, BodyLimit(app, limit=1000)(scope, receive, send)).result()
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    assert post([b"x" * 600, b"x" * 300], 900) == (200, b"ok") and seen == [900]
    status, body = post([b"x" * 10], 5000)  # declared too large: refused before a byte is read
    assert status == 413 and b"Request too large" in body
    status, body = post([b"x" * 600] * 3, None)  # chunked, no length: refused once past the limit
    assert status == 413 and seen == [900]


def test_an_upload_streams_through_up_to_its_own_limit_where_the_server_takes_uploads():
    """body_limit.BodyLimit(uploads=n): Gradio's upload route takes a body up to n (+ UPLOAD_SLACK), handed on as it
    comes (never held whole); one declared larger is refused with 413 naming the limit in MiB, one that grows past it
    unannounced is cut (the app hears a disconnect); every other route keeps the small limit, and a server that takes
    no uploads holds the upload route to it too."""
    from attention_viz.server.body_limit import UPLOAD_PATH, UPLOAD_SLACK, BodyLimit

    heard = []

    async def app(scope, receive, send):
        body, messages = b"", []
        while True:
            message = await receive()
            messages.append(message["type"])
            body += message.get("body", b"")
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        heard.append((len(body), messages[-1]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def post(path: str, chunks: list[bytes], declared: int | None, uploads: int) -> int:
        headers = [(b"content-length", str(declared).encode())] if declared is not None else []
        scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
        queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
        sent = []

        async def receive():
            return queue.pop(0)

        async def send(message):
            sent.append(message)

        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(asyncio.run, BodyLimit(app, limit=1000, uploads=uploads)(scope, receive, send)).result()
        body = b"".join(m.get("body", b"") for m in sent[1:])
        assert sent[0]["status"] == 200 or b"at most 1 MiB" in body or b"500 characters" in body
        return sent[0]["status"]

    chunk = b"x" * 65536
    assert post(UPLOAD_PATH, [chunk] * 16, 2**20, 2**20) == 200 and heard[-1] == (2**20, "http.request")
    assert post(UPLOAD_PATH, [chunk], 2**20 + UPLOAD_SLACK + 1, 2**20) == 413 and len(heard) == 1
    post(UPLOAD_PATH, [chunk] * 20, None, 2**20)  # no length, and more than it may send: cut after 1 MiB + slack
    assert heard[-1] == (2**20 + UPLOAD_SLACK, "http.disconnect")
    assert post("/gradio_api/queue/join", [chunk], 65536, 2**20) == 413  # elsewhere the small limit holds
    assert post(UPLOAD_PATH, [chunk], 65536, 0) == 413 and len(heard) == 2  # a server that takes no uploads
