"""The Long text tab: a real model reads a page (service.long_runs); every head's summary and one head's overview are
drawn in the browser (explorer/static/long.js), and a dragged rectangle asks the server for that region's exact
weights through the view's server function (gr.HTML's server_functions: `server.long_view(request)` in js_on_load,
one POST /component_server with no queue, a few ms a region).

Events: /long_read (the button) on the LONG line (server/admission.py): one page at a time on the whole server,
never on a real model's own line, so short answers of that model go on meanwhile.
"""

from __future__ import annotations

import gradio as gr

from attention_viz.explorer.html import asset
from attention_viz.server.admission import LONG
from attention_viz.service import Views
from attention_viz.webui.explorer_view import MOUNT_CLASS
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.scripts import call, on_load
from attention_viz.webui.widgets import PRIVATE, RAW, prose

VIEW = "long_view"
REFUSED = "Not read: the last text was refused (its message says why); these views are the last page's."
ABOUT = """Paste a page (up to {tokens:,} tokens, fewer where the model's positions end) and a real model reads it
in one pass. You see **every head's summary** (its weight on the first token, the *sink*; its entropy; how far back it
looks) and the chosen head's **whole map** shrunk to at most 512 x 512 cells. **Drag a rectangle** on the map to open
that region's exact weights, and point at a cell to read one."""


def long_view(handlers: Handlers, elem_id: str = VIEW, **kwargs) -> gr.HTML:
    """The long view: a gr.HTML whose value is a long run's payload (a page's; in the Pictures and sound tab a
    recording's encoder), with `long_view` as its server function (LongRuns.view answers both)."""

    def long_view(asked: dict) -> dict:  # a function of its own: Gradio marks it (a bound method takes no mark)
        return handlers.long_view(asked)

    return gr.HTML(value=None, html_template=f'<div class="{MOUNT_CLASS}"></div>', css_template=asset("long.css"),
                   js_on_load=on_load("mountLong", {"view": long_view.__name__}, server=True),
                   server_functions=[long_view], apply_default_css=False, elem_id=elem_id, padding=False,
                   container=False, **kwargs)


def choices_of(views: Views) -> list[tuple[str, str]]:
    """The real models, each of which reads a page (an encoder-decoder model with its encoder): those whose configs
    say they are of one stack first (each reads the whole page), then encoder-decoders, then those whose config the
    server cannot read before loading them (one that cannot be had is refused): so the first offered reads the page,
    the whole of it where the server has such a model. In the order set up within each."""
    real = views.runs.catalog.real
    order = {1: 0, 2: 1, None: 2}
    return sorted(views.runs.catalog.real_choices, key=lambda choice: order[real.stacks(choice[1])])


def render(demo: gr.Blocks, handlers: Handlers, views: Views, choices: list[tuple[str, str]]) -> dict:
    """The tab's widgets and wiring, inside the current gr.Tab; `choices`: choices_of(views), at least one."""
    prose(ABOUT.format(tokens=views.long.tokens))  # the server's page: more tokens on a GPU (service.long_runs)
    with gr.Row():
        model = gr.Dropdown(choices, value=choices[0][1] if choices else None, label="Real model",
                            elem_id="long_model", scale=1, min_width=240)
    text = gr.Textbox(lines=8, max_lines=16, max_length=views.long.chars, label="A page of text",
                      placeholder="Paste an essay, an article, a chapter...", elem_id="long_text")
    read = gr.Button("Read the page", variant="primary", elem_id="long_read")
    view = long_view(handlers)
    event = read.click(handlers.long_read, [model, text], view, api_name="long_read", **RAW, **LONG.wiring)
    event.failure(None, None, None, js=call("longStale", VIEW, REFUSED), **PRIVATE)
    return {"model": model, "text": text, "view": view}
