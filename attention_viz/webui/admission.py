"""Who may join the queue: a page (one browser tab, one session) holds at most PER_PAGE waiting events.

The queue is sized for a class (page.QUEUE_SIZE: a lecture hall of 300, each student's page with an event or
two waiting while the server is busy, so none of them hears "Queue is full"). Sized that way, a bound on the whole
line no longer stops one client that joins events back to back without waiting for their answers from filling it
for everyone; this bound does. A page in a browser waits for its answers: the lab sends one request at a time, a
run replaces the one still waiting (trigger_mode "always_last"), and a run's chain follows it, so it holds a few
events at most. Gradio keeps each session's events until their answers have been delivered
(`pending_event_ids_session`); a join past PER_PAGE of them is refused with HTTP 503 and a message that starts as
Gradio's own refusal does ("Queue is full"), before Gradio reads it.

    demo.launch(..., app_kwargs=server_app_kwargs(...))   (webui/serving.py puts it among the app's middlewares)
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.responses import JSONResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JOIN = "/gradio_api/queue/join"
PER_PAGE = 16  # a page's waiting events; a browser's page holds a few at most


def waiting(app: Any, session: str) -> int:
    """Events of `session` that Gradio's queue holds (waiting, running, or answered but not yet delivered)."""
    try:
        return len(app.get_blocks()._queue.pending_event_ids_session.get(session, ()))
    except AttributeError:  # not Gradio's app (a stand-in), or no queue: nothing is counted
        return 0


class PageShare:
    """An ASGI middleware that refuses a page's join past PER_PAGE of its events in the queue."""

    def __init__(self, app: ASGIApp, per_page: int = PER_PAGE) -> None:
        self.app = app
        self.per_page = per_page
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") != JOIN:
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:  # the join's whole body (a few hundred bytes: the inputs' values), kept to hand on
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        session = _session(b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request"))
        held = waiting(scope.get("app"), session) if session else 0
        if held >= self.per_page:
            self.refused += 1
            answer = JSONResponse({"detail": f"Queue is full for this page: {held} of its events are waiting. "
                                             "Wait for their answers before asking for more."}, status_code=503)
            await answer(scope, receive, send)
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def _session(body: bytes) -> str | None:
    """The join's session_hash, or None where the body is not a JSON object naming one (Gradio answers those)."""
    try:
        session = json.loads(body).get("session_hash")
    except (ValueError, AttributeError):
        return None
    return session if isinstance(session, str) else None
