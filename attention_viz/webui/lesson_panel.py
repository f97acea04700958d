"""The guided lesson (#lesson): a closed panel above the tabs whose Next and Back buttons set the controls a step
names, open its tab, and say what to notice with that view's numbers (service.lesson writes the text).

The step's controls are set by one event; their own change events then rerun what they drive, as if a person had
set them. A step that picks another model hands its scaling to the model's controls (lesson_scale), which would
otherwise reset the scaling to the model's own. The explorer's head is chosen in the browser once the run is
drawn (explorer_view.open_js).
"""

from __future__ import annotations

import json

import gradio as gr

from attention_viz.webui.explorer_view import open_js
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.transformer_tab import VIEW
from attention_viz.webui.widgets import PRIVATE, prose

# A step that changes only the heads switched off: their box reruns on its button, as when a person sets them.
RERUN_JS = ("(target) => { const t = target ? JSON.parse(target) : {}, run = document.querySelector('#heads_apply');"
            " if (t.rerun && run) run.click(); return []; }")
# After a step: the view it talks about comes into sight (explorer.js's AttentionExplorer.reveal), the first on show
# of these: the grid with its open head, steps, compare, which heads matter, the lab, training.
VIEWS = [["#explorer", "#head_view"], ["#steps_view"], ["#compare_view"], ["#heads_view"], ["#lab_view"], ["#train_view"]]
REVEAL_JS = f"() => {{ if (window.AttentionExplorer) window.AttentionExplorer.reveal({json.dumps(VIEWS)}); return []; }}"
INTRO = ("Eight steps from the anti-diagonal of reverse, through which of its heads matter, to why the paper divides "
         "by √d_k (two more on a real model when this server has one). Each step sets the "
         "controls for you and says what to look at, with the numbers of the view it opens.")


def render() -> dict:
    """The panel (closed until opened), above the tabs; wire() connects it once the tabs exist."""
    with gr.Accordion("A guided lesson: attention, step by step", open=False, elem_id="lesson"):
        text = prose(INTRO, elem_id="lesson_text")
        with gr.Row():
            back = gr.Button("◀ Back", elem_id="lesson_prev", size="sm")
            forward = gr.Button("Start ▶", elem_id="lesson_next", variant="primary", size="sm")
        index = gr.Number(-1, visible=False, precision=0, elem_id="lesson_step")
        target = gr.Textbox("", visible=False, elem_id="lesson_target")  # the explorer's head, as JSON
    return {"text": text, "back": back, "forward": forward, "index": index, "target": target}


def wire(handlers: Handlers, lesson: dict, tabs: gr.Tabs, transformer: dict, lab: dict, training: dict) -> None:
    """Next / Back -> handlers.lesson: the step's text, tab and controls; then the explorer's head and the training
    view (a radio set to the value it has fires no change)."""
    outputs = [lesson["index"], lesson["text"], tabs,
               transformer["text"], transformer["model"], transformer["d_k"], transformer["dk_log"], transformer["dk_trained"],
               transformer["scale"], transformer["lesson_scale"], transformer["heads_off"],
               lab["d_k"], lab["dk_log"], lab["scaled"],
               training["d_k"], training["live_task"], training["live_dk"], training["live_arm"],
               lesson["target"], transformer["views"], transformer["active"]]
    for button, move in ((lesson["forward"], 1), (lesson["back"], -1)):
        last = len(handlers.lesson_steps) - 1
        event = button.click(lambda i, m, h, move=move, last=last:
                             handlers.lesson(min(last, max(0, int(i) + move)), m, h),
                             [lesson["index"], transformer["model"], transformer["heads_off"]], outputs, **PRIVATE)
        event.then(None, lesson["target"], None, js=open_js(VIEW), **PRIVATE)
        event.then(None, lesson["target"], None, js=RERUN_JS, **PRIVATE)
        event.then(None, None, None, js=REVEAL_JS, **PRIVATE)
        event.then(handlers.lesson_training, [lesson["index"], training["d_k"]], training["view"], **PRIVATE)
        event.then(lambda i: gr.update(value="Next ▶" if int(i) < len(handlers.lesson_steps) - 1 else "Last step"),
                   lesson["index"], lesson["forward"], **PRIVATE)
