"""Footnote 4 on a model's own q and k (attention_viz.qkstats) for our Transformer: equal to a float64 reference that
takes q and k from the projections' outputs in a pass over one text at a time and loops over tokens; padding changes
nothing; with unit-variance Gaussian q and k the logit variance is d_k."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

import attention_viz as av
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.qkstats import pair_statistics, qk_statistics
from tests.qk_reference import assert_matches, reference

TEXTS = ["attention", "ab", "qkv", "footnotefour"]  # lengths 9, 2, 3, 12: a batch with padding


def projections(model: av.Transformer, src: torch.Tensor, tgt: torch.Tensor, scale) -> dict:
    """Map key -> (q [Q, H, d], k [K, H, d]) of one text's pass, read from q_proj's and k_proj's outputs."""
    found, hooks = {}, []
    for key in model(src, tgt, scale=scale)[1]:
        stack, layer, name = key.split(".")
        attention = model.attention_module(f"{stack}.{name}", int(layer))
        H, d = attention.n_heads, attention.d_k
        for part in ("q", "k"):
            def keep(module, inputs, output, key=key, part=part, H=H, d=d):
                found.setdefault(key, {})[part] = output[0].reshape(-1, H, d).double().numpy()  # (L, H, d)
            hooks.append(getattr(attention, f"{part}_proj").register_forward_hook(keep))
    with torch.no_grad():
        model(src, tgt, scale=scale)
    for hook in hooks:
        hook.remove()
    return {key: (v["q"], v["k"]) for key, v in found.items()}


def our_reference(model, texts, tokenizer, scale, steps) -> dict:
    """Per key, the reference over the texts, each alone: the decoder reads <bos> + what the model writes but its
    last token."""
    per_key = {}
    for text in texts:
        src = torch.tensor([tokenizer.encode(text).ids])  # (1, S)
        written, _ = model.greedy_decode(src, steps, scale=scale)
        tgt = torch.cat([torch.tensor([[tokenizer.bos_id]]), written[:, :-1]], dim=1)  # (1, T)
        for key, (q, k) in projections(model, src, tgt, scale).items():
            per_key.setdefault(key, []).append((q, k, key.endswith("self_attn") and key.startswith("decoder")))
    return {key: reference(items) for key, items in per_key.items()}


@pytest.mark.parametrize("name", ["reverse", "reverse_dk4_unscaled"])
def test_a_shipped_models_statistics_equal_the_float64_reference(name):
    model, card = av.load_model(name)
    tokenizer = CharTokenizer(max_len=card["max_len"])
    stats = qk_statistics(model, TEXTS, tokenizer=tokenizer, scale=card["scale"])
    expected = our_reference(model, TEXTS, tokenizer, card["scale"], card["max_len"] + 1)
    assert list(stats) == list(model(torch.tensor([[4]]), torch.tensor([[1]]))[1])  # every key, the maps' order
    for key, s in stats.items():
        assert s.d_k == card["config"]["d_k"] and s.n_heads == card["config"]["n_heads"]
        assert_matches(s, expected[key])


def test_odd_sizes_and_an_untrained_model_that_never_ends():
    torch.manual_seed(3)
    config = av.TransformerConfig(vocab_size=99, n_encoder_layers=1, n_decoder_layers=2, d_model=20, n_heads=3, d_k=7,
                                  d_v=5, d_ff=24, dropout=0.0)
    model = av.Transformer(config).eval()
    tokenizer = CharTokenizer(max_len=12)
    stats = qk_statistics(model, TEXTS, tokenizer=tokenizer, scale=0.7, max_new_tokens=5)
    expected = our_reference(model, TEXTS, tokenizer, 0.7, 5)
    assert set(stats) == set(expected) and len(stats) == 5
    for key, s in stats.items():
        assert s.d_k == 7 and s.logit_var.shape == (3,)
        assert_matches(s, expected[key])
    decoder = stats["decoder.1.self_attn"]  # 5 steps each (no <eos> written), causal: 1 + 2 + ... + 5 pairs per text
    assert decoder.n_pairs == len(TEXTS) * 15 and decoder.n_queries == len(TEXTS) * 5


def test_padding_changes_nothing_and_a_repeated_text_changes_no_variance():
    model, card = av.load_model("copy")
    tokenizer = CharTokenizer(max_len=card["max_len"])
    alone = qk_statistics(model, ["abcdefghijklmnopq"], tokenizer=tokenizer)
    padded = qk_statistics(model, ["abcdefghijklmnopq", "a", "abcdefghijklmnopq"], tokenizer=tokenizer)  # "a": padded
    twice = qk_statistics(model, ["abcdefghijklmnopq"] * 2, tokenizer=tokenizer)
    for key in alone:
        for name in ("logit_var", "q_var", "k_var", "entropy_scaled", "entropy_unscaled"):
            np.testing.assert_allclose(getattr(twice[key], name), getattr(alone[key], name), rtol=1e-6)
        assert padded[key].n_pairs > 2 * alone[key].n_pairs  # "a" counts: its own pairs, no padded one
    one_letter = qk_statistics(model, ["a"], tokenizer=tokenizer)
    assert one_letter["encoder.0.self_attn"].n_pairs == 4  # "a<eos>": 2 queries x 2 keys, nothing else
    for key in alone:
        assert padded[key].n_pairs == 2 * alone[key].n_pairs + one_letter[key].n_pairs


def test_with_unit_variance_gaussian_q_and_k_the_logit_variance_is_d_k():
    generator = torch.Generator().manual_seed(0)
    lengths = [31, 7, 24, 40, 3, 16, 29, 12]
    B, H, L = len(lengths), 3, max(lengths)
    real = torch.arange(L)[None, :] < torch.tensor(lengths)[:, None]  # (B, L)
    for d_k, causal in ((4, False), (64, True), (256, False)):
        q = torch.randn(B, H, L, d_k, generator=generator)
        k = torch.randn(B, H, L, d_k, generator=generator)
        q[~real[:, None, :, None].expand_as(q)] = 50.0  # padding: far from the law, and must not count
        allowed = real[:, :, None] & real[:, None, :]
        if causal:
            allowed = allowed & torch.ones(L, L, dtype=torch.bool).tril()
        s = pair_statistics(q, k, allowed)
        # Var of the sample variance of x = q·k (E x⁴ = 3d² + 6d): (2d² + 6d) / n, with n the distinct queries
        # (pairs that share a query are not independent: the bound takes the fewer, independent ones)
        n = int(real.sum())
        bound = 5 * math.sqrt((2 * d_k**2 + 6 * d_k) / n)
        assert np.all(np.abs(s.logit_var - d_k) < bound), (d_k, s.logit_var, bound)
        assert np.all(np.abs(s.q_var - 1) < 0.15) and np.all(np.abs(s.k_var - 1) < 0.15)
        assert np.all(np.abs(s.ratio - 1) < bound / d_k + 0.3)
        # scaled, the softmax is far from saturated; unscaled at d_k = 256 it is close to one-hot
        if d_k == 256:
            assert np.all(s.entropy_unscaled < 0.5) and np.all(s.entropy_scaled > 1.5)


def test_the_scaled_entropy_is_the_maps_entropy_under_1_over_sqrt_dk():
    model, card = av.load_model("sort")
    tokenizer = CharTokenizer(max_len=card["max_len"])
    stats = qk_statistics(model, ["zyx", "hello"], tokenizer=tokenizer)
    entropies = {}
    for text in ["zyx", "hello"]:  # the maps' rows of each text alone (every row's keys are the pooled ones)
        src = torch.tensor([tokenizer.encode(text).ids])
        written, _ = model.greedy_decode(src, card["max_len"] + 1)
        tgt = torch.cat([torch.tensor([[tokenizer.bos_id]]), written[:, :-1]], dim=1)
        with torch.no_grad():
            _, maps = model(src, tgt)
        for key, weights in maps.items():
            p = weights[0].double()  # (H, Q, K)
            entropies.setdefault(key, []).append(-(torch.xlogy(p, p)).sum(-1))  # (H, Q)
    for key, rows in entropies.items():
        np.testing.assert_allclose(stats[key].entropy_scaled, torch.cat(rows, dim=1).mean(-1).numpy(), rtol=1e-5)


def test_bad_input_is_refused_with_a_message():
    model, _ = av.load_model("reverse")
    for texts in ([], "", ["ok", ""]):
        with pytest.raises(ValueError, match="at least one text"):
            qk_statistics(model, texts)
    with pytest.raises(ValueError, match="more than this tokenizer's maximum"):
        qk_statistics(model, "x" * 21)
    with pytest.raises(ValueError, match="not dict"):
        qk_statistics({}, "abc")
    additive = av.Transformer(replace(av.TransformerConfig.small(), compatibility="additive"))
    with pytest.raises(ValueError, match="no q·k"):
        qk_statistics(additive, "abc")
    assert av.qk_statistics is qk_statistics and "qk_statistics" in av.__all__
