"""The functions behind the widgets: plain values in, service calls, Gradio values out.

The service checks every value (requests.py) and raises ValueError with a message for the user; `handler`
turns that into a gr.Error, and nothing else happens here: no math, no drawing.

The named endpoints (gradio_client: `Client(url).predict(..., api_name="/visualize")`; a refused input raises
gradio_client.exceptions.AppError carrying the message):

/visualize (text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens, d_model, n_heads,
    compatibility=None) -> (run, output, notes). model: a family key ("reverse/sqrt_dk", "reverse/none",
    "copy/sqrt_dk", "sort/sqrt_dk", the study's "study/scaled_dot", "study/dot", "study/additive"), "untrained", or a
    real model this server is set up with ("hub:" + its Hub id or folder name; ATTENTION_VIZ_HUB_MODELS).
    compatibility (last, optional in every endpoint below): None or "" runs `model`; with a study model,
    "scaled_dot", "dot" or "additive" runs the study's family of that compatibility function at the same d_k. One run of the model, with every map of every kind, layer and head:
    run     dict, the packed run the page's explorer draws (format "attention_viz.explorer/1", documented in
            attention_viz/explorer/pack.py): "title", "output", "notes" (list of Markdown lines),
            "tokens" {"source", "target"}, "n_heads", "quant" (65535), "kinds" (one entry per attention kind:
            "kind", "label", "queries"/"keys" (which token list labels rows and columns), "layers",
            "maps" (per layer, base64 of uint16 little-endian [H, Q, K] weights x 65535), "mask" (Q strings of
            K "1"/"0", "0" = masked), "stats" ({"entropy", "max_weight", "mean_distance", "diagonal"}, each
            [layer][head]), "scores" (each head's weight on a pattern: "values" {"alignment" (a task model's
            encoder-decoder attention), "previous", "first", "eos": [layer][head]}, "labels", "chance" and
            "look_for", a sentence from those numbers)), "decode" ("written": the token each step writes;
            "per_step": with the causal mask off, "steps" holds each step's own decoder maps, since earlier rows
            change), and "settings" (the settings as used: text, model, checkpoint, d_k (a trained
            family's nearest member), scale, causal_mask, padding_mask, pad_tokens, d_model, n_heads).
            attention_viz.explorer.unpack(run) gives (maps: key -> float32 [H, Q, K], masks: kind -> bool [Q, K]).
    output  str, the model's output (for an untrained model, a note that it means nothing).
    notes   str, HTML (the notes' Markdown, rendered): model, d_k, scaling, masks, and the output against the
            task's answer.
    No image: the browser draws the grid of every layer x head and the chosen head from `run`.
/steps (the ten settings above, kind, layer, head, compatibility) -> (steps, text): Figure 2 (left) for one head as numbers,
    which the page draws one panel at a time: steps is a dict (format "attention_viz.steps/1", documented in
    attention_viz/explorer/steps.py): "kind", "label", "layer", "head", "title", "queries"/"keys" (the tokens of
    rows and columns), "d_k", "d_v", "factor", "scaling", "mask" ([Q][K] booleans, true = may attend), "panels"
    (five {"key", "name", "values"}: scores QKᵀ, scaled, masked (null = −∞), softmax weights [Q][K], and
    weights·V [Q][d_v]; float32 values written as their shortest decimals), "text" and "settings".
    attention_viz.explorer.steps_arrays(steps) gives them as float32 arrays. text: HTML on each panel.
/compare (the ten settings, kind, layer, head, comparison: "scaling" | "causal_mask" | "padding_mask", compatibility)
    -> (comparison, text): the head with the switch on (a) and off (b), same input, as a dict (format
    "attention_viz.compare/1"): the identity and tokens as above, "comparison", "labels" [on, off], "a", "b",
    "difference" (a − b) [Q][K], "masks" [a's, b's], "largest" {"query", "key", "value"} or null, "mean_abs",
    "outputs" [on, off], "text", "settings"; the page draws the difference as a red (more weight on) / blue table.
    text: HTML on what changed and both outputs.
/export (the ten settings, kind, layer, head, colour_scale: "absolute" | "per_head", compatibility) -> [4 paths]:
    the grid of the kind and the head as PNG (settings in tEXt chunks), every map as .npz, the head as CSV.
heads_off, ablation (last, optional in /visualize, /steps, /compare and /export, after compatibility): heads
    switched off before W_O, as text ("decoder.1.cross_attn: 0 2; encoder.0.self_attn: all") or {map key: [heads]},
    and "zero" (their outputs set to 0) or "mean" (each one's mean output over reference texts); the packed run then
    has "heads_off" and "ablation", and every view is computed with those heads off (service.requests.parse_heads_off).
/importance (the ten settings, compatibility, heads_off (ignored), ablation) -> importance: every head switched off
    alone, Michel's one-pass estimate and the prune curve, as a dict (format "attention_viz.importance/1",
    documented in attention_viz/service/heads_view.py); the untrained model is refused (no task to score on).
/dk_lab (d_k, n_keys, scaled) -> (histogram, softmax, sweep, numbers): three PNG files and a table
    {"headers": [...], "data": [[...], ...]} of footnote 4's numbers.
/training (d_k) -> training: the compatibility study's three members (scaled dot product, plain dot product,
    additive) at one trained d_k ("8", "32", "128", "512" or "1024"), step by step: a dict (format
    "attention_viz.training/1", documented in attention_viz/service/training_view.py): "steps" (24 training steps,
    0 to 1000), "probes" (5 texts) and their "tokens", "kinds", and per arm its "train" and "probe" loss, token
    accuracy and exact match per step, its cross-attention "alignment" per step (weight on reverse's
    anti-diagonal) and "maps" (base64 of uint8 [steps, probes, heads, Q, K] weights x 255).
/live_train (task, d_k, compatibility) -> a stream of (training, message): train the study's small model live on
    "reverse", "copy" or "sort" at d_k "8" .. "1024" with "scaled_dot", "dot" or "additive"; one run at a time across
    all users (the message says your place in line while you wait), at most 600 steps or 55 s. training is the
    /training format with one arm, growing by a snapshot each update; the last message says how it ended.
/live_cancel () -> message: stops the caller's (the same client's) live run at its next step.
/ping () -> "pong".
kind is "encoder.self_attn", "decoder.self_attn" or "decoder.cross_attn"; layer and head count from 0.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math

import gradio as gr

from attention_viz.service.limits import EXAMPLES, LAB_HEADERS
from attention_viz.service.lesson import Lesson
from attention_viz.service.live import LiveTrainer
from attention_viz.service.requests import Settings
from attention_viz.service.views import Views, text_label
from attention_viz.webui.liveness import WATCH
from attention_viz.webui.runtime import release_free_memory
from attention_viz.webui.widgets import prose_html

logger = logging.getLogger(__name__)


def handler(fn):
    """A widget's function as the app serves it (the signature is kept for the API): counted as a call in flight
    (liveness.WATCH), ValueError -> gr.Error, any other exception logged with its trace for the operator and told to
    the visitor without it, and after each call the heap's free pages go back to the system
    (runtime.release_free_memory)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with WATCH.call(fn.__name__):
                return fn(*args, **kwargs)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        except (gr.Error, KeyboardInterrupt, GeneratorExit):
            raise
        except Exception as error:  # noqa: BLE001 - a fault of ours: the trace is for the log, never the page
            logger.exception("%s failed", fn.__name__)
            raise gr.Error(f"The server could not answer this ({type(error).__name__}); nothing else changed. "
                           "Try another input, or again.", print_exception=False) from None
        finally:
            release_free_memory()

    return wrapper


def _client(request: gr.Request | None) -> str | None:
    """Who an export is counted against: the page's (or API client's) session; None for a call from Python."""
    return getattr(request, "session_hash", None)


class Handlers:
    """The functions behind the widgets; each takes plain values, so tests call them without a server."""

    def __init__(self, views: Views) -> None:
        self.views = views
        self.runs = views.runs
        self.live = LiveTrainer(views.runs.catalog)
        self.lesson_steps = Lesson(views)

    def live_train(self, task: str, d_k: str, compatibility: str, request: gr.Request = None):
        """A live run, streamed: (the view so far, or unchanged; what is happening: place in line, step, outcome)."""
        owner = getattr(request, "session_hash", None)
        try:
            with contextlib.closing(self.live.run(task, d_k, compatibility, owner=owner)) as updates:
                for update in updates:
                    yield (update["view"] if update.get("view") is not None else gr.skip()), update["message"]
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        finally:
            release_free_memory()

    def live_cancel(self, request: gr.Request = None) -> str:
        """Stop this session's live run at its next step (its stream then says where it stopped)."""
        if self.live.cancel(getattr(request, "session_hash", None) or ""):
            return "Cancelling…"
        return "No live run of yours to cancel."

    def _settings(self, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens,
                  d_model, n_heads, compatibility=None, heads_off=None, ablation=None) -> Settings:
        return self.runs.settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility, heads_off, ablation)

    @handler
    def visualize(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                  causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                  compatibility: str | None = None, heads_off: str | None = None, ablation: str | None = None):
        """The packed run (every kind, layer and head, drawn in the browser), the output, the notes (HTML)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility, heads_off, ablation)
        view = self.views.visualize(settings, requested_d_k=d_k)
        return view.run, view.output, prose_html(view.info)

    @handler
    def steps(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
              causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
              kind: str, layer: float, head: float, compatibility: str | None = None, heads_off: str | None = None,
              ablation: str | None = None):
        """Figure 2 (left) for one head as numbers (QKᵀ, scaled, masked, softmax, weights·V), and its text (HTML)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility, heads_off, ablation)
        steps, note = self.views.steps(settings, kind, layer, head)
        return steps, prose_html(note)

    @handler
    def compare(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                kind: str, layer: float, head: float, comparison: str, compatibility: str | None = None,
                heads_off: str | None = None, ablation: str | None = None):
        """One head with a switch on and off ("scaling", "causal_mask" or "padding_mask") as numbers, and its text
        (HTML)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility, heads_off, ablation)
        comparison_view, note = self.views.compare(settings, comparison, kind, layer, head)
        return comparison_view, prose_html(note)

    @handler
    def export(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
               causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
               kind: str, layer: float, head: float, colour_scale: str, compatibility: str | None = None,
               heads_off: str | None = None, ablation: str | None = None, request: gr.Request = None):
        """The grid and the head as PNG, every map as .npz, the head as CSV (the page's session keeps its last few)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility, heads_off, ablation)
        return [str(path) for path in self.views.export(settings, kind, layer, head, colour_scale, _client(request))]

    @handler
    def importance(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                   causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                   compatibility: str | None = None, heads_off: str | None = None, ablation: str | None = None):
        """Which heads matter (service.heads_view): every head switched off alone, Michel's estimate, the prune
        curve, as numbers the page draws. ablation: "zero" or "mean"; heads_off is ignored (every head alone off)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility)
        return self.views.heads.importance(settings, ablation)

    @handler
    def importance_export(self, text: str, model: str, d_k: float, scale_mode: str, custom_factor: float,
                          causal_mask: bool, padding_mask: bool, pad_tokens: float, d_model: float, n_heads: float,
                          compatibility: str | None = None, heads_off: str | None = None, ablation: str | None = None,
                          request: gr.Request = None):
        """Every head's importance as a CSV file (the page's session keeps its last few)."""
        settings = self._settings(text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                                  pad_tokens, d_model, n_heads, compatibility)
        return self.views.heads.csv_file(settings, ablation, _client(request))

    @handler
    def dk_lab(self, d_k: float, n_keys: float, scaled: bool):
        """The √d_k lab's numbers, drawn by the page: the q·k histogram against the exact law (bins of the mode's own
        range), one query's logits and softmax, the sweep over d_k (a dict, service.lab_view); and the table."""
        view = self.views.dk_lab(d_k, n_keys, scaled)
        return view.data, {"headers": LAB_HEADERS, "data": view.numbers}

    @handler
    def training(self, d_k: str):
        """The study's scaled dot, plain dot and additive members at one trained d_k, every snapshot of their probes'
        maps with loss, accuracy and alignment so far (a dict, service.training_view), drawn by the page."""
        return self.views.training(d_k)

    @handler
    def model_controls(self, model: str, d_k: float, n_heads: float, lesson_scale: str | None = None,
                       progress=gr.Progress()):
        """The d_k controls for a newly picked model: its d_k family (log₂ slider, for the untrained model only; a
        trained one picks among its trained sizes), training scale, which d_k exist, and the compatibility picker
        (shown, with the model's own, for a study model only; scaling off for additive).
        lesson_scale: what a lesson step asks for with this model, then cleared: {"scale", "heads_off"} (or the
        scaling alone, as text), instead of the model's own scaling and every head on.
        A real model picked for the first time is loaded here, its download shown by Gradio's progress bar."""
        c = self.views.model_controls(model, d_k, n_heads=n_heads,
                                      progress=lambda fraction, text: progress(fraction, desc=text))
        handover = lesson_scale if isinstance(lesson_scale, dict) else {"scale": lesson_scale}
        scale = handover.get("scale") if handover.get("scale") and c.scaling_applies else c.scale_mode
        return (
            gr.update(minimum=c.log_d_k_min, maximum=c.log_d_k_max, step=c.log_d_k_step, value=math.log2(c.d_k),
                      visible=c.untrained),
            gr.update(value=c.d_k),
            gr.update(visible=c.untrained),
            gr.update(value=scale, interactive=c.scaling_applies),
            prose_html(c.d_k_note),
            gr.update(value=c.compatibility, visible=c.study),
            gr.update(choices=[str(v) for v in c.trained_d_ks], value=str(c.d_k) if c.trained_d_ks else None,
                      label=c.d_k_label,
                      visible=not c.untrained),
            None,
            gr.update(info=c.text_info, label=c.text_label or text_label(self.runs.catalog)),
            handover.get("heads_off") or "",  # heads off name one model's heads: a new model starts with all on
        )

    @handler
    def lesson_training(self, index: float, d_k: str):
        """After a lesson step that opens the Training tab: its view (a radio left as it was fires no change)."""
        return self.views.training(d_k) if self.lesson_steps.step(index).tab == "training" else gr.skip()

    @handler
    def lesson(self, index: float, current_model: str, current_heads_off: str | None = ""):
        """A guided lesson's step (service.lesson): its text and everything it sets, in the order of lesson_panel.wire's
        outputs. A Transformer step sets the heads switched off (none, unless it says); when only they change, the
        explorer's target asks the page to rerun (their box reruns on its button, not on a change)."""
        step = self.lesson_steps.step(index)
        c, lab, live = step.controls, step.lab, step.live
        model_changes = bool(c) and c.get("model") != current_model
        heads_off = c.get("heads_off", "") if c else None
        rerun = heads_off is not None and not model_changes and heads_off != (current_heads_off or "")
        target = dict(step.explorer or {}, **({"rerun": True} if rerun else {}))
        keep = gr.skip()
        return (
            step.index, prose_html(step.text), gr.update(selected=step.tab),
            c.get("text", keep) if c else keep,
            c.get("model", keep) if c else keep,
            c.get("d_k", keep) if c else keep,
            math.log2(c["d_k"]) if c else keep,
            str(c["d_k"]) if c and not model_changes else keep,  # a new model's controls set its own radio
            c.get("scale", keep) if c else keep,
            # the new model's controls then apply the lesson's scaling and heads off
            {"scale": c.get("scale"), "heads_off": heads_off} if model_changes else None,
            heads_off if heads_off is not None else keep,
            lab["d_k"] if lab else keep, math.log2(lab["d_k"]) if lab else keep, lab["scaled"] if lab else keep,
            str(step.training["d_k"]) if step.training else keep,
            live["task"] if live else keep, str(live["d_k"]) if live else keep, live["arm"] if live else keep,
            json.dumps(target) if target else "",
            # a Transformer step talks about the explorer: its Heatmaps view, whichever view was left open
            gr.update(selected="heatmaps") if step.tab == "transformer" else keep,
            "heatmaps" if step.tab == "transformer" else keep,
        )

    @handler
    def pick_compatibility(self, model: str, compatibility: str | None):
        """The model picker's value for the compatibility picker's choice (the study's family of that function);
        unchanged (no event) when it is already that."""
        picked = self.runs.catalog.with_compatibility(self.runs.catalog.check_model(model), compatibility)
        return gr.skip() if picked == model else gr.update(value=picked)

    def refresh_tab(self, active, text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask,
                    pad_tokens, d_model, n_heads, kind, layer, head, comparison, compatibility=None, heads_off=None,
                    ablation=None):
        """After the main view updates, update the step view or the comparison too when its tab is open."""
        args = (text, model, d_k, scale_mode, custom_factor, causal_mask, padding_mask, pad_tokens, d_model,
                n_heads, kind, layer, head)
        if active == "steps":
            return (*self.steps(*args, compatibility, heads_off, ablation), gr.skip(), gr.skip())
        if active == "compare":
            return (gr.skip(), gr.skip(), *self.compare(*args, comparison, compatibility, heads_off, ablation))
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
