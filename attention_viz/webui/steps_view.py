"""One head's steps and its comparison as Gradio 6 components: gr.HTMLs whose JavaScript draws the numbers.

    steps = steps_view(elem_id="steps_view")       # inside gr.Blocks; its value: explorer.steps.pack_steps(...)
    event = tab.select(handlers.steps, inputs, [steps, steps_text])
    event.failure(None, None, None, js=stale_js(["steps_view"]))   # a refused input: the view says it is stale
    event.success(None, None, None, js=fresh_js(["steps_view"]))   # an answer: it is not (even an equal one)

Gradio 6's gr.HTML is used as webui.explorer_view uses it (see its docstring): `value` is the payload dict,
which the API returns as it is; `html_template` never mentions `${value}`, so a new value leaves the DOM
that steps.js built alone; `js_on_load` is one call, attentionViz.mountSteps (steps.js and page.js are loaded once
per page: webui/scripts.py), which mounts the view, and `watch("value", ...)` hands every later value to it; `css_template` is steps.css, whose rules are
all under `.av-hv`.

stale_js and fresh_js here reach the explorer too (its controller is `.av-explorer`'s avExplorer, these
views' `.av-hv`'s avView), so one refused input marks every view of the tab at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import gradio as gr

from attention_viz.explorer.html import asset
from attention_viz.webui.explorer_view import MOUNT_CLASS, STALE
from attention_viz.webui.scripts import Raw, call, on_load

EMPTY = {"steps": "Choose a head in Heatmaps, then open this tab: its steps are computed and drawn here.",
         "compare": "Choose a head in Heatmaps, then open this tab: the comparison is computed and drawn here."}


def _js_on_load(view: str, answer: Callable | None = None) -> str:
    options = {"view": view, "empty": EMPTY[view], **({"answer": answer.__name__} if answer else {})}
    return on_load("mountSteps", options, server=answer is not None)


def _view(view: str, payload: Mapping | None, elem_id: str, answer: Callable | None = None, **kwargs) -> gr.HTML:
    return gr.HTML(
        value=dict(payload) if payload is not None else None,
        html_template=f'<div class="{MOUNT_CLASS}"></div>',
        css_template=asset("steps.css"),
        js_on_load=_js_on_load(view, answer),
        server_functions=[answer] if answer else None,
        apply_default_css=False,
        elem_id=elem_id,
        padding=False,
        container=False,
        **kwargs,
    )


def steps_view(payload: Mapping | None = None, elem_id: str = "steps_view", answer: Callable | None = None,
               **kwargs) -> gr.HTML:
    """A gr.HTML drawing one head's Figure 2 steps (explorer.steps.pack_steps), one panel at a time with a stepper;
    `answer`: its server function (a coroutine), which the page's stepsAsk asks for the steps beside the queue."""
    return _view("steps", payload, elem_id, answer, **kwargs)


def compare_view(payload: Mapping | None = None, elem_id: str = "compare_view", **kwargs) -> gr.HTML:
    """A gr.HTML drawing one head's comparison (explorer.steps.pack_compare) as a red / blue difference table."""
    return _view("compare", payload, elem_id, **kwargs)


def stale_js(elem_ids: Sequence[str], message: str = STALE, outputs: Sequence | None = None) -> str:
    """The `js` of an event that marks every view in these components stale at once, in the browser.

    With outputs=None it passes the event's input values on (for an event with a Python function); else it
    returns `outputs`, the values of a js-only event's outputs (e.g. clearing text beside the views).
    """
    back = () if outputs is None else (list(outputs),)
    return call("stale", list(elem_ids), message, Raw("args"), *back, params="...args")


def fresh_js(elem_ids: Sequence[str], shown_only: bool = False) -> str:
    """The `js` of a js-only event after an answer: these views are the current input's (even when the answer
    equalled the value already shown, so that Gradio sent nothing and `watch` did not fire).

    shown_only: only the views on show (in the open tab), for an answer that redrew only those.
    """
    return call("fresh", list(elem_ids), *((True,) if shown_only else ()))
