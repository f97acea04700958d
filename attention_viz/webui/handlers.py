"""The functions behind the widgets: plain values in, service calls, Gradio values out.

The service checks every value (requests.py) and raises ValueError with a message for the user; `handler`
turns that into a gr.Error, and nothing else happens here: no math, no drawing.
"""

from __future__ import annotations

import functools
import math

import gradio as gr

from attention_viz.service.limits import EXAMPLES, LAB_HEADERS, STAT_HEADERS
from attention_viz.service.requests import Settings
from attention_viz.service.views import Views
from attention_viz.webui.runtime import release_free_memory


def handler(fn):
    """A widget's function as the app serves it (the signature is kept for the API): ValueError -> gr.Error,
    and after each call the heap's free pages go back to the system (runtime.release_free_memory)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        finally:
            release_free_memory()

    return wrapper


class Handlers:
    """The functions behind the widgets; each takes plain values, so tests call them without a server."""

    def __init__(self, views: Views) -> None:
        self.views = views
        self.runs = views.runs

    def _settings(self, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens,
                  d_model, n_heads) -> Settings:
        return self.runs.settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)

    @handler
    def visualize(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                  causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                  kind: str, layer: float, head: float, colour_scale: str):
        """Every layer × head as a grid (PNG), one head in detail (HTML), the output, per-head statistics, notes."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        view = self.views.visualize(settings, kind, layer, head, colour_scale, requested_d_k=d_k)
        table = {"headers": STAT_HEADERS, "data": view.statistics}
        return view.grid, view.head, view.output, table, view.info

    @handler
    def steps(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
              causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
              kind: str, layer: float, head: float):
        """Figure 2 (left) for one head: QKᵀ, scaled, masked, softmax, weights·V."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return self.views.steps(settings, kind, layer, head)

    @handler
    def compare(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                kind: str, layer: float, head: float, comparison: str):
        """One head with a switch on minus off ("scaling", "causal_mask" or "padding_mask"), as a difference heatmap."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return self.views.compare(settings, comparison, kind, layer, head)

    @handler
    def export(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
               causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
               kind: str, layer: float, head: float, colour_scale: str):
        """The grid and the head as PNG, every map as .npz, the head as CSV."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads)
        return [str(path) for path in self.views.export(settings, kind, layer, head, colour_scale)]

    @handler
    def dk_lab(self, d_k: float, n_keys: float, scaled: bool):
        """The √d_k lab: q·k histogram against N(0, d_k), one softmax row, curves over d_k, the numbers."""
        view = self.views.dk_lab(d_k, n_keys, scaled)
        return view.histogram, view.softmax, view.sweep, {"headers": LAB_HEADERS, "data": view.numbers}

    def family_curves(self) -> str | None:
        """The d_k family's training curves (drawn once, on the first page or by the warm-up)."""
        return self.views.family_curves()

    @handler
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

    @handler
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
    catalog = views.runs.catalog
    model = catalog.default_model
    controls = views.model_controls(model, catalog.default_d_k(model))
    return views.runs.settings(EXAMPLES[0], model, controls.d_k, controls.scale_mode)


def ping() -> str:
    """A trivial endpoint: answers "pong" and touches nothing (the protocol's own cost, for the benchmarks)."""
    return "pong"
