"""Small widget recipes shared by the tabs."""

from __future__ import annotations

import gradio as gr

LIVE = dict(trigger_mode="always_last", show_progress="minimal")
# Public endpoints take the values as sent: Gradio's own checks would fail on a word where a number belongs
# with a message that show_error=False hides; the service checks everything and says why.
RAW = dict(preprocess=False)
PRIVATE = dict(api_visibility="private")


class Blocks(gr.Blocks):
    """gr.Blocks whose events may arrive without their trailing optional inputs (those passed to `optional`,
    added after the API was published): a raw HTTP client written before them still works, and each missing one
    is None, as gradio_client sends it (its handler's default)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._optional_ids: set[int] = set()

    def optional(self, component: gr.components.Component) -> gr.components.Component:
        """Mark an input that clients may leave out when it comes last."""
        self._optional_ids.add(component._id)
        return component

    async def preprocess_data(self, block_fn, inputs, state, explicit_call=False):
        missing = block_fn.inputs[len(inputs):]
        if missing and all(block._id in self._optional_ids for block in missing):
            inputs = [*inputs, *(None for _ in missing)]
        return await super().preprocess_data(block_fn, inputs, state, explicit_call)


def log2_slider_pair(log_slider: gr.Slider, number: gr.Number) -> None:
    """Keep a log₂ slider and its number in step, in the browser (no Python round trip)."""
    log_slider.release(None, log_slider, number, js="(x) => Math.round(2 ** x)", **PRIVATE)
    number.input(None, number, log_slider, js="(d) => Math.log2(Math.max(1, d))", **PRIVATE)
