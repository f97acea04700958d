"""Every reach into Gradio's internals (and Starlette's and FastAPI's), in one place: the accessors and patches the
server uses where Gradio has no public way to do the job. Each reach is named, with who uses it and why, and checked
against the installed Gradio in server/gradio_checks.py (REACHES, CHECKS), so an upgrade is reviewed there and here.

Written against Gradio 6.31.0 (GRADIO_VERSION), FastAPI 0.165 and Starlette 1.10. Public options are used wherever
they do the job: `launch(state_session_capacity=, app_kwargs=, max_file_size=)`, `queue(max_size=,
default_concurrency_limit=, status_update_rate=, api_open=)`, and `concurrency_id` / `concurrency_limit` per event.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import types
from collections.abc import Callable
from typing import Any

from anyio import to_thread
from gradio import blocks as gradio_blocks
from gradio import component_meta, helpers as gradio_helpers, queueing, route_utils
from gradio import utils as gradio_utils
from gradio.components import base as component_base
from gradio.blocks import BlocksConfig
from gradio.server_messages import EstimationMessage
from gradio.state_holder import SessionState
from fastapi import routing as fastapi_routing
from starlette.applications import Starlette

GRADIO_VERSION = "6.31.0"

GRADIO_COMPRESSES = (".html", ".htm", ".js", ".css", ".json", ".md", ".txt", ".csv", ".tsv", ".xml", ".svg")
GRADIO_MIN_BYTES = 400
FnIndexInferError = route_utils.FnIndexInferError
CONFIG_FOR_BLOCK = BlocksConfig.config_for_block  # Gradio's own, before share_config_entries


# ------------------------------------------------------------------------------------------ the queue (admission)


def queue_of(blocks: Any) -> Any:
    """The queued Blocks' queue (Blocks._queue)."""
    return blocks._queue


def wrap_push(blocks: Any, join: Callable) -> Callable:
    """Put `join` (same parameters and answer as Queue.push) in place of the queue's push; Gradio's push, returned."""
    queue = queue_of(blocks)
    push = queue.push
    queue.push = join
    return push


def queued_events(queue: Any) -> list:
    """Every event waiting on any line, then every running one."""
    events = [event for line in queue.event_queue_per_concurrency_id.values() for event in line.queue]
    return events + [event for job in queue.active_jobs if job for event in job]


def undelivered(queue: Any, session: str) -> int:
    """How many events of `session` are not yet delivered."""
    return len(queue.pending_event_ids_session.get(session, ()))


def request_of(event: Any) -> Any:
    """The request an event joined with."""
    return event.request


def line_of_event(event: Any) -> str:
    """The id of the line an event is on."""
    return event.concurrency_id


def waiting_event(queue: Any, event_id: str) -> Any | None:
    """The event `event_id` while it waits on its line (None once it runs, or where it never waited)."""
    event = queue.event_ids_to_events.get(event_id)
    lines = queue.event_queue_per_concurrency_id
    if event is None or event.concurrency_id not in lines or event not in lines[event.concurrency_id].queue:
        return None
    return event


def move_to_line(queue: Any, event: Any, line_id: str, slots: int) -> list:
    """Take a waiting event off its line and onto `line_id` (made with `slots` where Gradio has no such line); the
    list of the events waiting there, for the caller to insert it into."""
    lines = queue.event_queue_per_concurrency_id
    lines[event.concurrency_id].queue.remove(event)
    event.concurrency_id = line_id
    if line_id not in lines:
        lines[line_id] = queueing.EventQueue(line_id, slots)
    return lines[line_id].queue


def tell_place(queue: Any, event: Any, rank: int, size: int) -> None:
    """Tell a waiting event its place in its line now."""
    queue.send_message(event, EstimationMessage(rank=rank, queue_size=size))


def wake_on_events(blocks: Any, most_s: float, progress_s: float) -> None:
    """The queue's dispatcher asleep until an event may start, not polling. Gradio's looks every 1 ms for an event to
    start while none can (Queue.sleep_when_free: none waiting, or every line full), a thousand wake-ups a second:
    ~4 % of a core for an idle server, and a busy one's worker threads hand the GIL to each. Its sleep becomes a
    wait that a join or an event's end cuts short (most_s at the longest, should anything else let an event start);
    its progress loop looks every progress_s (Gradio: 0.01 s)."""
    queue = queue_of(blocks)
    queue.sleep_when_free = nap = _Nap(most_s)
    queue.progress_update_sleep_when_free = progress_s
    queueing.asyncio = _NAPPING_ASYNCIO
    queue.push, queue.process_events = nap.waking(queue.push), nap.waking(queue.process_events)


class _Nap(float):
    """A dispatcher's sleep_when_free (its seconds, at the longest) that a wake() cuts short."""

    def __init__(self, seconds: float) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None  # the dispatcher's, once it has slept
        self.woken: asyncio.Event | None = None

    async def take(self) -> None:
        """Sleep until woken (at once if woken since the last sleep), or for the nap's seconds."""
        if self.woken is None:
            self.loop, self.woken = asyncio.get_running_loop(), asyncio.Event()
        if not self.woken.is_set():
            try:
                async with asyncio.timeout(float(self)):
                    await self.woken.wait()
            except TimeoutError:
                pass
        self.woken.clear()

    def waking(self, coroutine_function: Callable) -> Callable:
        """`coroutine_function` (a queue's push or process_events), then a wake of the dispatcher, however it ends."""

        @functools.wraps(coroutine_function)
        async def then_wake(*args: Any, **kwargs: Any) -> Any:
            try:
                return await coroutine_function(*args, **kwargs)
            finally:
                self.wake()

        return then_wake

    def wake(self) -> None:
        """Something may start now: the dispatcher looks (from its loop's thread or any other)."""
        if self.woken is None:
            return
        try:
            here = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            here = False
        if here:
            self.woken.set()
        else:
            self.loop.call_soon_threadsafe(self.woken.set)


class _NappingAsyncio:
    """queueing's `asyncio`: the module itself, but for a sleep of a _Nap (the dispatcher's), which is its wait."""

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    @staticmethod
    async def sleep(delay: float, result: Any = None) -> Any:
        if isinstance(delay, _Nap):
            await delay.take()
            return result
        return await asyncio.sleep(delay, result)


_NAPPING_ASYNCIO = _NappingAsyncio()


def keep_no_analytics(blocks: Any) -> None:
    """Gradio's queue keeps a record of each of the last 10,000 events (Queue.event_analytics, a dict of a dict each)
    and after every event summarises them for its monitoring page (a pandas DataFrame of them all, grouped by
    function, percentiles of each, in a worker thread): ~2 ms of an answer's CPU. The records cost on their own as
    they fill: every event then copies the list of them all, drops the oldest from the dict's front, and the garbage
    collector walks them; a server past 10,000 events spent ~1.2 ms more on each (docs/benchmarks.md, a lecture hall
    on one core, 29 November). Where the page is off (launch(enable_monitoring=False)), nothing reads either: the
    queue keeps no record, keeps the summary it has (empty), and asks no thread for it."""
    if getattr(blocks, "enable_monitoring", True):  # on, or not a launched Blocks: left as it is
        return
    queue = queue_of(blocks)
    queue.ANALYTICS_MAX_EVENTS = 0  # Queue.push drops records past this many, the one it has just added included
    queue.event_analytics.clear()
    queue.compute_analytics_summary = _KeptSummary(queue)
    queueing.run_sync = _run_sync


class _KeptSummary:
    """Queue.compute_analytics_summary, answering the summary the queue has."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def __call__(self, records: Any = None) -> dict:
        return self.queue.cached_event_analytics_summary


async def _run_sync(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """queueing's run_sync (anyio's, used there for the summary only): a kept summary answered at once."""
    if isinstance(fn, _KeptSummary):
        return fn(*args)
    return await to_thread.run_sync(fn, *args, **kwargs)


def included_routers(app: Any) -> list:
    """The routers the app includes (FastAPI's _IncludedRouter: Gradio's routes)."""
    return [route for route in app.router.routes if isinstance(route, fastapi_routing._IncludedRouter)]


def route_matcher(router: Any) -> Callable:
    """An included router's match: scope -> (Match, child scope, route, route context); the one it uses now."""
    return router.__dict__.get("_match") or router._match


def match_routes_with(router: Any, matcher: Callable) -> None:
    """The included router matches every request with `matcher` (route_matcher's parameters and answer)."""
    router._match = matcher


def login_dependants(app: Any) -> list:
    """The FastAPI dependants whose call is Gradio's login_check, where the app has no login; empty where it has one.
    Setting a dependant's `call` changes what every request of its route calls. An included router answers each
    request through its own copy of the route (its effective route context, built once per set of routes, with a
    dependant of its own), so both the routes' dependants and their contexts' are listed."""
    if getattr(app, "auth", None) is not None or getattr(app, "auth_dependency", None) is not None:
        return []
    owners = [owner for router in included_routers(app)
              for owner in (*router.original_router.routes, *router.effective_route_contexts())]
    return [dependant for owner in owners
            for dependant in getattr(getattr(owner, "dependant", None), "dependencies", ())
            if getattr(dependant.call, "__name__", "") == "login_check"]


def routes_version(router: Any) -> object:
    """What changes when an included router's routes change."""
    return router.original_router._get_routes_version()


# ------------------------------------------------------------- building components (each gr.update of an answer)


_ANY_OBJECT = object()  # what a function is bound to for its bound signature


class _SignaturesKept:
    """The `inspect` module as Gradio's modules see it, with `signature` and `getfullargspec` of a plain function
    worked out once, and the signature of a method bound to an object once for its function: a function's signature
    never changes, and Gradio reads them again for every component it builds and every config entry (each gr.update
    of an event: a new component of the merged arguments, whose __init__ and every base class's __init__ read their
    own argument lists, and its entry the class's signature), and for every call of an event's function (a
    handler's bound method). Anything else (a class, a callable object) is inspect's as before."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._signatures = functools.lru_cache(maxsize=SIGNATURES_KEPT)(module.signature)
        # a bound method's: its function's, bound (the same for every object it is bound to)
        self._method_signatures = functools.lru_cache(maxsize=SIGNATURES_KEPT)(
            lambda function: module.signature(types.MethodType(function, _ANY_OBJECT)))
        self._argspecs = functools.lru_cache(maxsize=SIGNATURES_KEPT)(module.getfullargspec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def signature(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:
            if type(obj) is types.FunctionType:
                return self._signatures(obj)
            if type(obj) is types.MethodType and type(obj.__func__) is types.FunctionType:
                return self._method_signatures(obj.__func__)
        return self._module.signature(obj, *args, **kwargs)

    def getfullargspec(self, func: Any) -> Any:
        return self._argspecs(func) if type(func) is types.FunctionType else self._module.getfullargspec(func)


SIGNATURES_KEPT = 1024  # functions: Gradio's component classes' __init__s (~100) and a few more


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def _server_function_names(cls: type) -> list[str]:
    """The names, in dir()'s order, of `cls`'s attributes that Gradio's @server marked (`_is_server_fn`)."""
    return [name for name in builtins.dir(cls)
            if callable(attribute := getattr(cls, name, None)) and getattr(attribute, "_is_server_fn", False)]


def _dir_of_server_functions(*args: Any) -> list[str]:
    """`dir` as gradio.components.base sees it: Component.__init__'s one call, `dir(self.__class__)`, which it
    filters to the attributes @server marked (getattr, callable, `_is_server_fn` on each of a class's ~70 names:
    ~0.1 ms, half of building a component), answers with those names only, found once per class; the same list
    follows, in the same order. Anything else is builtins.dir's."""
    if len(args) == 1 and isinstance(args[0], type):
        return list(_server_function_names(args[0]))
    return builtins.dir(*args)


GRADIOS_GET_TYPE_HINTS = gradio_utils.get_type_hints  # Gradio's own, before read_signatures_once


@functools.lru_cache(maxsize=SIGNATURES_KEPT)
def _type_hints_of(fn: types.FunctionType) -> dict:
    return GRADIOS_GET_TYPE_HINTS(fn)


def _get_type_hints(fn: Any) -> dict:
    """gradio.utils.get_type_hints, worked out once for a plain function, and for a bound method once for its
    function (typing reads the function's annotations either way); a copy each time, as the caller may write into
    it. Anything else (a class, a callable object) Gradio's as before."""
    if type(fn) is types.MethodType and type(fn.__func__) is types.FunctionType:
        return dict(_type_hints_of(fn.__func__))
    return dict(_type_hints_of(fn)) if type(fn) is types.FunctionType else GRADIOS_GET_TYPE_HINTS(fn)


def read_signatures_once() -> None:
    """What Gradio reads of a function or a class each time it builds a component (each gr.update of an event) or
    calls an event's function, read once: blocks, component_meta, helpers and utils a plain function's signature and
    argument list (_SignaturesKept), utils its type hints (special_args reads both for every event), components'
    base a class's server functions (_dir_of_server_functions). Once only: a second call leaves the first."""
    for module in (gradio_blocks, component_meta, gradio_helpers, gradio_utils):
        if not isinstance(module.inspect, _SignaturesKept):
            module.inspect = _SignaturesKept(module.inspect)
    gradio_utils.get_type_hints = _get_type_hints
    component_base.dir = _dir_of_server_functions


# --------------------------------------------------------------------------------------------- sessions (memory)


def share_config_entries(config_for_block: Callable) -> None:
    """Build every session's config entries with `config_for_block` (BlocksConfig.config_for_block's parameters)."""
    BlocksConfig.config_for_block = staticmethod(config_for_block)


def keep_no_session_values() -> None:
    """Sessions no longer copy their events' values into their config entries."""
    SessionState._update_value_in_config = _keep_no_value


def _keep_no_value(self: SessionState, key: int, value: Any) -> None:
    """SessionState._update_value_in_config, keeping nothing."""


# ------------------------------------------------------------------------------------ the HTTP app (static, http)


def blocks_of(app: Any) -> Any:
    """The Blocks a Gradio app serves."""
    return app.get_blocks()


def page_config(app: Any) -> object | None:
    """The app's config object where the page is the same for every visitor (no login), else None."""
    if getattr(app, "auth", None) is not None or getattr(app, "auth_dependency", None) is not None:
        return None
    try:
        return blocks_of(app).config
    except Exception:  # noqa: BLE001 - not Gradio's app (a stand-in): never kept
        return None


def has_event(app: Any, fn_index: int | None = None, api_name: str | None = None) -> bool:
    """Whether the app has an event with this fn_index, or with this api_name."""
    fns = blocks_of(app).fns
    if fn_index is not None:
        return fn_index in fns
    return any(fn.api_name == api_name for fn in fns.values())


def keep_idle_connections(blocks: Any, seconds: float) -> None:
    """An idle kept-alive connection closed by the server after `seconds` (uvicorn's default: 5), for every
    connection opened from now on: the uvicorn server Gradio started (Blocks.server) reads its Config's
    timeout_keep_alive as each connection opens."""
    blocks.server.config.timeout_keep_alive = seconds


def put_in_front(app: Starlette, middleware: Callable[[Any], Any]) -> Any:
    """Wrap a running app's whole middleware stack (built on its first request) in `middleware(stack)`; returned."""
    front = middleware(app.middleware_stack or app.build_middleware_stack())
    app.middleware_stack = front
    return front


# ------------------------------------------------------------------------------------------- what an upgrade breaks
