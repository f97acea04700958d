"""The Transformer tab: the controls (text, model, d_k, scaling, masks), the explorer, steps, compare, export.

One answer of /visualize carries the whole run (every map of every kind, layer and head, masks, statistics,
output, notes) into the explorer (webui.explorer_view), which draws the grid of every layer x head and the
chosen head in the browser: choosing the attention kind, layer, head and colour scale sends no request.
The views of one head that the server computes (steps, compare, export) read that choice from the
explorer when they ask (selection_js); steps and compare come back as numbers that the browser draws
(webui.steps_view). A refused input marks every view stale at once and clears the output and notes, so
nothing on the page claims to be for an input it is not for.
"""

from __future__ import annotations

import math

import gradio as gr
import orjson
from starlette.responses import Response

from attention_viz.core.maps import KINDS
from attention_viz.service import (
    ABLATIONS,
    COLOUR_SCALES,
    COMPATIBILITY_LABEL,
    D_K_RANGE,
    D_MODEL_RANGE,
    DEFAULT_UNTRAINED,
    EXAMPLES,
    FACTOR_RANGE,
    HEADS_RANGE,
    HUB_PREFIX,
    PAD_TOKENS_RANGE,
    PAIR_TEXTS,
    POSITION_BIAS_LABEL,
    SCALE_CHOICES,
    STUDY_ARMS,
    Views,
    text_label,
)
from attention_viz.server.admission import RUNS, SCORES
from attention_viz.webui.explorer_view import explorer_view, selection_js
from attention_viz.webui.handlers import Handlers, comparison_choices, opening_settings, unscored_note
from attention_viz.webui.handling import named
from attention_viz.webui.heads_panel import badges_js, heads_empty_js, heads_view
from attention_viz.webui.inputs import COMPARE, EXPORT, EXTRA, ROUTED, SIDE_B, STEPS, VISUALIZE
from attention_viz.webui.scripts import Raw, call
from attention_viz.webui.steps_view import compare_view, fresh_js, stale_js, steps_view
from attention_viz.webui.widgets import (
    BUMP_JS,
    LIVE,
    PRIVATE,
    RAW,
    log2_slider_pair,
    prose,
    prose_html,
    released,
    route_unless_shown,
)

VIEW = "explorer_view"  # the explorer component's elem_id; #explorer and #head_view are inside it
STEPS_VIEW, COMPARE_VIEW = "steps_view", "compare_view"  # the elem_ids of the steps and compare components
# The runs (a new text, model or switch) of our models share the RUNS line, scoring every head the SCORES line;
# whatever names a real model waits on that model's own line, so it holds no slot the others need: the queue moves it
# there (server/admission.py), for the page and the API alike.
# after a run: the open Steps or Compare view follows it (refresh_tick's change asks the server); Heatmaps needs nothing
REFRESH_IF_OPEN_JS = call("refreshIfOpen", Raw("active"), Raw("tick"), params="active, tick")
REFUSED = "**Refused.** The views below are the last accepted input's; the message says what to change."
HELP_TITLE = "How to read the heatmaps: tiles, hover, switching heads off, what flows"
HELP = ("**Every layer (rows) × head.** Click a tile to open that head below; hover a cell for its exact weight. "
        "Attention, layer, head and colour change in your browser, without asking the server. "
        "**Switch heads off** turns a click into a switch: a tile, a layer's row or a whole kind goes off and the "
        "model reruns. **Show** what flows instead of the weights: α_ij·‖v_j W_O‖ (Kobayashi et al. 2020), each "
        "row's share, so a head that looks hard at a key whose value carries little shows it.")
HEADS_OFF_INFO = ("Click tiles in the heatmaps' “switch heads off” mode (they write {map key: [heads]} here), or "
                  "type map keys and heads, e.g. decoder.1.cross_attn: 0 2; encoder.0.self_attn: all — then Enter")


EXPORT_LABEL = "Export the head chosen in Heatmaps"
EXPORT_DRAWING = "Drawing the SVG and PDF figures for a paper… (the files below are ready)"  # until /export answers
# a number typed follows back to the nearest trained size, as the server snaps it
NEAREST_TRAINED_JS = call("nearestTrained", Raw("d"), Raw("current"), params="d, current")


# by name, every control and view a lesson step sets (handlers.transformer_state), in the lesson's order of outputs
LESSON_SETS = ("dk_log", "d_k", "untrained_box", "scale_mode", "dk_note", "compatibility", "dk_trained", "text",
               "causal_mask", "comparison", "examples", "heads_off", "model", "last_model", "run_key", "score_heads",
               "score_export", "score_note", "custom_factor", "padding_mask", "pad_tokens", "d_model", "n_heads",
               "ablation", "view", "output", "info", "views", "active", "importance", "position_bias")
# what a new model (or number of heads) sets, by name (handlers.model_controls), and the run's counter after them
MODEL_SETS = (*LESSON_SETS[:18], "position_bias")
MODEL_INPUTS = ("model", "d_k", "n_heads", "last_model", "run_tick")  # handlers.model_controls' values


def of(c: dict, names: tuple[str, ...]) -> list:
    """The components of these names, in that order: an event's inputs (inputs.py's tuples) or outputs."""
    return [c[name] for name in names]


def render(demo: gr.Blocks, handlers: Handlers, views: Views) -> dict:
    """The tab's widgets and wiring, inside the current gr.Tab (endpoints /visualize, /steps, /compare, /export);
    returns, by name, every control and view a guided lesson sets (handlers.transformer_state). Every widget is
    named once, in one dict (its names the endpoints' inputs' where it is one, webui/inputs.py)."""
    catalog = views.runs.catalog
    controls0 = views.model_controls(catalog.default_model, catalog.default_d_k(catalog.default_model))
    view0 = views.visualize(opening_settings(views))  # the page opens with its first run: no request on load
    with gr.Row():
        c = settings_column(demo, views, controls0, view0)
        c |= views_column(handlers, views, controls0, view0)
    wire_runs(handlers, c)
    wire_model(handlers, c)
    wire_head_views(handlers, c)
    wire_scores(handlers, c)
    return {name: c[name] for name in LESSON_SETS}


def settings_column(demo: gr.Blocks, views: Views, controls0, view0) -> dict:
    """The left column: the text, its output and notes, the model and its settings, the heads switched off."""
    catalog = views.runs.catalog
    c: dict = {}
    with gr.Column(scale=1, min_width=300):
        c["text"] = gr.Textbox(value=EXAMPLES[0], max_lines=1, elem_id="text", label=text_label(catalog),
                               info=controls0.text_info)
        # the output and its notes under the text they are of: the views' column starts with the views
        c["output"] = gr.Textbox(view0.output, label="Model output", interactive=False, elem_id="output")
        c["info"] = prose(view0.info, label="notes", elem_id="info")
        # A radio, not gr.Examples: one widget type less for the page to load (docs/benchmarks.md, the page
        # complete); choosing one fills the text in the browser, and another text clears the choice
        c["examples"] = gr.Radio(EXAMPLES, value=None, label="Examples", elem_id="examples")
        c["model"] = gr.Dropdown(catalog.model_choices, value=catalog.default_model, label="Model", elem_id="model")
        c["compatibility"] = gr.Radio([(label, key) for key, label in STUDY_ARMS.items()],
                                      value=controls0.compatibility, visible=controls0.study,
                                      label=f"{COMPATIBILITY_LABEL} (the study's models, same d_k)",
                                      elem_id="compatibility")
        if hasattr(demo, "optional"):  # server.answers.Blocks: API clients may leave it out (it comes last)
            demo.optional(c["compatibility"])
        with gr.Column(visible=controls0.untrained) as c["untrained_box"]:
            c["d_model"] = gr.Slider(*D_MODEL_RANGE, value=DEFAULT_UNTRAINED["d_model"], step=8,
                                     label="d_model (untrained model)", elem_id="d_model")
            c["n_heads"] = gr.Slider(*HEADS_RANGE, value=DEFAULT_UNTRAINED["n_heads"], step=1,
                                     label="heads h (untrained model)", elem_id="n_heads")
        c["dk_trained"] = gr.Radio([str(v) for v in controls0.trained_d_ks], value=str(controls0.d_k),
                                   visible=not controls0.untrained, label=controls0.d_k_label, elem_id="dk_trained")
        c["dk_log"] = gr.Slider(controls0.log_d_k_min, controls0.log_d_k_max, step=controls0.log_d_k_step,
                                value=math.log2(controls0.d_k), label="log₂ d_k (moves d_k below)", elem_id="dk_log",
                                visible=controls0.untrained)
        c["d_k"] = gr.Number(value=controls0.d_k, minimum=D_K_RANGE[0], maximum=D_K_RANGE[1],
                             label="d_k, query/key width per head", elem_id="dk")
        c["dk_note"] = prose(controls0.d_k_note, elem_id="dk_note")
        c["scale_mode"] = gr.Radio([(label, key) for key, label in SCALE_CHOICES.items()],
                                   value=controls0.scale_mode, label="Scaling of QKᵀ", elem_id="scale",
                                   info=controls0.scale_info or None)
        c["custom_factor"] = gr.Number(value=1.0, minimum=FACTOR_RANGE[0], maximum=FACTOR_RANGE[1],
                                       label="custom factor (when scaling = custom)", elem_id="factor",
                                       **factor_state(controls0.scale_mode))
        c["causal_mask"] = gr.Checkbox(value=True, label="causal mask (decoder self-attention)", elem_id="causal")
        # only for a model that adds a position bias to QKᵀ (T5, ALiBi); optional in the API, after ablation
        c["position_bias"] = gr.Checkbox(value=True, label=POSITION_BIAS_LABEL, elem_id="position_bias",
                                         visible=controls0.bias_applies)
        c["padding_mask"] = gr.Checkbox(value=True, label="padding mask", elem_id="padding")
        c["pad_tokens"] = gr.Slider(*PAD_TOKENS_RANGE, value=0, step=1, label="pad tokens after the text",
                                    elem_id="pads")
        c["heads_off"] = gr.Textbox("", max_lines=1, label="heads switched off (§3.2.2 taken apart)",
                                    info=HEADS_OFF_INFO, placeholder="none: every head on", elem_id="heads_off")
        c["ablation"] = gr.Radio([(label, key) for key, label in ABLATIONS.items()], value="zero",
                                 label="a head switched off passes on", elem_id="ablation")
        with gr.Row():
            c["heads_apply"] = gr.Button("Run with these heads off", size="sm", elem_id="heads_apply")
            c["heads_clear"] = gr.Button("Every head on", size="sm", elem_id="heads_clear")
        if hasattr(demo, "optional"):  # after compatibility, also optional in the API
            demo.optional(c["heads_off"])
            demo.optional(c["ablation"])
            demo.optional(c["position_bias"])
    return c


def views_column(handlers: Handlers, views: Views, controls0, view0) -> dict:
    """The right column: the choice of head (hidden), the page's counters, and the views' tabs."""
    catalog = views.runs.catalog
    # Kind, layer and head are chosen in the explorer; these hidden inputs carry the choice to the endpoints
    # that draw one head on the server (the API's bounds are the largest model's).
    max_layers, max_heads = catalog.largest_model()
    c: dict = {}
    with gr.Column(scale=3, elem_id="views_column"):
        c["kind"] = gr.Radio([(label, key) for key, label in KINDS.items()], value="encoder.self_attn",
                             label="attention kind", visible=False, elem_id="kind")
        c["layer"] = gr.Number(0, minimum=0, maximum=max_layers - 1, precision=0, label="layer", visible=False,
                               elem_id="layer")
        c["head"] = gr.Number(0, minimum=0, maximum=max_heads - 1, precision=0, label="head", visible=False,
                              elem_id="head")
        # the open view and a counter the page moves after a run when Steps or Compare is open: both live in the
        # page, so opening a tab and a run with Heatmaps open send nothing more to the server
        c["active"] = gr.Textbox("heatmaps", visible=False, elem_id="active_view")
        c["refresh_tick"] = gr.Textbox("0", visible=False, elem_id="refresh_tick")
        c["run_tick"] = gr.Textbox("0", visible=False, elem_id="run_tick")  # moved by every trigger of a run
        # the last model that could be had (a refused pick goes back to it), in the page: what an answer sets it to
        # is there when the picker's change reads it
        c["last_model"] = gr.Textbox(catalog.default_model, visible=False, elem_id="last_model")
        c["run_key"] = gr.Textbox("", visible=False, elem_id="run_key")  # the settings of a run an answer brought
        with gr.Tabs(overflow_behavior="wrap") as c["views"]:  # every view named at once, also on a phone
            with gr.Tab("Heatmaps", id="heatmaps") as c["tab_heatmaps"]:
                c["view"] = explorer_view(view0.run, elem_id=VIEW, summary=False, label="run", switchable=True)
                with gr.Accordion(HELP_TITLE, open=False, elem_id="heatmaps_help"):  # the maps come first
                    prose(HELP)
            with gr.Tab("Steps (Figure 2)", id="steps") as c["tab_steps"]:
                c |= steps_tab(handlers)
            with gr.Tab("Compare", id="compare") as c["tab_compare"]:
                c |= compare_tab(catalog)
            with gr.Tab("Which heads matter", id="heads") as c["tab_heads"]:
                c |= heads_tab(controls0)
            with gr.Tab("Export", id="export") as c["tab_export"]:
                c |= export_tab()
    return c


def steps_tab(handlers: Handlers) -> dict:
    """Figure 2 (left) for the chosen head, asked beside the queue (steps_beside)."""
    prose("**Figure 2 (left)** for the head chosen in Heatmaps, one step at a time "
          "(buttons or ← → keys); hover a cell for its exact value.")

    async def steps_answer(asked):  # a coroutine, unannotated: as the lab's (webui/lab_tab.py)
        return steps_beside(handlers, asked)

    return {"steps": steps_view(elem_id=STEPS_VIEW, label="steps", answer=steps_answer),
            "steps_text": prose(elem_id="steps_text", label="text")}


def compare_tab(catalog) -> dict:
    """Compare: a switch on and off, or another text or model (side b, service.pairs)."""
    model0 = catalog.default_model
    c = {"comparison": gr.Radio(comparison_choices(), value="scaling", label="Difference of", elem_id="comparison")}
    with gr.Row():  # side b of "another text" / "another model" (service.pairs)
        c["other_text"] = gr.Textbox(PAIR_TEXTS["real" if model0.startswith(HUB_PREFIX) else "ours"][1],
                                     max_lines=1, label="second text (b), same model", visible=False,
                                     elem_id="compare_text_b")
        c["other_model"] = gr.Dropdown(catalog.model_choices, value=model0, label="second model (b), same text",
                                       visible=False, elem_id="compare_model_b")
    c["compare"] = compare_view(elem_id=COMPARE_VIEW, label="comparison")
    c["compare_text"] = prose(elem_id="compare_text", label="text")
    return c


def heads_tab(controls0) -> dict:
    """Which heads matter: scoring every head, its CSV, induction heads."""
    prose("**Which heads matter** (§3.2.2 taken apart): each head switched off alone (the ablation "
          "chosen on the left), Michel et al.'s one-pass estimate beside it, and the prune curve. "
          "The scores also appear on the heatmaps' tiles as Δ badges.")
    scorable = not controls0.abilities.unscored  # else both buttons off, the note saying why
    c = {}
    with gr.Row():
        c["score_heads"] = gr.Button("Score every head", variant="primary", elem_id="score_heads",
                                     interactive=scorable)
        c["score_export"] = gr.Button("Export the scores (CSV)", elem_id="score_export", interactive=scorable)
    c["score_note"] = prose(unscored_note(controls0), elem_id="score_note", visible=not scorable)
    c["importance"] = heads_view(elem_id="heads_view", label="importance", unscored=controls0.abilities.unscored)
    c["induction_button"] = gr.Button("Score induction heads", elem_id="score_induction")
    c["induction"] = prose(elem_id="induction", label="induction heads")
    c["score_file"] = gr.File(label="every head's scores (CSV)", interactive=False, elem_id="score_file",
                              visible=False)  # shown with its file (an empty file list fails WCAG)
    return c


def export_tab() -> dict:
    """Export: the colour scale and the button; the files, shown once there are some."""
    c = {"colour_scale": gr.Radio([(label, key) for key, label in COLOUR_SCALES.items()], value="absolute",
                                  label="Colour scale of the PNGs", elem_id="colour"),
         "export_button": gr.Button(EXPORT_LABEL, elem_id="export_button")}
    # shown once it holds files: Gradio's empty gr.File carries an aria-label on a plain div (WCAG)
    c["files"] = gr.File(label="grid and head (PNG), every map (.npz), the head (CSV), the run on screen "
                               "as one HTML file (opens offline); the grid and head as SVG and PDF for a "
                               "paper a few seconds later",
                         file_count="multiple", interactive=False, elem_id="files", visible=False)
    return c


def marked(event, elem_ids, shown_only: bool = False) -> None:
    """A refused event marks these views stale; an answered one, fresh (shown_only: those on show)."""
    event.failure(None, None, None, js=stale_js(elem_ids), **PRIVATE)
    event.success(None, None, None, js=fresh_js(elem_ids, shown_only), **PRIVATE)


def refused(c: dict) -> dict:
    """What a refused run or pick does: every view marked stale, the output and notes cleared, in the browser."""
    return dict(fn=None, inputs=None, outputs=[c["output"], c["info"]],
                js=stale_js([VIEW, STEPS_VIEW, COMPARE_VIEW], outputs=["", prose_html(REFUSED)]), **PRIVATE)


def wire_runs(handlers: Handlers, c: dict) -> None:
    """What runs the model: /visualize on the run counter, which every trigger of a run moves in the browser; the
    open steps or compare view following each run; the controls' routes."""
    refresh = dict(fn=handlers.refresh_tab, inputs=[c["active"], *of(c, COMPARE)],
                   outputs=of(c, ("steps", "steps_text", "compare", "compare_text")),
                   js=selection_js(VIEW, at=1 + COMPARE.index("kind")), **PRIVATE)
    marked(c["refresh_tick"].change(**refresh), [STEPS_VIEW, COMPARE_VIEW], shown_only=True)  # only the open tab's

    # Only controls that change the computation reach the server; the run is cached by them. Every trigger of a run
    # moves one counter, in the browser: a model's controls answer first, and a cleared box is written first.
    route = dict(fn=None, inputs=c["run_tick"], outputs=c["run_tick"], js=BUMP_JS, **PRIVATE)
    run = c["run_tick"].change(handlers.visualize, of(c, VISUALIZE), of(c, ("view", "output", "info")),
                               api_name="visualize", **LIVE, **RAW, **RUNS.wiring)
    # after a run: refused -> stale; answered -> fresh, and the open steps or compare tab follows
    run.failure(**refused(c))
    run.success(None, None, None, js=fresh_js([VIEW]), **PRIVATE)
    run.success(None, [c["active"], c["refresh_tick"]], c["refresh_tick"], js=REFRESH_IF_OPEN_JS, **PRIVATE)
    # A control's change reruns the model, unless it now holds the value of the run on screen (a lesson step's
    # answer brought the run with its controls: their change events send nothing more), at its place in run_key's
    # list (ROUTED). The factor applies only while the scaling is custom: else its change sends nothing.
    for name, kind in (("text", "string"), ("d_k", "number"), ("scale_mode", "string"), ("custom_factor", "number"),
                       ("causal_mask", "boolean"), ("padding_mask", "boolean"), ("position_bias", "boolean"),
                       ("pad_tokens", "number"), ("d_model", "number")):
        trigger = c[name].release if isinstance(c[name], gr.Slider) else c[name].change
        route_unless_shown(trigger, c[name], ROUTED.index(name), kind, c["run_key"], c["run_tick"],
                           gate=(c["scale_mode"], CUSTOM) if name == "custom_factor" else None)
    # whatever sets the scaling (a person, a lesson's step, a new model), the factor box is typed in only when custom
    c["scale_mode"].change(None, c["scale_mode"], c["custom_factor"],
                           js=call("applies", Raw("s"), CUSTOM, FACTOR_OFF, params="s"), **PRIVATE)
    gr.on([c["heads_off"].submit, c["heads_apply"].click, c["ablation"].input], **route)
    # The explorer's heads-off mode: a click puts the heads it asks in the box as JSON ({map key: [heads]}) and moves
    # the counter, in the browser; the run reads the box, as after Enter (so later changes keep their order)
    c["view"].heads_off(None, c["run_tick"], [c["heads_off"], c["run_tick"]],
                        js=call("headsOffAsked", VIEW, Raw("tick"), params="tick"), **PRIVATE)
    c["heads_clear"].click(None, None, c["heads_off"], js=call("clearHeadsOff"), **PRIVATE).then(**route)
    log2_slider_pair(c["dk_log"], c["d_k"])
    c["examples"].input(None, c["examples"], c["text"], js=call("same", Raw("example"), params="example"), **PRIVATE)
    # whatever changes the text (typing, a lesson's step), the choice stays only while it is the text
    c["text"].change(None, [c["text"], c["examples"]], c["examples"],
                     js=call("clearChoice", Raw("t"), Raw("e"), params="t, e"), **PRIVATE)
    # A trained model's d_k: its radio moves the number (the run follows it); a number typed follows back to the
    # nearest trained size, as the server snaps it (log scale, ties to the smaller). A new model's controls and a
    # lesson's step set the radio themselves.
    c["dk_trained"].input(None, c["dk_trained"], c["d_k"], js=call("number", Raw("v"), params="v"), **PRIVATE)
    c["d_k"].input(None, [c["d_k"], c["dk_trained"]], c["dk_trained"], js=NEAREST_TRAINED_JS, **PRIVATE)


def wire_model(handlers: Handlers, c: dict) -> None:
    """A new model (or number of heads) changes the d_k controls first, then the run; a model that cannot be had
    puts the picker back (handlers.model_controls). The compatibility picker picks the study's model of that
    function: a new model, so the same path."""
    sets = {name: c[name] for name in (*MODEL_SETS, "run_tick")}
    outputs = list(sets.values())
    controls = named(handlers.model_controls, sets)
    # a person's pick only (a lesson step or a refusal sets the picker with everything else); "once": the picker
    # tells one pick twice, and the second, while the first is answered, is not sent
    picked = c["model"].input(controls, of(c, MODEL_INPUTS), outputs, trigger_mode="once", **PRIVATE)
    heads = released(c["n_heads"]).change(named(handlers.heads_controls, sets),
                                          of(c, ("model", "d_k", "n_heads", "run_tick")), outputs, **PRIVATE)
    compat_picked = c["compatibility"].input(handlers.pick_compatibility, of(c, ("model", "compatibility")),
                                             c["model"], **PRIVATE).success(controls, of(c, MODEL_INPUTS), outputs,
                                                                            **PRIVATE)
    for event in (picked, heads, compat_picked):
        event.failure(**refused(c))
        event.success(None, c["score_note"], None, js=heads_empty_js("heads_view"), **PRIVATE)  # the panel too


def wire_head_views(handlers: Handlers, c: dict) -> None:
    """The views of the chosen head the server computes: steps, compare, export (each reads the explorer's choice
    of head when it asks, selection_js)."""
    chosen = selection_js(VIEW, at=STEPS.index("kind"))  # kind, layer, head: the explorer's, when asked
    for name in ("heatmaps", "steps", "compare", "export"):
        c[f"tab_{name}"].select(None, None, c["active"], js=call("same", name), **PRIVATE)
    # The steps are asked beside the queue (steps_ask_js: the view's server function, steps_beside), and where that
    # gives none, of the queued /steps
    shown_steps = of(c, ("steps", "steps_text"))
    asked = c["tab_steps"].select(None, of(c, STEPS), shown_steps, js=steps_ask_js(STEPS.index("kind")),
                                  show_progress="hidden", **PRIVATE)
    asked.success(None, None, None, js=fresh_js([STEPS_VIEW]), **PRIVATE)
    marked(asked.failure(handlers.steps, of(c, STEPS), shown_steps, api_name="steps", js=chosen, **RAW,
                         **RUNS.wiring), [STEPS_VIEW])
    compared = dict(fn=handlers.compare, inputs=of(c, COMPARE), outputs=of(c, ("compare", "compare_text")), js=chosen)
    marked(c["comparison"].change(**compared, api_name="compare", **RAW), [COMPARE_VIEW])
    # a new side b: the comparison again (the model b picker's change, not its input: it tells one pick twice, and a
    # refusal was told twice; nothing but a person sets it)
    for box in (c["other_text"].submit, c["other_model"].change):
        marked(box(**compared, **PRIVATE), [COMPARE_VIEW])
    c["comparison"].change(lambda m: (gr.update(visible=m == "text"), gr.update(visible=m == "model")),
                           c["comparison"], of(c, SIDE_B), queue=False, **PRIVATE)
    c["model"].change(handlers.pair_default, of(c, ("model", "other_text")), c["other_text"], queue=False, **PRIVATE)
    marked(c["tab_compare"].select(**compared, **PRIVATE), [COMPARE_VIEW])
    # the files but the SVG and PDF figures at once, then all nine (the figures take seconds on a real model's grid)
    button, files = c["export_button"], c["files"]
    exported = button.click(handlers.export_files, of(c, EXPORT), files, js=chosen, **RAW, **PRIVATE)
    exported.success(lambda: gr.update(visible=True), None, files, queue=False, **PRIVATE)
    exported.success(None, None, button, js=call("same", EXPORT_DRAWING), **PRIVATE)
    figures = exported.success(handlers.export, of(c, EXPORT), files, api_name="export", js=chosen,
                               show_progress="hidden", **RAW)  # the list stays readable while the figures are drawn
    figures.then(None, None, button, js=call("same", EXPORT_LABEL), **PRIVATE)


def wire_scores(handlers: Handlers, c: dict) -> None:
    """Scoring every head, and its CSV, on the SCORES line (a real model's, ~10 s of the model each, on its own
    line); induction heads likewise."""
    once = dict(trigger_mode="once")  # as a button's click: another click while it works is not sent
    scored = c["score_heads"].click(handlers.importance, of(c, VISUALIZE), c["importance"], api_name="importance",
                                    **RAW, **once, **SCORES.wiring)
    scored.success(None, c["importance"], None, js=badges_js(VIEW), **PRIVATE)
    c["induction_button"].click(handlers.induction, of(c, VISUALIZE), c["induction"], api_name="induction", **RAW,
                                **once, **SCORES.wiring)
    score_csv = c["score_export"].click(handlers.importance_export, of(c, VISUALIZE), c["score_file"], **PRIVATE,
                                        **once, **SCORES.wiring)
    score_csv.success(lambda: gr.update(visible=True), None, c["score_file"], queue=False, **PRIVATE)


CUSTOM = "custom"  # the scaling whose factor is the box's
FACTOR_OFF = "Applies only when the scaling is \"custom factor\": pick it above to type one."


def factor_state(scale_mode: str) -> dict:
    """The factor box's interactive and info for a scaling, as page.js's applies(scaling, CUSTOM, FACTOR_OFF) sets
    them after every change of the scaling."""
    return {"interactive": scale_mode == CUSTOM, "info": None if scale_mode == CUSTOM else FACTOR_OFF}


def steps_ask_js(at: int) -> str:
    """The `js` of the steps' ask beside the queue: the event's inputs, kind, layer and head (at `at`) the explorer's
    choice (selection_js), asked of the steps view's server function in turn (page.js stepsAsk); it fails where that
    gives none, and the event's .failure asks the queued /steps."""
    return call("stepsAsk", STEPS_VIEW, VIEW, int(at), Raw("args"), params="...args")


def steps_beside(handlers: Handlers, asked: object) -> Response | None:
    """The steps and their text for `asked` (/steps' values in its order, as the page's stepsAsk sends them) as JSON
    {"steps", "text"}, where the service has them at once (Views.steps_at_once: the run kept, a trained family's:
    a few ms in the event loop, which answers nothing else meanwhile); else None, and the page asks the queued
    /steps, computed in a worker thread in its line: a run not kept, a real or untrained model, a refusal (its
    message is told there), a fault (logged by the handler). Written by orjson, ready to send."""
    if not isinstance(asked, list) or not len(STEPS) - len(EXTRA) <= len(asked) <= len(STEPS):
        return None
    try:
        found = handlers.steps_at_once(*asked)
    except gr.Error:
        return None
    if found is None:
        return None
    return Response(orjson.dumps({"steps": found[0], "text": found[1]}), media_type="application/json")
