"""Real models in the service (service.real_models, runs, views, lesson): small real-format models saved offline
(random weights, real tokenizers), run through the same views as ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

pytest.importorskip("transformers")

from attention_viz.core.maps import KINDS  # noqa: E402
from attention_viz.service.catalog import Catalog  # noqa: E402
from attention_viz.service.lesson import Lesson  # noqa: E402
from attention_viz.service.real_models import RealModels, display_name  # noqa: E402
from attention_viz.service.runs import Runs  # noqa: E402
from attention_viz.service.views import Views  # noqa: E402
from devtools.hub_models import save_tiny  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("real-models")
    return {family: save_tiny(family, root / f"tiny-{family}") for family in ("marian", "gpt2", "bert", "llama")}


@pytest.fixture(scope="module")
def views(folders, one_thread):
    os.environ["HF_HUB_OFFLINE"] = "1"
    catalog = Catalog(hub_models=[str(folders[f]) for f in ("marian", "gpt2", "bert", "llama")]
                      + ["Helsinki-NLP/opus-mt-xx-yy"])
    return Views(Runs(catalog))


def settings(views, model, text="the cat sat on the mat", scale="sqrt_dk", causal=True, padding=True, pads=0,
             heads_off=None):
    return views.runs.settings(text, model, 64, scale, 1.0, causal, padding, pads, 64, 4, heads_off=heads_off)


def test_the_picker_lists_the_set_up_models_by_name_never_by_server_path(views, folders):
    values = [value for _, value in views.runs.catalog.model_choices]
    assert ["hub:tiny-marian", "hub:tiny-gpt2", "hub:tiny-bert", "hub:tiny-llama",
            "hub:Helsinki-NLP/opus-mt-xx-yy"] == [v for v in values if v.startswith("hub:")]
    assert not any(str(folders["marian"].parent) in value for value in values)
    assert values[-1] == "untrained"
    assert display_name("Helsinki-NLP/opus-mt-en-de") == "Helsinki-NLP/opus-mt-en-de"


def test_a_model_not_set_up_is_refused_without_loading_anything(views, monkeypatch):
    loads = []
    monkeypatch.setattr(RealModels, "_load", lambda self, name, progress=None: loads.append(name))
    for model in ("hub:gpt2", "hub:/etc/passwd", "hub:../tiny-marian", "hub:"):
        with pytest.raises(ValueError, match="Unknown model"):
            settings(views, model)
    assert loads == []


def test_each_model_is_loaded_once_whatever_the_number_of_visitors(folders, monkeypatch):
    real = RealModels([str(folders["gpt2"])])
    calls, original = [], RealModels._load
    monkeypatch.setattr(RealModels, "_load",
                        lambda self, name, progress=None: calls.append(name) or original(self, name, progress))
    got = []
    threads = [threading.Thread(target=lambda: got.append(real.get("hub:tiny-gpt2"))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and len({id(model) for model in got}) == 1


def test_a_model_that_cannot_be_had_gets_a_clear_message_and_the_rest_works(views):
    for _ in range(2):  # the refusal is remembered: no second attempt
        with pytest.raises(ValueError, match="is not in this machine.s Hugging Face cache and the Hub is switched off"):
            settings(views, "hub:Helsinki-NLP/opus-mt-xx-yy")
    assert views.visualize(settings(views, "hub:tiny-marian")).output is not None
    assert views.visualize(views.runs.settings("hello", "reverse/sqrt_dk", 16)).run["output"]


def test_settings_take_any_unicode_up_to_the_token_cap_and_the_models_own_d_k(views):
    s = settings(views, "hub:tiny-marian", text="Grüße aus 東京 — naïve café")
    assert s.model == "hub:tiny-marian" and s.checkpoint == "tiny-marian" and s.d_k == views.runs.catalog.real.shape("hub:tiny-marian").d_k
    for text, message in ((" ", "empty"), ("a\nb", "control"), ("x" * 501, "maximum is 500"),
                          (" ".join(["cat"] * 70), "tokens for this model's tokenizer")):
        with pytest.raises(ValueError, match=message):
            settings(views, "hub:tiny-marian", text=text)


@pytest.mark.parametrize("family, kinds", [
    ("marian", list(KINDS)), ("gpt2", ["decoder.self_attn"]), ("bert", ["encoder.self_attn"]),
    ("llama", ["decoder.self_attn"]),
])
def test_a_run_has_only_the_kinds_its_model_has_with_its_masks_and_pieces(views, family, kinds):
    packed = views.visualize(settings(views, f"hub:tiny-{family}", pads=2)).run
    assert [k["kind"] for k in packed["kinds"]] == kinds
    run = views.runs.run(settings(views, f"hub:tiny-{family}", pads=2))
    for kind in kinds:
        weights, mask = run.weights(kind), run.mask(kind)  # (L, H, Q, K), (Q, K)
        assert weights.shape[-2:] == mask.shape
        assert (weights[..., ~mask] == 0).all()
        live = mask.any(-1)
        np.testing.assert_allclose(weights.sum(-1)[..., live], 1.0, atol=1e-5)
        if kind == "decoder.self_attn":
            assert not np.triu(mask, 1).any()  # the causal mask, as the model applied it
    if family in ("marian", "bert"):  # the pads appended to the source are hidden from every query
        assert run.src_tokens[-2:] == (run.src_tokens[-1],) * 2
        assert not run.mask("encoder.self_attn")[:, -2:].any()
    for missing in (k for k in KINDS if k not in kinds):
        with pytest.raises(ValueError, match=f"This model has no {KINDS[missing]}"):
            run.head_request(missing, 0, 0)


def test_a_real_runs_steps_are_its_own_maps_recomputed_from_the_q_k_v_it_received(views):
    for model, kind in (("hub:tiny-marian", "decoder.cross_attn"), ("hub:tiny-llama", "decoder.self_attn"),
                        ("hub:tiny-bert", "encoder.self_attn")):
        for scale in ("sqrt_dk", "none"):
            s = settings(views, model, scale=scale)
            run = views.runs.run(s)
            layer, head = run.n_layers(kind) - 1, 1
            steps = views.runs.steps(s, kind, layer, head)
            np.testing.assert_allclose(steps.arrays["weights"], run.head(kind, layer, head), atol=1e-6)
            expected = 1.0 if scale == "none" else run.config.d_k ** -0.5
            assert steps.factor == pytest.approx(expected)
            np.testing.assert_allclose(steps.arrays["scaled"], steps.arrays["scores"] * expected, rtol=1e-5, atol=1e-6)


def test_t5s_steps_add_its_position_bias_and_its_controls_say_it_has_no_1_over_sqrt_dk(tmp_path, one_thread):
    from devtools import tiny_archs

    os.environ["HF_HUB_OFFLINE"] = "1"
    views = Views(Runs(Catalog(hub_models=[str(tiny_archs.save("t5", tmp_path / "tiny-t5"))])))
    s = settings(views, "hub:tiny-t5")
    run = views.runs.run(s)
    for kind in ("encoder.self_attn", "decoder.self_attn"):  # the attentions T5 adds its bias in
        steps = views.runs.steps(s, kind, 1, 1)
        np.testing.assert_allclose(steps.arrays["weights"], run.head(kind, 1, 1), atol=1e-6)
        assert steps.factor == 1.0 and not np.array_equal(steps.arrays["masked"], steps.arrays["scaled"])
    controls = views.runs.catalog.controls("hub:tiny-t5", 16, 0, 0, None)
    note = controls.scale_info  # under the scaling control, where the switch it is about is
    assert "T5 multiplies QKᵀ by 1, not by 1/√d_k" in note and "W_Q" in note and controls.bias_applies
    own = views.own_qk.view("hub:tiny-t5", "decoder.cross_attn", 1, 2, False)  # the lab's "this model's own q·k"
    assert own["d_k"] == 16 and own["numbers"]["data"][-1][1] > 0  # pairs pooled


def test_t5s_position_bias_travels_to_the_explorer_as_maps_of_its_own_and_its_switch_takes_it_out(tmp_path, one_thread):
    """The payload's B per layer and head equals the model's own (model.traced(...).biases, proven equal to
    compute_bias in tests/hub/test_position_bias.py); position_bias=False reruns without it, says so and compares."""
    import torch

    from attention_viz.core.variation import Variation
    from attention_viz.explorer import unpack_biases
    from devtools import tiny_archs

    os.environ["HF_HUB_OFFLINE"] = "1"
    views = Views(Runs(Catalog(hub_models=[str(tiny_archs.save("t5", tmp_path / "tiny-t5"))])))
    s = settings(views, "hub:tiny-t5")
    run, payload = views.runs.run(s), views.visualize(s).run
    model = views.runs.catalog.real.get("hub:tiny-t5")
    with torch.inference_mode():
        traced = model.traced(torch.tensor([run.src_ids]), torch.tensor([run.tgt_ids]))
    biases = unpack_biases(payload)
    assert sorted(biases) == sorted(traced.biases) and not any("cross" in key for key in biases)
    for key, bias in traced.biases.items():
        np.testing.assert_array_equal(biases[key], bias[0].numpy())  # float32, exact
    kinds = {k["kind"]: k for k in payload["kinds"]}
    assert "bias" not in kinds["decoder.cross_attn"]  # T5's cross-attention adds none
    encoder = kinds["encoder.self_attn"]["bias"]
    assert encoder["maps"][1:] == [0] * (len(encoder["maps"]) - 1)  # one B a stack, shared by its layers: sent once
    assert encoder["range"] == pytest.approx(float(np.abs(biases["encoder.0.self_attn"]).max()))
    assert "position_bias" not in payload and "position_bias" not in payload["settings"]

    off = views.runs.settings(s.text, s.model, 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, position_bias=False)
    assert not off.position_bias and off.as_record()["position_bias"] is False
    view = views.visualize(off)
    assert view.run["position_bias"] is False and view.run["settings"]["position_bias"] is False
    assert not unpack_biases(view.run) and "Position bias taken out" in view.info
    assert "Scores QKᵀ ×1, the model's own factor (it has no 1/√d_k)" in view.info  # not ×1/√d_k
    run_off = views.runs.run(off)
    with torch.inference_mode():
        bare = model.traced(torch.tensor([run_off.src_ids]), torch.tensor([run_off.tgt_ids]),
                            variation=Variation(position_bias=False))
    for key in ("encoder.0.self_attn", "decoder.1.self_attn", "decoder.1.cross_attn"):
        np.testing.assert_allclose(run_off.maps[key], bare.maps[key][0].numpy(), atol=1e-6)
    assert not np.allclose(run_off.maps["encoder.0.self_attn"], run.maps["encoder.0.self_attn"])
    compared = views.runs.compare(s, "position_bias", "encoder.self_attn", 1, 0)
    assert compared.labels == ("position bias on", "position bias off") and np.abs(compared.difference).max() > 0


def test_debertas_position_terms_travel_as_its_position_bias_and_its_steps_end_on_its_map(tmp_path, one_thread):
    """DeBERTa v3 (routed, hub.routes): the explorer's B is c2p + p2c as the model kept them; its steps add them."""
    import torch

    from attention_viz.explorer import unpack_biases
    from devtools import tiny_archs

    os.environ["HF_HUB_OFFLINE"] = "1"
    views = Views(Runs(Catalog(hub_models=[str(tiny_archs.save("deberta-v2", tmp_path / "tiny-deberta"))])))
    s = settings(views, "hub:tiny-deberta", text="the cat sat on the mat")
    run, payload = views.runs.run(s), views.visualize(s).run
    model = views.runs.catalog.real.get("hub:tiny-deberta")
    with torch.inference_mode():
        traced = model.traced(torch.tensor([run.src_ids]))
    biases = unpack_biases(payload)
    assert sorted(biases) == sorted(traced.biases) == model.map_keys
    for key, bias in biases.items():
        terms = traced.terms[key]
        np.testing.assert_allclose(bias, (terms["c2p"] + terms["p2c"])[0].numpy(), atol=1e-6)
    steps = views.runs.steps(s, "encoder.self_attn", 1, 2)
    np.testing.assert_allclose(steps.arrays["weights"], run.head("encoder.self_attn", 1, 2), atol=1e-6)
    assert views.runs.catalog.controls("hub:tiny-deberta", 16, 0, 0, None).bias_applies


def test_a_model_without_a_position_bias_runs_as_it_is_whatever_the_switch_says(views):
    s = settings(views, "hub:tiny-marian")
    off = views.runs.settings(s.text, s.model, 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, position_bias=False)
    assert off == s  # nothing to take out: the same run, cached once
    with pytest.raises(ValueError, match="adds no position bias"):
        views.runs.compare(s, "position_bias", "encoder.self_attn", 0, 0)
    with pytest.raises(ValueError, match="position bias must be true or false"):
        views.runs.settings(s.text, s.model, 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, position_bias="maybe")
    assert not views.runs.catalog.controls("hub:tiny-marian", 64, 0, 0, None).bias_applies


@pytest.mark.parametrize("model_type", ["gemma2", "gpt_oss"])
def test_steps_of_a_soft_capped_or_sinking_model_end_on_its_own_map(model_type, tmp_path, one_thread):
    """Gemma 2 caps its logits, gpt-oss's rows give a share to a learned sink: the steps apply both, as its map."""
    from devtools import tiny_archs

    os.environ["HF_HUB_OFFLINE"] = "1"
    views = Views(Runs(Catalog(hub_models=[str(tiny_archs.save(model_type, tmp_path / f"tiny-{model_type}"))])))
    s = settings(views, f"hub:tiny-{model_type}")
    run = views.runs.run(s)
    for head in (0, 1):
        steps = views.runs.steps(s, "decoder.self_attn", 1, head)
        np.testing.assert_allclose(steps.arrays["weights"], run.head("decoder.self_attn", 1, head), atol=1e-6)
    if model_type == "gemma2":
        assert "capped" in steps.arrays and np.abs(steps.arrays["capped"]).max() < 50  # within the cap
    else:
        assert steps.arrays["weights"].sum(-1).max() < 1  # the sink's share taken from every row


def test_comparisons_and_the_switches_on_a_real_model(views):
    s = settings(views, "hub:tiny-marian", pads=2)
    scaling = views.runs.compare(s, "scaling", "encoder.self_attn", 0, 0)
    assert np.abs(scaling.difference).max() > 0
    padding = views.runs.compare(s, "padding_mask", "encoder.self_attn", 0, 0)
    assert not padding.masks[0][:, -2:].any() and padding.masks[1].all()
    lifted = views.runs.run(settings(views, "hub:tiny-gpt2", causal=False))
    assert lifted.mask("decoder.self_attn").all()
    assert np.triu(lifted.weights("decoder.self_attn"), 1).max() > 0
    steps = views.runs.step_maps(lifted)
    assert len(steps) == len(lifted.tgt_ids)
    assert steps[-1]["decoder.0.self_attn"].shape[-2:] == (len(lifted.tgt_ids),) * 2
    np.testing.assert_allclose(steps[-1]["decoder.0.self_attn"], lifted.maps["decoder.0.self_attn"], atol=1e-6)


def test_the_explorer_payload_scores_and_notes_of_a_real_run(views):
    view = views.visualize(settings(views, "hub:tiny-marian"))
    kinds = {k["kind"]: k for k in view.run["kinds"]}
    assert "</s> sink" in kinds["encoder.self_attn"]["scores"]["labels"].values()
    assert "real Marian model" in view.info and "subword pieces" in view.info
    unscaled = views.visualize(settings(views, "hub:tiny-marian", scale="none"))
    assert "not as it was trained" in unscaled.info
    decode = view.run["decode"]
    assert len(decode["written"]) == len(view.run["tokens"]["target"])
    gpt2 = views.visualize(settings(views, "hub:tiny-gpt2")).run
    assert len(gpt2["decode"]["written"]) == len(gpt2["tokens"]["target"])
    assert views.visualize(settings(views, "hub:tiny-bert")).run.get("decode") is None


def test_controls_and_exports_of_a_real_model(views):
    controls = views.model_controls("hub:tiny-llama", 512)
    shape = views.runs.catalog.real.shape("hub:tiny-llama")
    assert controls.d_k == shape.d_k and controls.trained_d_ks == (shape.d_k,)
    assert "its weights fix it" in controls.d_k_note and "tokens" in controls.text_label
    assert controls.d_k_label == "d_k: this model's own"
    assert views.model_controls("reverse/sqrt_dk", 16).d_k_label == "d_k: the sizes this model was trained at"
    files = views.export(settings(views, "hub:tiny-marian", text="Grüße"), "decoder.cross_attn", 1, 0)
    assert [f.suffix for f in files] == [".png", ".png", ".npz", ".csv", ".svg", ".pdf", ".svg", ".pdf", ".html"]
    assert all(f.name.isascii() and "tiny-marian" in f.name for f in files)


def test_the_lessons_real_step_is_written_from_the_runs_numbers(views):
    lesson = Lesson(views)
    assert len(lesson) == 13  # nine of ours; the 1/√d_k taken out, footnote 4, which heads matter, a long text
    step = lesson.step(9)
    assert step.controls["model"] == "hub:tiny-marian" and step.controls["scale"] == "none"
    assert step.settings.scale == "none" and step.settings.causal_mask and step.settings.heads_off == ()
    scaled = views.visualize(settings(views, "hub:tiny-marian", text="Attention is all you need.")).run
    unscaled = views.visualize(settings(views, "hub:tiny-marian", text="Attention is all you need.",
                                        scale="none")).run
    cross = [next(k for k in run["kinds"] if k["kind"] == "decoder.cross_attn") for run in (scaled, unscaled)]
    layer, head = step.explorer["layer"], step.explorer["head"]
    b = cross[1]["stats"]["max_weight"][layer][head]  # the opened head's own statistic in the run on screen
    assert f"now puts {b:.3f} of a row's weight" in step.text and f"1/√{step.controls['d_k']}" in step.text
    assert "`tiny-marian`" in step.text and "*Take the 1/√d_k away at the largest d_k* again" in step.text
    qk = lesson.step(10)
    assert qk.tab == "lab" and qk.own_qk["model"] == "hub:tiny-marian" and "`tiny-marian`" in qk.text


def test_the_lessons_real_steps_use_the_first_model_that_can_be_had_and_say_so_once_when_none(folders, one_thread):
    os.environ["HF_HUB_OFFLINE"] = "1"
    unreachable = "Helsinki-NLP/opus-mt-xx-yy"
    views = Views(Runs(Catalog(hub_models=[unreachable, str(folders["marian"])])))
    lesson = Lesson(views)
    step = lesson.step(9)  # the first set up cannot be had: the second is used, and named
    assert step.settings.model == "hub:tiny-marian" and "`tiny-marian`" in step.text and "cannot" not in step.text
    long = lesson.step(12)  # a translation model reads the page too: with its encoder, said so
    assert long.tab == "long" and long.long["model"] == "hub:tiny-marian" and long.controls == {}
    assert "`tiny-marian` has read a page in one pass with its encoder" in long.text
    assert all(key.startswith("encoder.") for key in long.long["payload"]["keys"])
    none = Views(Runs(Catalog(hub_models=[unreachable, "Helsinki-NLP/opus-mt-zz-yy"])))
    lesson = Lesson(none)
    step = lesson.step(9)
    assert step.title == "Real models: none can be had now" and "none can be had now" in step.text
    assert step.text.startswith("**Step 10 of 13:")
    for index in (10, 11, 12):  # the count a reader saw on step 1 holds: each real step says so in its place
        later = lesson.step(index)
        assert later.title == "Real models: none can be had now" and f"**Step {index + 1} of 13:" in later.text
    assert len(lesson) == 13
    with pytest.raises(ValueError, match="lesson step"):
        lesson.step(13)
    translation = Lesson(Views(Runs(Catalog(hub_models=[str(folders["marian"])]))))  # it reads a page with its encoder
    assert len(translation) == 13 and translation.titles[-1] == "Where attention goes in a long text"


def test_the_lessons_real_heads_step_switches_off_the_head_that_matters_most(views):
    lesson = Lesson(views)
    step = lesson.step(11)
    assert step.text.startswith("**Step 12 of 13: Which heads matter in a real model.**")
    c = step.controls
    assert c["model"] == "hub:tiny-marian" and c["scale"] == "sqrt_dk"
    scores = views.heads.importance(settings(views, "hub:tiny-marian", text=c["text"]), "zero")
    drop, key, head = max((v, k, h) for k, values in scores["drop"].items() for h, v in enumerate(values))
    assert c["heads_off"] == f"{key}: {head}" and f"`{key}` head {head} matters most: {drop:.3f} nats" in step.text
    stack, layer, kind = key.split(".")
    assert step.explorer == {"kind": f"{stack}.{kind}", "layer": int(layer), "head": head}
    without = views.visualize(settings(views, "hub:tiny-marian", text=c["text"], heads_off=c["heads_off"])).run
    assert f"`{without['output']}`" in step.text and without["heads_off"] == {key: [head]}


def test_the_lessons_long_step_quotes_the_kept_runs_summaries_and_reads_once(views):
    """The long text's step: the first model of one stack (GPT-2) reads the shipped page through LongRuns, once for
    every Next while its run is kept, again when it was dropped; every number the step quotes is the run's summary
    written as long.js writes it (the sink's top as its colour bar's, the chosen head's line), and the view it sets
    opens that head."""
    from attention_viz.explorer.long_pack import pack_overview
    from attention_viz.service.lesson import long_page
    from attention_viz.service.texts import fixed, long_shown

    lesson = Lesson(views)
    step = lesson.step(12)
    assert step.tab == "long" and step.text.startswith("**Step 13 of 13: Where attention goes in a long text.**")
    assert step.long["model"] == "hub:tiny-gpt2" and step.long["text"] == long_page() and "`tiny-gpt2`" in step.text
    payload = step.long["payload"]
    run = views.long._kept[payload["run"]].run  # the run the tab's view asks its overviews and regions of
    first = np.array([run.summaries[key]["first_token"] for key in run.keys])  # (L, H)
    previous = np.array([run.summaries[key]["previous_token"] for key in run.keys])
    sink, chosen = np.unravel_index(first.argmax(), first.shape), np.unravel_index(previous.argmax(), previous.shape)
    key, head = run.keys[chosen[0]], int(chosen[1])
    assert (f"layer {sink[0]}, head {sink[1]}, puts {long_shown(round(float(first[sink]), 6))} of a row's weight "
            "there") in step.text
    assert (f"`{key}` head {head}, open below the grids, puts {fixed(round(float(previous[chosen]), 6), 3)}"
            in step.text)
    assert f"sink {fixed(round(float(first[chosen]), 6), 3)}, previous token" in step.text
    quoted = [float(x) for x in re.findall(r"(?<![\w.])\d+\.\d+", step.text.split(".**", 1)[1])]
    assert quoted and all(min(abs(q - v) for v in (first[sink], previous[chosen], first[chosen])) <= 5e-4
                          for q in quoted)  # nothing else quoted
    assert payload["overview"] == pack_overview(run, key, head, 512) and payload["read"] == 256 < payload["of"]
    reads = len(views.long)
    again = lesson.step(12)  # Next pressed again, by anyone: the kept run, not a second pass
    assert again.long["payload"]["run"] == payload["run"] and len(views.long) == reads
    budget = views.long.budget
    try:  # the lesson's run dropped to make room for another visitor's: the step reads the page again
        views.long.budget = views.long.kept_bytes
        views.long.read("hub:tiny-gpt2", "the cat sat on the mat")
        assert payload["run"] not in views.long._kept
        later = lesson.step(12)
        assert later.long["payload"]["run"] != payload["run"] and later.text == step.text
    finally:
        views.long.budget = budget


def test_the_lessons_next_sets_the_long_tabs_model_text_and_view_in_its_answer(views):
    """The page's Next (the lesson's event, private: no API route to call it by) answers the Long text tab's model,
    text and view by name, the view being the kept run's payload with the chosen head's overview, and the page
    reveals it (tests/e2e/test_real_models_browser.py presses Next in the page and reads the tab it draws)."""
    import json

    from attention_viz.webui.handlers import Handlers

    handlers = Handlers(views)
    out = handlers.lesson(12)
    step = handlers.lesson_steps.step(12)
    assert out["tabs"]["selected"] == "long" and json.loads(out["lesson_target"]) == {"reveal": "long"}
    assert (out["long_model"], out["long_text"]) == (step.long["model"], step.long["text"])
    assert out["long_view"] == step.long["payload"] and out["long_view"]["run"] in views.long._kept
    assert out["lesson_forward"]["value"] == "End of the lesson" and out["lesson_forward"]["interactive"] is False


def test_without_the_hub_extra_the_app_and_package_work_and_say_how_to_add_it(tmp_path):
    script = (
        "import sys; sys.modules['transformers'] = None\n"
        "import attention_viz as av\n"
        "from attention_viz.service.catalog import Catalog\n"
        "c = Catalog(hub_models=['Helsinki-NLP/opus-mt-en-de'])\n"
        "assert c.real.missing_extra and not c.real.keys, c.real.names\n"
        "assert not any(v.startswith('hub:') for _, v in c.model_choices)\n"
        "try:\n    av.load_pretrained('x')\nexcept ImportError as e:\n    print('refused:', e)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'pip install "attention_viz[hub]"' in result.stdout


def test_a_download_shows_its_progress_and_fetches_no_pickle(folders, monkeypatch):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    asked = []

    def snapshot_download(name, allow_patterns, tqdm_class):
        asked.append((name, allow_patterns))
        bar = tqdm_class(total=4)
        for _ in range(4):
            bar.update(1)
        bar.close()
        return str(folders["gpt2"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    real, seen = RealModels(["someone/tiny-gpt2"]), []
    model = real.get("hub:someone/tiny-gpt2", progress=lambda fraction, text: seen.append((fraction, text)))
    assert model.family.name == "GPT-2"
    assert [fraction for fraction, _ in seen] == [0.25, 0.5, 0.75, 1.0]
    assert seen[0][1] == "Downloading someone/tiny-gpt2: 1 of 4 files"
    (name, patterns), = asked
    assert name == "someone/tiny-gpt2" and "*.safetensors" in patterns
    assert not any(p.endswith((".bin", ".pt", ".pth", ".ckpt", ".pkl", ".py")) for p in patterns)


def test_a_download_that_fails_is_refused_with_a_message(monkeypatch):
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def no_network(*args, **kwargs):
        raise OSError("no route to host")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    real = RealModels(["someone/unreachable"])
    with pytest.raises(ValueError, match="is not in this machine.s Hugging Face cache and could not be downloaded"):
        real.get("hub:someone/unreachable", progress=lambda fraction, text: None)


def test_random_unicode_texts_either_run_cleanly_or_are_refused_with_a_message(views):
    import random

    rng = random.Random(7)
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
              (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4E80), (0x1F600, 0x1F64F), (0x300, 0x36F), (0x200B, 0x200F),
              (0x0, 0x1F), (0xD800, 0xD80F), (0xE000, 0xE00F)]
    ran = refused = 0
    for _ in range(60):
        text = "".join(chr(rng.randint(*rng.choice(blocks))) for _ in range(rng.randint(1, 30)))
        for model in ("hub:tiny-marian", "hub:tiny-gpt2"):
            try:
                s = settings(views, model, text=text)
            except ValueError as error:
                assert str(error) and "Traceback" not in str(error)
                refused += 1
                continue
            run = views.runs.run(s)
            for kind in run.kinds:
                weights, mask = run.weights(kind), run.mask(kind)
                live = mask.any(-1)
                np.testing.assert_allclose(weights.sum(-1)[..., live], 1.0, atol=1e-5)
                assert (weights[..., ~mask] == 0).all()
            ran += 1
    assert ran > 10 and refused > 10  # both paths were taken


def test_an_encoder_has_no_causal_mask_control_and_says_what_it_can_do(views):
    from attention_viz.service.limits import REAL_EXAMPLES
    from attention_viz.webui.handlers import Handlers

    bert, gpt2 = views.model_controls("hub:tiny-bert", 64), views.model_controls("hub:tiny-gpt2", 64)
    assert bert.causal_applies is False and gpt2.causal_applies is True
    assert bert.examples == gpt2.examples == REAL_EXAMPLES  # a real model's examples, not our a-z words
    assert "writes text" in gpt2.text_info
    assert "Our Eq. 1 inside it: proven on load: maps within " in gpt2.text_info
    out = Handlers(views).controls_of(bert)
    assert out["causal_mask"]["visible"] is False
    assert "causal_mask" not in [key for _, key in out["comparison"]["choices"]]


def test_notes_and_exports_say_the_causal_mask_only_of_a_model_that_has_one(views):
    """An encoder has no causal mask: its notes and its CSV say so, never "causal mask on"; a decoder's and an
    encoder-decoder's say on or off as set."""
    for model, kind, causal, said in (("hub:tiny-bert", "encoder.self_attn", True, "none (an encoder)"),
                                      ("hub:tiny-gpt2", "decoder.self_attn", True, "on"),
                                      ("hub:tiny-marian", "decoder.cross_attn", False, "off")):
        s = settings(views, model, causal=causal)
        info = views.visualize(s).info
        if said.startswith("none"):
            assert "causal mask on" not in info and "no causal mask (an encoder" in info, info
        else:
            assert f"causal mask {said}" in info, info
        files = views.export(s, kind, 0, 0)
        csv = next(f for f in files if f.suffix == ".csv").read_text(encoding="utf-8")
        assert f"# causal mask: {said}\n" in csv, csv[:400]


def test_scoring_is_refused_at_once_for_a_model_that_writes_no_text_and_the_page_says_why(views):
    """BERT writes no text: its heads cannot be scored, refused before any pass with the reason and what to pick,
    and its controls turn both scoring buttons off with that reason under them; a model that writes text keeps
    them on."""
    from attention_viz.webui.handlers import Handlers

    bert = views.model_controls("hub:tiny-bert", 64)
    assert bert.abilities.scored_on is None and "writes no text" in bert.abilities.unscored
    assert bert.abilities.unscored.startswith("tiny-bert is an encoder alone")  # the picker's name, not BERT
    assert "Pick a model that writes text" in bert.abilities.unscored
    with pytest.raises(ValueError, match="tiny-bert is an encoder alone: it writes no text"):
        next(views.heads.stream(settings(views, "hub:tiny-bert")))
    out = Handlers(views).controls_of(bert)
    assert out["score_heads"]["interactive"] is False and out["score_export"]["interactive"] is False
    assert out["score_note"]["visible"] is True and "writes no text" in out["score_note"]["value"]
    gpt2 = Handlers(views).controls_of(views.model_controls("hub:tiny-gpt2", 64))
    assert gpt2["score_heads"]["interactive"] is True and gpt2["score_note"]["visible"] is False


def test_another_model_without_the_head_is_refused_naming_what_to_pick(views):
    """Compare's another model: model b without the kind names its kinds and models that have it; a layer past
    model b's names its range."""
    from attention_viz.service.pairs import compare_runs, missing_head

    a = views.runs.settings("the cat sat", "hub:tiny-marian", 64, "sqrt_dk")
    gpt2 = views.runs.settings("the cat sat", "hub:tiny-gpt2", 64, "sqrt_dk")
    with pytest.raises(ValueError) as refused:
        compare_runs(views.runs, a, gpt2, "model", "decoder.cross_attn", 0, 0)
    said = str(refused.value)
    assert said.startswith("Model b, tiny-gpt2 (real model), has no encoder-decoder attention: it has ")
    # real models first for a real model a, model a itself left out; BERT (no decoder) never named
    assert "Pick as model b one with encoder-decoder attention (reverse" not in said and "tiny-bert" not in said
    assert "or open in Heatmaps a head of a kind both models have" in said
    ours_first = missing_head(views.runs, views.runs.settings(
        "attention", "reverse/sqrt_dk", 16, "sqrt_dk"), gpt2, views.runs.run(gpt2), "decoder.cross_attn", 0, 0)
    assert "Pick as model b one with encoder-decoder attention (copy (trained with 1/√d_k)" in ours_first
    wide = views.runs.settings("attention", "untrained", 8, "sqrt_dk", 1.0, True, True, 0, 64, 8)  # 8 heads
    reverse = views.runs.settings("attention", "reverse/sqrt_dk", 16, "sqrt_dk")  # 4 heads
    with pytest.raises(ValueError, match=r"^Model b, reverse \(trained with 1/√d_k\), has no encoder self-attention "
                                         r"layer 1 head 6: its encoder self-attention has layers 0–1 and heads 0–3\."):
        compare_runs(views.runs, wide, reverse, "model", "encoder.self_attn", 1, 6)


def test_a_real_runs_value_norms_come_from_its_own_pass_and_equal_a_pass_of_their_own(views):
    """The decode's last pass keeps its values, so what flows needs no pass of its own: the norms it kept equal
    run_value_norms' separate pass on the run's ids (an encoder-decoder, a decoder-only model)."""
    from attention_viz.hub.text_run import run_value_norms

    cases = [("hub:tiny-marian", "the cat sat", {}), ("hub:tiny-gpt2", "hello world", {}),
             ("hub:tiny-bert", "the cat sat", {}),  # an encoder: its one pass
             ("hub:tiny-marian", "the cat sat", dict(scale_mode="none", causal_mask=False)),
             ("hub:tiny-marian", "the cat sat", dict(heads_off="encoder.0.self_attn: 1", ablation="mean"))]
    for model, text, switches in cases:
        settings = views.runs.settings(text, model, 64, **switches)
        run = views.runs.run(settings)
        assert run.norms is not None and set(run.norms) == set(run.maps), (model, switches)
        real, attention_model = views.runs.catalog.real.get(model), views.runs.attention_model(settings)
        separate = run_value_norms(real, run.src_ids, run.tgt_ids, **attention_model._switches(settings))
        for key, value in separate.items():
            np.testing.assert_allclose(run.norms[key], value, rtol=1e-5, atol=1e-6, err_msg=f"{model} {switches}")
        assert views.runs.value_norms(run) is run.norms  # no second pass


@pytest.mark.parametrize("model_type, kind", [("gpt_neo", "decoder.self_attn"), ("fsmt", "decoder.cross_attn"),
                                              ("mpnet", "encoder.self_attn"), ("xlm", "encoder.self_attn"),
                                              ("deberta", "encoder.self_attn"), ("squeezebert", "encoder.self_attn"),
                                              ("xlnet", "encoder.self_attn"), ("t5gemma", "decoder.cross_attn")])
def test_a_family_from_before_the_interface_runs_in_the_app_as_any_real_model(model_type, kind, tmp_path, one_thread):
    """Families routed through the interface (hub.routes) in the app: a run, its steps ending on its own map (GPT-Neo's
    local window and its factor 1, MPNet's position bias, FSMT's causal decoder in the pass given its encoder's
    output, DeBERTa v1's position terms, SqueezeBERT's convolutions, XLNet's relative terms and its W_O parameter;
    and T5Gemma, whose decoder starts with its decoder config's bos), the scaling note where it has none to take
    out."""
    from devtools import tiny_archs

    os.environ["HF_HUB_OFFLINE"] = "1"
    key = f"hub:tiny-{model_type}"
    views = Views(Runs(Catalog(hub_models=[str(tiny_archs.save(model_type, tmp_path / f"tiny-{model_type}"))])))
    s = settings(views, key)
    run = views.runs.run(s)
    layers = sorted(k for k in run.maps if k.endswith(kind.split(".")[1]) and k.startswith(kind.split(".")[0]))
    assert len(layers) == 2  # the tiny models' two layers of this kind
    for layer in range(2):
        steps = views.runs.steps(s, kind, layer, 1)
        np.testing.assert_allclose(steps.arrays["weights"], run.head(kind, layer, 1), atol=1e-6)
    note = views.runs.catalog.controls(key, 16, 0, 0, None).scale_info  # under the scaling control
    assert ("multiplies QKᵀ by 1" in note) == (model_type == "gpt_neo")
