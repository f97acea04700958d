"""Gradio's own floors, stand-ins served as app.py is: `python -m benchmarks.floors ping` (one trivial endpoint,
api_name "ping", queued, no torch: the cold start's floor) and `python -m benchmarks.floors explorer` (a page with the
explorer only, on the app's opening run: the page complete's floor, `python -m benchmarks.page --floor`)."""

import sys

import gradio as gr


def ping() -> None:
    with gr.Blocks() as demo:
        text = gr.Textbox(value="ping")
        echo = gr.Textbox()
        text.change(lambda x: x, text, echo, api_name="ping")
    demo.queue(max_size=64, default_concurrency_limit=1).launch()


def explorer() -> None:
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views
    from attention_viz.webui import scripts
    from attention_viz.webui.explorer_view import explorer_view
    from attention_viz.webui.handlers import opening_settings

    views = Views(Runs())
    first = views.visualize(opening_settings(views))
    with gr.Blocks() as demo:
        explorer_view(first.run, elem_id="explorer_view", summary=False)
    demo.launch(head=scripts.head())  # the views' scripts, once in the page, as the app loads them


if __name__ == "__main__":
    {"ping": ping, "explorer": explorer}[sys.argv[1]]()
