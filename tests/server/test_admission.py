"""server.admission: the line an event waits on, a client's share of the queue, its turn in the line.

The policy's functions alone, then the app's own queue (page.build_app, not started: nothing runs, so every joined
event stays where admission put it) joined as the page and the API join it, from made-up addresses.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from gradio.data_classes import PredictBodyInternal

from attention_viz.service.limits import HUB_PREFIX
from attention_viz.service.real_models import RealModels
from attention_viz.service.views import Views
from attention_viz.server import admission
from attention_viz.webui import page
from attention_viz.server.admission import (
    LIVE, PER_ADDRESS, PER_PAGE, REAL_RUNS, RUNS, SCORES, Held, Line, line_of, place, real_line, refusal,
)

REAL = HUB_PREFIX + "tiny-gpt2"


# ---------------------------------------------------------------------------- the policy


def test_a_client_within_its_share_joins_and_one_past_any_bound_is_told_which():
    assert refusal(Held(page=PER_PAGE - 1, address=PER_ADDRESS - 1, on_line=0), RUNS) is None
    page_full = refusal(Held(page=PER_PAGE, address=1, on_line=0), RUNS)
    address_full = refusal(Held(page=0, address=PER_ADDRESS, on_line=0), RUNS)
    line_full = refusal(Held(page=0, address=8, on_line=REAL_RUNS.per_address), REAL_RUNS)
    assert page_full.startswith("Queue is full for this page: 16 ")
    assert address_full.startswith(f"Queue is full for this address: {PER_ADDRESS} ")
    assert line_full.startswith("Queue is full for this address on the real models line: 8 ")
    assert refusal(Held(page=0, address=8, on_line=8), RUNS) is None  # our runs: only the address's whole share


def test_the_bounds_let_a_class_behind_one_address_in_and_keep_a_flood_to_a_share_of_the_queue():
    """100 students behind one NAT, three events each at the busiest moment: never refused. One address flooding:
    under a third of the queue, so the others always find room. The expensive lines: far below what they hold."""
    assert 100 * 3 < PER_ADDRESS < page.QUEUE_SIZE / 3
    assert refusal(Held(page=3, address=100 * 3, on_line=100 * 3), RUNS) is None
    for line in (SCORES, REAL_RUNS, LIVE):
        assert line.per_address is not None and line.per_address <= min(PER_PAGE, PER_ADDRESS // 10)
    assert LIVE.per_address < LIVE.slots // 2


@pytest.mark.parametrize("waiting, address, at", [
    ([], "a", 0),
    (["a", "a", "a"], "a", 3),             # one address: first come, first served
    (["a", "a", "a"], "b", 1),             # a second address's first event: after the first one's first
    (["a", "b", "a", "b", "a", "a"], "b", 5),  # its third: after every address's third, before a's fourth
    (["a", "b", "a", "a"], "c", 2),        # a third address: in the first round still open to it
    (["a", "a", "b"], "b", 3),             # b's second: after a's second, not before it
])
def test_each_address_waits_its_turn(waiting, address, at):
    assert place(waiting, address) == at


def test_whatever_names_a_real_model_waits_on_that_models_line_and_the_rest_on_their_own():
    for line_id in (RUNS.id, SCORES.id, "1234"):
        assert line_of(line_id, REAL, {REAL}) == real_line(REAL)
        assert line_of(line_id, HUB_PREFIX + "junk", {REAL}) == line_of(line_id, None)  # not a model of the server
    other = real_line(HUB_PREFIX + "another")
    assert other.id != real_line(REAL).id and (other.slots, other.per_address) == (REAL_RUNS.slots, REAL_RUNS.per_address)
    assert line_of(RUNS.id, "reverse/sqrt_dk") is RUNS and line_of(SCORES.id, None) is SCORES
    assert line_of("1234", "untrained") == Line("1234", 1)  # a listener's own line (Gradio's, one at a time)


# ---------------------------------------------------------------------------- the app's own queue


@pytest.fixture(scope="module")
def served_models(tmp_path_factory):
    """The real model the app is set up with: a folder named as REAL (never loaded here: nothing runs)."""
    folder = tmp_path_factory.mktemp("admission") / REAL[len(HUB_PREFIX):]
    folder.mkdir()
    return [str(folder)]


@pytest.fixture()
def app(runs, served_models, monkeypatch):
    monkeypatch.setattr(runs.catalog, "real", RealModels(served_models))
    demo = page.build_app(Views(runs))
    return SimpleNamespace(demo=demo, queue=demo._queue, fn={fn.api_name: fn for fn in demo.fns.values()
                                                             if fn.api_name})


def request(address: str):
    return SimpleNamespace(client=SimpleNamespace(host=address), headers={})


def body(fn, model: str = "untrained", session: str | None = None, text: str = "abc") -> PredictBodyInternal:
    """A join as the page sends it (a session) or as /call/<name> makes it (no session), for `fn`."""
    data = []
    for block in fn.inputs:
        value = getattr(block, "value", None)
        data.append(model if getattr(block, "elem_id", None) in ("model", "own_model") else text
                    if getattr(block, "elem_id", None) == "text" else value)
    return PredictBodyInternal(data=data, fn_index=fn._id, session_hash=session, event_data=None, trigger_id=None)


def joins(queue, *calls) -> list[tuple]:
    """Each (body, address) joined in order, in one event loop: (ok, event id or message, state) each."""
    async def run():
        return [await queue.push(body=b, request=request(address), username=None) for b, address in calls]

    with ThreadPoolExecutor(max_workers=1) as pool:  # the browser tests leave an event loop running in this thread
        return pool.submit(asyncio.run, run()).result()


def line_of_event(queue, event_id: str) -> str:
    return next(line_id for line_id, line in queue.event_queue_per_concurrency_id.items()
                if any(event._id == event_id for event in line.queue))


def test_every_endpoint_naming_a_real_model_waits_on_the_real_models_line_from_the_api_and_the_page(app):
    """/visualize, /steps, /compare, /export, /importance and the lab's /qk_lab, as the API calls them (no session)
    and as the page joins them (a session): a real model's on its own line (real_line), ours on the endpoint's."""
    names = ("visualize", "steps", "compare", "export", "importance", "qk_lab")
    calls = [(body(app.fn[name], model, session), f"10.0.0.{i}")
             for i, name in enumerate(names) for model in (REAL, "untrained") for session in (None, "page1")]
    answers = joins(app.queue, *calls)
    assert all(ok for ok, _, _ in answers), [answer for answer in answers if not answer[0]]
    lines = [line_of_event(app.queue, event_id) for _, event_id, _ in answers]
    for (b, _), line in zip(calls, lines):
        fn = app.demo.fns[b.fn_index]
        expected = real_line(REAL).id if REAL in b.data else fn.concurrency_id
        assert line == expected, (fn.api_name, b.data, line)
    real = real_line(REAL).id
    assert lines.count(real) == 2 * len(names) and app.queue.event_queue_per_concurrency_id[real].concurrency_limit == 1
    assert {line for line in lines if line != real} >= {RUNS.id, SCORES.id}


def test_a_flood_under_invented_sessions_holds_its_share_and_a_visitor_joins_at_the_front(app):
    visualize = app.fn["visualize"]
    flood = joins(app.queue, *[(body(visualize, session=f"s{i}", text=f"t{i}"), "10.0.0.66")
                               for i in range(PER_ADDRESS + 30)])
    refused = [message for ok, message, state in flood if not ok]
    assert sum(ok for ok, _, _ in flood) == PER_ADDRESS and len(refused) == 30, refused[:3]
    assert all(state == "queue_full" for ok, _, state in flood if not ok)
    assert refused[0].startswith(f"Queue is full for this address: {PER_ADDRESS} ")
    (ok, visitor, _), = joins(app.queue, (body(visualize, session="visitor"), "10.0.0.7"))
    waiting = app.queue.event_queue_per_concurrency_id[RUNS.id].queue
    assert ok and [event._id for event in waiting].index(visitor) == 1  # after the flood's first, before the rest
    told = app.queue.pending_messages_per_session["visitor"]
    places = [told.get_nowait() for _ in range(told.qsize())]
    assert (places[-1].rank, places[-1].queue_size) == (1, PER_ADDRESS + 1)  # what the page shows: its place now
    # the flood's address, from another page too: still full; a real model's scores from it: its own bound
    (ok, message, _), = joins(app.queue, (body(visualize, session="another"), "10.0.0.66"))
    assert not ok and message.startswith("Queue is full for this address")


def test_a_real_model_the_server_does_not_have_makes_no_line_of_its_own(app):
    """Names made up after "hub:" wait on their listener's own line (their event refuses them): no line per name, so
    a client can neither grow Gradio's lines nor pass the real lines' share per address."""
    visualize = app.fn["visualize"]
    before = set(app.queue.event_queue_per_concurrency_id)
    answers = joins(app.queue, *[(body(visualize, f"{HUB_PREFIX}junk{i}", session=f"j{i}"), "10.0.0.9")
                                 for i in range(12)])
    assert all(ok for ok, _, _ in answers)
    assert set(app.queue.event_queue_per_concurrency_id) - before <= {visualize.concurrency_id}
    assert {line_of_event(app.queue, event_id) for _, event_id, _ in answers} == {visualize.concurrency_id}


def test_one_address_holds_at_most_its_share_of_the_real_models_line_and_one_page_its_own(app):
    importance, steps = app.fn["importance"], app.fn["steps"]
    scored = joins(app.queue, *[(body(importance, REAL, session=f"s{i}"), "10.0.0.5") for i in range(10)])
    assert [ok for ok, _, _ in scored] == [True] * REAL_RUNS.per_address + [False] * 2
    assert scored[-1][1].startswith("Queue is full for this address on the real models line")
    # the same address on our models' lines, and another address on the real line, are not held back
    assert all(ok for ok, _, _ in joins(app.queue, (body(steps, session="x"), "10.0.0.5"),
                                        (body(importance, REAL, session="y"), "10.0.0.6")))
    page_full = joins(app.queue, *[(body(steps, session="one page", text=f"t{i}"), f"10.0.1.{i}")
                                   for i in range(PER_PAGE + 1)])
    assert [ok for ok, _, _ in page_full] == [True] * PER_PAGE + [False]
    assert page_full[-1][1].startswith("Queue is full for this page")


@pytest.mark.parametrize("fn_index", [None, 10_000])
def test_a_join_that_names_no_event_goes_to_gradio_as_before(app, fn_index):
    b = PredictBodyInternal(data=[], fn_index=fn_index, session_hash="a1")
    if fn_index is None:
        assert joins(app.queue, (b, "10.0.0.1")) == [(False, "No function index provided.", "error")]
    else:
        with pytest.raises(KeyError):
            joins(app.queue, (b, "10.0.0.1"))
