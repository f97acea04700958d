"""The explorer's stack views and head scores: the packed run's rollout and attention flow equal the package's
functions on the run's own maps (each stack, the residual 0.5), flow only within its budget and a sentence otherwise,
the duplicate-token score equal to core.patterns' on the run's tokens, two runs compared as analysis.compare
compares them, induction scores as pattern_scores gives them; a real model through the same path."""

from __future__ import annotations

import numpy as np
import pytest

import attention_viz as av
from attention_viz.analysis.compare import compare
from attention_viz.core.patterns import duplicate_targets, score
from attention_viz.explorer import unpack
from attention_viz.explorer.pack import QUANT, pack
from attention_viz.explorer.steps import compare_arrays
from attention_viz.service.induction import Induction
from attention_viz.service.pairs import text_maps
from attention_viz.service.stacks import flow_refusal, stack_views
from tests.service.conftest import own

TOLERANCE = 0.5 / QUANT + 1e-9  # the uint16 quantisation of the packed maps


def settings(runs, text="hello", model="reverse/sqrt_dk", causal=True):
    return runs.settings(text, model, 16, "sqrt_dk", 1.0, causal, True, 0, 64, 4, None, "", None)


def decoded(entry: dict, name: str, n: int) -> np.ndarray:
    """A packed [T, T] map of a kind's stack, as the browser decodes it."""
    packed = {"format": "attention_viz.explorer/1", "n_heads": 1, "quant": QUANT, "tokens": {"source": ["x"] * n},
              "kinds": [{"kind": "encoder.self_attn", "queries": "source", "keys": "source",
                         "maps": [entry["stack"][name]], "mask": ["1" * n] * n}]}
    return unpack(packed)[0]["encoder.0.self_attn"][0]


def test_the_packed_run_carries_each_stacks_rollout_and_flow(views):
    s = settings(views.runs, "hey")  # 4 source tokens, at most 8 decoder inputs: both stacks within FLOW_WORK
    run, packed = views.runs.run(s), views.visualize(s).run
    kinds = {entry["kind"]: entry for entry in packed["kinds"]}
    assert "stack" not in kinds["decoder.cross_attn"]  # encoder-decoder attention is no stack of its own
    for stack in ("encoder", "decoder"):
        entry = kinds[f"{stack}.self_attn"]
        n = len(run.src_tokens if stack == "encoder" else run.tgt_tokens)
        np.testing.assert_allclose(decoded(entry, "rollout", n), av.rollout(run.maps, stack, 0.5)[0], atol=TOLERANCE)
        np.testing.assert_allclose(decoded(entry, "flow", n), av.attention_flow(run.maps, stack, 0.5, normalise=True)[0],
                                   atol=TOLERANCE)
        assert "residual 0.5" in entry["stack"]["note"] and entry["stack"]["flow_note"] == ""
    assert "masked self-attention only" in kinds["decoder.self_attn"]["stack"]["note"]
    assert "masked self-attention only" not in kinds["encoder.self_attn"]["stack"]["note"]
    rolled = decoded(kinds["decoder.self_attn"], "rollout", len(run.tgt_tokens))
    assert np.allclose(np.triu(rolled, 1), 0)  # the causal mask holds through the product


def test_flow_is_left_out_past_its_budget_with_the_reason(views):
    s = settings(views.runs, "abcdefghijklmnop")  # 17 source tokens over 2 layers: 2·17⁴ > FLOW_WORK
    run, packed = views.runs.run(s), views.visualize(s).run
    entry = next(e for e in packed["kinds"] if e["kind"] == "encoder.self_attn")
    assert entry["stack"]["flow"] is None and "2 layers × 17 tokens" in entry["stack"]["flow_note"]
    np.testing.assert_allclose(decoded(entry, "rollout", 17), av.rollout(run.maps, "encoder")[0], atol=TOLERANCE)
    assert "past 32 tokens" in flow_refusal(1, 33) and flow_refusal(2, 8) is None and flow_refusal(2, 10)


def test_stack_views_of_a_decoder_only_run_are_not_said_to_leave_cross_attention_out():
    rng = np.random.default_rng(0)
    maps = {f"decoder.{i}.self_attn": np.tril(rng.random((2, 5, 5))) for i in range(3)}
    for a in maps.values():
        a /= a.sum(-1, keepdims=True)
    views = stack_views(maps, encoder_decoder=False)
    assert list(views) == ["decoder.self_attn"] and "left out" not in views["decoder.self_attn"]["note"]
    np.testing.assert_allclose(views["decoder.self_attn"]["rollout"], av.rollout(maps)[0])
    payload = pack(maps, [], list("abcde"), stacks=views)
    assert payload["kinds"][0]["stack"]["flow"] is not None
    with pytest.raises(ValueError, match="rollout of decoder.self_attn has shape"):
        pack(maps, [], list("abcde"), stacks={"decoder.self_attn": {"rollout": np.eye(4)}})


def test_the_duplicate_token_score_is_core_patterns_on_the_runs_tokens(views):
    s = settings(views.runs, "hello")  # the two l's
    run, packed = views.runs.run(s), views.visualize(s).run
    entry = next(e for e in packed["kinds"] if e["kind"] == "encoder.self_attn")
    expected, _ = score(run.weights("encoder.self_attn"), duplicate_targets(run.src_tokens), run.mask("encoder.self_attn"))
    np.testing.assert_allclose(np.array(entry["scores"]["values"]["duplicate"], dtype=float), expected, atol=1e-4)
    assert entry["scores"]["labels"]["duplicate"] == "duplicate token"
    plain = views.visualize(settings(views.runs, "abc")).run  # no token twice: no duplicate score
    assert all("duplicate" not in e["scores"]["values"] for e in plain["kinds"])


def test_a_real_models_run_carries_its_stacks(real_views):
    """Marian (encoder-decoder, random weights): the same values as the package's functions on its maps."""
    model = "hub:tiny-marian"
    s = real_views.runs.settings("The cat sat on the mat.", model, 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, None,
                                 "", None)
    run, packed = real_views.runs.run(s), real_views.visualize(s).run
    kinds = {entry["kind"]: entry for entry in packed["kinds"]}
    for stack in ("encoder", "decoder"):
        n = len(run.src_tokens if stack == "encoder" else run.tgt_tokens)
        np.testing.assert_allclose(decoded(kinds[f"{stack}.self_attn"], "rollout", n),
                                   av.rollout(run.maps, stack)[0], atol=TOLERANCE)
    assert "masked self-attention only" in kinds["decoder.self_attn"]["stack"]["note"]


# ----------------------------------------------------------------------------- two runs side by side (service.pairs)

def test_another_text_is_the_packages_comparison_of_the_two_runs(views):
    a, b = settings(views.runs, "attention"), settings(views.runs, "attentive")
    payload, text = views.compare_pair(a, b, "text", "encoder.self_attn", 1, 0)
    expected = compare(text_maps(views.runs.run(a)), text_maps(views.runs.run(b)), "encoder.1.self_attn", 0)
    arrays = compare_arrays(payload)
    np.testing.assert_array_equal(np.isnan(arrays["difference"]), np.isnan(expected.difference[0, 0]))
    np.testing.assert_allclose(arrays["difference"], expected.difference[0, 0], atol=1e-6)  # NaN where not aligned
    np.testing.assert_allclose(arrays["b"], expected.b[0, 0], atol=1e-6)
    assert payload["pair"] and payload["queries_b"] == list("attentive") + ["<eos>"]
    assert "in a “o”, “n”; in b “v”, “e”" in payload["unaligned"] and payload["unaligned"] in text
    assert np.isnan(arrays["difference"][7]).all() and not np.isnan(arrays["difference"][6, :7]).any()


def test_another_model_on_the_same_text(views):
    a = settings(views.runs, "hello")
    b = settings(views.runs, "hello", model="copy/none")
    payload, text = views.compare_pair(a, b, "model", "decoder.cross_attn", 1, 1)
    run_a, run_b = views.runs.run(a), views.runs.run(b)
    arrays = compare_arrays(payload)
    np.testing.assert_allclose(arrays["a"], run_a.head("decoder.cross_attn", 1, 1), atol=1e-6)
    np.testing.assert_allclose(arrays["b"], run_b.head("decoder.cross_attn", 1, 1), atol=1e-6)
    assert payload["labels"] == [a.name, b.name] == ["reverse (trained with 1/√d_k), d_k = 16",  # the picker's names
                                                      "copy (trained without scaling), d_k = 16"]
    assert "Output a:" in text


def test_a_head_the_other_model_lacks_is_refused_with_a_sentence(views):
    a = settings(views.runs, "hello")
    b = views.runs.settings("hello", "untrained", 16, "sqrt_dk", 1.0, True, True, 0, 64, 1, None, "", None)
    with pytest.raises(ValueError, match=r"^Model b, untrained \(random weights\), has no encoder-decoder attention "
                                         r"layer 1 head 1: its encoder-decoder attention has layers 0–1 and head "
                                         r"0\. Open a head inside those in Heatmaps, or pick another model b\.$"):
        views.compare_pair(a, b, "model", "decoder.cross_attn", 1, 1)


# ----------------------------------------------------------------------------- induction heads on demand

def test_induction_scores_are_the_packages_on_the_model_and_kept_per_model(views):
    induction = Induction(views.runs)
    s = settings(views.runs, "hello")
    payload = induction.scores(s)
    expected = av.pattern_scores(own(views.runs, s)[0], n=16, seed=0)
    assert [k["kind"] for k in payload["kinds"]] == ["encoder.self_attn", "decoder.self_attn"]
    for entry in payload["kinds"]:
        np.testing.assert_allclose(np.array(entry["values"], dtype=float), expected.scores[entry["kind"]]["induction"],
                                   atol=1e-4)
    assert induction.scores(settings(views.runs, "other text")) is payload  # one pass per model, whatever the text
    assert "| L1 |" in payload["text"] and "Strongest:" in payload["text"]


def test_induction_scores_of_a_real_model(real_views):
    s = real_views.runs.settings("The cat sat.", "hub:tiny-marian", 64, "sqrt_dk", 1.0, True, True, 0, 64, 4, None,
                                 "", None)
    payload = Induction(real_views.runs).scores(s)
    expected = av.pattern_scores(real_views.runs.attention_model(s).model, n=16, seed=0)
    for entry in payload["kinds"]:
        np.testing.assert_allclose(np.array(entry["values"], dtype=float), expected.scores[entry["kind"]]["induction"],
                                   atol=1e-4)
