"""The explorer as a Gradio 6 component: a gr.HTML whose JavaScript draws every view from one packed run.

    view = explorer_view(payload)                            # inside gr.Blocks; payload = explorer.pack(...)
    event = button.click(lambda text: payload_for(text), inputs=text, outputs=view)
    event.failure(None, None, None, js=stale_js(view.elem_id))   # a refused input: the view says it is stale
    event.success(None, None, None, js=fresh_js(view.elem_id))   # an answer: it is not (even an equal one)

How Gradio 6's gr.HTML is used (read from gradio 6.31's HTML component and its guide, "Custom Components
with gr.HTML"):
- `value` is the packed run itself, a JSON-able dict (or None): Gradio sends it as JSON, so the API returns
  it as a dict too. `html_template` never mentions `${value}`, so a new value leaves the rendered template
  unchanged and Gradio does not morph the DOM the script built.
- `js_on_load` runs once per component with `element` (the component's root), `props` (props.value is the
  current value) and `watch`: one call, attentionViz.mountExplorer (webui/static/page.js; the page loads it and the
  explorer's scripts once, in its head: webui/scripts.py), mounts the explorer into the template's container, and
  `watch("value", ...)` hands every later value to `setPayload`. Kind, layer, head and colour scale then change in
  the browser only: no event, no request. A switchable explorer also gets `trigger`: a click in its heads-off mode
  calls trigger(HEADS_OFF), the component's custom event, whose listener (`view.heads_off(...)`) reads the heads the
  click asked from the explorer (page.js headsOffAsked); Gradio finds a custom event by its name in quotes in
  js_on_load (here in the options).
- `css_template` is scoped by Gradio to this component, and every rule of explorer.css is under
  `.av-explorer` as well.
- An event's `js` runs in the browser before its Python function, gets the event's input values and returns
  the values the function receives: `selection_js` puts the explorer's chosen kind, layer and head there,
  so server views of one head (steps, compare, export) follow what the browser shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gradio as gr

from attention_viz.explorer.html import DEFAULT_ROOT_ID, asset, head_view_id
from attention_viz.webui.scripts import Raw, call, on_load

MOUNT_CLASS = "av-mount"
STALE = "Not for the current input: the last change was refused, so these views are the last accepted run's."
HIDE_SUMMARY = "\n.av-explorer .av-summary { display: none; }\n"
HEADS_OFF = "heads_off"  # the event a switchable explorer triggers with the heads off a click asks for


def _js_on_load(root_id: str, head_view: str, switchable: bool = False) -> str:
    options = {"rootId": root_id, "headViewId": head_view, "switchable": switchable}
    if switchable:  # the explorer's heads-off clicks trigger the component's HEADS_OFF event (page.js mountExplorer)
        options["headsOff"] = HEADS_OFF
    return on_load("mountExplorer", options, trigger=switchable)


def explorer_view(payload: Mapping | None = None, root_id: str = DEFAULT_ROOT_ID, elem_id: str | None = None,
                  summary: bool = True, switchable: bool = False, **kwargs) -> gr.HTML:
    """A gr.HTML showing the explorer: `#<root_id>` holds the controls and grid, `#head_view` the chosen head.

    Args:
        payload: the first run to show (pack.pack's result), or None for an empty view.
        root_id: the explorer's id (the app's contract uses "explorer"; the head view is head_view_id(root_id)).
        elem_id: the component's own id (default "<root_id>_view"), for stale_js, fresh_js and selection_js.
        summary: show the run's title, output and notes above the views (False where the page shows them).
        switchable: the explorer gets its "switch heads off" mode: a click there triggers the component's
            HEADS_OFF event, which `view.heads_off(...)` listens to; its js asks the explorer for the heads the click
            asked, {map key: [heads]} (page.js headsOffAsked).
        kwargs: passed on to gr.HTML (visible, min_height, ...).
    """
    return gr.HTML(
        value=dict(payload) if payload is not None else None,
        html_template=f'<div class="{MOUNT_CLASS}"></div>',
        css_template=asset("explorer.css") + ("" if summary else HIDE_SUMMARY),
        js_on_load=_js_on_load(root_id, head_view_id(root_id), switchable),
        apply_default_css=False,
        elem_id=elem_id or f"{root_id}_view",
        padding=False,
        container=False,
        **kwargs,
    )


def stale_js(elem_id: str, message: str = STALE, outputs: Sequence | None = None) -> str:
    """The `js` of an event that marks the view stale at once, in the browser; the next run (or fresh_js) clears it.

    With outputs=None the function passes the event's input values on (for an event with a Python function);
    else it returns `outputs`, the values of a js-only event's outputs (e.g. clearing text beside the view).
    """
    back = () if outputs is None else (list(outputs),)
    return call("stale", [elem_id], message, Raw("args"), *back, params="...args")


def fresh_js(elem_id: str) -> str:
    """The `js` of a js-only event after a successful run: the view is the current input's, even if the answer
    equalled the value already shown (Gradio then sends no new value, and `watch` does not fire)."""
    return call("fresh", [elem_id])


def selection_js(elem_id: str, at: int) -> str:
    """The `js` of an event whose inputs at positions at, at+1, at+2 are kind, layer and head: they become the
    explorer's current choice (kept as sent when the explorer has no run)."""
    return call("selection", elem_id, int(at), Raw("args"), params="...args")


def open_js(elem_id: str) -> str:
    """The `js` of a js-only event whose one input is a JSON {"kind", "layer", "head"} (or ""): the explorer opens
    that head now and keeps it for the run on its way (a guided lesson's step)."""
    return call("openOn", elem_id, Raw("target"), params="target")
