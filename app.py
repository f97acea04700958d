"""attention_viz in the browser: every attention map of the Transformer, live d_k, scaling and masking, the √d_k lab.

Run `python app.py` (http://127.0.0.1:7860). Host and port come from GRADIO_SERVER_NAME and
GRADIO_SERVER_PORT, loopback by default. This file only wires widgets to the package:
attention_viz.service.explorer validates inputs and runs the model, attention_viz.service.views composes the images
and texts, and every handler turns the package's ValueError into a gr.Error the user can read.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import threading

import gradio as gr
import torch

from attention_viz.core.maps import KINDS
from attention_viz.service.explorer import (
    COMPARISONS,
    D_K_RANGE,
    D_MODEL_RANGE,
    DEFAULT_UNTRAINED,
    FACTOR_RANGE,
    HEADS_RANGE,
    PAD_TOKENS_RANGE,
    SCALE_MODES,
    STAT_HEADERS,
    Explorer,
    Settings,
)
from attention_viz.service.views import COLOUR_SCALES, LAB_D_K_RANGE, LAB_HEADERS, LAB_KEYS_RANGE, Views

QUEUE_SIZE = 64            # events waiting beyond this are refused with "Queue is full"
CONCURRENCY = 1            # per event listener: one visualize (or lab, steps...) at a time; the cores are shared
EXAMPLES = ["attention", "transformer", "hello", "softmax", "abcdefghij", "queries"]
DEFAULT_KEYS = 32
LAB_D_K = 16               # the √d_k lab opens at this d_k
# glibc malloc (mallopt parameters, from malloc.h), see tune_malloc
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 1 << 20   # bytes: blocks this large get their own mapping

INTRO = """# attention_viz: every attention map of *Attention Is All You Need*
Type a word and see every layer and head of the three attentions of §3.2.3, from a small Transformer
trained to reverse, copy or sort characters. Change **d_k**, switch the **1/√d_k scaling** and the **masks**
and watch the maps and the model's output change. The **√d_k lab** shows why the paper scales (footnote 4).
"""

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


def _picture(caption: str, elem_id: str, **kwargs) -> gr.Image:
    """A PNG image output under a one-line caption (a label drawn on the image would hide its corner)."""
    gr.Markdown(caption)
    return gr.Image(label=caption.strip("*"), show_label=False, format="png", type="filepath", interactive=False,
                    elem_id=elem_id, buttons=["download", "fullscreen"], **kwargs)


def _handler(fn):
    """A widget's function as the app serves it; the signature is kept for the API.

    The package's ValueError (a message for the user) becomes gr.Error. After each call the heap's free pages
    go back to the system (glibc's malloc_trim; elsewhere nothing): renders free many blocks under the mmap
    threshold (tune_malloc) between live ones, so the heap keeps whole free pages that glibc only returns
    from its top, ~100 MB after 1,000 requests. Trimming walks the free lists (about a millisecond).
    """
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        trim = None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        finally:
            if trim is not None:
                trim(0)

    return wrapper


class Handlers:
    """The functions behind the widgets; each takes plain values, so tests call them without a server."""

    def __init__(self, views: Views) -> None:
        self.views = views
        self.explorer = views.explorer

    def _settings(self, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens,
                  d_model, n_heads):
        return self.explorer.settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                      pad_tokens, d_model, n_heads)

    @_handler
    def visualize(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                  causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                  kind: str, layer: float, head: float, colour_scale: str):
        """Every layer × head as a grid (PNG), one head in detail (HTML), the output, per-head statistics, notes."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        view = self.views.visualize(settings, kind, layer, head, colour_scale, requested_d_k=d_k)
        table = {"headers": STAT_HEADERS, "data": view.statistics}
        return view.grid, view.head, view.output, table, view.info

    @_handler
    def steps(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
              causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
              kind: str, layer: float, head: float):
        """Figure 2 (left) for one head: QKᵀ, scaled, masked, softmax, weights·V."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return self.views.steps(settings, kind, layer, head)

    @_handler
    def compare(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                kind: str, layer: float, head: float, comparison: str):
        """One head with a switch on minus off ("scaling", "causal_mask" or "padding_mask"), as a difference heatmap."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return self.views.compare(settings, comparison, kind, layer, head)

    @_handler
    def export(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
               causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
               kind: str, layer: float, head: float, colour_scale: str):
        """The grid and the head as PNG, every map as .npz, the head as CSV."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return [str(path) for path in self.views.export(settings, kind, layer, head, colour_scale)]

    @_handler
    def dk_lab(self, d_k: float, n_keys: float, scaled: bool):
        """The √d_k lab: q·k histogram against N(0, d_k), one softmax row, curves over d_k, the numbers."""
        view = self.views.dk_lab(d_k, n_keys, scaled)
        return view.histogram, view.softmax, view.sweep, {"headers": LAB_HEADERS, "data": view.numbers}

    def family_curves(self) -> str | None:
        """The d_k family's training curves (drawn once, on the first page or by the warm-up)."""
        return self.views.family_curves()

    @_handler
    def model_controls(self, model: str, d_k: float, layer: float, head: float, n_heads: float):
        """Slider ranges for a newly picked model: its d_k family (log₂), layers, heads, training scale."""
        c = self.views.model_controls(model, d_k, layer, head, n_heads)
        return (
            gr.update(minimum=c.log_d_k_min, maximum=c.log_d_k_max, step=c.log_d_k_step, value=math.log2(c.d_k)),
            gr.update(value=c.d_k),
            # A Gradio slider needs minimum < maximum: a model with one layer or head gets a locked 0..1 slider.
            gr.update(maximum=max(c.max_layer, 1), value=c.layer, interactive=c.max_layer > 0),
            gr.update(maximum=max(c.max_head, 1), value=c.head, interactive=c.max_head > 0),
            gr.update(visible=c.untrained),
            gr.update(value=c.scale_mode),
            c.d_k_note,
        )

    @_handler
    def grid_click(self, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens,
                   d_model, n_heads, kind, layer, head, evt: gr.SelectData):
        """Pick the head under a click on the grid image."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        picked = self.views.head_at(settings, kind, *evt.index[:2])
        return (gr.skip(), gr.skip()) if picked is None else picked

    def refresh_tab(self, active, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                    pad_tokens, d_model, n_heads, kind, layer, head, comparison):
        """After the main view updates, update the step view or the comparison too when its tab is open."""
        args = (text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens, d_model,
                n_heads, kind, layer, head)
        if active == "steps":
            return (*self.steps(*args), gr.skip(), gr.skip())
        if active == "compare":
            return (gr.skip(), gr.skip(), *self.compare(*args, comparison))
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()


def opening_settings(views: Views) -> Settings:
    """The controls the page opens with: the first example on the default model, at its default d_k."""
    explorer = views.explorer
    model = explorer.default_model
    controls = views.model_controls(model, explorer.default_d_k(model))
    return explorer.settings(EXAMPLES[0], model, controls.d_k, controls.scale_mode)


def build_app(views: Views | None = None, warm: bool = True) -> gr.Blocks:
    """The app's Blocks, queued; `warm` computes the page's first view before the first user asks for it."""
    views = views or Views(Explorer())
    explorer = views.explorer
    handlers = Handlers(views)
    model0 = explorer.default_model
    controls0 = views.model_controls(model0, explorer.default_d_k(model0))
    # The layer and head sliders start with the bounds of the largest model, which the API checks against;
    # each page then narrows them to its model (on load, and whenever the model changes).
    max_layers, max_heads = views.largest_model()
    if warm:
        views.visualize(opening_settings(views), "encoder.self_attn", 0, 0)

    # The views' own PNG files (written once, content-named, nothing else in that folder) are served from where
    # they are, not copied into Gradio's cache on every answer.
    gr.set_static_paths([views.image_dir])
    # delete_cache: every hour, drop the exports Gradio cached more than an hour ago.
    with gr.Blocks(title="attention_viz", delete_cache=(3600, 3600)) as demo:
        gr.Markdown(INTRO)
        with gr.Tabs():
            with gr.Tab("Transformer", id="transformer"):
                with gr.Row():
                    with gr.Column(scale=1, min_width=300):
                        text = gr.Textbox(value=EXAMPLES[0], max_lines=1, elem_id="text",
                                          label=f"Text (1 to {explorer.tokenizer.max_len} printable ASCII characters)")
                        gr.Examples([[e] for e in EXAMPLES], inputs=[text], label="Examples")
                        model = gr.Dropdown(explorer.model_choices, value=model0, label="Model", elem_id="model")
                        with gr.Group(visible=controls0.untrained) as untrained_box:
                            d_model = gr.Slider(*D_MODEL_RANGE, value=DEFAULT_UNTRAINED["d_model"], step=8,
                                                label="d_model (untrained model)", elem_id="d_model")
                            n_heads = gr.Slider(*HEADS_RANGE, value=DEFAULT_UNTRAINED["n_heads"], step=1,
                                                label="heads h (untrained model)", elem_id="n_heads")
                        dk_log = gr.Slider(controls0.log_d_k_min, controls0.log_d_k_max, step=controls0.log_d_k_step,
                                           value=math.log2(controls0.d_k), label="log₂ d_k (moves d_k below)",
                                           elem_id="dk_log")
                        d_k = gr.Number(value=controls0.d_k, minimum=D_K_RANGE[0], maximum=D_K_RANGE[1],
                                        label="d_k, query/key width per head", elem_id="dk")
                        dk_note = gr.Markdown(controls0.d_k_note, elem_id="dk_note")
                        scale = gr.Radio([(label, key) for key, label in SCALE_MODES.items()],
                                         value=controls0.scale_mode, label="Scaling of QKᵀ", elem_id="scale")
                        factor = gr.Number(value=1.0, minimum=FACTOR_RANGE[0], maximum=FACTOR_RANGE[1],
                                           label="custom factor (when scaling = custom)", elem_id="factor")
                        causal = gr.Checkbox(value=True, label="causal mask (decoder self-attention)",
                                             elem_id="causal")
                        padding = gr.Checkbox(value=True, label="padding mask", elem_id="padding")
                        pads = gr.Slider(*PAD_TOKENS_RANGE, value=0, step=1, label="pad tokens after the text",
                                         elem_id="pads")
                    with gr.Column(scale=3):
                        output = gr.Textbox(label="Model output", interactive=False, elem_id="output")
                        info = gr.Markdown(elem_id="info")
                        with gr.Row(equal_height=True):
                            kind = gr.Radio([(label, key) for key, label in KINDS.items()], value="encoder.self_attn",
                                            label="Attention", elem_id="kind", scale=3)
                            layer = gr.Slider(0, max_layers - 1, value=0, step=1, label="layer",
                                              elem_id="layer", scale=1)
                            head = gr.Slider(0, max_heads - 1, value=0, step=1, label="head", elem_id="head",
                                             scale=1)
                            colour = gr.Radio([(label, key) for key, label in COLOUR_SCALES.items()],
                                              value="absolute", label="Colour scale", elem_id="colour", scale=2)
                        active = gr.State("heatmaps")
                        with gr.Tabs():
                            with gr.Tab("Heatmaps", id="heatmaps") as tab_heatmaps:
                                grid = _picture("**Every layer (rows) × head (columns).** "
                                                "Click a tile to open it below.", "grid")
                                gr.Markdown("**One head**: query positions down, key positions across; "
                                            "hover a cell for its exact weight.")
                                head_table = gr.HTML(elem_id="head_table", js_on_load=None, padding=False, apply_default_css=False)
                                stats = gr.Dataframe(headers=STAT_HEADERS, label="per-head statistics",
                                                     interactive=False, elem_id="stats")
                            with gr.Tab("Steps (Figure 2)", id="steps") as tab_steps:
                                steps_image = _picture("**Figure 2 (left)** for the chosen head: "
                                                       "QKᵀ → scaled → masked → softmax → weights·V.", "steps_image")
                                steps_text = gr.Markdown(elem_id="steps_text")
                            with gr.Tab("Compare", id="compare") as tab_compare:
                                comparison = gr.Radio([(f"{a} − {b}", key) for key, (a, b) in COMPARISONS.items()],
                                                      value="scaling", label="Difference of", elem_id="comparison")
                                compare_image = _picture("**Difference heatmap** of the chosen head, same input.",
                                                         "compare_image")
                                compare_text = gr.Markdown(elem_id="compare_text")
                            with gr.Tab("Export", id="export") as tab_export:
                                export_button = gr.Button("Export the current view", elem_id="export_button")
                                files = gr.File(label="grid and head (PNG), every map (.npz), the head (CSV)",
                                                file_count="multiple", interactive=False, elem_id="files")
            with gr.Tab("√d_k lab", id="lab"):
                gr.Markdown(LAB_TEXT)
                with gr.Row():
                    lab_dk_log = gr.Slider(0, math.log2(LAB_D_K_RANGE[1]), value=math.log2(LAB_D_K), step=1,
                                           label="log₂ d_k (moves d_k)", elem_id="lab_dk_log")
                    lab_dk = gr.Number(value=LAB_D_K, minimum=LAB_D_K_RANGE[0], maximum=LAB_D_K_RANGE[1], label="d_k",
                                       elem_id="lab_dk")
                    lab_keys = gr.Slider(*LAB_KEYS_RANGE, value=DEFAULT_KEYS, step=1, label="number of keys",
                                         elem_id="lab_keys")
                    lab_scaled = gr.Checkbox(value=True, label="scaled by 1/√d_k", elem_id="lab_scaled")
                lab_numbers = gr.Dataframe(headers=LAB_HEADERS, label="at this d_k", interactive=False,
                                           elem_id="lab_numbers")
                with gr.Row():
                    with gr.Column():
                        lab_histogram = _picture("**q·k samples** against the theory N(0, d_k)", "lab_histogram")
                    with gr.Column():
                        lab_softmax = _picture("**One query's softmax** over its keys", "lab_softmax")
                lab_sweep = _picture("**Over d_k**: unscaled (red) against scaled (blue); the grey line is the "
                                     "slider's d_k", "lab_sweep")
                gr.Markdown(FAMILY_TEXT)
                family = None
                if views.has_family():
                    family = gr.Image(interactive=False, show_label=False, format="png", type="filepath",
                                      elem_id="family")
                else:
                    gr.Markdown("*The family's curves appear here once its checkpoints are in `attention_viz/data/models`.*")

        settings_inputs = [text, model, d_k, scale, factor, causal, padding, pads, d_model, n_heads]
        head_inputs = [*settings_inputs, kind, layer, head]
        view_outputs = [grid, head_table, output, stats, info]
        live = dict(trigger_mode="always_last", show_progress="minimal")
        # Public endpoints take the values as sent: Gradio's own checks would fail on a word where a number
        # belongs with a message that show_error=False hides; the package checks everything and says why.
        raw = dict(preprocess=False)

        # Every control reruns `visualize`; the run is cached, so view-only controls only re-render.
        shown = gr.on(
            [text.change, d_k.change, scale.change, factor.change, causal.change, padding.change, pads.release,
             d_model.release, kind.change, layer.release, head.release, colour.change],
            handlers.visualize, [*head_inputs, colour], view_outputs, api_name="visualize", **live, **raw,
        )
        refresh = dict(fn=handlers.refresh_tab, inputs=[active, *head_inputs, comparison],
                       outputs=[steps_image, steps_text, compare_image, compare_text], api_visibility="private")
        shown.success(**refresh)
        # d_k moves on a log₂ slider; the browser turns its value into d_k (no Python round trip).
        dk_log.release(None, dk_log, d_k, js="(x) => Math.round(2 ** x)", api_visibility="private")
        d_k.input(None, d_k, dk_log, js="(d) => Math.log2(Math.max(1, d))", api_visibility="private")
        # A new model (or number of heads) changes the sliders' ranges first, then the view.
        gr.on([demo.load, model.change, n_heads.release], handlers.model_controls, [model, d_k, layer, head, n_heads],
              [dk_log, d_k, layer, head, untrained_box, scale, dk_note], api_visibility="private").success(
            handlers.visualize, [*head_inputs, colour], view_outputs, api_visibility="private", **live
        ).success(**refresh)
        grid.select(handlers.grid_click, [*head_inputs], [layer, head], api_visibility="private").success(
            handlers.visualize, [*head_inputs, colour], view_outputs, api_visibility="private", **live
        ).success(**refresh)

        for tab, name in ((tab_heatmaps, "heatmaps"), (tab_steps, "steps"), (tab_compare, "compare"),
                          (tab_export, "export")):
            tab.select(lambda name=name: name, None, active, api_visibility="private", queue=False)
        tab_steps.select(handlers.steps, head_inputs, [steps_image, steps_text], api_name="steps", **raw)
        compare_inputs = [*head_inputs, comparison]
        comparison.change(handlers.compare, compare_inputs, [compare_image, compare_text], api_name="compare", **raw)
        tab_compare.select(handlers.compare, compare_inputs, [compare_image, compare_text], api_visibility="private")
        export_button.click(handlers.export, [*head_inputs, colour], files, api_name="export", **raw)

        lab_inputs, lab_outputs = [lab_dk, lab_keys, lab_scaled], [lab_histogram, lab_softmax, lab_sweep, lab_numbers]
        gr.on([lab_dk.change, lab_keys.release, lab_scaled.change], handlers.dk_lab, lab_inputs, lab_outputs,
              api_name="dk_lab", **live, **raw)
        lab_dk_log.release(None, lab_dk_log, lab_dk, js="(x) => Math.round(2 ** x)", api_visibility="private")
        lab_dk.input(None, lab_dk, lab_dk_log, js="(d) => Math.log2(Math.max(1, d))", api_visibility="private")

        demo.load(handlers.dk_lab, lab_inputs, lab_outputs, api_visibility="private")
        if family is not None:
            demo.load(handlers.family_curves, None, family, api_visibility="private")
        gr.api(ping, api_name="ping")  # the protocol's own cost, for benchmarks/app.py's floor
    # A bounded line of waiting events, served one at a time; past QUEUE_SIZE, clients hear "Queue is full".
    return demo.queue(max_size=QUEUE_SIZE, default_concurrency_limit=CONCURRENCY)


def ping() -> str:
    """A trivial endpoint: answers "pong" and touches nothing."""
    return "pong"


def tune_malloc(arenas: int = MALLOC_ARENAS, mmap_threshold: int = MMAP_THRESHOLD) -> None:
    """Keep glibc from holding on to memory the app has freed.

    Arenas: each Gradio worker thread would otherwise keep its own (~100 MB under load). mmap threshold:
    glibc raises it after every freed large block (up to 32 MB), so images, Agg canvases and model weights
    of a few MB end up inside the heap, and the holes they leave are never returned (~100 MB after 1,000
    requests). A fixed threshold keeps every block of a MiB or more in its own mapping, unmapped when freed.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_ARENA_MAX, arenas)
        libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    except (OSError, AttributeError):
        pass  # not glibc (macOS, musl): nothing to tune


def freeze_start_up_objects() -> None:
    """Collect once, then leave everything built so far (Gradio, torch, matplotlib, warm caches) out of every collection.

    A matplotlib Figure is a reference cycle of ~8,000 objects holding its Agg canvas (MBs), so it is freed
    only by a full collection, which Python runs once the objects promoted since the last one reach 25% of
    those that survived it. Counting the ~400,000 start-up objects, that took 10 to 20 figures (~30 MB held,
    and a full collection walking them all took seconds on this machine). Frozen, they neither count nor get
    walked: the second collect sets the survivors' count to what was created since, so figures go within a
    few requests, in collections of milliseconds.
    """
    gc.collect()
    gc.freeze()
    gc.collect()


def main() -> None:
    """Start the server: host and port from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860)."""
    torch.set_num_threads(1)  # the event loop and PNG encoding share the cores; one thread answers fastest
    tune_malloc()
    # show_error=False: no internal text reaches users; max_file_size=0: the app takes no uploads, so it stores
    # none; share=False: never a public tunnel, whatever GRADIO_SHARE says.
    views = Views(Explorer())
    demo = build_app(views)
    freeze_start_up_objects()
    demo.launch(show_error=False, max_file_size=0, share=False, footer_links=["api"], prevent_thread_lock=True)
    # Once the server answers: the other tabs' figures (steps, compare, the lab, the family's curves), drawn
    # while the first visitor looks at the first view. Before launch they would slow the start by seconds.
    threading.Thread(target=views.warm_up, args=(opening_settings(views), LAB_D_K, DEFAULT_KEYS), name="warm-up",
                     daemon=True).start()
    demo.block_thread()


if __name__ == "__main__":
    main()
