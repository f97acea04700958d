"""The √d_k lab tab: footnote 4 as a histogram, one softmax row, curves over d_k and a table of numbers."""

from __future__ import annotations

import math

import gradio as gr

from attention_viz.service.limits import LAB_D_K, LAB_D_K_RANGE, LAB_HEADERS, LAB_KEYS, LAB_KEYS_RANGE
from attention_viz.service.views import Views
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.widgets import LIVE, PRIVATE, RAW, log2_slider_pair, picture

LAB_TEXT = """### Why divide by √d_k? (§3.2.1, footnote 4)
If the components of q and k are independent with mean 0 and variance 1, then q·k = Σᵢ qᵢkᵢ has mean 0 and
**variance d_k**. Unscaled, the logits spread like √d_k: the softmax puts almost all weight on one key
(**saturates**), its entropy drops to 0, and its gradient ‖∂softmax/∂logits‖ vanishes, so the
queries and keys stop learning. Multiplying by **1/√d_k** brings the variance back to 1 for every d_k.
Move **d_k** (log scale) and switch **scaled** to see each effect; the curves below sweep d_k from 1 to 4096.
"""

FAMILY_TEXT = """### Training the d_k family
The reverse task trained at several d_k, with 1/√d_k (blue) and without it (red, dashed), from the same seed, data
and number of steps: compare how fast each reaches exact answers. These models are the ones the Transformer tab's
d_k slider moves through."""


def render(demo: gr.Blocks, handlers: Handlers, views: Views) -> None:
    """The lab's widgets and wiring, inside the current gr.Tab (endpoint /dk_lab)."""
    gr.Markdown(LAB_TEXT)
    with gr.Row():
        dk_log = gr.Slider(0, math.log2(LAB_D_K_RANGE[1]), value=math.log2(LAB_D_K), step=1,
                           label="log₂ d_k (moves d_k)", elem_id="lab_dk_log")
        d_k = gr.Number(value=LAB_D_K, minimum=LAB_D_K_RANGE[0], maximum=LAB_D_K_RANGE[1], label="d_k",
                        elem_id="lab_dk")
        keys = gr.Slider(*LAB_KEYS_RANGE, value=LAB_KEYS, step=1, label="number of keys", elem_id="lab_keys")
        scaled = gr.Checkbox(value=True, label="scaled by 1/√d_k", elem_id="lab_scaled")
    numbers = gr.Dataframe(headers=LAB_HEADERS, label="at this d_k", interactive=False, elem_id="lab_numbers")
    with gr.Row():
        with gr.Column():
            histogram = picture("**q·k samples** against the theory N(0, d_k)", "lab_histogram")
        with gr.Column():
            softmax = picture("**One query's softmax** over its keys", "lab_softmax")
    sweep = picture("**Over d_k**: unscaled (red) against scaled (blue); the grey line is the slider's d_k", "lab_sweep")
    gr.Markdown(FAMILY_TEXT)
    family = None
    if views.has_family():
        family = gr.Image(interactive=False, show_label=False, format="png", type="filepath", elem_id="family")
    else:
        gr.Markdown("*The family's curves appear here once its checkpoints are in `attention_viz/data/models`.*")

    inputs, outputs = [d_k, keys, scaled], [histogram, softmax, sweep, numbers]
    gr.on([d_k.change, keys.release, scaled.change], handlers.dk_lab, inputs, outputs, api_name="dk_lab",
          **LIVE, **RAW)
    log2_slider_pair(dk_log, d_k)
    demo.load(handlers.dk_lab, inputs, outputs, **PRIVATE)
    if family is not None:
        demo.load(handlers.family_curves, None, family, **PRIVATE)
