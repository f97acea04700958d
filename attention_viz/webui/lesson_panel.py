"""The guided lesson (#lesson): a closed panel above the tabs, once open a bar that stays at the top of the screen
(CSS), whose Next and Back buttons move to a step (service.lesson): one request answers with the step's text, its
tab, and every control and view it sets, by name (handlers.lesson): a step brings its view with the controls (the
Transformer tab's run, the lab, the training view), so nothing is asked again after it (widgets.route_unless_shown).
The explorer's head is chosen in the browser once the run is drawn (explorer_view.open_js), and what the step's
numbers come from is brought into sight below the bar (page.js's reveal).
"""

from __future__ import annotations

import gradio as gr

from attention_viz.server.admission import LESSON
from attention_viz.webui.explorer_view import open_js
from attention_viz.service import check_int
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.heads_panel import heads_empty_js
from attention_viz.webui.handling import handler, named
from attention_viz.webui.scripts import Raw, call, on_load
from attention_viz.webui.theme import FOCUS
from attention_viz.webui.transformer_tab import VIEW
from attention_viz.webui.widgets import PRIVATE, RAW, prose

# After a step: what its numbers come from comes into sight below the lesson's bar (page.js's attentionViz.reveal):
# the part the step names (handlers.lesson: PARTS' key), else the first on show of VIEWS: the explorer's open head
# (the head a Transformer step quotes), steps, compare, which heads matter, the lab, training. Each a list of views,
# the first on show taken, each a list of selectors whose boxes together are the view.
VIEWS = [["#head_view"], ["#explorer"], ["#steps_view"], ["#compare_view"], ["#heads_view"], ["#lab_view"],
         ["#train_view"]]
PARTS = {
    "live": [["#live_start"]],  # the Train button the step says to press
    # the training view's play bar, its sentence of numbers or the first arm's, and that arm's curve
    "training": [["#train_step .av-train-bar", "#train_step .av-curve"],
                 ["#train_step .av-train-say", "#train_step .av-curve"],
                 ["#train_step .av-arm-numbers", "#train_step .av-curve"], ["#train_step .av-curve"], ["#train_step"]],
    "own_qk": [["#own_qk table[data-role=own-numbers]"], ["#own_qk"]],  # the own q·k's table
    "lab": [["#lab_numbers"], ["#lab_view"]],  # the table of medians under the lab's charts
    # the long view's sink grid (its colour bar's top) and the chosen head's line under the grids
    "long": [["#long_view .av-long-grid[data-stat=first_token]", "#long_view .av-long-chosen"],
             ["#long_view .av-long-chosen"], ["#long_view"]],
    "heads": [["#heads_view .av-imp-box"], ["#heads_view"]],  # the head scores' table
    "media": [["#media_overlay"], ["#media_notes"]],  # the picture the step's numbers are drawn over
}
BAR = "#lesson"
MORE = "2.5em"  # the height of the fade at the foot of the step's text while more of it is below
REVEAL_JS = call("reveal", Raw("target"), VIEWS, BAR, PARTS, params="target")
# The lesson, open, is a bar that stays at the top of the screen while the page scrolls under it, so a step's text,
# Back and Next stay in sight beside the view the step brings (into the part of the screen below the bar): its text
# scrolls in its own box past a few lines (fewer on a phone), Back and Next side by side. Gradio's container clips
# what overflows it (`clip`, not `hidden`, which would make it the sticky bar's scroller, and it never scrolls).
# Keyboard focus scrolls a control into the part below the bar too (the bar's height, --av-bar, set by reveal);
# the text's box is reached by Tab (reveal makes it focusable), with the page's focus ring. While more of the text
# is below what its box shows (page.js's moreBelow marks the box av-more as it scrolls, its text changes or its size
# does), the box's foot fades into the bar (a layer stuck to its bottom), so the person sees there is more.
CSS = f"""
.gradio-container.gradio-container {{ overflow: clip; }}
{BAR}:has(> .label-wrap.open) {{
  position: sticky; top: 0; z-index: var(--layer-5, 50); background: var(--block-background-fill);
  box-shadow: 0 3px 8px rgba(0, 0, 0, 0.25);
}}
html:has({BAR} > .label-wrap.open) {{ scroll-padding-top: calc(var(--av-bar, 0px) + 8px); }}
#lesson_text .html-container {{ max-height: min(28vh, 12em); overflow-y: auto; }}
#lesson_text .html-container:focus-visible {{ outline: 2px solid {FOCUS}; outline-offset: 2px; }}
#lesson_moves {{ flex-wrap: nowrap; }}
#lesson_moves > button {{ min-width: 0; }}
@media (max-width: 640px) {{ #lesson_text .html-container {{ max-height: 22vh; }} }}
#lesson_text .html-container::after {{
  content: ""; display: block; position: sticky; bottom: 0; height: {MORE}; pointer-events: none; visibility: hidden;
  margin: -{MORE} calc(-1 * var(--spacing-xl) - 2px) 0;
  background: linear-gradient(to bottom, transparent, var(--block-background-fill) 85%);
}}
#lesson_text .html-container.av-more::after {{ visibility: visible; }}
"""
INTRO = ("Nine steps from the anti-diagonal of reverse, through which of its heads matter, to why the paper divides "
         "by √d_k (more on a real model when this server has one). Each step sets the "
         "controls for you and says what to look at, with the numbers of the view it opens.")


def render() -> dict:
    """The panel (closed until opened), above the tabs; wire() connects it once the tabs exist."""
    with gr.Accordion("A guided lesson: attention, step by step", open=False, elem_id="lesson"):
        text = prose(INTRO, elem_id="lesson_text", js_on_load=on_load("moreBelow"))
        with gr.Row(elem_id="lesson_moves"):
            back = gr.Button("◀ Back", elem_id="lesson_prev", size="sm", interactive=False)
            forward = gr.Button("Start ▶", elem_id="lesson_next", variant="primary", size="sm")
        index = gr.Number(-1, visible=False, precision=0, elem_id="lesson_step")
        target = gr.Textbox("", visible=False, elem_id="lesson_target")  # the explorer's head, as JSON
    return {"text": text, "back": back, "forward": forward, "index": index, "target": target}


def moved(handlers: Handlers, index: object, move: int) -> int:
    """The step Next (move 1) or Back (-1) goes to from step `index` (-1: none yet), within the lesson; ValueError
    for an index that is not one (what a raw HTTP client may send)."""
    last = len(handlers.lesson_steps) - 1
    return max(0, min(check_int("lesson step", index, -1, last) + move, last))


def wire(handlers: Handlers, lesson: dict, tabs: gr.Tabs, transformer: dict, lab: dict, training: dict,
         long: dict | None = None, media: dict | None = None) -> None:
    """Next / Back -> handlers.lesson, one request: the step's text, tab, controls and views by name (the Long text
    tab's, `long`, where the page has it); then the explorer's head, in the browser. The lesson's events wait on their own line, real steps included: a real step's
    answer is computed once and shared, and a class behind one address would pass the real models' line's bound per
    address (server/admission.py) if thirty pressed Next together."""
    named_outputs = {
        "lesson_index": lesson["index"], "lesson_text": lesson["text"], "lesson_target": lesson["target"],
        "lesson_forward": lesson["forward"], "lesson_back": lesson["back"], "tabs": tabs,
        **{name: component for name, component in transformer.items() if isinstance(component, gr.components.Component)
           or isinstance(component, gr.Tabs)},
        # a view's key before its controls: a tab not yet drawn fires a control's change as its value is set
        **{f"lab_{name}": lab[name] for name in ("shown", "d_k", "dk_log", "keys", "scaled", "view", "numbers")},
        **{name: lab[name] for name in ("own_model", "own_kind", "own_layer", "own_head", "own_scaled", "own_qk")
           if name in lab},
        **{f"training_{name}": training[name] for name in ("shown", "d_k", "view")},
        **{name: training[name] for name in ("live_task", "live_dk", "live_arm")},
        **{f"long_{name}": long[name] for name in ("model", "text", "view") if long},
        **{f"media_{name}": component for name, component in (media or {}).items()},
    }
    step = named(handlers.lesson, named_outputs)
    for button, move in ((lesson["forward"], 1), (lesson["back"], -1)):
        event = button.click(handler(lambda i, move=move: step(moved(handlers, i, move))), lesson["index"],
                             list(named_outputs.values()), **PRIVATE, **RAW, **LESSON.wiring)
        event.then(None, lesson["target"], None, js=open_js(VIEW), **PRIVATE)
        event.then(None, lesson["target"], None, js=REVEAL_JS, **PRIVATE)
        event.then(None, transformer["score_note"], None, js=heads_empty_js("heads_view"), **PRIVATE)
