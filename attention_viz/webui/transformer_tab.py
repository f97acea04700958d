"""The Transformer tab: the controls (text, model, d_k, scaling, masks), every map, one head, steps, compare, export."""

from __future__ import annotations

import math

import gradio as gr

from attention_viz.core.maps import KINDS
from attention_viz.service.limits import (
    COLOUR_SCALES,
    COMPARISONS,
    D_K_RANGE,
    D_MODEL_RANGE,
    DEFAULT_UNTRAINED,
    EXAMPLES,
    FACTOR_RANGE,
    HEADS_RANGE,
    PAD_TOKENS_RANGE,
    SCALE_MODES,
    STAT_HEADERS,
)
from attention_viz.service.views import Views
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.widgets import LIVE, PRIVATE, RAW, log2_slider_pair, picture


def render(demo: gr.Blocks, handlers: Handlers, views: Views) -> None:
    """The tab's widgets and wiring, inside the current gr.Tab (endpoints /visualize, /steps, /compare, /export)."""
    catalog = views.runs.catalog
    model0 = catalog.default_model
    controls0 = views.model_controls(model0, catalog.default_d_k(model0))
    # The layer and head sliders start with the bounds of the largest model, which the API checks against;
    # each page then narrows them to its model (on load, and whenever the model changes).
    max_layers, max_heads = views.largest_model()
    with gr.Row():
        with gr.Column(scale=1, min_width=300):
            text = gr.Textbox(value=EXAMPLES[0], max_lines=1, elem_id="text",
                              label=f"Text (1 to {catalog.tokenizer.max_len} printable ASCII characters)")
            gr.Examples([[e] for e in EXAMPLES], inputs=[text], label="Examples")
            model = gr.Dropdown(catalog.model_choices, value=model0, label="Model", elem_id="model")
            with gr.Group(visible=controls0.untrained) as untrained_box:
                d_model = gr.Slider(*D_MODEL_RANGE, value=DEFAULT_UNTRAINED["d_model"], step=8,
                                    label="d_model (untrained model)", elem_id="d_model")
                n_heads = gr.Slider(*HEADS_RANGE, value=DEFAULT_UNTRAINED["n_heads"], step=1,
                                    label="heads h (untrained model)", elem_id="n_heads")
            dk_log = gr.Slider(controls0.log_d_k_min, controls0.log_d_k_max, step=controls0.log_d_k_step,
                               value=math.log2(controls0.d_k), label="log₂ d_k (moves d_k below)", elem_id="dk_log")
            d_k = gr.Number(value=controls0.d_k, minimum=D_K_RANGE[0], maximum=D_K_RANGE[1],
                            label="d_k, query/key width per head", elem_id="dk")
            dk_note = gr.Markdown(controls0.d_k_note, elem_id="dk_note")
            scale = gr.Radio([(label, key) for key, label in SCALE_MODES.items()],
                             value=controls0.scale_mode, label="Scaling of QKᵀ", elem_id="scale")
            factor = gr.Number(value=1.0, minimum=FACTOR_RANGE[0], maximum=FACTOR_RANGE[1],
                               label="custom factor (when scaling = custom)", elem_id="factor")
            causal = gr.Checkbox(value=True, label="causal mask (decoder self-attention)", elem_id="causal")
            padding = gr.Checkbox(value=True, label="padding mask", elem_id="padding")
            pads = gr.Slider(*PAD_TOKENS_RANGE, value=0, step=1, label="pad tokens after the text", elem_id="pads")
        with gr.Column(scale=3):
            output = gr.Textbox(label="Model output", interactive=False, elem_id="output")
            info = gr.Markdown(elem_id="info")
            with gr.Row(equal_height=True):
                kind = gr.Radio([(label, key) for key, label in KINDS.items()], value="encoder.self_attn",
                                label="Attention", elem_id="kind", scale=3)
                layer = gr.Slider(0, max_layers - 1, value=0, step=1, label="layer", elem_id="layer", scale=1)
                head = gr.Slider(0, max_heads - 1, value=0, step=1, label="head", elem_id="head", scale=1)
                colour = gr.Radio([(label, key) for key, label in COLOUR_SCALES.items()],
                                  value="absolute", label="Colour scale", elem_id="colour", scale=2)
            active = gr.State("heatmaps")
            with gr.Tabs():
                with gr.Tab("Heatmaps", id="heatmaps") as tab_heatmaps:
                    grid = picture("**Every layer (rows) × head (columns).** Click a tile to open it below.", "grid")
                    gr.Markdown("**One head**: query positions down, key positions across; "
                                "hover a cell for its exact weight.")
                    head_table = gr.HTML(elem_id="head_table", js_on_load=None, padding=False, apply_default_css=False)
                    stats = gr.Dataframe(headers=STAT_HEADERS, label="per-head statistics", interactive=False,
                                         elem_id="stats")
                with gr.Tab("Steps (Figure 2)", id="steps") as tab_steps:
                    steps_image = picture("**Figure 2 (left)** for the chosen head: "
                                          "QKᵀ → scaled → masked → softmax → weights·V.", "steps_image")
                    steps_text = gr.Markdown(elem_id="steps_text")
                with gr.Tab("Compare", id="compare") as tab_compare:
                    comparison = gr.Radio([(f"{a} − {b}", key) for key, (a, b) in COMPARISONS.items()],
                                          value="scaling", label="Difference of", elem_id="comparison")
                    compare_image = picture("**Difference heatmap** of the chosen head, same input.", "compare_image")
                    compare_text = gr.Markdown(elem_id="compare_text")
                with gr.Tab("Export", id="export") as tab_export:
                    export_button = gr.Button("Export the current view", elem_id="export_button")
                    files = gr.File(label="grid and head (PNG), every map (.npz), the head (CSV)",
                                    file_count="multiple", interactive=False, elem_id="files")

    settings_inputs = [text, model, d_k, scale, factor, causal, padding, pads, d_model, n_heads]
    head_inputs = [*settings_inputs, kind, layer, head]
    view_outputs = [grid, head_table, output, stats, info]

    # Every control reruns `visualize`; the run is cached, so view-only controls only re-render.
    shown = gr.on(
        [text.change, d_k.change, scale.change, factor.change, causal.change, padding.change, pads.release,
         d_model.release, kind.change, layer.release, head.release, colour.change],
        handlers.visualize, [*head_inputs, colour], view_outputs, api_name="visualize", **LIVE, **RAW,
    )
    refresh = dict(fn=handlers.refresh_tab, inputs=[active, *head_inputs, comparison],
                   outputs=[steps_image, steps_text, compare_image, compare_text], **PRIVATE)
    shown.success(**refresh)
    log2_slider_pair(dk_log, d_k)
    # A new model (or number of heads) changes the sliders' ranges first, then the view.
    gr.on([demo.load, model.change, n_heads.release], handlers.model_controls, [model, d_k, layer, head, n_heads],
          [dk_log, d_k, layer, head, untrained_box, scale, dk_note], **PRIVATE).success(
        handlers.visualize, [*head_inputs, colour], view_outputs, **PRIVATE, **LIVE
    ).success(**refresh)
    grid.select(handlers.grid_click, [*head_inputs], [layer, head], **PRIVATE).success(
        handlers.visualize, [*head_inputs, colour], view_outputs, **PRIVATE, **LIVE
    ).success(**refresh)

    for tab, name in ((tab_heatmaps, "heatmaps"), (tab_steps, "steps"), (tab_compare, "compare"),
                      (tab_export, "export")):
        tab.select(lambda name=name: name, None, active, queue=False, **PRIVATE)
    tab_steps.select(handlers.steps, head_inputs, [steps_image, steps_text], api_name="steps", **RAW)
    compare_inputs = [*head_inputs, comparison]
    comparison.change(handlers.compare, compare_inputs, [compare_image, compare_text], api_name="compare", **RAW)
    tab_compare.select(handlers.compare, compare_inputs, [compare_image, compare_text], **PRIVATE)
    export_button.click(handlers.export, [*head_inputs, colour], files, api_name="export", **RAW)
