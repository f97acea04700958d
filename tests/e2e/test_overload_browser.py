"""A crowded server in Debian's Chromium: a student whose change must wait sees its place in the line and an
estimate where they are looking, and gets the answer once the line ahead has gone; no error on the way.

The crowd is other pages, each joining requests for one head's steps (Figure 2) of a new text up to its share of the
queue (admission.PER_PAGE): an answer costs the server a run, ~20 milliseconds, so the crowd (PAGES x PER_PAGE, a third of the
queue's QUEUE_SIZE), joined from several connections at once, is a line of seconds ahead of the student, who opens
the steps view of the untrained model's run (on the runs' line: admission.RUNS; a trained model's steps of the run on
screen come beside the queue, webui/transformer_tab.py, and would not wait). (The √d_k lab's answers come beside the queue,
webui/lab_tab.py: a crowd does not hold them up in a line.) The crowd comes from three loopback addresses (one
address holds at most admission.PER_ADDRESS events), one of them the student's own, so the student waits its
address's turn behind them all. Nothing is timed.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from playwright.sync_api import Page, expect

from attention_viz.server.admission import PER_ADDRESS, PER_PAGE
from benchmarks.browser import dependency, elem_ids, opening_values
from tests.e2e.conftest import SCREENSHOTS

pytestmark = pytest.mark.browser
TIMEOUT_MS = 60_000
PAGES = 24  # the crowd: 24 x PER_PAGE = 384 steps requests ahead of the student (the queue holds QUEUE_SIZE)
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")  # the crowd's; each holds under PER_ADDRESS of its events
QUEUE_TEXT = re.compile(r"queue: \d+/\d+ \| [\d.]+(/[\d.]+)?s")
STATUS = "#steps_view [data-testid=status-tracker]"
SHOWN_JS = """(e) => { const b = e.getBoundingClientRect();
  if (!b.width || !b.height) return false;
  for (let a = e.parentElement; a; a = a.parentElement) {
    const s = getComputedStyle(a), r = a.getBoundingClientRect();
    if (s.display === 'none' || s.visibility === 'hidden' || Number(s.opacity) === 0) return false;
    if ((s.overflowX !== 'visible' || s.overflowY !== 'visible') && (b.top < r.top - 0.5 || b.bottom > r.bottom + 0.5
        || b.left < r.left - 0.5 || b.right > r.right + 0.5)) return false;
  }
  return true; }"""


def crowd(base: str, client: httpx.Client) -> list[tuple[str, int]]:
    """PAGES sessions, each joining PER_PAGE requests for the steps of a new text's run at one of its heads, 8 pages
    at once: (session, events accepted)."""
    config = client.get(base + "/config").json()
    dep = dependency(config, "steps")
    values, ids, rng = opening_values(config), elem_ids(config), random.Random(7)
    heads = int(values[ids["explorer_view"]]["n_heads"])
    bodies = {uuid.uuid4().hex[:11]: [] for _ in range(PAGES)}
    for session, page_bodies in bodies.items():
        for _ in range(PER_PAGE):
            text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(10))  # a new run each: ~20 ms
            data = [rng.randrange(heads) if i == ids["head"] else text if i == ids["text"] else values[i]
                    for i in dep["inputs"]]
            page_bodies.append({"data": data, "event_data": None, "fn_index": dep["id"], "trigger_id": None,
                                "session_hash": session})

    def join(numbered: tuple[int, str]) -> tuple[str, int]:
        number, session = numbered
        transport = httpx.HTTPTransport(local_address=ADDRESSES[number % len(ADDRESSES)])
        with httpx.Client(timeout=120, transport=transport) as own:
            return session, sum(own.post(base + "/gradio_api/queue/join", json=body).status_code == 200
                                for body in bodies[session])

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(join, enumerate(bodies)))


def drain(base: str, session: str, events: int) -> int:
    """Read a crowd page's stream until its events have completed; how many completed."""
    completed = 0
    with httpx.Client(timeout=120) as client:
        while completed < events:
            with client.stream("GET", base + "/gradio_api/queue/data", params={"session_hash": session}) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        completed += message.get("msg") == "process_completed" and bool(message.get("success"))
                        if message.get("msg") == "close_stream":
                            break
    return completed


def test_a_waiting_change_shows_its_place_in_the_line_at_the_top_of_the_view_then_its_answer(page: Page, app_url):
    base = app_url.rstrip("/")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(app_url)
    expect(page.locator("#explorer .av-tile").first).to_be_visible(timeout=TIMEOUT_MS)
    # the untrained model's run: its steps are not answered beside the queue (views.steps_at_once), they wait
    page.locator("#model input").click()
    page.get_by_role("option", name="untrained (random weights)").click()
    expect(page.locator("#info")).to_contain_text("Untrained model", timeout=TIMEOUT_MS)
    sent = []  # what the page sends from now on
    page.on("request", lambda r: sent.append(r.url.split("/gradio_api", 1)[-1].split("?")[0])
            if "/gradio_api/" in r.url and r.method == "POST" else None)
    toasts = page.locator("[data-testid=toast-body]")
    with httpx.Client(timeout=120) as client:
        assert -(-PAGES // len(ADDRESSES)) * PER_PAGE < PER_ADDRESS  # the crowd is within each address's share
        joined = crowd(base, client)
        assert all(accepted == PER_PAGE for _, accepted in joined), joined  # the crowd's joins: all in the line
        page.get_by_role("tab", name="Steps (Figure 2)").click()
        status = page.locator(STATUS).locator(".progress-text")
        expect(status).to_have_text(QUEUE_TEXT, timeout=TIMEOUT_MS)
        where = status.bounding_box()
        assert where is not None and 0 <= where["y"] and where["y"] + where["height"] <= 900, where  # on screen
        # and drawn there: no box around it clips it away, none is hidden
        assert status.evaluate(SHOWN_JS), "the place in the line is hidden"
        place = int(re.search(r"queue: (\d+)/", status.inner_text()).group(1))
        assert place > 1  # behind the crowd
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "overload_steps_waiting.png"))
        expect(page.locator("#steps_text")).to_contain_text("softmax", timeout=TIMEOUT_MS)
        assert sent == ["/component_server/", "/queue/join"], sent  # asked beside the queue, none: then in the line
        expect(page.locator(STATUS)).to_have_class(re.compile(r"\bhide\b"), timeout=TIMEOUT_MS)
        assert toasts.count() == 0
        with ThreadPoolExecutor(8) as pool:  # each crowd page's answers all came, none failed
            assert list(pool.map(lambda page_joined: drain(base, page_joined[0], page_joined[1]), joined)) == \
                [PER_PAGE] * PAGES
