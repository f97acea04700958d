"""The research functions on real models (small models of real families, random weights, their real tokenizers):
maps_of gives each model's own pieces; rollout and pattern scores read their maps as they read ours; a minimal pair
compared through GPT-2's pieces; a figure of a real model's head holds its pieces as text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("transformers")

import attention_viz as av  # noqa: E402


@pytest.fixture(scope="module")
def gpt2(tiny_folder):
    return av.load_pretrained(tiny_folder("gpt2"))


def test_a_decoder_only_models_rollout_and_scores_read_its_own_maps(gpt2):
    text = "The keys to the cabinet are"
    run = av.maps_of(gpt2, text, max_new_tokens=3)
    pieces = gpt2.pieces(gpt2.encode(text).ids.tolist())
    assert run.source_tokens == [] and run.target_tokens[:len(pieces)] == pieces  # the model's own pieces
    rolled = av.rollout(run)  # no encoder: the decoder's self-attention
    assert rolled.shape == (1, len(run.target_tokens), len(run.target_tokens))
    np.testing.assert_allclose(rolled.sum(-1), 1.0, atol=1e-9)
    assert np.allclose(np.triu(rolled[0], 1), 0.0)
    expected = np.eye(rolled.shape[-1])
    for layer in range(2):
        a = run[f"decoder.{layer}.self_attn"].astype(np.float64).mean(0)
        mixed = 0.5 * np.eye(len(a)) + 0.5 * a
        expected = (mixed / mixed.sum(-1, keepdims=True)) @ expected
    np.testing.assert_allclose(rolled[0], expected, atol=1e-6)
    flow = av.attention_flow(run)
    assert flow.shape == rolled.shape and (flow <= 1 + 1e-9).all()
    scores = av.pattern_scores(gpt2, n=10, seed=0)
    assert list(scores.scores) == ["decoder.self_attn"] and scores.repeated == 10
    tokens = scores.tokens["decoder.self_attn"][0]
    assert len(tokens) == 20 and tokens[:10] == tokens[10:]  # GPT-2 adds no start token
    assert scores.scores["decoder.self_attn"]["induction"].shape == (2, 4)


def test_a_minimal_pair_through_gpt2s_pieces_and_its_figure(gpt2, tmp_path):
    cmp = av.compare("The keys to the cabinet are", "The key to the cabinets is", "decoder.self_attn", None,
                     model=gpt2, max_new_tokens=1)
    a, b = cmp.tokens_a[0], cmp.tokens_b[0]
    assert a[:6] != b[:6]
    for i, j in cmp.queries.pairs:
        assert a[i] == b[j]
    assert cmp.queries.a_only and cmp.queries.b_only and len(cmp.queries.pairs) >= 3  # "The", "to", "the" at least
    assert cmp.difference.shape == (2, 4, len(a), len(a)) and np.isnan(cmp.difference).any()
    assert (cmp.masks[0] == np.tril(np.ones((len(a), len(a)), dtype=bool))).all()  # the causal mask, drawn grey
    svg = av.save_comparison(cmp, tmp_path / "pair.svg")
    texts = {"".join(t.itertext()) for t in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}text")}
    assert {a[0], b[0], "a − b (aligned)"} <= texts or {a[0], "a − b"} <= texts  # the pieces, as text
    run = av.maps_of(gpt2, "The keys to the cabinet are", max_new_tokens=1)
    pdf = av.save_figure(run, "decoder.1.self_attn", 2, tmp_path / "head.pdf")
    assert b"/FontFile2" in pdf.read_bytes() and gpt2.name.encode() in pdf.read_bytes()


@pytest.mark.parametrize("family", ["marian", "bert"])
def test_encoder_decoder_and_encoder_models_score_and_roll_out(tiny_folder, family):
    model = av.load_pretrained(tiny_folder(family))
    scores = av.pattern_scores(model, n=6, seed=1)
    kinds = {"marian": {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"},
             "bert": {"encoder.self_attn"}}[family]
    assert set(scores.scores) == kinds
    source = scores.tokens["encoder.self_attn"][0]
    core = [t for t in source if t not in model.tokenizer.all_special_tokens]
    assert len(core) == 12 and core[:6] == core[6:]
    run = av.maps_of(model, "a small test", max_new_tokens=2)
    np.testing.assert_allclose(av.rollout(run, "encoder").sum(-1), 1.0, atol=1e-9)
