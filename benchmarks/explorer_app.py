"""A stand-in page with the explorer only (the app's opening run, nothing else): Gradio's own floor for the
page complete (`python -m benchmarks.page --floor` opens it beside app.py)."""

import gradio as gr

from attention_viz.service.runs import Runs
from attention_viz.service.views import Views
from attention_viz.webui import scripts
from attention_viz.webui.explorer_view import explorer_view
from attention_viz.webui.handlers import opening_settings


def build() -> gr.Blocks:
    views = Views(Runs())
    first = views.visualize(opening_settings(views))
    with gr.Blocks() as demo:
        explorer_view(first.run, elem_id="explorer_view", summary=False)
    return demo


if __name__ == "__main__":
    build().launch(head=scripts.head())  # the views' scripts, once in the page, as the app loads them
