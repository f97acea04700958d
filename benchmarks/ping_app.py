"""A stand-in with one trivial endpoint (api_name "ping"), queued as app.py is: Gradio's own floor, when the app has none."""

import gradio as gr


def build() -> gr.Blocks:
    with gr.Blocks() as demo:
        text = gr.Textbox(value="ping")
        echo = gr.Textbox()
        text.change(lambda x: x, text, echo, api_name="ping")
    return demo.queue(max_size=64, default_concurrency_limit=1)


if __name__ == "__main__":
    build().launch()
