"""The web UI's handlers called directly, per control: what each returns, what reruns the model, what errors say."""

import inspect
import json
import math
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from PIL import Image

from attention_viz.core.maps import KINDS
from attention_viz.draw import figures as render, raster
from attention_viz.explorer import COMPARE_FORMAT, STEPS_FORMAT, compare_arrays, unpack
from attention_viz.service.limits import LAB_HEADERS, UNTRAINED
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views
from attention_viz.server import admission, runtime
from attention_viz.webui import page
from attention_viz.webui.handlers import Handlers
from attention_viz.webui.handling import run_key as handlers_run_key
from attention_viz.webui.inputs import ROUTED
from attention_viz.webui.lesson_panel import PARTS
from attention_viz.webui.widgets import prose_html

ROOT = Path(__file__).resolve().parents[2]

BASE = dict(text="attention", model="reverse/sqrt_dk", d_k=16, scale_mode="sqrt_dk", custom_factor=1.0,
            causal_mask=True, padding_mask=True, pad_tokens=0, d_model=64, n_heads=4,
            kind="encoder.self_attn", layer=0, head=0, colour_scale="absolute")
OPTIONAL = ["compatibility", "heads_off", "ablation", "position_bias"]  # every endpoint's last inputs, which clients may leave out
SETTINGS_KEYS = list(BASE)[:10]  # /visualize takes these; kind, layer, head and colour are the browser's


@pytest.fixture(scope="module")
def handlers(views):
    return Handlers(views)


def pixels(path) -> np.ndarray:
    """The RGB pixels of a PNG file a handler returned (PNG files are named by their content, so two
    handlers' answers show the same image exactly when their paths are equal)."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        return np.asarray(image.convert("RGB"))


def visualize(handlers, **changes):
    values = {**BASE, **changes}
    return handlers.visualize(**{key: values[key] for key in SETTINGS_KEYS})


def head_args(**changes):
    values = {**BASE, **changes}
    return {key: values[key] for key in [*SETTINGS_KEYS, "kind", "layer", "head"]}


def test_visualize_returns_the_packed_run_output_and_notes(handlers, runs):
    packed, output, info = visualize(handlers)
    run = runs.run(runs.settings("attention", "reverse/sqrt_dk", 16))
    maps, masks = unpack(packed)
    assert maps.keys() == run.maps.keys() and set(masks) == set(KINDS)  # every kind, layer and head at once
    np.testing.assert_allclose(maps["encoder.0.self_attn"][0], run.head("encoder.self_attn", 0, 0), atol=1e-5)
    assert packed["tokens"]["source"] == list("attention") + ["<eos>"] and packed["n_heads"] == 2
    assert all(len(entry["stats"]["entropy"]) == 2 for entry in packed["kinds"])  # [layer][head]
    assert output == run.output or output.startswith(run.output)
    assert packed["output"] == run.output and info == prose_html("\n\n".join(packed["notes"]))  # Markdown -> HTML
    assert "<code>reverse_dk16_sqrt_dk</code>" in info and "×1/√16 = 0.25" in info
    json.dumps(packed)  # JSON as it is: the API returns it as a dict


def test_visualize_takes_no_view_control(handlers):
    """Kind, layer, head and colour scale are chosen in the browser from the one run: /visualize has no such input."""
    import inspect

    parameters = inspect.signature(handlers.visualize).parameters
    # the study's picker and the heads switched off, last and optional
    assert list(parameters) == [*SETTINGS_KEYS, "compatibility", "heads_off", "ablation", "position_bias"]
    assert parameters["compatibility"].default is parameters["heads_off"].default is None


# Controls that change the computation: from a starting point, one change reruns the model and changes the picture.
UNTRAINED_BASE = {"model": UNTRAINED}
@pytest.mark.parametrize("start, changes", [
    ({}, {"text": "transformer"}),
    ({}, {"model": "copy/none"}),
    ({}, {"model": UNTRAINED}),
    ({}, {"d_k": 64}),
    ({}, {"scale_mode": "none"}),
    ({}, {"scale_mode": "custom", "custom_factor": 0.01}),
    ({"kind": "decoder.self_attn"}, {"causal_mask": False}),
    ({}, {"pad_tokens": 3}),
    ({"pad_tokens": 3}, {"padding_mask": False}),
    (UNTRAINED_BASE, {"d_model": 32}),
    (UNTRAINED_BASE, {"n_heads": 2}),
    (UNTRAINED_BASE, {"d_k": 300}),
], ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "default")
def test_computation_controls_rerun_the_model(handlers, runs, start, changes):
    before = visualize(handlers, **start)
    misses = runs.run.cache_info().misses
    after = visualize(handlers, **start, **changes)
    assert runs.run.cache_info().misses == misses + 1
    assert before[0]["kinds"] != after[0]["kinds"] or before[0]["tokens"] != after[0]["tokens"]


def test_custom_factor_matters_only_in_custom_mode(handlers):
    assert visualize(handlers, custom_factor=0.5)[0] == visualize(handlers)[0]
    assert visualize(handlers, scale_mode="custom", custom_factor=0.5)[0]["kinds"] != visualize(handlers)[0]["kinds"]


def test_untrained_output_says_it_is_meaningless(handlers):
    _, output, info = visualize(handlers, model=UNTRAINED)
    assert output.startswith("(untrained model: no meaningful output")
    assert "Untrained model" in info


def test_snapped_d_k_is_reported(handlers):
    info = visualize(handlers, d_k=24.0)[2]  # Gradio sends numbers as floats
    assert "No trained model with d_k = 24; showing the nearest, d_k = 16." in info


def test_the_explorers_heads_off_as_json_in_the_box_run_as_their_text_does(handlers):
    """The explorer's heads-off clicks put {map key: [heads]} in the box as JSON (page.js headsOffAsked, as
    JSON.stringify writes it); /visualize reads it once, as it reads the typed text, and refuses what is wrong."""
    args = [BASE[key] for key in SETTINGS_KEYS]
    off = {"encoder.0.self_attn": [1], "decoder.1.cross_attn": [0, 1]}  # this model: 2 layers, 2 heads a layer
    box = json.dumps(off, separators=(",", ":"))
    view, output, info = handlers.visualize(*args, None, box, None)
    assert (view, output, info) == handlers.visualize(*args, None, "encoder.0.self_attn: 1; decoder.1.cross_attn: all",
                                                      None)
    assert view["heads_off"] == off and "3 of" in info
    for wrong, message in (('{"encoder.0.self_attn":[9]}', "head 9 does not exist"),
                           ('{"encoder.0.self_attn":["1"]}', "does not exist"),
                           ('{"encoder.0.self_attn":[true]}', "does not exist"),
                           ('{"nowhere":[0]}', "does not have"), ('{"encoder.0.self_attn":[0', "not valid JSON"),
                           ("[1]", "key: heads")):
        with pytest.raises(gr.Error, match=message):
            handlers.visualize(*args, None, wrong, None)


def test_a_lesson_step_sets_every_control_and_brings_its_run_in_one_answer():
    """A Transformer step answers, by name, every control of the tab (nothing left from an earlier step) and its
    run; the next step turns every head back on; a lab step sets the lab, a training step brings its view."""
    handlers = Handlers(Views(Runs()))  # the shipped models: the lesson's study members and snapshots
    out = handlers.lesson(2)
    heads_off = out["heads_off"]
    assert re.fullmatch(r"(encoder|decoder)\.\d\.(self|cross)_attn: \d", heads_off)
    assert out["model"]["value"] == "reverse/sqrt_dk" and out["scale_mode"]["value"] == "sqrt_dk" and out["d_k"] == 16
    assert (out["custom_factor"], out["causal_mask"]["value"], out["padding_mask"], out["pad_tokens"],
            out["ablation"]) == (
        1.0, True, True, 0, "zero")
    assert out["view"]["heads_off"] and out["output"].startswith(out["view"]["output"]) and out["active"] == "heatmaps"
    target = json.loads(out["lesson_target"])
    assert set(target) == {"kind", "layer", "head", "reveal"} and out["tabs"]["selected"] == "transformer"
    assert target["reveal"] == "heads"  # the head scores' table it quotes, brought into sight (lesson_panel.PARTS)
    every_control = {"text", "model", "d_k", "dk_log", "dk_trained", "scale_mode", "custom_factor", "causal_mask",
                     "padding_mask", "pad_tokens", "heads_off", "ablation", "compatibility", "untrained_box", "d_model",
                     "n_heads", "examples", "position_bias"}
    assert every_control <= out.keys()
    nxt = handlers.lesson(3)  # the next step: every head on again, the largest d_k, unscaled
    assert nxt["heads_off"] == "" and nxt["d_k"] == max(map(int, nxt["dk_trained"]["choices"]))
    assert nxt["scale_mode"]["value"] == "none"
    lab = handlers.lesson(4)
    assert (lab["lab_d_k"], lab["lab_keys"], lab["lab_scaled"], lab["tabs"]["selected"]) == (512, 32, False, "lab")
    data, numbers = handlers.dk_lab(512, 32, False)  # the lab's view comes with its controls, as /dk_lab draws it
    assert lab["lab_view"] == data and lab["lab_numbers"] == numbers
    assert "view" not in lab and "heads_off" not in lab  # the Transformer tab stays as it was
    own = handlers.lesson(5)
    assert own["own_model"].startswith("reverse") and own["own_qk"]["kind"] == "decoder.cross_attn"
    training = handlers.lesson(6)
    assert training["training_d_k"] == "512" and training["training_view"] == handlers.training("512")
    value = (lambda v: v["value"] if isinstance(v, dict) else v)
    keyed = {"run_key": ROUTED,
             "lab_shown": ("lab_d_k", "lab_keys", "lab_scaled"), "training_shown": ("training_d_k",)}
    reveals = set()
    for index in range(len(handlers.lesson_steps)):  # a view a step brings is keyed by the values its controls show
        step = handlers.lesson(index)
        reveals.add(json.loads(step["lesson_target"] or "{}").get("reveal"))
        assert ("lab_view" in step) == ("lab_d_k" in step) and ("training_view" in step) == ("training_d_k" in step)
        for key, names in keyed.items():
            if key in step:
                shown = [value(step[name]) for name in names]
                assert json.loads(step[key]) == json.loads(handlers_run_key(*shown)), (index, key)
            else:
                assert not any(name in step for name in names), (index, key)
    # what a step's numbers come from, by a name the page knows where to find (None: the explorer's open head)
    assert reveals == {None, "heads", "lab", "own_qk", "training", "live"} and reveals - {None} <= PARTS.keys()
    # Next goes on to the last step and ends there; Back ends at the first
    last = handlers.lesson(len(handlers.lesson_steps) - 1)
    assert last["lesson_forward"] == {"__type__": "update", "value": "End of the lesson", "interactive": False}
    assert last["live_arm"] == "dot" and last["lesson_back"]["interactive"] is True
    before = handlers.lesson(len(handlers.lesson_steps) - 2)
    assert before["lesson_forward"]["value"] == "Last step ▶" and before["lesson_forward"]["interactive"] is True
    first = handlers.lesson(0)
    assert first["lesson_forward"]["value"] == "Next ▶" and first["lesson_back"]["interactive"] is False


def test_model_controls_follow_the_family(handlers):
    c = handlers.model_controls("reverse/sqrt_dk", 20, 4)
    dk_log, untrained_box, scale, note, trained = (c[name] for name in ("dk_log", "untrained_box", "scale_mode",
                                                                         "dk_note", "dk_trained"))
    assert c["heads_off"] == "" and c["last_model"] == "reverse/sqrt_dk"  # a new model starts with every head on
    # d_k 4, 16, 64: log₂ 2, 4, 6, so the slider steps by 2 and stops on trained members only
    assert (dk_log["minimum"], dk_log["maximum"], dk_log["step"], dk_log["value"]) == (2, 6, 2.0, 4)
    assert c["d_k"] == 16 and untrained_box["visible"] is False and scale["value"] == "sqrt_dk"
    assert note == "<p>Trained d_k: 4, 16, 64.</p>\n"
    assert (trained["choices"], trained["value"], trained["visible"]) == (["4", "16", "64"], "16", True)
    assert dk_log["visible"] is False  # a trained model's d_k stops at its trained sizes only: the radio
    assert handlers.model_controls("copy/none", 16, 4)["scale_mode"]["value"] == "none"
    c = handlers.model_controls(UNTRAINED, 300, 3)
    assert (c["dk_log"]["minimum"], c["dk_log"]["maximum"], c["d_k"]) == (0.0, 10.0, 300)
    assert c["untrained_box"]["visible"] is True and c["dk_note"].startswith("<p>Any d_k from 1 to 1024 with 3 heads")
    assert c["dk_trained"]["visible"] is False and c["dk_log"]["visible"] is True
    # more heads: the slider stops at the widest d_k they allow (h·d_k ≤ 4096), and a wider d_k comes down to it
    c = handlers.model_controls(UNTRAINED, 1024, 16)
    assert (c["dk_log"]["maximum"], c["dk_log"]["value"], c["d_k"]) == (8.0, 8.0, 256)
    assert c["dk_note"].startswith("<p>Any d_k from 1 to 256 with 16 heads (heads × d_k ≤ 4096)")
    assert handlers.model_controls(UNTRAINED, 100, 16)["d_k"] == 100  # within it: kept
    c = handlers.model_controls(UNTRAINED, 1024, 5)  # 4096 // 5 = 819: the slider's last power, 512
    assert (c["dk_log"]["maximum"], c["dk_log"]["value"], c["d_k"]) == (9.0, 9.0, 512)
    assert handlers.model_controls(UNTRAINED, 819, 5)["d_k"] == 819  # typed up to the widest: taken


def test_a_model_that_cannot_be_picked_leaves_the_page_as_it_was(handlers, monkeypatch):
    """The picker goes back to the last model that worked and says why under it; nothing else is answered."""
    def refuse(*args, **kwargs):
        raise ValueError("The model 'x' is not in this machine's Hugging Face cache and could not be downloaded.")

    monkeypatch.setattr(handlers.views, "model_controls", refuse)
    out = handlers.model_controls("hub:x", 16, 4, "reverse/sqrt_dk")
    assert set(out) == {"model"} and out["model"]["value"] == "reverse/sqrt_dk"
    assert "could not be downloaded" in out["model"]["info"]
    with pytest.raises(gr.Error, match="could not be downloaded"):  # nothing to go back to: refused as before
        handlers.model_controls("hub:x", 16, 4, None)
    monkeypatch.undo()
    # the picker set by an answer (a lesson step, or put back) is the last model: nothing more is answered
    assert handlers.model_controls("reverse/sqrt_dk", 16, 4, "reverse/sqrt_dk", "3") == {}
    picked = handlers.model_controls("copy/none", 16, 4, "reverse/sqrt_dk", "3")
    assert picked["run_tick"] == "4" and picked["last_model"] == "copy/none" and picked["run_key"] == ""


def test_steps_handler_returns_numbers_and_text(handlers):
    steps, text = handlers.steps(**head_args(kind="decoder.self_attn", layer=1, head=1))
    json.dumps(steps, allow_nan=False)  # the API sends it as JSON: no image, no Infinity
    assert steps["format"] == STEPS_FORMAT and (steps["kind"], steps["layer"], steps["head"]) == ("decoder.self_attn", 1, 1)
    assert [panel["key"] for panel in steps["panels"]] == ["scores", "scaled", "masked", "weights", "output"]
    assert steps["factor"] == 0.25 and steps["mask"][0][1] is False  # the causal mask hides the future
    assert "×0.25" in text and "−∞" in text and prose_html(steps["text"]) == text


@pytest.mark.parametrize("comparison", ["scaling", "causal_mask", "padding_mask"])
def test_compare_handler_returns_numbers_and_text(handlers, comparison):
    data, text = handlers.compare(**head_args(kind="decoder.self_attn", pad_tokens=2), comparison=comparison)
    json.dumps(data, allow_nan=False)
    assert data["format"] == COMPARE_FORMAT and data["comparison"] == comparison
    arrays = compare_arrays(data)
    np.testing.assert_array_equal(arrays["difference"], arrays["a"] - arrays["b"])
    assert "Output" in text and prose_html(data["text"]) == text


def test_export_handler_writes_png_npz_csv(handlers, views):
    paths = [Path(p) for p in handlers.export(**head_args(kind="decoder.cross_attn", layer=1, head=1),
                                              colour_scale="absolute")]
    assert sorted(p.suffix for p in paths) == [".csv", ".html", ".npz", ".pdf", ".pdf", ".png", ".png", ".svg", ".svg"]
    for path in paths:
        assert path.is_file() and views.export_root in path.parents
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths if p.suffix == ".png")
    # The files describe themselves: names say model, text and view; PNG and CSV carry the settings.
    stem = "reverse-trained-with-1-sqrtd_k-d_k-16__attention__decoder_cross_attn__"  # the picker's name, made safe
    assert all(p.name.startswith(stem) for p in paths), paths
    head_png = next(p for p in paths if p.name.endswith("L1_H1.png"))
    metadata = Image.open(head_png).text
    assert metadata["model"] == "reverse (trained with 1/√d_k), d_k = 16" and metadata["text"] == "attention"
    assert metadata["scaling"] == "×1/√16 = 0.25" and metadata["causal mask"] == "on"
    assert (metadata["layer"], metadata["head"], metadata["d_k"]) == ("1", "1", "16")
    grid_png = next(p for p in paths if p.name.endswith("grid.png"))
    # read on its own: the head at twice the page's size (it was 452 × 431), the grid with its tokens and colour bar
    assert Image.open(head_png).size[0] >= 800
    grid = np.asarray(Image.open(grid_png).convert("RGB"))  # (height, width, 3)
    ends = [np.nonzero((grid == raster.colormap_lut(raster.WEIGHT_CMAP)[i]).all(-1))[1] for i in (255, 0)]
    assert set(ends[0]) & set(ends[1])  # a colour bar: one column from the top colour (1) to the bottom one (0)
    assert "layer" not in Image.open(grid_png).text and Image.open(grid_png).text["attention"] == "encoder-decoder attention"
    csv_lines = next(p for p in paths if p.suffix == ".csv").read_text().splitlines()
    assert "# padding mask: on" in csv_lines and "# head: 1" in csv_lines
    assert csv_lines[len([line for line in csv_lines if line.startswith("#")])].startswith("query \\ key")
    # the head and the grid for a paper: SVG labels as <text> with the tokens, PDF fonts TrueType; settings in both
    svg = next(p for p in paths if p.name.endswith("L1_H1.svg")).read_text()
    assert ">n</text>" in svg and "&lt;bos&gt;</text>" in svg and "scaling: ×1/√16 = 0.25" in svg
    assert b"/FontFile2" in next(p for p in paths if p.name.endswith("L1_H1.pdf")).read_bytes()
    grid_svg = next(p for p in paths if p.name.endswith("grid.svg")).read_text()
    assert all(f">{label}</text>" in grid_svg for label in ("layer 0", "layer 1", "head 0")), "layers and heads named"
    assert ">n</text>" in grid_svg and "every layer (rows)" in grid_svg
    assert b"/FontFile2" in next(p for p in paths if p.name.endswith("grid.pdf")).read_bytes()
    # the run on screen as one page: the packed run the app draws, nothing fetched
    page = next(p for p in paths if p.suffix == ".html").read_text()
    assert page.startswith("<!doctype html>") and "AttentionExplorer.mountAll" in page and "http" not in page.lower()
    data = json.loads(re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, re.S).group(1))
    assert data["tokens"]["source"] == [*"attention", "<eos>"] and len(data["kinds"]) == 3


def test_dk_lab_handler_returns_numbers_for_the_page_to_draw(handlers):
    data, numbers = handlers.dk_lab(1024, 32, False)
    assert json.loads(json.dumps(data, allow_nan=False)) == data  # plain JSON: the browser draws it
    assert {"histogram", "query", "sweep"} <= set(data) and (data["d_k"], data["n_keys"], data["scaled"]) == (1024, 32, False)
    assert numbers["headers"] == LAB_HEADERS
    variance = numbers["data"][0]
    assert variance[1] == pytest.approx(1024, rel=0.05) and variance[2] == pytest.approx(1, rel=0.05)
    scaled, _ = handlers.dk_lab(1024, 32, True)
    assert scaled["histogram"]["edges"][-1] == pytest.approx(data["histogram"]["edges"][-1] / 32)  # own range per mode
    assert scaled["query"]["limit"] == data["query"]["limit"]  # one logit scale for both


def test_the_study_ships_as_numbers_the_page_draws(handlers):
    from attention_viz.service.runs import Runs

    assert handlers.views.study_data() is None  # the test checkpoints hold no study
    shipped = Views(Runs())  # attention_viz/data/models/study: the compatibility study's members and summary
    data = shipped.study_data()
    summary = shipped.study_summary()
    assert data["format"] == "attention_viz.study/1" and data["d_k"] == [8, 32, 128, 512, 1024]
    series = {(s["arm"], s["init"]): s for s in data["accuracy"]}
    assert {("scaled_dot", "unit_qk"), ("dot", "unit_qk"), ("additive", "unit_qk")} <= set(series)
    assert list(series)[:3] == [("scaled_dot", "unit_qk"), ("dot", "unit_qk"), ("additive", "unit_qk")]
    for row in summary["summary"]:  # every point is the summary's, in %
        s = series[(row["compatibility"], row["init"])]
        i = s["d_k"].index(row["d_k"])
        assert s["mean"][i] == pytest.approx(100 * row["heldout_exact_match"]["mean"], abs=0.01)
        assert s["std"][i] == pytest.approx(100 * row["heldout_exact_match"]["std"], abs=0.01)
    spread = {(s["arm"], s["init"]): s for s in data["logit_std"]}
    for row in summary["initialisation"]:
        s = spread[(row["compatibility"], row["init"])]
        i = s["d_k"].index(row["d_k"])
        assert s["min"][i] <= row["logit_std"] + 1e-4 and row["logit_std"] - 1e-4 <= s["max"][i]
    plain = spread[("dot", "unit_qk")]  # unit-variance q, k, unscaled: the logits spread like √d_k
    for d_k, mean in zip(plain["d_k"], plain["mean"]):
        assert mean == pytest.approx(math.sqrt(d_k), rel=0.35)
    json.dumps(data, allow_nan=False)  # travels in the page's config as it is


def test_a_summary_that_is_not_the_study_is_refused():
    from attention_viz.service.study_view import study_data

    with pytest.raises(ValueError, match="not the study's summary"):
        study_data({"setup": {}, "summary": [{"init": "x"}], "initialisation": []})
    with pytest.raises(ValueError, match="not the study's summary"):
        study_data({"setup": {"task": "reverse", "n_layers": 1, "d_model": 8, "n_heads": 1, "steps": 1, "seeds": [0]},
                    "summary": [], "initialisation": []})


def test_refresh_updates_only_the_open_tab(handlers):
    args = dict(head_args(), comparison="scaling")
    assert handlers.refresh_tab("heatmaps", **args) == (gr.skip(),) * 4
    steps = handlers.refresh_tab("steps", **args)
    assert steps[0]["format"] == STEPS_FORMAT and steps[2:] == (gr.skip(), gr.skip())
    compare = handlers.refresh_tab("compare", **args)
    assert compare[:2] == (gr.skip(), gr.skip()) and compare[2]["format"] == COMPARE_FORMAT


@pytest.mark.parametrize("changes, message", [
    ({"text": "x" * 31}, "Text is 31 characters; the maximum is 24."),  # the test folder's cards: max_len 24
    ({"text": "naïve"}, "Unknown characters: 'ï'."),
    ({"text": ""}, "Text is empty"),
    ({"d_k": math.nan}, "d_k must be a finite number"),
    ({"d_k": 0}, "d_k must be between 1 and 1024, got 0"),
    ({"scale_mode": "custom", "custom_factor": math.inf}, "custom scale factor must be a finite number"),
    ({"pad_tokens": 2.5}, "pad tokens must be a whole number"),
    ({"causal_mask": "maybe"}, "causal mask must be true or false"),
    ({"model": "../../etc/passwd"}, "Unknown model"),
    ({"layer": 2}, "layer must be between 0 and 1, got 2"),
    ({"head": -1}, "head must be between 0 and 1, got -1"),
    ({"kind": "self"}, "attention kind must be one of"),
    ({"colour_scale": "rainbow"}, "colour scale must be one of"),
])
def test_bad_inputs_raise_gradio_errors_with_the_message(handlers, changes, message):
    with pytest.raises(gr.Error) as error:
        if set(changes) & {"kind", "layer", "head", "colour_scale"}:  # inputs of the one-head endpoints only
            handlers.export(**{**BASE, **changes})
        else:
            visualize(handlers, **changes)
    assert message in error.value.message


@pytest.mark.parametrize("args, message", [
    ((0, 32, True), "d_k must be between 1 and 4096"), ((math.nan, 32, True), "d_k must be a finite number"),
    ((16, 1, True), "number of keys must be between 2 and 1024"), ((16, 32, "perhaps"), "scaled must be true or false"),
])
def test_bad_lab_inputs(handlers, args, message):
    with pytest.raises(gr.Error) as error:
        handlers.dk_lab(*args)
    assert message in error.value.message


def test_strings_for_booleans_are_coerced(handlers):
    assert visualize(handlers, causal_mask="false")[0] == visualize(handlers, causal_mask=False)[0]


def test_the_export_button_shows_the_files_but_the_figures_first_then_all_nine(handlers, views, runs):
    """export_files (the button's first answer) writes export's files but the four SVG and PDF figures, the same
    bytes; the click's chain then asks /export, whose answer replaces the list with all nine."""
    args = dict(**head_args(kind="encoder.self_attn", layer=1, head=1), colour_scale="per_head")
    first = [Path(p) for p in handlers.export_files(**args)]
    every = [Path(p) for p in handlers.export(**args)]
    assert [p.name for p in first] == [p.name for p in every if p.suffix not in (".svg", ".pdf")]
    assert sorted(p.suffix for p in first) == [".csv", ".html", ".npz", ".png", ".png"]
    for a, b in zip(first, (p for p in every if p.suffix not in (".svg", ".pdf"))):
        assert a.parent != b.parent and views.export_root in a.parents
        if a.suffix != ".npz":  # np.savez_compressed stamps each member with the time it was written
            assert a.read_bytes() == b.read_bytes(), a.name
    config = page.build_app(Views(runs)).get_config_file()
    ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    click = next(d for d in config["dependencies"] if [ids.get(t) for t, _ in d["targets"]] == ["export_button"])
    chained = [d for d in config["dependencies"] if d.get("trigger_after") == click["id"] and d["backend_fn"]
               and d.get("queue") is not False]
    assert click["api_name"] in (None, "export_files") and click["api_visibility"] == "private"
    assert [d["api_name"] for d in chained] == ["export"] and chained[0]["trigger_only_on_success"]
    assert [ids[o] for o in click["outputs"]] == ["files"] == [ids[o] for o in chained[0]["outputs"]]


def test_build_app_names_its_endpoints_and_bounds_its_queue(runs):
    demo = page.build_app(Views(runs))
    endpoints = demo.get_api_info()["named_endpoints"]
    assert set(endpoints) == {"/visualize", "/steps", "/compare", "/export", "/importance", "/induction", "/dk_lab",
                              "/qk_lab", "/ping"}
    assert [p["parameter_name"] for p in endpoints["/visualize"]["parameters"]] == [*SETTINGS_KEYS, *OPTIONAL]
    assert [r["label"] for r in endpoints["/visualize"]["returns"]] == ["run", "Model output", "notes"]
    assert [p["parameter_name"] for p in endpoints["/export"]["parameters"]] == [*BASE, *OPTIONAL]
    compare = endpoints["/compare"]["parameters"]  # side b of another text / model, after them, optional too
    assert [(p["parameter_name"], p["parameter_has_default"]) for p in compare[-2:]] == [("other_text", True),
                                                                                       ("other_model", True)]
    for name in ("/visualize", "/steps", "/compare", "/export"):  # old clients may leave it out
        n = len(OPTIONAL)
        last = endpoints[name]["parameters"][-n - 2:-2] if name == "/compare" else endpoints[name]["parameters"][-n:]
        assert [(p["parameter_name"], p["parameter_has_default"]) for p in last] == [(n, True) for n in OPTIONAL]
        assert last[0]["parameter_default"] is None
    assert [p["parameter_name"] for p in endpoints["/dk_lab"]["parameters"]] == ["d_k", "n_keys", "scaled"]
    assert [r["label"] for r in endpoints["/steps"]["returns"]] == ["steps", "text"]
    assert [r["label"] for r in endpoints["/compare"]["returns"]] == ["comparison", "text"]
    assert demo._queue.max_size == page.QUEUE_SIZE
    assert demo._queue.default_concurrency_limit == page.CONCURRENCY
    assert not demo._queue.live_updates and demo._queue.update_intervals == page.STATUS_EVERY_S  # not n² messages
    # one listener per computation: the runs and the steps on RUNS, the lesson's Next and Back on LESSON, scoring every
    # head and its CSV on SCORES (a real model's are moved to that model's own line as they join:
    # tests/server/test_admission.py)
    lines = {name: {(fn.concurrency_id, fn.concurrency_limit) for fn in demo.fns.values() if fn.name == name}
             for name in ("visualize", "steps", "importance", "importance_export")}
    assert lines == {"visualize": {(admission.RUNS.id, admission.RUN_SLOTS)},
                     "steps": {(admission.RUNS.id, admission.RUN_SLOTS)},
                     "importance": {(admission.SCORES.id, 2)}, "importance_export": {(admission.SCORES.id, 2)}}, lines
    shipped = page.build_app(Views(Runs()))  # the shipped models: the lesson's, so the page has one
    lesson = [fn.concurrency_limit for fn in shipped.fns.values() if fn.concurrency_id == admission.LESSON.id]
    assert lesson == [admission.RUN_SLOTS] * 2  # Next and Back, on a line of their own
    assert inspect.unwrap(demo._queue.push).__self__.__class__ is admission.FairQueue  # every join passes admission


def test_importance_streams_and_its_refusals_are_gradio_errors(handlers, runs):
    """/importance is a generator (Gradio streams its partial payloads to the page; the API's predict returns the
    last): our model's scores are one payload; a refusal is a gr.Error with the message, as every handler's."""
    values = [BASE[k] for k in SETTINGS_KEYS]
    told = list(handlers.importance(*values))
    assert len(told) == 1 and told[0]["format"] == "attention_viz.importance/1" and "progress" not in told[0]
    with pytest.raises(gr.Error, match="no task to score its heads on"):
        list(handlers.importance(values[0], UNTRAINED, *values[2:]))
    with pytest.raises(gr.Error, match="ablation must be one of"):
        list(handlers.importance(*values, None, None, "half"))
    demo = page.build_app(Views(runs))
    assert {fn.types_generator for fn in demo.fns.values() if fn.name == "importance"} == {True}


def test_png_files_are_named_by_content_and_written_once(views):
    image = np.zeros((4, 6, 3), dtype=np.uint8)
    first = views.png_file(image)
    assert views.png_file(image.copy()) == first and Path(first).parent.parent == views.export_root
    mtime = Path(first).stat().st_mtime_ns
    assert views.png_file(image) == first and Path(first).stat().st_mtime_ns == mtime  # not rewritten
    other = image.copy()
    other[0, 0] = 1
    assert views.png_file(other) != first
    np.testing.assert_array_equal(pixels(first), image)


def test_cached_images_are_drawn_again_when_their_file_is_gone(views, runs, monkeypatch):
    """The caches keep file names, not pixels; a name whose file the store has deleted is never served."""
    settings = runs.settings("attention", "reverse/sqrt_dk", 16)
    grid = views.grid_file(settings, "decoder.cross_attn")
    assert views.grid_file(settings, "decoder.cross_attn") == grid  # cached: the same file
    monkeypatch.setattr(views.store, "kept", 2)
    for value in range(3):  # three newer images push the grid's file out of the store
        views.png_file(np.full((2, 2, 3), value, dtype=np.uint8))
    assert not Path(grid).exists()
    again = views.grid_file(settings, "decoder.cross_attn")
    assert Path(again).exists() and Path(again).name == Path(grid).name  # drawn again: the same content


MAPPED_BLOCK = """
import ctypes, sys
from attention_viz.server import runtime

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "tuned":
    runtime.tune_malloc()
for size in (8 << 20, 2 << 20):  # glibc's own threshold climbs to the size of each freed block
    block = libc.malloc(size)
    mapped = libc.mallinfo2().hblks
    libc.free(block)
    print(mapped - libc.mallinfo2().hblks)
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_tune_malloc_gives_large_blocks_their_own_mapping():
    # A fresh process: in this one, earlier tests left free heap space that large blocks may reuse.
    def unmapped_on_free(mode: str) -> list[str]:
        result = subprocess.run([sys.executable, "-c", MAPPED_BLOCK, mode], cwd=ROOT, capture_output=True, text=True,
                                timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.split()

    assert unmapped_on_free("default") == ["1", "0"]  # the second block stays in the heap when freed
    assert unmapped_on_free("tuned") == ["1", "1"]    # each freed block goes back to the system


def test_frozen_start_up_objects_let_figures_go_within_a_few_renders():
    import gc
    import weakref

    weights = np.full(20, 0.05)
    figures = []
    runtime.freeze_start_up_objects()
    try:
        for _ in range(30):  # never collected by hand: only the automatic collections run
            figure = render.softmax_bars(weights, np.log(weights))
            render.figure_to_array(figure)
            figures.append(weakref.ref(figure))
            del figure
        assert sum(ref() is not None for ref in figures) <= 6  # ~11 of 30 unfrozen, with far fewer objects than the app
    finally:
        gc.unfreeze()


def test_the_text_box_says_what_the_chosen_model_knows():
    from attention_viz.service.catalog import Catalog
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views

    views = Views(Runs(Catalog()))  # the shipped models
    reverse = views.model_controls("reverse/sqrt_dk", 16).text_info
    assert reverse == ("reverse was trained on a–z, 1 to 20 characters: capitals run lower-cased, and any other "
                       "character is named in the notes.")
    assert "dates was trained on a–z, space and 0–9, 1 to 32 characters (a date in words" in views.model_controls(
        "dates/sqrt_dk", 16).text_info
    assert "1 to 8 characters" in views.model_controls("study/dot", 128).text_info
    assert "any printable ASCII" in views.model_controls("untrained", 16).text_info
    handlers = Handlers(views)
    assert handlers.model_controls("sort/sqrt_dk", 16, 4)["text"]["info"].startswith("sort was trained on a–z")
    # examples belong to their model
    assert "twenty second of november 2026" in handlers.model_controls("dates/sqrt_dk", 16, 4)["examples"]["choices"]
    letters = handlers.model_controls("reverse/sqrt_dk", 16, 4)["examples"]["choices"]
    assert "attention" in letters and not any(" " in example for example in letters)




def test_the_second_text_follows_the_models_kind_unless_it_is_ones_own():
    """Compare's "another text": the minimal pair of a real model or of ours (service.pairs), a typed text kept."""
    assert Handlers.pair_default("hub:gpt2", "attentive")["value"] == "The key to the cabinets is"
    assert Handlers.pair_default("reverse/sqrt_dk", "The key to the cabinets is")["value"] == "attentive"
    assert Handlers.pair_default("hub:gpt2", "The key to the cabinets is") == gr.skip()
    assert Handlers.pair_default("reverse/sqrt_dk", "hallo") == gr.skip()
