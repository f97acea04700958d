"""Which heads matter, as a Gradio 6 gr.HTML drawn by heads.js from service.heads_view's numbers (used as
webui.steps_view uses its views: `value` is the payload, `js_on_load` calls attentionViz.mountHeads, which mounts the
view and watches the value), and the event's js that puts each head's importance on the explorer's tiles as a badge."""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr

from attention_viz.explorer.html import asset
from attention_viz.webui.explorer_view import MOUNT_CLASS
from attention_viz.webui.scripts import Raw, call, on_load

EMPTY = ("Press “Score every head”: each head of the model is switched off alone and what it costs is measured "
         "(a shipped model on its task's held-out strings, a real model on your text).")


def heads_view(payload: Mapping | None = None, elem_id: str = "heads_view", unscored: str = "", **kwargs) -> gr.HTML:
    """A gr.HTML drawing the importance of every head, the prune curve and the summary (heads.js); without scores it
    says why they cannot be asked (unscored: the model's reason; heads_empty_js keeps it to the model's), else EMPTY."""
    return gr.HTML(
        value=dict(payload) if payload is not None else None,
        html_template=f'<div class="{MOUNT_CLASS}"></div>',
        css_template=asset("heads.css"),
        js_on_load=on_load("mountHeads", {"empty": EMPTY, "unscored": unscored, "id": elem_id}),
        apply_default_css=False, elem_id=elem_id, padding=False, container=False, **kwargs,
    )


def heads_empty_js(elem_id: str) -> str:
    """The `js` of a js-only event whose one input is the note under the scoring buttons (HTML, "" when they are
    on): the panel without scores says the note's reason, or EMPTY (page.js headsEmpty)."""
    return call("headsEmpty", elem_id, Raw("note"), params="note")


def badges_js(explorer_elem_id: str) -> str:
    """The `js` of a js-only event whose one input is the importance payload: the explorer's tiles get badges
    (Δ: what each head alone costs), for the model the payload is of."""
    return call("badges", explorer_elem_id, Raw("data"), params="data")
