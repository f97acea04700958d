"""Footnote 4 on a real model's own q and k (attention_viz.qkstats) for a small model of every family: equal to the
float64 reference over one unpadded text at a time (q, k as the model's attention receives them), whatever the
padding of the batch; the scaled entropy is the recorded maps' own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import attention_viz as av  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from devtools.hub_models import FAMILIES  # noqa: E402
from tests.qk_reference import assert_matches, reference  # noqa: E402

TEXTS = ["the cat sat on the mat", "a dog", "attention is all you need to know today"]  # lengths differ: padding


def real_reference(model, texts, scale) -> tuple[dict, dict]:
    """Per key: the reference over the texts, each alone, and the mean entropy of its recorded maps' rows."""
    per_key, entropies = {}, {}
    for text in texts:
        src = model.encode(text).ids[None]  # (1, S)
        decoder = None
        if model.layout == "encoder-decoder":  # the start token + what the model writes, but its last token
            written, _ = model.greedy_decode(src, 40, scale=scale)
            decoder = torch.cat([torch.tensor([[model.start_id]]), written[:, :-1]], dim=1)
        for key in model.map_keys:
            with torch.no_grad():
                recorded = model.traced(src, decoder, variation=Variation(scale), keep=("q", "k"), at=(key,))
            q = recorded.kept[key]["q"][0].transpose(0, 1).double().numpy()  # (Q, H, d)
            k = recorded.kept[key]["k"][0].transpose(0, 1).double().numpy()  # (K, H, d)
            per_key.setdefault(key, []).append((q, k, key.startswith("decoder") and key.endswith("self_attn")))
            p = recorded.maps[key][0].double()  # (H, Q, K)
            entropies.setdefault(key, []).append(-torch.xlogy(p, p).sum(-1))  # (H, Q)
    return ({key: reference(items) for key, items in per_key.items()},
            {key: torch.cat(rows, dim=1).mean(-1).numpy() for key, rows in entropies.items()})


@pytest.mark.parametrize("family", FAMILIES)
def test_every_familys_statistics_equal_the_reference_and_its_maps(tiny_folder, family):
    model = av.load_pretrained(tiny_folder(family))
    stats = av.qk_statistics(model, TEXTS)
    expected, map_entropy = real_reference(model, TEXTS, "sqrt_dk")
    assert list(stats) == model.map_keys
    for key, s in stats.items():
        assert s.d_k == model.d_k and s.n_heads == model.n_heads
        assert_matches(s, expected[key])
        np.testing.assert_allclose(s.entropy_scaled, map_entropy[key], rtol=1e-4)  # q, k before the model's factor


def test_a_real_decoder_without_its_scaling_reads_its_own_unscaled_output(tiny_folder):
    model = av.load_pretrained(tiny_folder("marian"))
    stats = av.qk_statistics(model, TEXTS[:2], scale="none", max_new_tokens=40, keep_logits=True)
    expected, map_entropy = real_reference(model, TEXTS[:2], "none")
    for key, s in stats.items():
        assert_matches(s, expected[key])
        np.testing.assert_allclose(s.entropy_unscaled, map_entropy[key], rtol=1e-4)
        assert s.logits.shape == (model.n_heads, s.n_pairs)
        np.testing.assert_allclose(s.logits.astype(np.float64).var(-1), s.logit_var, rtol=1e-4)


def test_a_tokenizer_for_a_real_model_is_refused(tiny_folder):
    model = av.load_pretrained(tiny_folder("bert"))
    with pytest.raises(ValueError, match="its own tokenizer"):
        av.qk_statistics(model, "hello", tokenizer=av.CharTokenizer())


def test_the_labs_own_view_offers_the_real_models_set_up_and_only_their_kinds(tiny_folder):
    from attention_viz.service.catalog import Catalog
    from attention_viz.service.qk_view import REAL_TEXTS, OwnQK

    own = OwnQK(Catalog(hub_models=[str(tiny_folder("bert")), str(tiny_folder("gpt2"))]))
    real = [value for _, value in own.choices if value.startswith("hub:")]
    assert len(real) == 2 and "reverse" in [value for _, value in own.choices]
    bert, gpt2 = real
    assert own.shape(bert)["kinds"] == ["encoder.self_attn"] and own.shape(gpt2)["kinds"] == ["decoder.self_attn"]
    data = own.view(gpt2, "decoder.self_attn", 1, 3, False)
    s = av.qk_statistics(own.catalog.real.get(gpt2), list(REAL_TEXTS))["decoder.1.self_attn"]
    assert data["numbers"]["data"][2][1] == pytest.approx(s.logit_var[3], rel=1e-3)
    assert data["histogram"]["samples"] == s.n_pairs and data["d_k"] == s.d_k
    with pytest.raises(ValueError, match="attention"):
        own.view(bert, "decoder.cross_attn", 0, 0, True)
