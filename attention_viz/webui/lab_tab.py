"""The √d_k lab tab: the server computes footnote 4's numbers, the page draws them (a Gradio 6 gr.HTML).

How gr.HTML is used here (gradio 6.31's HTML component):
- `value` is the lab's data (service.lab_view, a JSON-able dict); `html_template` is an empty mount point
  that never mentions `${value}`, so a new value leaves the template as it is and the drawing stays.
- `js_on_load` runs once per page with `element`, `props` and `watch`: one call, attentionViz.mountLab (lab.js and
  page.js are in the page's head once, package data: nothing is fetched, it works offline), mounts the view, and
  `watch("value", ...)` redraws on every new value. `css_template` carries lab.css (Gradio scopes it to this component).
- A change of d_k, the keys or the scaling is answered beside the queue: the event has no Python function, its `js`
  marks the view "computing", waits its turn (lab.js turn()) and asks the view's server function, lab_answer
  (gr.HTML's server_functions: one POST /component_server, no line; ~1 ms of the server's CPU, where a queued event
  costs ~5 ms of Gradio's machinery besides: docs/benchmarks.md). Where that does not answer (a refusal, a fault, no
  connection, or a d_k typed off the slider's powers of two, whose numbers take tens of ms: answer_beside) the js
  fails, and the event's `.failure` asks the queued /dk_lab (the API's endpoint too) with the controls' values: a
  refusal's message and the admission's shares come from there, as for every other event. `.success` of either marks
  the view current, even when the answer equals what is shown; `.failure` of the queued one marks it stale (the charts
  and the table say they are for the last accepted settings). All of these compare the drawn numbers with the
  controls' values, so answers that come back out of order leave the right mark.
Why not gr.LinePlot / gr.BarPlot: see attention_viz/labview/__init__.py.
"""

from __future__ import annotations

import math

import gradio as gr
import orjson
from starlette.responses import Response

from attention_viz.labview import MOUNT_CLASS, asset
from attention_viz.service import (
    KIND_LABELS,
    LAB_D_K,
    LAB_D_K_RANGE,
    LAB_HEADERS,
    LAB_KEYS,
    LAB_KEYS_RANGE,
    LAB_TABLE,
    OwnQK,
    Views,
)
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.handling import handler
from attention_viz.webui.scripts import Raw, call, on_load
from attention_viz.webui.widgets import LIVE, PRIVATE, RAW, log2_slider_pair, prose, route_unless_shown

VIEW_ID, NUMBERS_ID, STUDY_ID, OWN_ID = "lab_view", "lab_numbers", "study", "own_qk"

LAB_TEXT = """### Why divide by √d_k? (§3.2.1, footnote 4)
If the components of q and k are independent with mean 0 and variance 1, then q·k = Σᵢ qᵢkᵢ has mean 0 and
**variance d_k**. Unscaled, the logits spread like √d_k: the softmax puts almost all weight on one key
(**saturates**), its entropy drops to 0, and its gradient ‖∂softmax/∂logits‖ vanishes, so the
queries and keys stop learning. Multiplying by **1/√d_k** brings the variance back to 1 for every d_k.
Move **d_k** (log scale) and switch **scaled** to see each effect: the histogram is held against the exact law of
q·k (normal only as d_k grows), the logits keep one scale when you switch, and the curves sweep d_k from 1 to 4096.
"""

STUDY_TEXT = """### Does it matter in training? Scaled dot product, plain dot product and additive attention
The reverse task trained at d_k 8 to 1024 with each compatibility function, 3 seeds each, everything else identical,
from an initialisation where q and k have unit-variance components (footnote 4's premise), and from Xavier's. Left:
without 1/√d_k the dot product falls from about 96% to about 20% held out as d_k grows, while scaled dot product and
additive attention stay at 90-100%. Right: why; at step 0 the unscaled logits spread like √d_k, so the softmax starts
saturated. Hover a point for its numbers. The seed-0 models are in the Transformer tab's model list. The whole account, with Britz et al.'s numbers
beside ours and what did not reproduce: docs/study.md."""

OWN_TEXT = """### This model's own q·k
Footnote 4 assumes q and k have independent components of mean 0 and variance 1. A trained model's need not. Pick a
model, an attention, a layer and a head: the histogram holds that head's own logits q·k, every (query, key) pair of
the texts it read (real tokens only, the decoder's self-attention up to the query), against footnote 4's law at the
same d_k; the table sets its variance beside d_k and beside d_k · Var q · Var k, footnote 4 on the head's own
component variances. A variance far above d_k · Var q · Var k means q and k are not independent: the head has learned
to align them."""


NUMBERS_TEMPLATE = f"""<div class="av-numbers"><table><caption>{LAB_TABLE}</caption>
<thead><tr>{{{{#each value.headers}}}}<th scope="col">{{{{this}}}}</th>{{{{/each}}}}</tr></thead>
<tbody>{{{{#each value.data}}}}<tr>{{{{#each this}}}}<td>{{{{this}}}}</td>{{{{/each}}}}</tr>{{{{/each}}}}</tbody></table></div>"""
NUMBERS_CSS = """
.av-numbers { overflow-x: auto; max-width: 100%; padding: 0 2px; }
.av-numbers table { border-collapse: collapse; font-size: 14px; min-width: 100%; }
.av-numbers caption { text-align: left; font-weight: 600; padding: 4px 0 6px; }
.av-numbers th, .av-numbers td { border: 1px solid var(--border-color-primary, #ddd); padding: 4px 8px; text-align: left; }
.av-numbers th { background: var(--table-even-background-fill, #f6f6f6); font-weight: 600; }
.av-numbers td:not(:first-child) { font-variant-numeric: tabular-nums; }
/* a phone: less padding, so the table fits (at 8 px it ran past the screen's edge and lost its right border) */
@media (max-width: 480px) { .av-numbers th, .av-numbers td { padding: 4px 4px; } }
"""


LAB_ARGS = (Raw("d_k"), Raw("n_keys"), Raw("scaled"))
ANSWER = "lab_answer"  # the view's server function
JS_ON_LOAD = on_load("mountLab", {"alsoFade": ["#" + NUMBERS_ID], "answer": ANSWER}, server=True)
STUDY_JS = "attentionViz.mountStudy(element, props)"
# Before the request leaves: the view marks what was asked for, and the request waits while others are in flight
# (lab.js turn(): two requests in flight together may be answered in either order); then it asks the view's server
# function for the latest request's inputs, as every request that waited with it does. It fails where that does not
# answer, and the queued /dk_lab follows.
ASK_JS = call("labAsk", VIEW_ID, *LAB_ARGS, params="d_k, n_keys, scaled")
# On a refusal: the controls' values now (gathered when the failure is handled), so a refusal of an older request
# leaves a view that already draws them current.
STALE_JS = call("labStale", VIEW_ID, *LAB_ARGS, params="d_k, n_keys, scaled")
CURRENT_JS = call("labCurrent", VIEW_ID)
# An answer that brought the view with the controls (a lesson step: `shown`, their values, set): the view marks what
# it draws as asked for
SHOWN_JS = call("labShown", VIEW_ID, Raw("shown"), params="shown")
OWN_JS = on_load("mountOwn")


def _own_js(current: bool) -> str:
    """The own-q·k view's mark after an answer (current) or a refusal."""
    return call("own", OWN_ID, current)


class OwnHandlers:
    """What "this model's own q·k" calls: plain values in, the service's dict out (ValueError -> gr.Error)."""

    def __init__(self, own: OwnQK) -> None:
        self.own = own

    @handler
    def view(self, model: str, kind: str, layer: int, head: int, scaled: bool) -> dict:
        """One head's logits against footnote 4's law and its table (service.qk_view.OwnQK.view)."""
        return self.own.view(model, kind, layer, head, scaled)

    @handler
    def pick_model(self, model: str, scaled: bool):
        """A new model: its kinds, layers and heads in the pickers (the first of each), and that head's view."""
        shape = self.own.shape(model)
        kind = shape["kinds"][-1]  # the last kind: encoder-decoder attention where the model has it
        data = self.own.view(model, kind, 0, 0, scaled)
        return (gr.update(choices=[(KIND_LABELS[k], k) for k in shape["kinds"]], value=kind),
                gr.update(choices=list(range(shape["layers"][kind])), value=0),
                gr.update(choices=list(range(shape["heads"])), value=0), data)

    @handler
    def pick_kind(self, model: str, kind: str, scaled: bool):
        """A new kind of attention: its layers in the picker (the first) and head 0, and that head's view."""
        shape = self.own.shape(model)
        data = self.own.view(model, kind, 0, 0, scaled)
        return gr.update(choices=list(range(shape["layers"][data["kind"]])), value=0), gr.update(value=0), data


def lab_view(handlers: Handlers, data: dict | None = None) -> gr.HTML:
    """The lab's charts as a gr.HTML whose value is LabView.data (drawn by lab.js in the page), with lab_answer (the
    page's way to ask for the view beside the queue) as its server function."""

    # A coroutine, so Gradio runs it in the event loop (a worker thread's hop cost more than a cached answer), with
    # no annotations (Gradio reads a server function's type hints on every call). Its own function: Gradio marks it.
    async def lab_answer(asked):
        return answer_beside(handlers, asked)

    return gr.HTML(value=data, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("lab.css"),
                   js_on_load=JS_ON_LOAD, server_functions=[lab_answer], apply_default_css=False, elem_id=VIEW_ID,
                   padding=False, container=False, min_height=400)


def answer_beside(handlers: Handlers, asked: object) -> Response | None:
    """The lab's view and table at `asked` ({"d_k", "n_keys", "scaled"}, as the page's labAsk sends them) as JSON
    {"view", "numbers"}, computed by the same handler as /dk_lab, or None where the queued /dk_lab is to answer
    instead: a refusal (its message is told there), a fault (logged by the handler), and a d_k off the shipped sweeps
    (LabData.tabled: one typed into the box). Computed in the event loop, which answers no other request meanwhile,
    so only what takes a few ms at most: a d_k off the sweeps takes tens of ms, in a worker thread, in its line.
    Written by orjson, ready to send: FastAPI's encoder of a plain dict walked every float of it (5 ms for a
    thousand keys, against 0.3)."""
    if not isinstance(asked, dict) or not handlers.views.lab.tabled(asked.get("d_k")):
        return None
    try:
        view, numbers = handlers.dk_lab(asked.get("d_k"), asked.get("n_keys"), asked.get("scaled"))
    except gr.Error:
        return None
    return Response(orjson.dumps({"view": view, "numbers": numbers}), media_type="application/json")


def numbers_table(value: dict) -> gr.HTML:
    """The lab's numbers ({"headers", "data"}, as /dk_lab returns them) as a table the page fills from its template
    (Handlebars escapes every cell). A gr.HTML rather than a gr.Dataframe: the page then loads no table widget,
    the largest script it would fetch (docs/benchmarks.md, the page complete)."""
    return gr.HTML(value=value, html_template=NUMBERS_TEMPLATE, css_template=NUMBERS_CSS, elem_id=NUMBERS_ID,
                   apply_default_css=False, padding=False)


def render(demo: gr.Blocks, handlers: Handlers, views: Views) -> dict:
    """The lab's widgets and wiring, inside the current gr.Tab (endpoints /dk_lab, /qk_lab); returns the controls and
    views a lesson sets (d_k, dk_log, keys, scaled, the view and its numbers, and `shown`, the key of what they
    show; own_model, own_kind, own_layer, own_head, own_scaled and the own view, own_qk, with own_handlers.view to
    fill it: the own pickers answer a person's input only)."""
    prose(LAB_TEXT)
    with gr.Row():
        dk_log = gr.Slider(0, math.log2(LAB_D_K_RANGE[1]), value=math.log2(LAB_D_K), step=1,
                           label="log₂ d_k (moves d_k)", elem_id="lab_dk_log")
        d_k = gr.Number(value=LAB_D_K, minimum=LAB_D_K_RANGE[0], maximum=LAB_D_K_RANGE[1], label="d_k",
                        elem_id="lab_dk")
        keys = gr.Slider(*LAB_KEYS_RANGE, value=LAB_KEYS, step=1, label="number of keys", elem_id="lab_keys")
        scaled = gr.Checkbox(value=True, label="scaled by 1/√d_k", elem_id="lab_scaled")
    first = views.dk_lab(LAB_D_K, LAB_KEYS, True)  # in the page's config: no request when the page opens
    view = lab_view(handlers, first.data)
    numbers = numbers_table({"headers": LAB_HEADERS, "data": first.numbers})
    study = views.study_data()  # the study's numbers, in the page's config: drawn by lab.js, nothing on load
    if study is not None:
        prose(STUDY_TEXT)
        gr.HTML(value=study, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("lab.css"),
                js_on_load=STUDY_JS, apply_default_css=False, elem_id=STUDY_ID, padding=False, container=False,
                min_height=300)

    # d_k, the keys and the scaling move a counter whose change asks the server, unless they hold what a lesson
    # step's answer brought with its view (widgets.route_unless_shown; `shown` is handling.run_key(d_k, n_keys,
    # scaled)); the view then marks what it draws as asked for
    tick = gr.Textbox("0", visible=False, elem_id="lab_tick")
    shown = gr.Textbox("", visible=False, elem_id="lab_key")
    for index, trigger, control, kind in ((0, d_k.change, d_k, "number"), (1, keys.release, keys, "number"),
                                          (2, scaled.change, scaled, "boolean")):
        route_unless_shown(trigger, control, index, kind, shown, tick)
    shown.change(None, shown, None, js=SHOWN_JS, **PRIVATE)
    inputs, outputs = [d_k, keys, scaled], [view, numbers]
    # Every change runs (an event with no Python function is never deferred; lab.js turn() orders them). The queued
    # event's trigger_mode is "multiple", not LIVE's "always_last": in gradio 6.31 a trigger deferred behind an event
    # that fails waits for the next trigger (the page's error path does not run the deferred one), and leaving the
    # keys' box fires keys.release with the old d_k, so a refused d_k would swallow the next one typed.
    beside = tick.change(None, inputs, outputs, js=ASK_JS, show_progress="hidden", **PRIVATE)
    beside.success(None, None, None, js=CURRENT_JS, **PRIVATE)
    queued = beside.failure(handlers.dk_lab, inputs, outputs, api_name="dk_lab", trigger_mode="multiple",
                            show_progress="minimal", **RAW)
    queued.success(None, None, None, js=CURRENT_JS, **PRIVATE)
    queued.failure(None, inputs, None, js=STALE_JS, **PRIVATE)
    log2_slider_pair(dk_log, d_k)
    own = render_own(OwnHandlers(views.own_qk))
    return {"d_k": d_k, "dk_log": dk_log, "keys": keys, "scaled": scaled, "view": view, "numbers": numbers,
            "shown": shown, **own}


def render_own(handlers: OwnHandlers) -> dict:
    """"This model's own q·k": a model, an attention, a layer, a head, the scaling; the head's histogram and table
    (endpoint /qk_lab). The opening view is in the page's config (computed when the page is built)."""
    own = handlers.own
    model0 = own.default_model
    shape = own.shape(model0)
    kind0 = shape["kinds"][-1]
    first = own.view(model0, kind0, 0, 0, True)
    prose(OWN_TEXT)
    with gr.Row():
        model = gr.Dropdown(own.choices, value=model0, label="Model", elem_id="own_model", scale=3)
        kind = gr.Dropdown([(KIND_LABELS[k], k) for k in shape["kinds"]], value=kind0, label="Attention",
                           elem_id="own_kind", scale=2)
        layer = gr.Dropdown(list(range(shape["layers"][kind0])), value=0, label="Layer", elem_id="own_layer",
                            min_width=90)
        head = gr.Dropdown(list(range(shape["heads"])), value=0, label="Head", elem_id="own_head", min_width=90)
        scaled = gr.Checkbox(value=True, label="scaled by 1/√d_k", elem_id="own_scaled")
    view = gr.HTML(value=first, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("lab.css"),
                   js_on_load=OWN_JS, apply_default_css=False, elem_id=OWN_ID, padding=False, container=False,
                   min_height=300)
    events = [
        model.input(handlers.pick_model, [model, scaled], [kind, layer, head, view], **PRIVATE, **LIVE, **RAW),
        kind.input(handlers.pick_kind, [model, kind, scaled], [layer, head, view], **PRIVATE, **LIVE, **RAW),
        gr.on([layer.input, head.input, scaled.input], handlers.view, [model, kind, layer, head, scaled], view,
              api_name="qk_lab", **LIVE, **RAW),
    ]
    for event in events:
        event.success(None, None, None, js=_own_js(True), **PRIVATE)
        event.failure(None, None, None, js=_own_js(False), **PRIVATE)
    return {"own_model": model, "own_kind": kind, "own_layer": layer, "own_head": head, "own_scaled": scaled,
            "own_qk": view, "own_handlers": handlers}
