"""§3.2.1's compatibility functions as a model option: additive attention against a float64 reference,
masks, the scale switch ignored by additive attention, footnote 4's initialisation, and config checks."""

import math

import pytest
import torch

from attention_viz.core.attention import Additive, MultiHeadAttention, attention, causal_mask
from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer


def reference_additive(q, k, v, w, mask=None):
    """Loops written from the formula, in float64: score[b,h,i,j] = Σ_d w[h,d]·tanh(q[b,h,i,d] + k[b,h,j,d])."""
    q, k, v, w = q.double(), k.double(), v.double(), w.double()
    B, H, Q, _ = q.shape
    K = k.size(2)
    weights = torch.zeros(B, H, Q, K, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for i in range(Q):
                allowed = [j for j in range(K) if mask is None or bool(mask.expand(B, H, Q, K)[b, h, i, j])]
                if not allowed:
                    continue  # a fully masked row stays all 0
                scores = torch.stack([(w[h] * torch.tanh(q[b, h, i] + k[b, h, j])).sum() for j in allowed])
                e = torch.exp(scores - scores.max())
                weights[b, h, i, allowed] = e / e.sum()
    return weights @ v, weights  # (B, H, Q, d_v), (B, H, Q, K)


def tensors(B=2, H=3, Q=4, K=5, d_k=6, d_v=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, Q, d_k, generator=g), torch.randn(B, H, K, d_k, generator=g),
            torch.randn(B, H, K, d_v, generator=g), torch.randn(H, d_k, generator=g))


@pytest.mark.parametrize("masking", ["none", "random", "causal", "fully_masked_row"])
def test_multihead_additive_matches_a_hand_written_float64_reference(masking):
    q, k, v, w = tensors(Q=5, K=5)
    g = torch.Generator().manual_seed(3)
    mask = {
        "none": None,
        "random": torch.rand(2, 3, 5, 5, generator=g) > 0.5,
        "causal": causal_mask(5),
        "fully_masked_row": torch.ones(2, 1, 5, 5, dtype=torch.bool).index_fill(2, torch.tensor([1, 3]), False),
    }[masking]
    out, weights = attention(q, k, v, mask, compatibility=Additive(w))
    ref_out, ref_weights = reference_additive(q, k, v, w, mask)
    torch.testing.assert_close(weights.double(), ref_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=1e-5)
    assert not torch.isnan(weights).any()
    if mask is not None:
        hidden = ~mask.expand_as(weights)
        assert (weights[hidden] == 0).all()  # exactly 0, not merely small
    rows = weights.sum(-1)
    live = torch.ones_like(rows, dtype=torch.bool) if mask is None else mask.expand_as(weights).any(-1)
    torch.testing.assert_close(rows[live], torch.ones_like(rows[live]))
    assert (rows[~live] == 0).all()


def test_the_module_runs_additive_attention_per_head_and_ignores_scale():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=3, d_k=8, d_v=4, compatibility="additive").eval()
    x, y = torch.randn(2, 4, 12), torch.randn(2, 6, 12)
    out_a, w_a = mha(x, y, y, None, "sqrt_dk")
    out_b, w_b = mha(x, y, y, None, "none")
    out_c, w_c = mha(x, y, y, None, 7.5)
    assert w_a.shape == (2, 3, 4, 6)
    assert torch.equal(w_a, w_b) and torch.equal(w_a, w_c) and torch.equal(out_a, out_c)
    q, k, v = mha.project(x, y, y)
    _, ref_weights = reference_additive(q, k, v, mha.score.detach())
    torch.testing.assert_close(w_a.double(), ref_weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(mha.scores(q, k), torch.einsum("bhqkd,hd->bhqk", torch.tanh(q[:, :, :, None] + k[:, :, None]), mha.score))


def test_dot_product_scores_follow_the_scale_switch():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=2, d_k=16, d_v=4)
    q, k, _ = mha.project(*(torch.randn(1, 3, 12),) * 3)
    torch.testing.assert_close(mha.scores(q, k, "sqrt_dk") * 4, mha.scores(q, k, "none"))
    assert not hasattr(mha, "score")  # no extra parameter for dot products


def test_an_additive_model_records_every_map_and_decodes():
    cfg = TransformerConfig.small(vocab_size=20, n_encoder_layers=1, n_decoder_layers=1, d_model=16, d_k=8, d_v=4,
                                  d_ff=32, compatibility="additive")
    torch.manual_seed(0)
    model = Transformer(cfg).eval()
    src, tgt = torch.randint(3, 20, (2, 5)), torch.randint(3, 20, (2, 4))
    src[1, 3:] = cfg.pad_id
    logits, maps = model(src, tgt)
    assert logits.shape == (2, 4, 20)
    cross = maps["decoder.0.cross_attn"]
    assert cross.shape == (2, cfg.n_heads, 4, 5) and (cross[1, :, :, 3:] == 0).all()
    torch.testing.assert_close(cross.sum(-1), torch.ones(2, cfg.n_heads, 4))
    tokens, _ = model.greedy_decode(src, 6)
    assert tokens.shape[0] == 2


@pytest.mark.parametrize("d_k", [8, 256])
def test_unit_qk_init_gives_q_and_k_components_of_variance_near_one(d_k):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=128, n_heads=2, d_k=d_k, d_v=8)
    mha.init_unit_qk()
    x = torch.randn(64, 16, 128)  # unit-variance inputs, as after a LayerNorm
    q, k, _ = mha.project(x, x, x)
    assert 0.8 < q.var().item() < 1.2 and 0.8 < k.var().item() < 1.2
    dots = mha.scores(q, k, "none")
    assert 0.7 * d_k < dots.var().item() < 1.3 * d_k  # footnote 4: q·k has variance d_k


def test_transformer_init_option_changes_only_q_and_k():
    base = dict(vocab_size=20, n_encoder_layers=1, n_decoder_layers=1, d_model=64, d_k=32, d_v=8, d_ff=32)
    torch.manual_seed(0)
    xavier = Transformer(TransformerConfig.small(**base))
    torch.manual_seed(0)
    unit = Transformer(TransformerConfig.small(**base, init="unit_qk"))
    for (name, a), b in zip(xavier.named_parameters(), unit.parameters()):
        changed = not torch.equal(a, b)
        assert changed == (name.endswith(("q_proj.weight", "k_proj.weight")) or
                           (name.endswith(("q_proj.bias", "k_proj.bias")) and a.abs().sum() > 0)), name
    w = unit.encoder.layers[0].self_attn.q_proj.weight
    assert abs(w.std().item() - 1 / math.sqrt(64)) < 0.01


@pytest.mark.parametrize("field,value", [("compatibility", "multiplicative"), ("init", "kaiming")])
def test_unknown_compatibility_or_init_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        TransformerConfig.small(**{field: value})
