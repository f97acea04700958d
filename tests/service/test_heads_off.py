"""Heads switched off in the service: the setting checked once (text or {key: [heads]}), every view of a run
(decode, maps, steps, compare, decode steps) computed with those heads off, mean ablation's reference means, the
notes and the packed run saying so; real models through the same path."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from attention_viz.core.ablation import mean_outputs
from attention_viz.data.tasks import heldout_strings, make_batch, task_max_len
from attention_viz.explorer import unpack
from attention_viz.service.limits import MEAN_REFERENCE_STRINGS
from attention_viz.service.requests import heads_off_text, model_keys, parse_heads_off
from tests.service.conftest import own

KEYS = {"encoder.0.self_attn": 2, "encoder.1.self_attn": 2, "decoder.0.self_attn": 2, "decoder.0.cross_attn": 2,
        "decoder.1.self_attn": 2, "decoder.1.cross_attn": 2}


def settings(runs, off="", ablation=None, text="hello", model="reverse/sqrt_dk", **kw):
    return runs.settings(text, model, 16, kw.pop("scale", "sqrt_dk"), 1.0, kw.pop("causal", True), True, 0, 64, 4,
                         None, off, ablation)


@pytest.mark.parametrize("value, expected", [
    ("", ()), (None, ()), ("   ", ()),
    ("decoder.1.cross_attn: 1", (("decoder.1.cross_attn", (1,)),)),
    ("decoder.1.cross_attn: 1, 0; encoder.0.self_attn: all",
     (("encoder.0.self_attn", (0, 1)), ("decoder.1.cross_attn", (0, 1)))),
    ("decoder.0.cross_attn: 1\ndecoder.0.cross_attn: 0 1 1", (("decoder.0.cross_attn", (0, 1)),)),
    ({"decoder.0.self_attn": [1]}, (("decoder.0.self_attn", (1,)),)),
    ('{"encoder.1.self_attn": [0]}', (("encoder.1.self_attn", (0,)),)),
])
def test_heads_off_are_read_in_the_models_key_order(value, expected):
    assert parse_heads_off(value, KEYS) == expected
    assert parse_heads_off(heads_off_text(expected, KEYS), KEYS) == expected  # the text form reads back


@pytest.mark.parametrize("value, message", [
    ("decoder.9.cross_attn: 0", "which this model does not have"),
    ("encoder.0.self_attn: 2", "head 2 does not exist"),
    ("encoder.0.self_attn: -1", "'-1' after encoder.0.self_attn: is not a head number"),
    ("encoder.0.self_attn: 1.5", "is not a head number"),
    ("encoder.0.self_attn: ١", "is not a head number"),  # an Arabic-Indic digit
    ("encoder.0.self_attn", 'write each attention as "key: heads"'),
    ("encoder.0.self_attn:", "no heads after encoder.0.self_attn"),
    ("{", "not valid JSON"),
    ('{"encoder.0.self_attn": [true]}', "head True does not exist"),
    ('{"encoder.0.self_attn": "0"}', "must be a list of head indices"),
    ('["encoder.0.self_attn"]', 'write each attention as "key: heads"'),
    ({"encoder.0.self_attn": [0], "x": [0]}, "names 'x'"),
    (7, "heads off must be text"),
    ("; ".join(f"{key}: all" for key in KEYS), "every head of the model is switched off"),
    ("encoder.0.self_attn: 0;" * 400, "characters; at most"),
])
def test_bad_heads_off_are_refused_by_name(value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_heads_off(value, KEYS)


@pytest.mark.parametrize("value", [
    "encoder.0.self_attn: " + "9" * 3000,                      # a head number of 3,000 digits, as text
    '{"encoder.0.self_attn": [%s]}' % ("9" * 3000),            # ... and as JSON
    {"x" * 100_000: [0]},                                        # a key no model has, 100,000 characters
    {"encoder.0.self_attn": "y" * 100_000},                      # heads that are not a list
    {"encoder.0.self_attn": [10 ** 400]},                        # an integer no float holds
])
def test_a_refused_heads_off_echoes_at_most_40_characters_of_it(value):
    """Like every other refusal (docs/reliability.md), what heads off echoes of a bad value is cut at 40 characters."""
    with pytest.raises(ValueError) as refused:
        parse_heads_off(value, KEYS)
    message = str(refused.value)
    assert "…" in message and len(message) < 300, message[:300]


def test_every_endpoint_refuses_before_running(runs):
    misses = runs.run.cache_info().misses
    for bad, message in (("decoder.2.cross_attn: 0", "does not have"), ("encoder.0.self_attn: 4", "does not exist")):
        with pytest.raises(ValueError, match=message):
            settings(runs, bad)
    with pytest.raises(ValueError, match="ablation must be one of"):
        settings(runs, "encoder.0.self_attn: 0", "half")
    assert runs.run.cache_info().misses == misses


def test_the_keys_follow_the_model(runs):
    assert model_keys(runs.run(settings(runs)).config) == KEYS
    untrained = runs.settings("hello", "untrained", 16, "sqrt_dk", 1.0, True, True, 0, 32, 3, None,
                              "decoder.1.self_attn: 2")
    assert untrained.off == {"decoder.1.self_attn": [2]}


def test_nothing_off_is_the_run_of_before_and_ablation_is_ignored(runs):
    plain = settings(runs)
    assert settings(runs, "", "mean") == plain == plain.switched(heads_off=(), ablation="zero")
    assert plain.off is None and plain.n_off == 0


def test_a_run_with_heads_off_is_the_models_own_decode_with_them_off(runs):
    s = settings(runs, "decoder.1.cross_attn: 0; encoder.0.self_attn: 1")
    run = runs.run(s)
    model, _ = own(runs, s)
    src = torch.tensor([run.src_ids])
    tok = runs.tokenizer
    with torch.inference_mode():
        written, _ = model.greedy_decode(src, len(s.text) + 5, heads_off=s.off)
        _, direct = model(src, torch.tensor([run.tgt_ids]), heads_off=s.off)
    assert run.output == tok.decode(written[0].tolist())
    for key, value in direct.to_numpy().items():
        np.testing.assert_allclose(run.maps[key], value[0], atol=1e-6)
    plain = runs.run(settings(runs))
    assert any(not np.allclose(run.maps[k], plain.maps[k]) for k in run.maps if k.startswith("decoder.1"))
    # a switched-off head's own map is still computed: encoder layer 0's maps are the plain run's (nothing below it)
    np.testing.assert_array_equal(run.maps["encoder.0.self_attn"], plain.maps["encoder.0.self_attn"])


def test_steps_and_compare_see_the_heads_off(runs):
    s = settings(runs, "encoder.0.self_attn: 0 1")  # the whole first layer: layer 1's inputs change
    run = runs.run(s)
    steps = runs.steps(s, "encoder.self_attn", 1, 0)
    np.testing.assert_allclose(steps.arrays["weights"], run.head("encoder.self_attn", 1, 0), atol=1e-6)
    plain = runs.steps(settings(runs), "encoder.self_attn", 1, 0)
    assert not np.allclose(steps.arrays["weights"], plain.arrays["weights"])
    comparison = runs.compare(s, "scaling", "decoder.cross_attn", 1, 1)
    np.testing.assert_allclose(comparison.a, run.head("decoder.cross_attn", 1, 1), atol=1e-6)


def test_decode_steps_without_the_causal_mask_see_the_heads_off(runs):
    s = settings(runs, "decoder.0.self_attn: 1", causal=False)
    run = runs.run(s)
    steps = runs.step_maps(run)
    np.testing.assert_allclose(steps[-1]["decoder.1.cross_attn"], run.maps["decoder.1.cross_attn"], atol=1e-6)


def test_mean_ablation_puts_the_tasks_reference_mean_in_place(runs):
    s = settings(runs, "decoder.1.cross_attn: 1", "mean")
    means = runs.head_means(s)
    model, card = own(runs, s)
    max_len = min(task_max_len(card["task"]), runs.tokenizer.max_len)  # the task's strings that the app takes
    texts = heldout_strings(max_len, MEAN_REFERENCE_STRINGS, task=card["task"])
    batch = make_batch(texts, card["task"], runs.tokenizer)
    with torch.inference_mode():
        outputs = model.head_outputs(batch.src, batch.tgt_in)
    pad = runs.tokenizer.pad_id
    expected = mean_outputs(outputs, {k: (batch.src if k.startswith("encoder") else batch.tgt_in) != pad
                                      for k in outputs})
    torch.testing.assert_close(means["decoder.1.cross_attn"], expected["decoder.1.cross_attn"])
    assert runs.head_means(replace(s, text="other")) is means  # one reference per model and switches
    run = runs.run(s)
    with torch.inference_mode():
        _, direct = model(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]), heads_off=s.off,
                          ablation="mean", head_means=means)
    np.testing.assert_allclose(run.maps["decoder.1.cross_attn"], direct["decoder.1.cross_attn"][0].numpy(), atol=1e-6)
    zero = runs.run(settings(runs, "decoder.1.cross_attn: 1"))
    assert run.settings != zero.settings


def test_an_export_with_heads_off_says_so_in_its_png_and_csv(views):
    """The PNGs' text chunks and the CSV's # lines carry the settings the export was made with: heads off and the
    ablation included, so a file of a run with heads off never reads as the run with every head on."""
    from PIL import Image

    off = settings(views.runs, "decoder.1.cross_attn: 1; encoder.0.self_attn: all", "mean")  # 2 heads each
    paths = [Path(p) for p in views.export(off, "decoder.cross_attn", 1, 0)]
    expected = {"heads off": "encoder.0.self_attn: 0 1; decoder.1.cross_attn: 1", "ablation": "mean"}
    for path in paths:
        if path.suffix == ".png":
            assert {k: Image.open(path).text.get(k) for k in expected} == expected, path.name
        if path.suffix == ".csv":
            lines = path.read_text().splitlines()
            assert "# heads off: encoder.0.self_attn: 0 1; decoder.1.cross_attn: 1" in lines
            assert "# ablation: mean" in lines
    plain = [Path(p) for p in views.export(settings(views.runs), "decoder.cross_attn", 1, 0)]
    csv_lines = next(p for p in plain if p.suffix == ".csv").read_text().splitlines()
    assert not any(line.startswith(("# heads off", "# ablation")) for line in csv_lines)  # every head on: no line


def test_the_packed_run_and_its_notes_say_which_heads_are_off(views):
    s = settings(views.runs, "decoder.1.cross_attn: 0 1")
    view = views.visualize(s)
    assert view.run["heads_off"] == {"decoder.1.cross_attn": [0, 1]} and view.run["ablation"] == "zero"
    assert view.run["settings"]["heads_off"] == {"decoder.1.cross_attn": [0, 1]}
    assert "**2 of 12 heads switched off** (zero ablation" in view.info
    plain = views.runs.run(settings(views.runs))
    assert (f"with every head on it writes `{plain.output}`" in view.info
            or "the output is the same as with every head on" in view.info)
    maps, _ = unpack(view.run)
    np.testing.assert_allclose(maps["decoder.1.cross_attn"], views.runs.run(s).maps["decoder.1.cross_attn"],
                               atol=1e-4)
    assert "heads_off" not in views.visualize(settings(views.runs)).run


# ----------------------------------------------------------------------------- a real model, the same path

def test_a_real_model_runs_with_heads_off_and_mean_ablation(real_views):
    runs = real_views.runs
    plain = settings(runs, model="hub:tiny-marian", text="the cat sat on the mat")
    off = settings(runs, "decoder.1.cross_attn: all; encoder.0.self_attn: 2", model="hub:tiny-marian",
                   text="the cat sat on the mat")
    model = runs.catalog.real.get("hub:tiny-marian")
    run = runs.run(off)
    with torch.inference_mode():
        direct = model.traced(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]),
                                    variation=off.variation)
    for key, value in direct.maps.to_numpy().items():
        np.testing.assert_allclose(run.maps[key], value[0], atol=1e-5)
    assert runs.run(plain).maps.keys() == run.maps.keys()
    mean = off.switched(ablation="mean")
    means = runs.head_means(mean)
    assert set(means) == set(model.map_keys) and means["encoder.0.self_attn"].shape == (4, 8)
    view = real_views.visualize(mean)
    assert view.run["ablation"] == "mean" and "5 of 24 heads switched off** (mean ablation" in view.info
    steps = runs.steps(off, "decoder.cross_attn", 1, 3)
    np.testing.assert_allclose(steps.arrays["weights"], run.head("decoder.cross_attn", 1, 3), atol=1e-5)
    with pytest.raises(ValueError, match="does not have"):
        settings(runs, "decoder.2.cross_attn: 0", model="hub:tiny-marian")


def test_a_real_model_is_scored_on_the_text(real_views):
    from attention_viz.importance import real_head_importance

    s = settings(real_views.runs, model="hub:tiny-marian", text="the cat sat on the mat")
    data = real_views.heads.importance(s, "zero")
    model = real_views.runs.catalog.real.get("hub:tiny-marian")
    from attention_viz.service.limits import real_new_tokens

    budget = real_new_tokens(len(model.encode("the cat sat on the mat").ids), True)  # what the app lets it write
    imp = real_head_importance(model, ["the cat sat on the mat"], max_new_tokens=budget)
    assert data["metric"] == "log-probability per token" and data["unit"] == "nats" and data["total"] == 24
    assert "loss_rise" not in data and data["texts"] == 1
    for key in imp.keys:
        np.testing.assert_allclose(data["drop"][key], imp.drop[key], atol=1e-4)
    assert "of its own output" in data["text"]


# ----------------------------------------------------------------------------- what flows (value norms)

def test_the_packed_run_carries_the_value_norms_of_its_own_pass(views):
    """‖v_j W_O^h‖ of the run's own pass (its heads off included), per kind and layer: maps x norms is what
    core's value_flows gives on the run's tokens."""
    s = settings(views.runs, "encoder.0.self_attn: 1")
    run, packed = views.runs.run(s), views.visualize(s).run
    model, _ = own(views.runs, s)
    src, tgt = torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids])
    with torch.inference_mode():
        flows = model.value_flows(src, tgt, heads_off={"encoder.0.self_attn": [1]})
        plain = model.value_norms(src, tgt)
    for entry in packed["kinds"]:
        stack, name = entry["kind"].split(".")
        assert len(entry["norms"]) == entry["layers"]
        for layer, norms in enumerate(entry["norms"]):
            key = f"{stack}.{layer}.{name}"
            norms = np.array(norms)  # (H, K)
            assert norms.shape == run.maps[key].shape[::2]  # (H, K) of an (H, Q, K) map
            np.testing.assert_allclose(run.maps[key] * norms[:, None, :], flows[key][0].numpy(), rtol=1e-3, atol=1e-6)
    off = next(e for e in packed["kinds"] if e["kind"] == "encoder.self_attn")["norms"][1]
    assert not np.allclose(off, plain["encoder.1.self_attn"][0].numpy(), rtol=1e-3)  # the head off below changed it


def test_a_real_models_packed_run_carries_its_value_norms(real_views):
    runs = real_views.runs
    s = settings(runs, "encoder.0.self_attn: 2", model="hub:tiny-marian", text="the cat sat on the mat")
    run, packed = runs.run(s), real_views.visualize(s).run
    model = runs.catalog.real.get("hub:tiny-marian")
    with torch.inference_mode():
        flows = model.value_flows(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]),
                                  heads_off={"encoder.0.self_attn": [2]})
    for entry in packed["kinds"]:
        stack, name = entry["kind"].split(".")
        for layer, norms in enumerate(entry["norms"]):
            key = f"{stack}.{layer}.{name}"
            np.testing.assert_allclose(run.maps[key] * np.array(norms)[:, None, :], flows[key][0].numpy(),
                                       rtol=1e-3, atol=1e-6)
