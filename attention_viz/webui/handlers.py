"""The functions behind the widgets: plain values in, service calls, Gradio values out.

The service checks every value (requests.py) and raises ValueError with a message for the user; `handler`
(webui/handling.py) turns that into a gr.Error, and nothing else happens here: no math, no drawing.

The named endpoints (gradio_client: `Client(url).predict(..., api_name="/visualize")`; a refused input raises
gradio_client.exceptions.AppError carrying the message), every parameter and every field of what comes back:
docs/http_api.md. Each is a method here, its inputs by name (webui/inputs.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math

import gradio as gr

from attention_viz.service import (
    COMPARISONS,
    EXAMPLES,
    HUB_PREFIX,
    KIND_LABELS,
    LAB_HEADERS,
    PAIR_TEXTS,
    PAIRS,
    Lesson,
    LiveTrainer,
    ModelControls,
    Settings,
    Views,
    heads_off_text,
    text_label,
)
from attention_viz.server.liveness import WATCH
from attention_viz.server.runtime import release_free_memory
from attention_viz.webui import media_tab
from attention_viz.webui.handling import handler, run_key, shown_reason
from attention_viz.webui.inputs import COMPARE, EXPORT, ROUTED, STEPS, VISUALIZE, Inputs, takes
from attention_viz.webui.widgets import prose_html

logger = logging.getLogger(__name__)


def _client(request: gr.Request | None) -> str | None:
    """Who an export is counted against: the page's (or API client's) session; None for a call from Python."""
    return getattr(request, "session_hash", None)


def unscored_note(controls: ModelControls) -> str:
    """Under the scoring buttons: why they are off for this model (Markdown), or nothing."""
    return f"⚠ {controls.abilities.unscored}" if controls.abilities.unscored else ""


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
            return "Cancel asked: your run stops at its next step."
        return "No live run of yours to cancel."

    def _settings(self, inputs: Inputs, heads: bool = True) -> Settings:
        """The run `inputs` ask for, checked (requests.parse_settings); heads: with the heads they switch off."""
        return self.runs.settings(**inputs.settings(heads))

    @handler
    @takes(VISUALIZE)
    def visualize(self, inputs: Inputs):
        """The packed run (every kind, layer and head, drawn in the browser), the output, the notes (HTML)."""
        view = self.views.visualize(self._settings(inputs), requested_d_k=inputs.d_k)
        return view.run, view.output, prose_html(view.info)

    @handler
    @takes(STEPS)
    def steps(self, inputs: Inputs):
        """Figure 2 (left) for one head as numbers (QKᵀ, scaled, masked, softmax, weights·V), and its text (HTML)."""
        steps, note = self.views.steps(self._settings(inputs), inputs.kind, inputs.layer, inputs.head)
        return steps, prose_html(note)

    @handler
    @takes(STEPS)
    def steps_at_once(self, inputs: Inputs):
        """steps of /steps' values where the service has them at once (Views.steps_at_once), else None."""
        found = self.views.steps_at_once(self._settings(inputs), inputs.kind, inputs.layer, inputs.head)
        return None if found is None else (found[0], prose_html(found[1]))

    @handler
    @takes(COMPARE)
    def compare(self, inputs: Inputs):
        """One head with a switch on and off ("scaling", "causal_mask" or "padding_mask"), or of two runs ("text":
        other_text through the same model; "model": the text through other_model), as numbers, and its text (HTML)."""
        settings, head = self._settings(inputs), (inputs.kind, inputs.layer, inputs.head)
        if inputs.comparison in PAIRS:
            other = self._other_settings(inputs)
            comparison_view, note = self.views.compare_pair(settings, other, inputs.comparison, *head)
        else:
            comparison_view, note = self.views.compare(settings, inputs.comparison, *head)
        return comparison_view, prose_html(note)

    def _other_settings(self, inputs: Inputs) -> Settings:
        """The settings of a comparison's side b: another text through the same model (its switches), or the text
        through another model (at its own default d_k, no heads off); each refusal says which input it is about."""
        if inputs.comparison == "text":
            if not isinstance(inputs.other_text, str) or not inputs.other_text.strip():
                raise ValueError("Write the second text (b) to compare with, in the box under “Difference of”.")
            try:
                return self._settings(dataclasses.replace(inputs, text=inputs.other_text))
            except ValueError as error:
                raise ValueError(f"Second text (b): {error}") from None
        if not isinstance(inputs.other_model, str) or not inputs.other_model:
            raise ValueError("Pick the second model (b) to compare with, under “Difference of”.")
        try:
            other = self.runs.catalog.check_model(inputs.other_model)
            return self._settings(dataclasses.replace(inputs, model=other, d_k=self.runs.catalog.default_d_k(other),
                                                      compatibility=None, heads_off=None, ablation=None))
        except ValueError as error:
            raise ValueError(f"Second model (b): {error}") from None

    @staticmethod
    def pair_default(model: str, other_text: str):
        """The second text's box follows the model's kind while it holds the other kind's minimal pair (service.pairs:
        a real model's "The key to the cabinets is", ours' "attentive"); a text of one's own stays."""
        ours, real = PAIR_TEXTS["ours"][1], PAIR_TEXTS["real"][1]
        wanted = real if isinstance(model, str) and model.startswith(HUB_PREFIX) else ours
        return gr.update(value=wanted) if other_text in (ours, real, "") and other_text != wanted else gr.skip()

    @handler
    @takes(VISUALIZE)
    def induction(self, inputs: Inputs):
        """Every head's induction score on a repeated random sequence (service.induction: one extra pass, cached per
        model), as a text with a table per kind (HTML)."""
        return prose_html(self.views.induction.scores(self._settings(inputs, heads=False))["text"])

    @handler
    @takes(EXPORT)
    def export(self, inputs: Inputs, request: gr.Request = None):
        """The grid and the head as PNG, every map as .npz, the head as CSV, SVG and PDF, the run as one HTML page (the
        page's session keeps its last few)."""
        return [str(path) for path in self.views.export(self._settings(inputs), inputs.kind, inputs.layer, inputs.head,
                                                        inputs.colour_scale, _client(request))]

    @handler
    @takes(EXPORT)
    def export_files(self, inputs: Inputs, request: gr.Request = None):
        """export's files but the SVG and PDF figures, at once (tens of ms): what the Export button shows first."""
        return [str(path) for path in self.views.export(self._settings(inputs), inputs.kind, inputs.layer, inputs.head,
                                                        inputs.colour_scale, _client(request), figures=False)]

    @takes(VISUALIZE)
    def importance(self, inputs: Inputs):
        """Which heads matter (service.heads_view): every head switched off alone, Michel's estimate, the prune
        curve, as numbers the page draws. ablation: "zero" or "mean"; heads_off is ignored (every head alone off).
        Streamed: a real model's partial payloads as its heads are scored, then the payload (the API's answer).
        As `handler` does for the other widgets, for a stream: counted in flight, ValueError -> gr.Error, a fault of
        ours logged and told without its trace."""
        try:
            with WATCH.call("importance"):
                yield from self.views.heads.stream(self._settings(inputs, heads=False), inputs.ablation)
        except ValueError as error:
            raise gr.Error(str(error), print_exception=False) from None
        except (gr.Error, KeyboardInterrupt, GeneratorExit):
            raise
        except Exception as error:  # noqa: BLE001 - a fault of ours: the trace is for the log, never the page
            logger.exception("importance failed")
            raise gr.Error(f"The server could not answer this ({type(error).__name__}); nothing else changed. "
                           "Try another input, or again.", print_exception=False) from None
        finally:
            release_free_memory()

    @handler
    @takes(VISUALIZE)
    def importance_export(self, inputs: Inputs, request: gr.Request = None):
        """Every head's importance as a CSV file (the page's session keeps its last few)."""
        return self.views.heads.csv_file(self._settings(inputs, heads=False), inputs.ablation, _client(request))

    @handler
    def long_read(self, model: str, text: str) -> dict:
        """A real model reads a page (service.long_runs): the long view's payload."""
        return self.views.long.read(model, text)

    def long_view(self, asked: dict) -> dict:
        """The long view's server function: an overview or a region of a kept run, or {"error": a sentence}; a fault
        of ours is logged with its trace and told without it."""
        try:
            with WATCH.call("long_view"):
                return self.views.long.view(asked)
        except Exception as error:  # noqa: BLE001 - the browser's call gets a sentence, never a trace
            logger.exception("long_view failed")
            return {"error": f"The server could not draw this view ({type(error).__name__}); try again."}

    @handler
    def dk_lab(self, d_k: float, n_keys: float, scaled: bool):
        """The √d_k lab's numbers, drawn by the page: the q·k histogram against the exact law (bins of the mode's own
        range), one query's logits and softmax, the sweep over d_k (a dict, service.lab_view); and the table."""
        return self._lab(d_k, n_keys, scaled)

    def _lab(self, d_k, n_keys, scaled) -> tuple[dict, dict]:
        """The lab's view and its table, as the page's two components take them."""
        view = self.views.dk_lab(d_k, n_keys, scaled)
        return view.data, {"headers": LAB_HEADERS, "data": view.numbers}

    @handler
    def training(self, d_k: str):
        """The study's scaled dot, plain dot and additive members at one trained d_k, every snapshot of their probes'
        maps with loss, accuracy and alignment so far (a dict, service.training_view), drawn by the page."""
        return self.views.training(d_k)

    def controls_of(self, c: ModelControls, scale: object = None) -> dict[str, object]:
        """The controls that depend on the model, by name (transformer_tab's names): its d_k family (a log₂
        slider for the untrained model only; a trained one picks among its trained sizes), scaling (`scale`, else the
        model's own; fixed for additive attention), the compatibility picker (a study model only), the causal mask
        (not for an encoder alone), its examples, what the text box says of the model, and the scoring buttons (off,
        with the reason under them, for a model whose heads cannot be scored)."""
        return {
            "dk_log": gr.update(minimum=c.log_d_k_min, maximum=c.log_d_k_max, step=c.log_d_k_step,
                                value=math.log2(c.d_k), visible=c.untrained),
            "d_k": c.d_k,
            "untrained_box": gr.update(visible=c.untrained),
            "scale_mode": gr.update(value=scale if scale and c.scaling_applies else c.scale_mode,
                                    interactive=c.scaling_applies, info=c.scale_info),  # "" clears it
            "dk_note": prose_html(c.d_k_note),
            "compatibility": gr.update(value=c.compatibility, visible=c.study),
            "dk_trained": gr.update(choices=[str(v) for v in c.trained_d_ks],
                                    value=str(c.d_k) if c.trained_d_ks else None, label=c.d_k_label,
                                    visible=not c.untrained),
            "text": gr.update(info=c.text_info, label=c.text_label or text_label(self.runs.catalog)),
            "causal_mask": gr.update(visible=c.causal_applies),
            "position_bias": gr.update(value=True, visible=c.bias_applies),
            "comparison": gr.update(choices=comparison_choices(c.causal_applies, c.bias_applies)),
            "examples": gr.update(choices=list(c.examples), value=None),
            "score_heads": gr.update(interactive=not c.abilities.unscored),
            "score_export": gr.update(interactive=not c.abilities.unscored),
            "score_note": gr.update(value=prose_html(unscored_note(c)), visible=bool(c.abilities.unscored)),
        }

    @handler
    def model_controls(self, model: str, d_k: float, n_heads: float, last_model: str | None = None,
                       run_tick: str | None = None, progress=gr.Progress()) -> dict[str, object]:
        """A newly picked model, by name: its controls (controls_of), every head on, the model remembered as the last
        that worked, and the run counter moved (the page then runs it). A real model picked for the first time is
        loaded here, its download shown by Gradio's progress bar. A model that cannot be had leaves the page as it
        was: the picker goes back to the last model that worked and says why under it; no other control changes,
        and no toast (the picker tells one pick twice). The picker set by an answer (a lesson step, or put back) is
        the last model: nothing to do."""
        if last_model and model == last_model:
            return {}
        try:
            c = self.views.model_controls(model, d_k, n_heads=n_heads,
                                          progress=lambda fraction, text: progress(fraction, desc=text))
        except ValueError as error:
            if not last_model:
                raise
            return {"model": gr.update(value=last_model, info=f"⚠ {shown_reason(error)} (still showing the model "
                                                              "before)")}
        return {**self.controls_of(c), "heads_off": "", "model": gr.update(info=None), "last_model": model,
                "run_key": "", **({"run_tick": str(int(run_tick) + 1)} if run_tick is not None else {})}

    @handler
    def heads_controls(self, model: str, d_k: float, n_heads: float, run_tick: str | None = None) -> dict[str, object]:
        """The untrained model's controls for a new number of heads (its widest d_k moves), by name, and its run."""
        return self.model_controls(model, d_k, n_heads, None, run_tick)

    def transformer_state(self, settings: Settings) -> dict[str, object]:
        """The Transformer tab set to one run's settings, by name: every control (nothing left from before) and the
        run itself (the explorer, the output, the notes), as one answer: what a lesson step sets."""
        c = self.views.model_controls(settings.model, settings.d_k, n_heads=settings.n_heads)
        scale = settings.scale if isinstance(settings.scale, str) else "custom"
        factor = 1.0 if isinstance(settings.scale, str) else float(settings.scale)
        if not c.scaling_applies:  # additive attention: the radio shows the family's own mode, fixed (controls_of)
            scale = c.scale_mode
        shown = {"text": settings.typed or settings.text, "model": settings.model, "d_k": settings.d_k,
                 "scale_mode": scale, "custom_factor": factor, "causal_mask": settings.causal_mask,
                 "padding_mask": settings.padding_mask, "pad_tokens": settings.pad_tokens,
                 "d_model": settings.d_model, "n_heads": settings.n_heads,
                 "heads_off": heads_off_text(settings.heads_off), "ablation": settings.ablation,
                 "position_bias": settings.position_bias}
        view, controls = self.views.visualize(settings), self.controls_of(c, scale)
        return {
            **controls, **shown, "scale_mode": controls["scale_mode"],  # the radio set as controls_of sets it
            "model": gr.update(value=settings.model, info=None),
            "last_model": settings.model,
            "text": gr.update(value=shown["text"], info=c.text_info,
                              label=c.text_label or text_label(self.runs.catalog)),
            "causal_mask": gr.update(value=settings.causal_mask, visible=c.causal_applies),
            "position_bias": gr.update(value=settings.position_bias, visible=c.bias_applies),
            "view": view.run, "output": view.output, "info": prose_html(view.info),
            "views": gr.update(selected="heatmaps"), "active": "heatmaps",
            "run_key": run_key(*(shown[name] for name in ROUTED)),  # the run on screen: no control asks it again
        }

    @handler
    def lesson(self, index: float) -> dict[str, object]:
        """A guided lesson's step (service.lesson), by name: its text and tab, and everything it sets, in one
        answer: a Transformer step sets every control of the tab and brings its run (no control reruns it); a lab
        step the lab's controls with its view (and the own-q·k view it opens), a training step the training view and
        the live run's choices; each view with the key of what it shows (run_key), so no control's change asks for it
        again. The explorer's head travels as JSON in `lesson_target` (the page opens it)."""
        step = self.lesson_steps.step(index)
        last = len(self.lesson_steps) - 1
        # what the step's numbers come from, by name (lesson_panel.PARTS says where it is on the page)
        reveal = next((name for name, on in (("live", step.live), ("training", step.training), ("own_qk", step.own_qk),
                                             ("lab", step.lab), ("long", step.long), ("media", step.media),
                                             ("heads", step.view == "heads")) if on), None)
        out: dict[str, object] = {
            "lesson_index": step.index, "lesson_text": prose_html(step.text), "tabs": gr.update(selected=step.tab),
            # the explorer's head to open, and the part of the view the step's numbers come from, to bring into sight
            "lesson_target": json.dumps({**(step.explorer or {}), **({"reveal": reveal} if reveal else {})})
            if step.explorer or reveal else "",
            # Next goes on to the last step ("Last step ▶") and ends there; Back ends at the first
            "lesson_forward": gr.update(value="Next ▶" if step.index < last - 1 else "Last step ▶"
                                        if step.index < last else "End of the lesson", interactive=step.index < last),
            "lesson_back": gr.update(interactive=step.index > 0),
        }
        if step.settings is not None:
            out |= self.transformer_state(step.settings)
            if step.view == "heads":  # the scores it quotes, in the view it opens
                out |= {"views": gr.update(selected="heads"),
                        "importance": self.views.heads.importance(step.settings, "zero")}
        if step.lab:
            d_k, n_keys, scaled = step.lab["d_k"], step.lab["n_keys"], step.lab["scaled"]
            view, numbers = self._lab(d_k, n_keys, scaled)
            out |= {"lab_d_k": d_k, "lab_dk_log": math.log2(d_k), "lab_keys": n_keys, "lab_scaled": scaled,
                    "lab_view": view, "lab_numbers": numbers, "lab_shown": run_key(d_k, n_keys, scaled)}
        if step.own_qk:
            own, o = self.views.own_qk, step.own_qk
            shape = own.shape(o["model"])
            out |= {"own_model": o["model"],
                    "own_kind": gr.update(choices=[(KIND_LABELS[k], k) for k in shape["kinds"]], value=o["kind"]),
                    "own_layer": gr.update(choices=list(range(shape["layers"][o["kind"]])), value=o["layer"]),
                    "own_head": gr.update(choices=list(range(shape["heads"])), value=o["head"]),
                    "own_scaled": o["scaled"],
                    "own_qk": own.view(o["model"], o["kind"], o["layer"], o["head"], o["scaled"])}
        if step.training:
            d_k = str(step.training["d_k"])
            out |= {"training_d_k": d_k, "training_view": self.views.training(d_k), "training_shown": run_key(d_k)}
        if step.live:
            out |= {"live_task": step.live["task"], "live_dk": str(step.live["d_k"]), "live_arm": step.live["arm"]}
        if step.long:  # the Long text tab: its model, its text, and the kept run's view as its read would answer
            out |= {"long_model": step.long["model"], "long_text": step.long["text"], "long_view": step.long["payload"]}
        if step.media:  # the Pictures and sound tab: its controls, and the views the step quotes
            out |= media_tab.lesson_state(self.views.media, step.media)
        return out

    @handler
    def pick_compatibility(self, model: str, compatibility: str | None):
        """The model picker's value for the compatibility picker's choice (the study's family of that function);
        unchanged (no event) when it is already that."""
        picked = self.runs.catalog.with_compatibility(self.runs.catalog.check_model(model), compatibility)
        return gr.skip() if picked == model else gr.update(value=picked)

    @takes(COMPARE)
    def refresh_tab(self, active: str, inputs: Inputs):
        """After the main view updates, update the step view or the comparison too when its tab is open."""
        if active == "steps":
            return (*self.steps(**inputs.pick(STEPS)), gr.skip(), gr.skip())
        if active == "compare":
            return (gr.skip(), gr.skip(), *self.compare(**inputs.pick(COMPARE)))
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()


def comparison_choices(causal_applies: bool = True, bias_applies: bool = False) -> list[tuple[str, str]]:
    """The Compare tab's modes: a switch on − off (the causal mask's and the position bias's only where they act), or
    another text or model."""
    acts = {"causal_mask": causal_applies, "position_bias": bias_applies}
    return [*((f"{a} − {b}", key) for key, (a, b) in COMPARISONS.items() if acts.get(key, True)),
            *((label, key) for key, label in PAIRS.items())]


def opening_settings(views: Views) -> Settings:
    """The controls the page opens with: the first example on the default model, at its default d_k."""
    catalog = views.runs.catalog
    model = catalog.default_model
    controls = views.model_controls(model, catalog.default_d_k(model))
    return views.runs.settings(EXAMPLES[0], model, controls.d_k, controls.scale_mode)


def ping() -> str:
    """A trivial endpoint: answers "pong" and touches nothing (the protocol's own cost, for the benchmarks)."""
    return "pong"
