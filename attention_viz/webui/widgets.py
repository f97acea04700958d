"""Small widget recipes shared by the tabs."""

from __future__ import annotations

import functools

import gradio as gr
from markdown_it import MarkdownIt

from attention_viz.webui.scripts import Raw, call

LIVE = dict(trigger_mode="always_last", show_progress="minimal")
# Public endpoints take the values as sent: Gradio's own checks would fail on a word where a number belongs
# with a message that show_error=False hides; the service checks everything and says why.
RAW = dict(preprocess=False)
PRIVATE = dict(api_visibility="private")

# CommonMark plus tables; raw HTML in the source is written out as text, and unsafe link schemes are refused.
_MARKDOWN = MarkdownIt("commonmark", {"html": False}).enable("table")


PROSE_KEPT = 512  # texts whose HTML is kept: the lesson's steps, the steps view's notes, repeated by a class


@functools.lru_cache(maxsize=PROSE_KEPT)
def prose_html(markdown: str | None) -> str:
    """Markdown (the app's texts and notes) as HTML, rendered on the server (once per text while it is kept)."""
    return _MARKDOWN.render(markdown or "")


# The look gr.Markdown gives its text (Gradio's .md rules): flush with its block (gr.HTML's container pads it by
# --block-padding: 10px 12px), paragraphs 16 px apart, code in a small framed box, long words broken.
PROSE_CSS = """
margin: calc(-1 * var(--spacing-xl)) calc(-1 * var(--spacing-xl) - 2px);
overflow-wrap: anywhere;
p:not(:first-child) { margin-top: var(--spacing-xxl); }
:not(pre) > code { font-family: var(--font-mono); font-size: var(--text-sm); line-height: 1.4;
  padding: var(--spacing-xxs) var(--spacing-xs); border-radius: var(--radius-xs);
  background: var(--code-background-fill); border: 1px solid var(--panel-border-color); }
table { word-break: break-word; }
th, td { padding: var(--spacing-sm) var(--spacing-xl); }
"""


def prose(markdown: str | None = "", js_on_load: str | None = None, **kwargs) -> gr.HTML:
    """A text written in Markdown, shown as HTML rendered on the server (kwargs: gr.HTML's; js_on_load: a call of
    page.js, else none, never Gradio's default). The page has no gr.Markdown at all, so a fresh opening neither fetches
    nor runs Gradio's Markdown module and parser (docs/benchmarks.md, the page complete); handlers answer such a
    component with prose_html(...)."""
    return gr.HTML(prose_html(markdown), css_template=PROSE_CSS, js_on_load=js_on_load, **kwargs)


def plain_text(text: str = "", **kwargs) -> gr.HTML:
    """A line of plain text, written out as text by the browser: its value (and the API's) stays the string sent."""
    return gr.HTML(text, html_template="{{#if value}}<p>{{value}}</p>{{/if}}", js_on_load=None, **kwargs)


# A view that an answer may bring with its controls (a lesson step: the Transformer tab's run, the lab, the training
# view) is computed on the change of a counter `tick` that its controls' triggers move; the answer also writes
# `shown`, the values it brought (handling.run_key's JSON list), so the change events those controls fire as the
# answer lands send nothing: one request, not one more per control.
BUMP_JS = call("bump", Raw("tick"), params="tick")  # a trigger that always moves the counter


def route_one_js(index: int, kind: str, box: str | None = None, function: str = "routeOne",
                 gate: str | None = None) -> str:
    """A trigger's route when one control changes ("number", "boolean" or "string": at `index` of handling.run_key's
    list): nothing is sent when its new value is the one in `shown`, the values of the view an answer brought with
    the controls; anything else moves the counter, as BUMP_JS, and forgets `shown` (page.js's routeOne). box: a
    number box's elem_id, whose changes while typed in wait for Enter or the focus leaving (page.js's routeTyped)."""
    route = (index, kind, Raw("value"), Raw("shown"), Raw("tick"), *((box,) if box else ()))
    if gate is not None:  # gate: the value another control (the event's last input) must hold for this one to apply
        return call("routeWhen", Raw("gated"), gate, function, *route, params="value, shown, tick, gated")
    return call(function, *route, params="value, shown, tick")


def route_unless_shown(trigger, control: gr.components.Component, index: int, kind: str, shown: gr.Textbox,
                       tick: gr.Textbox, gate: tuple[gr.components.Component, str] | None = None) -> None:
    """`trigger` (a listener of `control`, e.g. control.change) moves `tick` unless `control` holds the value at
    `index` of `shown` (route_one_js), in the browser. A gr.Number applies what is typed in it on Enter or when the
    focus leaves it, never a part typed on the way ("0" of "0.25" would be refused, "6" of "64" run); a gr.Slider's
    release (`trigger`) applies a value only once (see `released`).
    gate: (another control, a value): `control` applies only while that control holds that value, else nothing."""
    box = control.elem_id if isinstance(control, gr.Number) else None
    inputs = [control, shown, tick, *((gate[0],) if gate else ())]
    value = gate[1] if gate else None
    slider = isinstance(control, gr.Slider)
    trigger(None, inputs, [tick, shown], js=route_one_js(index, kind, control.elem_id if slider else box,
                                                         "routeTyped" if slider else "routeOne", gate=value),
            **PRIVATE)
    if box:
        control.blur(None, inputs, [tick, shown], js=route_one_js(index, kind, box, "routeTyped", value),
                     **PRIVATE)  # Enter tells it too (page.js)


def log2_slider_pair(log_slider: gr.Slider, number: gr.Number) -> None:
    """Keep a log₂ slider and its number in step, in the browser (no Python round trip)."""
    log_slider.release(None, log_slider, number, js=call("twoTo", Raw("x"), params="x"), **PRIVATE)
    number.input(None, number, log_slider, js=call("log2", Raw("d"), params="d"), **PRIVATE)


def released(slider: gr.Slider) -> gr.Textbox:
    """A counter that moves when `slider` is released at a value it did not hold when it last applied: its change is
    the slider's event. Gradio fires a slider's release on every pointerup and blur of its number box, a click into
    the box included; this applies each value once (page.js's released)."""
    tick = gr.Textbox("0", visible=False)
    slider.release(None, [slider, tick], tick, js=call("released", slider.elem_id, Raw("v"), Raw("t"), params="v, t"),
                   **PRIVATE)
    return tick
