"""Liveness that tells the truth: the calls the server is working on, whether one is stuck, and GET /healthz.

Every widget's function runs inside `WATCH.call(name)` (webui/handling.handler). A call still running after
STUCK_AFTER_S is stuck: no call of this app takes that long when the server is well (the longest, a real model's
first load, gives up waiting after service.real_models.LOAD_WAIT_S; the real models' run line after BUSY_WAIT_S; a
live training run stops at 55 s), so a stuck call means a worker that will not come back. GET /healthz, the probes'
endpoint (a container's HEALTHCHECK, Kubernetes' probes, a proxy's checks: deploy/, docs/deploy.md), then answers
503 with what is stuck, and an orchestrator's liveness probe restarts the server.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from attention_viz.service.catalog import Catalog

STUCK_AFTER_S = 300.0
HEALTH_PATH = "/healthz"  # deploy/kubernetes/ and the Dockerfile's HEALTHCHECK probe this path


class Watch:
    """The calls in flight, each with its name and when it began; thread-safe."""

    def __init__(self, stuck_after_s: float = STUCK_AFTER_S) -> None:
        self.stuck_after_s = stuck_after_s
        self._calls: dict[int, tuple[str, float]] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def call(self, name: str):
        """Count the block as a call in flight while it runs."""
        token = next(self._ids)
        with self._lock:
            self._calls[token] = (name, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                del self._calls[token]

    def in_flight(self) -> int:
        with self._lock:
            return len(self._calls)

    def stuck(self) -> list[dict]:
        """The calls running for longer than stuck_after_s: [{"call", "seconds"}], longest first."""
        now = time.monotonic()
        with self._lock:
            calls = list(self._calls.values())
        late = [{"call": name, "seconds": round(now - began, 1)} for name, began in calls
                if now - began > self.stuck_after_s]
        return sorted(late, key=lambda c: -c["seconds"])


WATCH = Watch()  # the server's one watch: the handlers count into it, /healthz reads it


def health_route(catalog: Catalog, watch: Watch = WATCH) -> Route:
    """GET /healthz: 200 and the catalog's readiness as JSON, or 503 with status "stuck" and the calls running past
    STUCK_AFTER_S (a worker that will not come back: the orchestrator restarts the server). It answers once the
    server answers at all, which is after the opening page's run; it does no model work, so a probe every few
    seconds costs nothing."""
    async def healthz(request: Request) -> Response:
        state, stuck = catalog.readiness(), watch.stuck()
        if stuck:
            state = dict(state, status="stuck", stuck=stuck)
        return JSONResponse(state, status_code=503 if stuck else 200, headers={"Cache-Control": "no-store"})
    return Route(HEALTH_PATH, healthz, methods=["GET"])
