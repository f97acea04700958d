"""Which heads matter, as a Gradio 6 gr.HTML drawn by heads.js from service.heads_view's numbers (used as
webui.steps_view uses its views: `value` is the payload, `js_on_load` mounts the view and watches the value), and
the JS that puts each head's importance on the explorer's tiles as a badge."""

from __future__ import annotations

import json
from collections.abc import Mapping

import gradio as gr

from attention_viz.explorer.html import asset, script
from attention_viz.webui.explorer_view import MOUNT_CLASS

EMPTY = ("Press “Score every head”: each head of the model is switched off alone and what it costs is measured "
         "(a shipped model on its task's held-out strings, a real model on your text).")


def heads_view(payload: Mapping | None = None, elem_id: str = "heads_view", **kwargs) -> gr.HTML:
    """A gr.HTML drawing the importance of every head, the prune curve and the summary (heads.js)."""
    options = json.dumps({"empty": EMPTY}, ensure_ascii=False)
    return gr.HTML(
        value=dict(payload) if payload is not None else None,
        html_template=f'<div class="{MOUNT_CLASS}"></div>',
        css_template=asset("heads.css"),
        js_on_load=script("heads.js") + f"""
;(function () {{
  const view = window.AttentionHeads.mount(element.querySelector(".{MOUNT_CLASS}"), props.value || null, {options});
  watch("value", () => view.setPayload(props.value || null));
}})();
""",
        apply_default_css=False, elem_id=elem_id, padding=False, container=False, **kwargs,
    )


def badges_js(explorer_elem_id: str) -> str:
    """The `js` of a js-only event whose one input is the importance payload: the explorer's tiles get badges
    (Δ: what each head alone costs), for the model the payload is of."""
    controller = f"(document.querySelector({json.dumps('#' + explorer_elem_id + ' .av-explorer')}) || {{}}).avExplorer"
    return (f"(data) => {{ const view = {controller}; if (view && data && data.drop) view.setImportance({{"
            "model: data.model, values: data.drop, label: `${data.metric} lost (${data.unit}) with this head alone off`,"
            " digits: data.unit === 'points' ? 0 : 2, high: Math.max(...Object.values(data.drop).flat()) / 2});"
            " return []; }")
