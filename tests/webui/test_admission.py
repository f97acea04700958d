"""webui.admission: a page's join past PER_PAGE of its events in the queue is refused; everything else passes."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest

from attention_viz.webui.admission import JOIN, PER_PAGE, PageShare


class Gradio:
    """A stand-in for Gradio's app behind the middleware: records what reached it, answers 200."""

    def __init__(self, pending: dict[str, set]):
        self.queue = SimpleNamespace(pending_event_ids_session=pending)
        self.bodies: list[bytes] = []

    def get_blocks(self):
        return SimpleNamespace(_queue=self.queue)

    async def __call__(self, scope, receive, send):
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def post(app: PageShare, gradio: Gradio, body: bytes, path: str = JOIN, chunks: int = 2) -> tuple[int, bytes]:
    scope = {"type": "http", "method": "POST", "path": path, "query_string": b"", "headers": [], "app": gradio}
    step = -(-len(body) // chunks) or 1
    incoming = [{"type": "http.request", "body": body[i:i + step], "more_body": i + step < len(body)}
                for i in range(0, max(len(body), 1), step)]
    sent = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    with ThreadPoolExecutor(max_workers=1) as pool:  # the browser tests leave an event loop running in this thread
        pool.submit(asyncio.run, app(scope, receive, send)).result()
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def join(session: str) -> bytes:
    return json.dumps({"data": ["x" * 300], "fn_index": 0, "session_hash": session}).encode()


def test_a_page_with_per_page_events_waiting_is_refused_and_the_others_are_not():
    gradio = Gradio({"full": set(range(PER_PAGE)), "some": set(range(PER_PAGE - 1))})
    app = PageShare(gradio)
    status, body = post(app, gradio, join("full"))
    assert status == 503 and json.loads(body)["detail"].startswith("Queue is full for this page")
    assert gradio.bodies == [] and app.refused == 1
    for session in ("some", "new"):
        assert post(app, gradio, join(session))[0] == 200
    assert gradio.bodies == [join("some"), join("new")]  # handed on whole, as it came in two pieces


@pytest.mark.parametrize("body, path", [(b"not json", JOIN), (b"[1, 2]", JOIN), (json.dumps({"session_hash": 3}).encode(), JOIN),
                                        (join("full"), "/gradio_api/run/predict")])
def test_what_names_no_page_or_is_no_join_goes_to_gradio(body, path):
    gradio = Gradio({"full": set(range(PER_PAGE)), "3": set(range(PER_PAGE))})
    assert post(PageShare(gradio), gradio, body, path)[0] == 200 and gradio.bodies == [body]
