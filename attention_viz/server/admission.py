"""Who may join the queue, on which line an event waits, and in what order: fair queueing by client address.

The lines (Gradio's concurrency ids) are defined here, each with the events it runs at once:

    RUNS       our models' runs: a new text, model or switch, and a head's steps (a few ms each)  8 at once
    LESSON     the lesson's Next and Back (a few ms each; a real step computed once, then shared) 8 at once
    SCORES     scoring every head of our models, and its CSV (hundreds of ms each)               2 at once
    REAL_RUNS  anything a real model computes (runs, steps, compare, export, scores: up to ~10 s) 1 at once
               per model: each real model has a line of its own (real_line), so a small one never waits behind
               a large one
    LONG       a real model reading a page (service.long_runs: seconds to minutes each)          1 at once
               on the whole server, beside every other line: a page never holds a real model's own line, so
               its short answers go on meanwhile
    LIVE       live training (service.live trains one run at a time and refuses past LIVE_LINE)  LIVE_LINE + 2

Every event of the page and of the API joins through one place, `FairQueue.join` (Gradio's Queue.push, wrapped),
whichever way it arrives (the page's /queue/join, the API's /call/<name>, gradio_client). There:

1. **The line is chosen by what the event computes**: an event that takes a model picker's value (the Transformer
   tab's, the lab's own q·k) and names one of the server's real models ("hub:...") waits on that model's line
   (real_line: REAL_RUNS's bounds), whatever event it is, so a real model never holds a slot of our models' lines
   nor of another real model's. Gradio fixes an event's line by its listener; this moves it, the one decision made
   in one place.
2. **A join is refused** (HTTP 503, a message that starts as Gradio's own: "Queue is full") when its client
   already holds its share. A client is known by its address (the connection's peer as uvicorn reports it: behind
   a proxy, the X-Forwarded-For of a proxy named in FORWARDED_ALLOW_IPS, uvicorn's own setting): a session id is
   the client's to invent, so a bound by session alone stops nobody who wants more; an address costs a client
   something to change. But a whole class can sit behind one school's address (NAT), so the bounds by address are
   sized for a class:
   - PER_PAGE (16): events of one session (waiting, running or answered and not yet delivered). A browser's page
     holds a few at most (the lab sends one request at a time, a run replaces the one still waiting, a run's chain
     follows it); this stops a page, or one student's script, from taking a class's share.
   - PER_ADDRESS (320): events of one address waiting or running on any line: a class of 100 behind one address
     with three events each at the busiest moment (a class's pages hold one or two), so a lecture from one address
     is never refused; a flood from one address holds under a third of the queue (page.QUEUE_SIZE, 1,024), so
     the others always find room.
   - Line.per_address, on the expensive lines (REAL_RUNS 8, SCORES 8, LIVE 2): events of one address waiting or
     running on that line. These lines run one or two events at a time for seconds each; 8 of one address's are
     a minute or more of the real model, and the queue holds hundreds, so a client cannot stock a line with hours
     of work. A class that asks one line for more than it can give at once is told so at the join, not after
     minutes of waiting behind its own eight.
     LIVE_LINE (8) users may wait for live training; one address takes two of those places.
3. **Each line is served in turns by address**: an event joins its line after every event of the other addresses
   that has as many or fewer of its own address's events ahead of it (the n-th waiting event of each address goes
   before any address's (n+1)-th). From one address the line is first come, first served, as before (a class
   behind one NAT, the classroom benchmark); a visitor's view never waits behind a flood's backlog, only behind
   the events already running and at most one event of each other address.

The counts are read from Gradio's queue at each join, not kept beside it, so nothing drifts (what that costs per
join: docs/reliability.md). Joins that race each other may each pass a bound that their sum passes, by the few joins
in flight. Gradio's queue is reached through server/gradio_internals.py, which names each internal this relies on.

    admission.install(demo, *model_pickers)   (webui/page.py, after demo.queue(...))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container
from dataclasses import dataclass, replace
from typing import Any

from attention_viz.server import gradio_internals as gradio
from attention_viz.service.limits import HUB_PREFIX, LIVE_LINE


@dataclass(frozen=True)
class Line:
    """One of Gradio's lines: its concurrency id, how many of its events run at once, and how many events (waiting
    or running) one address may hold in it (None: only PER_ADDRESS)."""

    id: str
    slots: int
    per_address: int | None = None
    label: str = "this"  # in a refusal: "Queue is full for this address on the {label} line"

    @property
    def wiring(self) -> dict:
        """The event listener's options that put its events on this line."""
        return dict(concurrency_id=self.id, concurrency_limit=self.slots)


RUN_SLOTS = 8
RUNS = Line("runs", RUN_SLOTS, label="runs")
LESSON = Line("lesson", RUN_SLOTS, label="lesson")  # its own: a real step computed on first use holds no run's slot
SCORES = Line("scores", 2, per_address=8, label="head scores")
REAL_RUNS = Line("real_runs", 1, per_address=8, label="real models")
LIVE = Line("live_train", LIVE_LINE + 2, per_address=2, label="live training")
LONG = Line("long_runs", 1, per_address=40, label="long texts")  # a class behind one address, each a page
LINES = {line.id: line for line in (RUNS, LESSON, SCORES, REAL_RUNS, LIVE, LONG)}

PER_PAGE = 16      # a session's events; a browser's page holds a few at most
PER_ADDRESS = 320  # an address's waiting or running events: a class of 100 behind one NAT, three each

@dataclass(frozen=True)
class Held:
    """What a joining client holds in the queue now."""

    page: int      # events of its session, not yet delivered
    address: int   # events of its address, waiting or running, on every line
    on_line: int   # of those, on the line the new event goes to


def refusal(held: Held, line: Line, per_page: int = PER_PAGE, per_address: int = PER_ADDRESS) -> str | None:
    """Why a join is refused ("Queue is full ..."), or None when the client is within its share."""
    if held.page >= per_page:
        return (f"Queue is full for this page: {held.page} of its events are waiting. "
                "Wait for their answers before asking for more.")
    if held.address >= per_address:
        return (f"Queue is full for this address: {held.address} of its events are waiting. "
                "Wait for their answers before asking for more.")
    if line.per_address is not None and held.on_line >= line.per_address:
        return (f"Queue is full for this address on the {line.label} line: {held.on_line} of its events are "
                "waiting there, and it runs one or two at a time. Wait for their answers before asking for more.")
    return None


def place(waiting: list[str], address: str) -> int:
    """Where an event of `address` joins a line whose waiting events are of `waiting` (their addresses, in order):
    before the first event with more of its own address's events ahead of it than `address` has in the line."""
    turn, seen = waiting.count(address), Counter()
    for at, other in enumerate(waiting):
        if seen[other] > turn:
            return at
        seen[other] += 1
    return len(waiting)


def real_line(model: str) -> Line:
    """The line of one real model ("hub:" + name): REAL_RUNS's bounds, a line of its own, so each real model runs one
    thing at a time (its run line in service.real_models) and two models side by side."""
    return replace(REAL_RUNS, id=f"{REAL_RUNS.id}:{model[len(HUB_PREFIX):]}")


def line_of(line_id: str, model: object, real: Container[str] = ()) -> Line:
    """The line an event of listener line `line_id` waits on, given the model it names (None where it takes none):
    one of `real`, the server's real models, waits on that model's line; anything else (our models, a name the
    server does not have, which its event refuses) on the listener's own."""
    if isinstance(model, str) and model.startswith(HUB_PREFIX) and model in real:
        return real_line(model)
    return LINES.get(line_id, Line(line_id, 1))


def address_of(request: Any) -> str:
    """The client's address as the server sees it ("" where the request names none)."""
    client = getattr(request, "client", None)
    return getattr(client, "host", None) or ""


class FairQueue:
    """The app's queue with the admission above: installed on a queued Blocks by `install`."""

    def __init__(self, blocks: Any, *models: Any, real: Container[str] = ()) -> None:
        self.blocks = blocks
        self.real = frozenset(real)  # the server's real models ("hub:" + name): each has a line
        self.queue = gradio.queue_of(blocks)
        self.push = self.queue.push  # Gradio's, until install
        # listener -> where among its inputs a model picker's value arrives
        self.model_at = {fn_id: at for fn_id, fn in blocks.fns.items()
                         for at, block in enumerate(fn.inputs) if any(block is model for model in models)}
        self.refused = 0

    async def join(self, body: Any, request: Any, username: str | None):
        """Gradio's Queue.push, with the line chosen, the shares checked and the event placed in turn."""
        fn = self.blocks.fns.get(body.fn_index) if isinstance(body.fn_index, int) else None
        if fn is None:  # no such event: Gradio answers it
            return await self.push(body=body, request=request, username=username)
        at = self.model_at.get(body.fn_index)
        data = body.data if isinstance(body.data, list) else []
        line = line_of(fn.concurrency_id, data[at] if at is not None and at < len(data) else None, self.real)
        address = address_of(request)
        why = refusal(self.held(body.session_hash, address, line.id), line)
        if why is not None:
            self.refused += 1
            return False, why, "queue_full"
        ok, event_id, state = await self.push(body=body, request=request, username=username)
        if ok:
            self.seat(event_id, line, address)
        return ok, event_id, state

    def held(self, session: str | None, address: str, line_id: str) -> Held:
        """What `session` and `address` hold now (from Gradio's own lists)."""
        mine = [event for event in gradio.queued_events(self.queue) if address_of(gradio.request_of(event)) == address]
        page = gradio.undelivered(self.queue, session) if session else 0
        return Held(page, len(mine), sum(gradio.line_of_event(event) == line_id for event in mine))

    def seat(self, event_id: str, line: Line, address: str) -> None:
        """Move the event Gradio just queued to its line, in its address's turn. No await since push appended it, so
        it is still waiting where push left it (an event answered from a cache never waited: left alone)."""
        event = gradio.waiting_event(self.queue, event_id)
        if event is None:
            return
        waiting = gradio.move_to_line(self.queue, event, line.id, line.slots)
        at = place([address_of(gradio.request_of(other)) for other in waiting], address)
        waiting.insert(at, event)
        if at < len(waiting) - 1:  # push told it the end of the line: its place now (the rest hear within a second)
            gradio.tell_place(self.queue, event, rank=at, size=len(waiting))


def install(blocks: Any, *models: Any, real: Container[str] = ()) -> FairQueue:
    """Put FairQueue in front of a queued Blocks' queue; `models` are the model pickers whose value routes an event,
    `real` the server's real models (each on a line of its own)."""
    fair = FairQueue(blocks, *models, real=real)
    fair.push = gradio.wrap_push(blocks, fair.join)
    return fair
