"""Small widget recipes shared by the tabs."""

from __future__ import annotations

import gradio as gr

LIVE = dict(trigger_mode="always_last", show_progress="minimal")
# Public endpoints take the values as sent: Gradio's own checks would fail on a word where a number belongs
# with a message that show_error=False hides; the service checks everything and says why.
RAW = dict(preprocess=False)
PRIVATE = dict(api_visibility="private")


def picture(caption: str, elem_id: str, **kwargs) -> gr.Image:
    """A PNG image output under a one-line caption (a label drawn on the image would hide its corner)."""
    gr.Markdown(caption)
    return gr.Image(label=caption.strip("*"), show_label=False, format="png", type="filepath", interactive=False,
                    elem_id=elem_id, buttons=["download", "fullscreen"], **kwargs)


def log2_slider_pair(log_slider: gr.Slider, number: gr.Number) -> None:
    """Keep a log₂ slider and its number in step, in the browser (no Python round trip)."""
    log_slider.release(None, log_slider, number, js="(x) => Math.round(2 ** x)", **PRIVATE)
    number.input(None, number, log_slider, js="(d) => Math.log2(Math.max(1, d))", **PRIVATE)
