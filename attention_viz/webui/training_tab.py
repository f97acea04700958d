"""The Training tab: the study's members at one d_k, step by step, drawn in the page from their snapshots.

How gr.HTML is used: as in lab_tab.py. `value` is service.training_view's data (None until the tab is first
opened: its ~120 kB stay out of the page's config, so the page opens as fast as before); `js_on_load` runs
attentionViz.mountTraining (training.js and page.js are in the page's head once: offline), which mounts the view and
`watch("value", ...)` hands each new value to setData. Step, attention kind and probe change in the page only.
A refused d_k (only through the API: the radio offers the trained sizes) marks the view stale.
Below it, a live run (service.live): a generator event streams the view so far and a status line (the place in
line while waiting); Cancel asks the service to stop this session's run, whose stream then says where it stopped.
"""

from __future__ import annotations

import gradio as gr

from attention_viz.labview import MOUNT_CLASS, asset
from attention_viz.service import LIVE_ARMS, LIVE_D_KS, LIVE_TASKS, Views
from attention_viz.server.admission import LIVE
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.scripts import call, on_load
from attention_viz.webui.widgets import PRIVATE, RAW, plain_text, prose, route_unless_shown

VIEW_ID, DK_ID, ROOT_ID = "train_view", "train_dk", "train_step"
LIVE_VIEW_ID, LIVE_ROOT_ID = "live_view", "live_train"
OPENING_D_K = 512  # where the three functions part: plain dot products stall, the other two align

TEXT = """### Training, step by step: do the heads form without 1/√d_k?
The same one-layer, one-head model trained on the reverse task three ways at the **same d_k**: **scaled dot
product** (the paper), **plain dot product** (no 1/√d_k) and **additive attention** (§3.2.1), same seed, data and
steps. Move the step (or press play) to watch cross-attention find the anti-diagonal, the character each output
is written from; pick d_k to see where plain dot products start to fall behind. Every map is of the same five
probe strings, teacher-forced, saved during training (docs/study.md)."""

LIVE_TEXT = """### Train one yourself
Pick a task, a d_k and a compatibility function and train the same small model here, live: the curves and the
maps arrive as it learns (600 steps, under a minute). One run trains at a time for everyone using this app; if
another is training you are told your place in line. Try plain dot product at d_k 1024, then scaled."""


def _js_on_load(root_id: str, empty: str) -> str:
    return on_load("mountTraining", {"rootId": root_id, "empty": empty})


def _training_view(elem_id: str, root_id: str, min_height: int, empty: str) -> gr.HTML:
    return gr.HTML(value=None, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("training.css"),
                   js_on_load=_js_on_load(root_id, empty), apply_default_css=False, elem_id=elem_id, padding=False,
                   container=False, min_height=min_height)


STALE_JS = call("training", VIEW_ID, "This d_k was refused; the view shows the last one that was accepted.")
CURRENT_JS = call("training", VIEW_ID, None)


def render(demo: gr.Blocks, handlers: Handlers, views: Views, tab: gr.Tab) -> dict:
    """The tab's widgets and wiring, inside `tab` (endpoints /training, /live_train, /live_cancel); returns the
    controls a lesson sets (d_k, the view and `shown`, the key of what it shows; live_task, live_dk, live_arm); {}
    when no snapshots ship."""
    sizes = views.training_sizes()
    if not sizes:
        prose("No training snapshots ship with this app.")
        return {}
    prose(TEXT)
    opening = OPENING_D_K if OPENING_D_K in sizes else sizes[-1]
    d_k = gr.Radio([str(size) for size in sizes], value=str(opening), label="d_k (the trained sizes)",
                   elem_id=DK_ID)
    view = _training_view(VIEW_ID, ROOT_ID, 600, "Loading the study's snapshots…")
    # the radio and the tab's opening move a counter whose change asks the server, unless the view holds what a
    # lesson step's answer brought (widgets.route_unless_shown; `shown` is handling.run_key(d_k))
    tick = gr.Textbox("0", visible=False, elem_id="train_tick")
    shown = gr.Textbox("", visible=False, elem_id="train_key")
    for trigger in (d_k.change, tab.select):
        route_unless_shown(trigger, d_k, 0, "string", shown, tick)
    event = tick.change(handlers.training, [d_k], [view], api_name="training", show_progress="minimal", **RAW)
    event.success(None, None, None, js=CURRENT_JS, **PRIVATE)
    event.failure(None, None, None, js=STALE_JS, **PRIVATE)

    prose(LIVE_TEXT)
    with gr.Row():
        task = gr.Radio(list(LIVE_TASKS), value=LIVE_TASKS[0], label="task", elem_id="live_task")
        live_dk = gr.Radio([str(v) for v in LIVE_D_KS], value=str(LIVE_D_KS[-1]), label="d_k", elem_id="live_dk")
        arm = gr.Radio([(label, key) for key, label in LIVE_ARMS.items()], value="dot",
                       label="compatibility function", elem_id="live_arm")
    with gr.Row():
        start = gr.Button("Train", variant="primary", elem_id="live_start")
        stop = gr.Button("Cancel", elem_id="live_cancel", interactive=False)  # on only while this page's run goes
    status = plain_text("", elem_id="live_status")
    cancelling = plain_text("", elem_id="live_cancel_status")  # the Cancel button's own answer, true in either order:
    #   the run's stream and the cancel's answer may come in either order, so it never writes over the run's last line
    live_view = _training_view(LIVE_VIEW_ID, LIVE_ROOT_ID, 60,
                               "Press Train: the curves and the maps appear here as the model learns.")
    # Many may wait at once (each hears its place in line); LiveTrainer trains one at a time, and refuses the one
    # past its line (hence two more slots than the line: the one training, and the one to be told "full").
    # Cancel is on while this page's run waits or trains, in the page (listened to before the run: the page answers
    # a click's listeners in turn, and a later one would wait for the run to end)
    start.click(None, None, stop, js=call("interactive", True), **PRIVATE)
    run = start.click(handlers.live_train, [task, live_dk, arm], [live_view, status], api_name="live_train",
                      show_progress="minimal", **RAW, **LIVE.wiring)
    run.then(None, None, stop, js=call("interactive", False), **PRIVATE)  # ended, refused or cancelled
    stop.click(handlers.live_cancel, None, cancelling, api_name="live_cancel", concurrency_limit=None,
               show_progress="hidden")
    return {"d_k": d_k, "view": view, "shown": shown, "live_task": task, "live_dk": live_dk, "live_arm": arm}
