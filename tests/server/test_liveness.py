"""server.liveness and the handlers around it: every call counted while it runs, a call stuck past the bound makes
/healthz answer 503 (an orchestrator then restarts the server), and a fault of ours reaches the visitor as a message
without its trace."""

from __future__ import annotations

import logging
import threading
import time

import gradio as gr
import pytest

from attention_viz.webui.handling import handler
from attention_viz.server.liveness import WATCH, Watch
from attention_viz.server.liveness import health_route
from tests.server.test_static import get


class Ready:
    def readiness(self):
        return {"status": "ok", "real_models": {}}


def health(watch):
    route = health_route(Ready(), watch)
    status, headers, body = get(route.app, "/healthz")
    return status, body.decode()


def test_healthz_answers_503_while_a_call_is_stuck_and_200_once_it_ends():
    watch = Watch(stuck_after_s=2.0)
    assert health(watch)[0] == 200
    release = threading.Event()

    def stuck_call():
        with watch.call("visualize"):
            release.wait(10)

    thread = threading.Thread(target=stuck_call)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while watch.in_flight() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert watch.in_flight() == 1 and health(watch)[0] == 200  # running, not yet stuck
        time.sleep(2.2)
        status, body = health(watch)
        assert status == 503 and '"status":"stuck"' in body and '"call":"visualize"' in body
    finally:
        release.set()
        thread.join(5)
    assert health(watch)[0] == 200 and watch.in_flight() == 0


def test_a_handler_is_counted_while_it_runs():
    seen = []

    @handler
    def visualize():
        seen.append(WATCH.in_flight())
        return "ok"

    before = WATCH.in_flight()
    assert visualize() == "ok" and seen == [before + 1] and WATCH.in_flight() == before


def test_a_fault_of_ours_reaches_the_visitor_as_a_message_without_its_trace(caplog):
    @handler
    def broken(value):
        return {}[value]

    with caplog.at_level(logging.ERROR), pytest.raises(gr.Error) as raised:
        broken("missing")
    message = str(raised.value.message)
    assert "could not answer this (KeyError); nothing else changed" in message and "Traceback" not in message
    assert "missing" not in message  # nothing of the input or the server's state is echoed
    assert any(record.exc_info for record in caplog.records)  # the operator's log has the trace
    assert WATCH.in_flight() == 0


def test_a_refusal_stays_the_services_own_message():
    @handler
    def refused():
        raise ValueError("d_k must be between 1 and 1024, got 0")

    with pytest.raises(gr.Error, match="d_k must be between 1 and 1024, got 0"):
        refused()
