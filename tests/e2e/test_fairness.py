"""Fair queueing on the launched app: one client floods the queue under invented session ids; it hears a clear
refusal past its share, and another client's view is answered meanwhile (a generous bound, never a timing).

127.0.0.1 only: the server listens there, the flood connects from 127.0.0.2 (loopback too) so that the server sees
two clients. Every loop is bounded (1,100 joins; the visitor's wait, PATIENCE_S).
"""

from __future__ import annotations

import time

import httpx

from attention_viz.server.admission import PER_ADDRESS
from benchmarks.common import own_loop
from benchmarks.fairness import flood
from benchmarks.browser import Page, dependency, elem_ids, opening_values

JOINS = 1100  # more than the queue holds (page.QUEUE_SIZE, 1,024)
PATIENCE_S = 60.0


def drained(base: str, bound_s: float = 180.0) -> None:
    """Wait (at most bound_s) until the shared app's queue is empty: the flood's backlog must not meet the next test."""
    deadline = time.monotonic() + bound_s
    with httpx.Client(timeout=10) as client:
        while client.get(f"{base}/gradio_api/queue/status").json().get("queue_size") and time.monotonic() < deadline:
            time.sleep(0.5)


def test_a_flood_under_invented_sessions_is_refused_past_its_share_and_another_clients_view_answers(app_url):
    base = app_url.rstrip("/")
    try:
        _flood_then_visit(base)
    finally:
        drained(base)


def _flood_then_visit(base: str) -> None:
    flooded = flood(base, JOINS, threads=4)
    # the flood: its share joined, the rest refused at once with a message that says why (no hang: it returned)
    assert set(flooded["statuses"]) == {200, 503} and flooded["accepted"] >= PER_ADDRESS, flooded
    assert flooded["refused"] > 0, flooded  # (the others, answered while it joined, left room)
    assert [m[:31] for m in flooded["messages"]] == ["Queue is full for this address:"], flooded["messages"]
    # right after, its backlog still waiting, a visitor's view: answered, for its own text, well within the bound
    async def visit() -> tuple[dict, list[dict]]:
        page = Page(base, patience_s=PATIENCE_S)
        try:
            await page.open()
            visualize, values = dependency(page.config, "visualize"), opening_values(page.config)
            values[elem_ids(page.config)["text"]] = "visitor"
            _, completed = await page.call(visualize, values, None)
            return completed, page.estimations
        finally:
            await page.close()

    completed, estimations = own_loop(visit())
    view, output, notes = completed["output"]["data"]
    assert output == "rotisiv" and view  # the opening model reverses the text
    place = min((estimation["rank"] for estimation in estimations), default=0)
    assert place <= 8, estimations  # at the front of the line, not behind the flood's hundreds


def test_no_event_runs_past_the_queue(app_url):
    """Gradio runs a direct POST /gradio_api/run/<name> at once, on no line and past every share, unless the queue is
    closed to it: a real model's work must not get round the queue that way."""
    with httpx.Client(timeout=30) as client:
        for route in ("run", "api"):
            answer = client.post(f"{app_url}gradio_api/{route}/importance", json={"data": ["abc", "hub:x"]})
            assert answer.status_code == 404 and "join the queue" in answer.json()["detail"], answer.text
