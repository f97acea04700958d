"""Gradio's per-session copy of the page's config, built once per component instead of once per student.

When a page's first event reaches the server, Gradio starts the session's state (state_holder.SessionState) with a
config entry for every component of the app (`BlocksConfig.config_for_block`): each component's `get_config`, which
reads its constructor's signature, and for a gr.HTML searches its whole `js_on_load` script once per attribute name
(gr.HTML makes any quoted name in it an event trigger). This page has ~100 components, a third of them gr.HTML
with scripts of tens of kB: each student's first event builds them all on the event loop, during which nothing
else is answered, and each event that first touches a component in that session pays for that component again.
Those entries serve Gradio's deep links only (a gr.DeepLinkButton, which the app does not have), and they are the
same for every session until an event updates one.

`share_session_configs()` makes config_for_block keep the entry of each of the app's own components the first time
and hand each later caller its own copy of it (the entry and its props, the two levels Gradio writes to): a
component that an event replaces in a session (a gr.update) is a new object and is built as before. What it costs
and saves, measured: docs/benchmarks.md ("What made it fast": each student's session).
"""

from __future__ import annotations

import threading
from typing import Any

from gradio.blocks import BlocksConfig

_kept: dict[int, tuple[Any, dict]] = {}  # id(component) -> (the component, its entry as first built)
_lock = threading.Lock()
_original = BlocksConfig.config_for_block


def _shared(_id: int, rendered_ids: list[int], block: Any, renderable: Any = None) -> dict:
    """BlocksConfig.config_for_block: a copy of the kept entry for one of the app's own components, else Gradio's."""
    kept = _kept.get(id(block))
    if kept is None or kept[0] is not block or renderable is not None or rendered_ids:
        return _original(_id, rendered_ids, block, renderable)
    entry = kept[1]
    return {**entry, "props": dict(entry["props"])} if "props" in entry else dict(entry)


def share_session_configs(blocks: Any) -> None:
    """Build the config entry of every component of `blocks` once, now, and let every session copy it; any other
    component (one an event replaced in a session, one of another app) is built by Gradio as before."""
    with _lock:
        for _id, block in blocks.blocks.items():
            _kept[id(block)] = (block, _original(_id, [], block))
        BlocksConfig.config_for_block = staticmethod(_shared)


def kept() -> int:
    """How many components' entries are kept (for tests)."""
    return len(_kept)
