"""Each reach into Gradio's internals named and checked: REACHES says, for each, the module that relies on it, what it
is and why nothing public does the job; CHECKS looks for it in the installed Gradio (FastAPI, Starlette) and says
what is no longer there in the shape relied on. `changed()` lists those; tests/server/test_gradio_internals.py fails
on each by name, so an upgrade is reviewed here and in the module that uses it. The accessors and patches
themselves: server/gradio_internals.py.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio import processing_utils, queueing, route_utils, routes
from gradio.blocks import BlocksConfig
from gradio.data_classes import PredictBodyInternal
from gradio.server_messages import EstimationMessage
from gradio.state_holder import SessionState
from fastapi import routing as fastapi_routing
from fastapi.dependencies import utils as fastapi_dependencies
from fastapi.dependencies.models import Dependant as FastAPIDependant
from starlette.applications import Starlette

from attention_viz.server import gradio_internals as internals

ADMISSION, SESSIONS, STATIC, PAGE, ANSWERS = ("server/admission.py", "server/sessions.py", "server/static.py",
                                              "webui/page.py", "server/answers.py (the app's Blocks)")
ROUTES = "server/routes.py"
# name -> (the module that relies on it, what it is, why no public option does the job)
REACHES = {
    "Queue.push": (ADMISSION, "every join (/queue/join, /call/<name>, gradio_client) passes here; it returns "
                   "(ok, event id or message, state), and state 'queue_full' is answered 503; its body (a "
                   "PredictBodyInternal: .fn_index, .data, .session_hash) names the listener (Blocks.fns[fn_index]: "
                   ".concurrency_id, .inputs) and the values",
                   "a listener's concurrency_id is fixed when it is wired; the line by an input's value, shares per "
                   "address and turns by address have no option"),
    "Queue's lines": (ADMISSION, "Queue.event_queue_per_concurrency_id: line id -> EventQueue(concurrency_id, "
                      "concurrency_limit), whose .queue lists the waiting Events in the order they start; "
                      "Queue.active_jobs: the running events (lists of Events, None where a worker is free); "
                      "Queue.event_ids_to_events: event id -> Event until it is done",
                      "counting and reordering waiting events: no public view of the queue"),
    "Queue.pending_event_ids_session": (ADMISSION, "session -> the ids of its events not yet delivered",
                                       "a page's share: no public count"),
    "Event": (ADMISSION, "Event.concurrency_id (read again wherever Gradio starts, ends, cancels or counts it), "
              ".request (the join's), .session_hash", "moving an event to another line"),
    "Queue.send_message": (ADMISSION, "send_message(event, EstimationMessage(rank, queue_size)) tells a waiting "
                           "event its place", "a seated event's new place, before the next status update"),
    "Queue.sleep_when_free": (PAGE, "the seconds Queue.start_processing sleeps between its looks for an event to "
                               "start, when none is waiting or every line is full (a float attribute, 0.001 on "
                               "Linux), slept as `await asyncio.sleep(self.sleep_when_free)` with queueing's "
                               "module `asyncio`; an event can start after Queue.push (async) or once a running one "
                               "ends (Queue.process_events, a coroutine looked up on the queue, frees its "
                               "active_jobs slot); Queue.progress_update_sleep_when_free: how often start_progress_"
                               "updates looks for progress to send (0.01 s)",
                               "no option sets the dispatcher's polling interval, or wakes it"),
    "Queue.compute_analytics_summary": (PAGE, "called after every event as `await run_sync(self."
                                        "compute_analytics_summary, records)` (queueing.run_sync: anyio's, used "
                                        "for nothing else there); it answers Queue.cached_event_analytics_summary, "
                                        "which only the monitoring routes read (Blocks.enable_monitoring); "
                                        "Queue.event_analytics, the events' records the summary is made of, which "
                                        "Queue.push bounds to Queue.ANALYTICS_MAX_EVENTS and only the monitoring "
                                        "dashboard reads besides",
                                        "launch(enable_monitoring=False) turns the routes off but not the summary "
                                        "or the records"),
    "BlocksConfig.config_for_block": (SESSIONS, "builds a component's config entry for each session",
                                      "no option shares the page's entries between sessions"),
    "SessionState._update_value_in_config": (SESSIONS, "copies every input and output value into the session's "
                                             "entry (for deep links), the only write into an entry",
                                             "no option keeps sessions from holding values"),
    "Blocks.preprocess_data": (ANSWERS, "(block_fn, inputs, state, explicit_call): an "
                               "event's values before its function runs; Gradio refuses one short of inputs "
                               "(validate_inputs); Component._id names an input",
                               "no option lets an API client leave out inputs added after it was written"),
    "Blocks.postprocess_data": (ANSWERS, "(block_fn, predictions, state): an event's answer turned into what is "
                                "sent; an output left as it is (gr.skip(), and every output a function answering a "
                                "dict of components does not name: blocks.convert_component_dict_to_list) is sent "
                                "as {\"__type__\": \"update\"}, after Gradio has built a new component of the "
                                "same arguments into the session's state and its config entry; BlockFunction's "
                                ".outputs and .batch",
                                "no option skips an output without that work (~0.6 ms per output: the lesson's "
                                "step names a few of its ~50 outputs)"),
    "processing_utils' traversals": (ANSWERS, "an answer's values are walked twice after postprocess, every element "
                                     "of them: processing_utils.async_move_files_to_cache (per output, in "
                                     "Blocks.postprocess_data) and processing_utils.add_root_url (the whole answer, in "
                                     "Blocks.process_api); each rebuilds every dict and list, changing only the "
                                     "file dicts (client_utils.is_file_obj_with_meta: a dict with \"path\" and a "
                                     "\"meta\" of _type gradio.FileData)",
                                     "no option skips them for an answer that holds no file: the lab's ~2,000 "
                                     "numbers took ~1.7 ms of walking"),
    "route_utils.get_root_url": (ANSWERS, "(request, route_path, root_path) -> the root URL of an answer's files, "
                                 "asked by Queue.process_events for every event (as route_utils.get_root_url); it "
                                 "reads of the request its url and its x-forwarded-host, x-gradio-server and "
                                 "x-forwarded-proto headers (get_request_origin), with three httpx.URL parsings",
                                 "no option keeps it: ~0.3 ms of CPU an event"),
    "App internals": (STATIC + ", server/http.py", "App.get_blocks() -> the Blocks; Blocks.fns: fn_index -> "
                      "BlockFunction (.api_name); Blocks.config: a new object when the page changes; App.auth, "
                      "App.auth_dependency; route_utils.FnIndexInferError: a call to a name no event has",
                      "answering the page from memory and an unknown endpoint with 404: no hook"),
    "BrotliMiddleware's rules": (STATIC, "which files Gradio compresses: internals.GRADIO_COMPRESSES, from "
                                 "internals.GRADIO_MIN_BYTES", "the kept files go out compressed as Gradio would"),
    "FastAPI's included routers": (ROUTES, "App.router.routes holds fastapi.routing._IncludedRouter objects (Gradio's "
                                   "routes); each matches a request by `_match(scope)` -> (Match, child scope, route, "
                                   "route context), called by APIRouter.matches and again by _handle_selected; "
                                   "_IncludedRouter.original_router._get_routes_version() changes with the routes",
                                   "no option makes FastAPI look a route up instead of trying each in turn"),
    "login_check": (ROUTES, "Gradio's routes depend on `login_check` (routes.App.create_app: a plain function, which "
                    "FastAPI runs in a worker thread for every request of the queue: ~0.2 ms of CPU each); it "
                    "returns at once where the app has no login (App.auth and App.auth_dependency None); each "
                    "route's FastAPI Dependant lists it in .dependencies, and so does the dependant of each route's "
                    "copy that an included router answers with (_IncludedRouter.effective_route_contexts(): "
                    "_EffectiveRouteContext.dependant); solve_dependencies calls a sub-dependant's `.call`",
                    "app.dependency_overrides (FastAPI's own) replaces it, but an app with any override "
                    "has every dependency of every request derived afresh (~0.27 ms a request)"),
    "inspect in gradio.blocks and gradio.component_meta": (PAGE, "both modules `import inspect` and call "
                                                            "`inspect.signature(cls.__init__)` (Block.get_config) and "
                                                            "`inspect.getfullargspec(fn)` (updateable: every "
                                                            "component's __init__) through that module name; so do "
                                                            "gradio.helpers and gradio.utils, `inspect.signature(fn)` "
                                                            "of an event's function, with `utils.get_type_hints(fn)` "
                                                            "(special_args, for every event)",
                                                            "no option keeps what they read"),
    "dir in gradio.components.base": (PAGE, "Component.__init__ lists its server functions as `getattr(self, value) "
                                       "for value in dir(self.__class__)` kept where callable and `_is_server_fn` "
                                       "(set by gradio.components.base.server); that is the module's one call of "
                                       "`dir`", "no option keeps the list per class"),
    "uvicorn's keep-alive": (PAGE, "Blocks.launch keeps the uvicorn server it starts as Blocks.server "
                             "(http_server.start_server builds its uvicorn.Config with no timeout_keep_alive: "
                             "uvicorn's 5 s); each of uvicorn's HTTP protocols reads config.timeout_keep_alive as a "
                             "connection opens",
                             "launch() passes no option to uvicorn: a client or proxy that keeps idle connections "
                             "longer than 5 s sends requests on connections the server is closing"),
    "Starlette.middleware_stack": (STATIC, "the app's built middleware stack (Starlette builds it at "
                                   "the server's start, before launch() returns; add_middleware refuses after that)",
                                   "Gradio adds its CORS and compression after app_kwargs' middleware: only "
                                   "replacing the built stack puts a middleware in front of them"),
}

# What Gradio's BrotliMiddleware compresses (gradio/brotli_middleware.py): these extensions, from 400 bytes

def _parameters(function: Callable) -> list[str]:
    return [name for name in inspect.signature(function).parameters if name != "self"]


def _source_uses(obj: Any, *names: str) -> list[str]:
    source = inspect.getsource(obj)
    return [name for name in names if name not in source]


def _check_push() -> list[str]:
    found = _parameters(queueing.Queue.push)
    problems = [] if found[:3] == ["body", "request", "username"] else [f"Queue.push's parameters are {found}"]
    return problems + [f"Queue.push no longer answers {name}" for name in _source_uses(queueing.Queue, '"queue_full"')]


def _check_lines() -> list[str]:
    problems = [f"Queue no longer has {name}" for name in _source_uses(
        queueing.Queue, "self.event_queue_per_concurrency_id", "self.active_jobs", "self.event_ids_to_events")]
    if _parameters(queueing.EventQueue)[:2] != ["concurrency_id", "concurrency_limit"]:
        problems.append(f"EventQueue's parameters are {_parameters(queueing.EventQueue)}")
    problems += [f"EventQueue has no {name}" for name in _source_uses(queueing.EventQueue, "self.queue")]
    return problems


def _check_pending() -> list[str]:
    return [f"Queue no longer has {name}" for name in _source_uses(queueing.Queue, "self.pending_event_ids_session")]


def _check_event() -> list[str]:
    problems = [f"Event has no {name}" for name in _source_uses(
        queueing.Event.__init__, "self.concurrency_id", "self.request", "self.session_hash")]
    return problems + [f"Queue no longer reads {name}" for name in _source_uses(queueing.Queue, "event.concurrency_id")]


def _check_send_message() -> list[str]:
    problems = []
    if _parameters(queueing.Queue.send_message)[:2] != ["event", "event_message"]:
        problems.append(f"Queue.send_message's parameters are {_parameters(queueing.Queue.send_message)}")
    if not {"rank", "queue_size"} <= set(EstimationMessage.model_fields):
        problems.append(f"EstimationMessage's fields are {sorted(EstimationMessage.model_fields)}")
    return problems


def _check_sleep_when_free() -> list[str]:
    problems = [f"Queue no longer has {name}" for name in _source_uses(
        queueing.Queue, "self.sleep_when_free =", "self.progress_update_sleep_when_free =")]
    uses = inspect.getsource(queueing.Queue.start_processing).count("await asyncio.sleep(self.sleep_when_free)")
    problems += [] if uses == 3 else [f"Queue.start_processing sleeps sleep_when_free {uses} times, not 3"]
    problems += [f"Queue.start_processing no longer uses {name}" for name in _source_uses(
        queueing.Queue.start_processing, "self.process_events, events")]
    problems += [f"Queue.process_events no longer frees its slot with {name}" for name in _source_uses(
        queueing.Queue.process_events, "self.active_jobs[self.active_jobs.index(events)] = None")]
    problems += [f"Queue.start_progress_updates no longer uses {name}" for name in _source_uses(
        queueing.Queue.start_progress_updates, "await asyncio.sleep(self.progress_update_sleep_when_free)")]
    if not inspect.iscoroutinefunction(queueing.Queue.push):
        problems.append("Queue.push is no longer a coroutine")
    if queueing.asyncio is not asyncio and not isinstance(queueing.asyncio, internals._NappingAsyncio):
        problems.append("queueing's asyncio is not the asyncio module")
    return problems


def _check_analytics() -> list[str]:
    source = inspect.getsource(queueing)
    problems = [] if "from anyio.to_thread import run_sync" in source else ["queueing no longer imports anyio's run_sync"]
    calls = source.count("run_sync(")
    summaries = source.count("await run_sync(\n                        self.compute_analytics_summary") + source.count(
        "await run_sync(\n                    self.compute_analytics_summary")
    if calls != summaries or not calls:
        problems.append(f"queueing calls run_sync {calls} times, {summaries} of them for the summary")
    problems += [f"Queue no longer has {name}" for name in _source_uses(
        queueing.Queue, "self.cached_event_analytics_summary", "def compute_analytics_summary")]
    if "while len(self.event_analytics) > self.ANALYTICS_MAX_EVENTS:" not in inspect.getsource(queueing.Queue.push):
        problems.append("Queue.push no longer bounds its records by ANALYTICS_MAX_EVENTS")
    routes_source = inspect.getsource(routes)
    if routes_source.count("cached_event_analytics_summary") != 1 or "if blocks.enable_monitoring is False" not in \
            routes_source:
        problems.append("the monitoring routes read the summary otherwise")
    if routes_source.count("_queue.event_analytics") != 1 or "if not blocks.enable_monitoring:" not in routes_source:
        problems.append("the events' records are read otherwise than by the monitoring dashboard")
    return problems


def _check_config_for_block() -> list[str]:
    if not isinstance(inspect.getattr_static(BlocksConfig, "config_for_block"), staticmethod):
        return ["BlocksConfig.config_for_block is no longer a staticmethod"]
    found = _parameters(internals.CONFIG_FOR_BLOCK)
    if found != ["_id", "rendered_ids", "block", "renderable"]:
        return [f"BlocksConfig.config_for_block's parameters are {found}"]
    return [f"SessionState no longer calls {name}" for name in _source_uses(SessionState, "config_for_block")]


def _check_update_value_in_config() -> list[str]:
    """The method exists with (key, value), and it is the only place Gradio writes into a session's config entries
    (config_values[...][...] = ..., or .update/.setdefault/.pop/.clear on one): what lets the sessions share them."""
    found = _parameters(SessionState._update_value_in_config)
    if found != ["key", "value"]:
        return [f"SessionState._update_value_in_config's parameters are {found}"]
    home = Path(gr.__file__).parent
    users = sorted(p.relative_to(home).as_posix() for p in home.rglob("*.py") if "config_values" in p.read_text())
    if users != ["state_holder.py"]:
        return [f"Gradio now uses sessions' config entries in {users}"]
    writers = set()
    for function in ast.walk(ast.parse((home / "state_holder.py").read_text())):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
            if any(isinstance(t, ast.Subscript) and "config_values[" in ast.unparse(t.value) for t in targets):
                writers.add(function.name)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("update", "setdefault", "pop", "clear")
                    and "config_values[" in ast.unparse(node.func.value)):
                writers.add(function.name)
    return [] if writers == {"_update_value_in_config"} else [f"Gradio writes into config entries in {sorted(writers)}"]


def _check_preprocess_data() -> list[str]:
    found = _parameters(gr.Blocks.preprocess_data)
    if found != ["block_fn", "inputs", "state", "explicit_call"]:
        return [f"Blocks.preprocess_data's parameters are {found}"]
    problems = [f"Blocks.preprocess_data no longer calls {name}" for name in _source_uses(
        gr.Blocks.preprocess_data, "self.validate_inputs(block_fn, inputs)")]
    return problems + [f"Block has no {name}" for name in _source_uses(gr.blocks.Block.__init__, "self._id")]


def _check_postprocess_data() -> list[str]:
    from gradio import blocks

    found = _parameters(gr.Blocks.postprocess_data)
    if found != ["block_fn", "predictions", "state"]:
        return [f"Blocks.postprocess_data's parameters are {found}"]
    problems = [f"Blocks.postprocess_data no longer uses {name}" for name in _source_uses(
        gr.Blocks.postprocess_data, "convert_component_dict_to_list", "is_prop_update", "block.__class__(**kwargs)",
        "block_fn.outputs", "block_fn.batch", "postprocess_update_dict(")]
    if gr.skip() != {"__type__": "update"}:
        problems.append(f"gr.skip() is {gr.skip()}")
    if "skip()" not in inspect.getsource(blocks.convert_component_dict_to_list):
        problems.append("convert_component_dict_to_list no longer fills the outputs not named with skip()")
    return problems


def _check_get_root_url() -> list[str]:
    gradios = inspect.unwrap(route_utils.get_root_url)  # Gradio's own, also once answers has put ours first
    problems = [] if _parameters(gradios) == ["request", "route_path", "root_path"] else [
        f"get_root_url's parameters are {_parameters(gradios)}"]
    problems += [f"get_root_url no longer uses {name}" for name in _source_uses(
        gradios, "get_request_origin(request, route_path)")]
    origin = inspect.getsource(route_utils.get_request_origin)
    read = {name for name in ("x-forwarded-host", "x-gradio-server", "x-forwarded-proto") if f'"{name}"' in origin}
    problems += [] if read == {"x-forwarded-host", "x-gradio-server", "x-forwarded-proto"} else [
        f"get_request_origin reads only {sorted(read)} of the three headers"]
    attributes = set(re.findall(r"request\.(\w+)", origin + inspect.getsource(route_utils.get_first_header_value)))
    if attributes != {"url", "headers"}:
        problems.append(f"get_request_origin reads the request's {sorted(attributes)}, not its url and headers")
    return problems + [f"Queue.process_events no longer calls {name}" for name in _source_uses(
        queueing.Queue.process_events, "route_utils.get_root_url(")]


def _check_traversals() -> list[str]:
    from gradio import blocks
    from gradio_client import utils as client_utils

    problems = [f"Blocks.process_api no longer calls {name}" for name in _source_uses(
        gr.Blocks.process_api, "processing_utils.add_root_url(data, root_path, None)")]
    problems += [f"Blocks.postprocess_data no longer calls {name}" for name in _source_uses(
        gr.Blocks.postprocess_data, "processing_utils.async_move_files_to_cache(")]
    gradios = inspect.unwrap(processing_utils.add_root_url)  # Gradio's own, also once answers has put ours first
    if _parameters(gradios) != ["data", "root_url", "previous_root_url"]:
        problems.append(f"add_root_url's parameters are {_parameters(gradios)}")
    problems += [f"add_root_url no longer uses {name}" for name in _source_uses(
        gradios, "client_utils.traverse(data, _add_root_url, client_utils.is_file_obj_with_url)")]
    problems += [f"async_move_files_to_cache no longer uses {name}" for name in _source_uses(
        processing_utils.async_move_files_to_cache, "client_utils.async_traverse(",
        "client_utils.is_file_obj_with_meta")]
    if "is_file_obj_with_meta(d)" not in inspect.getsource(client_utils.is_file_obj_with_url):
        problems.append("is_file_obj_with_url no longer starts from is_file_obj_with_meta")
    meta = inspect.getsource(client_utils.is_file_obj_with_meta)
    if not all(word in meta for word in ('"path" in d', '"meta"', '"gradio.FileData"')):
        problems.append("is_file_obj_with_meta no longer asks for path and a meta of gradio.FileData")
    return problems + ([] if blocks.processing_utils is processing_utils else ["blocks imports processing_utils otherwise"])


def _check_app() -> list[str]:
    problems = [] if _parameters(routes.App.get_blocks) == [] else ["App.get_blocks takes parameters"]
    problems += [f"App has no {name}" for name in _source_uses(routes.App.__init__, "self.auth ",
                                                               "self.auth_dependency")]
    problems += [f"Blocks has no {name}" for name in _source_uses(gr.Blocks, "self.fns", "self.config =")]
    problems += [f"BlockFunction has no {name}" for name in _source_uses(gr.blocks.BlockFunction.__init__,
                                                                          "self.api_name", "self.inputs",
                                                                          "self.concurrency_id")]
    problems += [f"a join's body has no {name}" for name in ("fn_index", "data", "session_hash")
                 if name not in PredictBodyInternal.model_fields]
    if "raise FnIndexInferError" not in inspect.getsource(route_utils.get_fn):
        problems.append("route_utils.get_fn no longer raises FnIndexInferError for an unknown api_name")
    return problems


def _check_brotli() -> list[str]:
    from gradio import brotli_middleware

    source = inspect.getsource(brotli_middleware.BrotliMiddleware._is_compressible_file_type)
    listed = set(ast.literal_eval(source[source.index("{"):source.index("}") + 1]))
    problems = [] if listed == set(internals.GRADIO_COMPRESSES) else [f"Gradio compresses {sorted(listed)}"]
    minimum = inspect.signature(brotli_middleware.BrotliMiddleware).parameters["minimum_size"].default
    return problems + ([] if minimum == internals.GRADIO_MIN_BYTES else [f"Gradio compresses from {minimum} bytes"])


def _check_included_routers() -> list[str]:
    included = getattr(fastapi_routing, "_IncludedRouter", None)
    if included is None:
        return ["fastapi.routing has no _IncludedRouter"]
    problems = [] if _parameters(included._match) == ["scope"] else [f"_match's parameters are {_parameters(included._match)}"]
    problems += [f"_IncludedRouter no longer calls {name}" for name in _source_uses(
        included._handle_selected, "self._match(scope)")]
    problems += [f"APIRouter.matches no longer calls {name}" for name in _source_uses(
        fastapi_routing.APIRouter.matches, "included_router._match(scope)")]
    if "original_router" not in {field.name for field in dataclasses.fields(included)}:
        problems.append("_IncludedRouter has no original_router")
    if not hasattr(fastapi_routing.APIRouter, "_get_routes_version"):
        problems.append("APIRouter has no _get_routes_version")
    return problems


def _check_login_check() -> list[str]:
    return [f"routes.App.create_app no longer has {name!r}" for name in _source_uses(
        routes.App.create_app, "def login_check(user: str = Depends(get_current_user)):\n            if (app.auth is None "
        "and app.auth_dependency is None) or user is not None:\n                return\n",
        '@router.post("/queue/join", dependencies=[Depends(login_check)])',
        '@router.get("/queue/data", dependencies=[Depends(login_check)])')] + [
        f"fastapi's solve_dependencies no longer has {name!r}" for name in _source_uses(
            fastapi_dependencies.solve_dependencies, "for sub_dependant in dependant.dependencies:",
            "call = sub_dependant.call")] + (
        [] if "call" in {field.name for field in dataclasses.fields(FastAPIDependant)} else ["Dependant has no call"]) + (
        [] if hasattr(fastapi_routing._IncludedRouter, "effective_route_contexts") else
        ["_IncludedRouter has no effective_route_contexts"]) + (
        [] if "dependant" in {field.name for field in dataclasses.fields(fastapi_routing._EffectiveRouteContext)} else
        ["_EffectiveRouteContext has no dependant"])


def _check_inspect() -> list[str]:
    from gradio import blocks as gradio_blocks
    from gradio import component_meta, helpers, utils

    problems = [f"gradio.{module.__name__.split('.')[-1]} has no module `inspect`" for module in
                (gradio_blocks, component_meta, helpers, utils) if not hasattr(module, "inspect")]
    problems += [f"special_args no longer has {name!r}" for name in _source_uses(
        helpers.special_args, "signature = inspect.signature(fn)", "type_hints = utils.get_type_hints(fn)")]
    problems += [] if hasattr(utils, "get_type_hints") else ["gradio.utils has no get_type_hints"]
    problems += [f"Block.get_config no longer has {name!r}" for name in _source_uses(
        gradio_blocks.Block.get_config, "signature = inspect.signature(cls.__init__)")]
    return problems + [f"component_meta.updateable no longer has {name!r}" for name in _source_uses(
        component_meta.updateable, "fn_args = inspect.getfullargspec(fn).args")]


def _check_component_dir() -> list[str]:
    from gradio.components import base as component_base

    problems = [f"Component.__init__ no longer has {name!r}" for name in _source_uses(
        component_base.Component.__init__, "for value in dir(self.__class__)", '"_is_server_fn"')]
    calls = re.findall(r"(?<![\w.])dir\(", inspect.getsource(component_base))
    return problems + ([] if len(calls) == 1 else [f"gradio.components.base calls dir {len(calls)} times, not once"])


def _check_middleware_stack() -> list[str]:
    problems = [f"Starlette no longer uses {name}" for name in _source_uses(
        Starlette.__call__, "self.middleware_stack", "self.build_middleware_stack()")]
    return problems + [f"Starlette has no {name}" for name in _source_uses(Starlette.__init__, "self.middleware_stack")]


def _check_keep_alive() -> list[str]:
    import uvicorn
    from gradio import http_server
    from uvicorn.protocols.http import h11_impl, httptools_impl

    problems = [f"Blocks.launch no longer has {name!r}" for name in _source_uses(gr.Blocks.launch, "self.server = ")]
    problems += [f"http_server.start_server no longer has {name!r}" for name in _source_uses(
        http_server.start_server, "uvicorn.Config(")]
    if "timeout_keep_alive" in inspect.getsource(http_server.start_server):
        problems.append("http_server.start_server sets timeout_keep_alive itself")
    if "timeout_keep_alive" not in inspect.signature(uvicorn.Config).parameters:
        problems.append("uvicorn.Config has no timeout_keep_alive")
    return problems + [f"{module.__name__} no longer reads config.timeout_keep_alive as a connection opens"
                       for module in (h11_impl, httptools_impl)
                       if "config.timeout_keep_alive" not in inspect.getsource(module)]


CHECKS: dict[str, Callable[[], list[str]]] = {
    "Queue.push": _check_push,
    "Queue's lines": _check_lines,
    "Queue.pending_event_ids_session": _check_pending,
    "Event": _check_event,
    "Queue.send_message": _check_send_message,
    "Queue.sleep_when_free": _check_sleep_when_free,
    "Queue.compute_analytics_summary": _check_analytics,
    "BlocksConfig.config_for_block": _check_config_for_block,
    "SessionState._update_value_in_config": _check_update_value_in_config,
    "Blocks.preprocess_data": _check_preprocess_data,
    "Blocks.postprocess_data": _check_postprocess_data,
    "processing_utils' traversals": _check_traversals,
    "route_utils.get_root_url": _check_get_root_url,
    "App internals": _check_app,
    "BrotliMiddleware's rules": _check_brotli,
    "FastAPI's included routers": _check_included_routers,
    "login_check": _check_login_check,
    "inspect in gradio.blocks and gradio.component_meta": _check_inspect,
    "dir in gradio.components.base": _check_component_dir,
    "uvicorn's keep-alive": _check_keep_alive,
    "Starlette.middleware_stack": _check_middleware_stack,
}


def changed() -> dict[str, list[str]]:
    """What the installed Gradio and Starlette no longer have in the shape each reach relies on ({} when all is)."""
    found = {name: check() for name, check in CHECKS.items()}
    return {name: problems for name, problems in found.items() if problems}
