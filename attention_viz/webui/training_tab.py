"""The Training tab: the study's members at one d_k, step by step, drawn in the page from their snapshots.

How gr.HTML is used: as in lab_tab.py. `value` is service.training_view's data (None until the tab is first
opened: its ~120 kB stay out of the page's config, so the page opens as fast as before); `js_on_load` runs
explorer.js (its colour map) and training.js, inlined from the package (offline), mounts the view and
`watch("value", ...)` hands each new value to setData. Step, attention kind and probe change in the page only.
A refused d_k (only through the API: the radio offers the trained sizes) marks the view stale.
"""

from __future__ import annotations

import json

import gradio as gr

from attention_viz.explorer.html import asset as explorer_asset
from attention_viz.labview import MOUNT_CLASS, asset
from attention_viz.service.views import Views
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.widgets import PRIVATE, RAW

VIEW_ID, DK_ID, ROOT_ID = "train_view", "train_dk", "train_step"
OPENING_D_K = 512  # where the three functions part: plain dot products stall, the other two align

TEXT = """### Training, step by step: do the heads form without 1/√d_k?
The same one-layer, one-head model trained on the reverse task three ways at the **same d_k**: **scaled dot
product** (the paper), **plain dot product** (no 1/√d_k) and **additive attention** (§3.2.1), same seed, data and
steps. Move the step (or press play) to watch cross-attention find the anti-diagonal, the character each output
is written from; pick d_k to see where plain dot products start to fall behind. Every map is of the same five
probe strings, teacher-forced, saved during training (docs/study.md)."""

JS_ON_LOAD = explorer_asset("explorer.js") + asset("training.js") + f"""
;(function () {{
  const view = window.AttentionTraining.mount(element.querySelector(".{MOUNT_CLASS}"), props.value || null,
                                              {{rootId: {json.dumps(ROOT_ID)}}});
  watch("value", () => view.setData(props.value || null));
}})();
"""
_VIEW = f"(document.querySelector({json.dumps('#' + VIEW_ID + ' .av-training')}) || {{}}).avTraining"
STALE_JS = ("() => { const v = " + _VIEW + "; if (v) v.markStale(\"This d_k was refused; the view shows the last "
            "one that was accepted.\"); }")
CURRENT_JS = "() => { const v = " + _VIEW + "; if (v) v.markStale(null); }"


def render(demo: gr.Blocks, handlers: Handlers, views: Views, tab: gr.Tab) -> None:
    """The tab's widgets and wiring, inside `tab` (endpoint /training); nothing when no snapshots ship."""
    sizes = views.training_sizes()
    if not sizes:
        gr.Markdown("No training snapshots ship with this app.")
        return
    gr.Markdown(TEXT)
    opening = OPENING_D_K if OPENING_D_K in sizes else sizes[-1]
    d_k = gr.Radio([str(size) for size in sizes], value=str(opening), label="d_k (the trained sizes)",
                   elem_id=DK_ID)
    view = gr.HTML(value=None, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("training.css"),
                   js_on_load=JS_ON_LOAD, apply_default_css=False, elem_id=VIEW_ID, padding=False, container=False,
                   min_height=600)
    event = gr.on([d_k.change, tab.select], handlers.training, [d_k], [view], api_name="training",
                  show_progress="minimal", **RAW)
    event.success(None, None, None, js=CURRENT_JS, **PRIVATE)
    event.failure(None, None, None, js=STALE_JS, **PRIVATE)
