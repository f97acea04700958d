"""What Gradio keeps for each session, in one place: the page's config shared, no values, a bounded count.

Gradio keeps a session's state (state_holder.SessionState) for every session hash it sees, the browser's page and
every API call alike (gradio_client and the raw /call routes make a new one each time), up to `launch`'s
`state_session_capacity` (10,000 by default), the oldest dropped first. Three things made that costly here, and
each is bounded by this module (figures: docs/reliability.md, "What the server keeps per visitor"):

- **A config entry per component, built for each session.** When a session's first event reaches the server,
  Gradio builds a config entry for every component of the app (`BlocksConfig.config_for_block`: each component's
  `get_config`, which reads its constructor's signature, and for a gr.HTML searches its whole `js_on_load` script
  once per attribute name). This page has ~100 components, a third of them gr.HTML (their scripts are one-line
  calls now, loaded once in the page's head): the event loop's CPU for each student's first event, and memory kept
  per session (docs/benchmarks.md). Those
  entries serve Gradio's deep links only (a gr.DeepLinkButton, which the app does not have) and are the same for
  every session.
  `share_session_configs()` builds the entry of each of the app's own components once and hands every session
  that same entry: a session keeps only its own dicts of the components and events.
- **A new component for each gr.update an event answers.** Gradio builds one of the session's component's arguments
  and the update's (a dozen for a lesson's step: ~0.3 ms each with its two entries), though a class's sessions
  get the same updates of the same components again and again. `updated()` builds each (component, update) once
  and every session that gets that update of that component shares it, with its entry (UPDATES_KEPT of them, the
  oldest dropped; server/answers.py calls it).
- **Every input's and output's value, copied into those entries** (`SessionState._update_value_in_config`), for
  the same deep links: a refused 10 MB text stayed 10 MB for as long as its session was kept, an answered run
  0.1-1 MB. `share_session_configs()` makes that method keep nothing; it was the only place Gradio wrote into an
  entry, which is what lets the sessions share them (both reaches are named in server/gradio_internals.py, whose
  test fails when an upgrade changes either).
- **The number of sessions.** `SESSIONS_KEPT` goes to `launch(state_session_capacity=...)`: a lecture hall's pages
  several times over. A page whose session was dropped gets a fresh one at its next event with the page's
  defaults: a gr.State (the lesson's scaling) back to its start, nothing else (the service checks every value).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import Any

from attention_viz.server import gradio_internals as gradio

SESSIONS_KEPT = 1000  # sessions Gradio keeps (launch's state_session_capacity; its default is 10,000)
UPDATES_KEPT = 1024   # components built by a gr.update, each shared by the sessions that get that update

_kept: dict[int, tuple[Any, dict]] = {}  # id(component) -> (the component, its entry as first built)
_lock = threading.Lock()
_original = gradio.CONFIG_FOR_BLOCK  # Gradio's own
# (id of the component updated, the update but its value, as JSON) -> (that component, the one the update makes)
_updates: OrderedDict[tuple[int, str], tuple[Any, Any]] = OrderedDict()


def _shared(_id: int, rendered_ids: list[int], block: Any, renderable: Any = None) -> dict:
    """BlocksConfig.config_for_block: the kept entry for one of the app's own components (shared by every session:
    nothing writes into it once gradio.keep_no_session_values() runs), else Gradio's."""
    kept = _kept.get(id(block))
    if kept is None or kept[0] is not block or renderable is not None or rendered_ids:
        return _original(_id, rendered_ids, block, renderable)
    return kept[1]


def share_session_configs(blocks: Any) -> None:
    """Build the config entry of every component of `blocks` once, now, and let every session use it; any other
    component (one an event replaced in a session, one of another app) is built by Gradio as before. From now on
    no session keeps the values its events took or gave."""
    with _lock:
        for _id, block in blocks.blocks.items():
            _kept[id(block)] = (block, _original(_id, [], block))
        gradio.share_config_entries(_shared)
        gradio.keep_no_session_values()


def updated(block: Any, base: Any, update: dict) -> Any:
    """The component a gr.update `update` (its Nones taken out) of `base` (the session's copy of the app's `block`)
    makes, as Gradio's Blocks.postprocess_data builds it: `base`'s constructor arguments with the update's, but for
    its value, not rendered. Built once for each `base` and update (a component's arguments never change after it
    is built, and nothing writes into it), its config entry with it; an update whose arguments are not JSON's is
    built each time, as Gradio does."""
    props = {name: value for name, value in update.items() if name not in ("value", "__type__")}
    try:
        key = (id(base), json.dumps(props, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError):
        key = None
    with _lock:
        found = _updates.get(key) if key else None
        if found is not None and found[0] is base:  # the dict keeps `base` alive: its id names no other object
            _updates.move_to_end(key)
            return found[1]
    kwargs = {**base.constructor_args, **update, "render": False}
    kwargs.pop("value", None)
    kwargs.pop("__type__")
    component = block.__class__(**kwargs)
    if key is None:
        return component
    entry = _original(block._id, [], component)
    with _lock:
        _updates[key] = (base, component)
        _kept[id(component)] = (component, entry)
        while len(_updates) > UPDATES_KEPT:
            _, (_, dropped) = _updates.popitem(last=False)
            _kept.pop(id(dropped), None)
    return component


def kept() -> int:
    """How many components' entries are kept (for tests)."""
    return len(_kept)
