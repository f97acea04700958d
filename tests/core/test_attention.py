"""Attention math proven against PyTorch's own kernels and the paper's invariants."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.core.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    attention_steps,
    causal_mask,
    padding_mask,
    scale_factor,
    scaled_dot_product_attention,
)
from attention_viz.fast import attention as fast
from attention_viz.fast import hugepages
from attention_viz.fast.attention import MANY_SCORES
from attention_viz.core.interop import multihead_attention_from_torch


def qkv(B=2, H=3, Q=5, K=7, d_k=16, d_v=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, Q, d_k, generator=g), torch.randn(B, H, K, d_k, generator=g),
            torch.randn(B, H, K, d_v, generator=g))


def random_mask(shape, seed=1):
    """A random boolean mask with at least one allowed key per row."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) > 0.4
    mask[..., 0] = True
    return mask


def explicit_softmax_weights(q, k, factor, mask=None):
    scores = (q.double() @ k.double().transpose(-2, -1)) * factor
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    exp = torch.exp(scores - scores.amax(-1, keepdim=True))
    return (exp / exp.sum(-1, keepdim=True)).float()


@pytest.mark.parametrize("scale,torch_scale", [("sqrt_dk", None), ("none", 1.0), (0.37, 0.37), (3.0, 3.0)])
@pytest.mark.parametrize("masking", ["none", "random", "causal"])
def test_output_matches_torch_sdpa(scale, torch_scale, masking):
    q, k, v = qkv(Q=6, K=6)
    mask = {"none": None, "random": random_mask((2, 3, 6, 6)), "causal": causal_mask(6)}[masking]
    out, weights = scaled_dot_product_attention(q, k, v, mask, scale)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=torch_scale)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    factor = 1 / math.sqrt(16) if torch_scale is None else torch_scale
    torch.testing.assert_close(weights, explicit_softmax_weights(q, k, factor, mask), atol=1e-6, rtol=1e-5)


def test_rows_sum_to_one_and_masked_weights_are_exactly_zero():
    q, k, v = qkv()
    mask = random_mask((2, 3, 5, 7))
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights[~mask] == 0.0)
    assert torch.all(weights[mask] > 0.0)


def test_causal_mask_zeroes_the_upper_triangle():
    q, k, v = qkv(Q=6, K=6)
    _, weights = scaled_dot_product_attention(q, k, v, causal_mask(6))
    upper = torch.ones(6, 6, dtype=torch.bool).triu(1)
    assert torch.all(weights[..., upper] == 0.0)
    assert torch.all(weights[..., ~upper] > 0.0)


def test_padding_mask_hides_pad_keys():
    ids = torch.tensor([[5, 6, 7, 0, 0], [5, 6, 7, 8, 9]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 1, 5)
    q, k, v = qkv(Q=5, K=5)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[0, ..., 3:] == 0.0)
    assert torch.all(weights[1] > 0.0)


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = qkv(Q=2, K=4)
    mask = torch.tensor([[True, False, True, False], [False, False, False, False]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not torch.isnan(out).any() and not torch.isnan(weights).any()
    assert torch.all(weights[..., 1, :] == 0.0)
    assert torch.all(out[..., 1, :] == 0.0)


def test_scaling_off_equals_factor_one_and_differs_from_sqrt_dk():
    q, k, v = qkv()
    off = scaled_dot_product_attention(q, k, v, scale="none")
    one = scaled_dot_product_attention(q, k, v, scale=1.0)
    paper = scaled_dot_product_attention(q, k, v, scale="sqrt_dk")
    assert torch.equal(off[0], one[0]) and torch.equal(off[1], one[1])
    assert not torch.allclose(off[1], paper[1])
    assert scale_factor("sqrt_dk", 64) == 0.125


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, "sqrt", True, None])
def test_bad_scale_is_refused(bad):
    with pytest.raises(ValueError):
        scale_factor(bad, 16)


def test_numpy_numbers_are_scale_factors_as_python_ones_are():
    import numpy as np

    assert scale_factor(np.float32(0.5), 16) == scale_factor(0.5, 16) == 0.5
    assert scale_factor(np.int64(2), 16) == 2.0
    for bad in (np.float64(-1.0), np.float32("nan"), np.float64("inf")):
        with pytest.raises(ValueError, match="positive finite"):
            scale_factor(bad, 16)


def test_weights_are_recorded_before_dropout():
    q, k, v = qkv()
    torch.manual_seed(0)
    out_drop, weights = scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    out_plain, weights_plain = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, weights_plain)
    assert not torch.allclose(out_drop, out_plain)


def test_attention_steps_are_consistent_with_eq1():
    q, k, v = qkv(Q=4, K=4)
    mask = causal_mask(4)
    steps = attention_steps(q, k, v, mask, "sqrt_dk")
    torch.testing.assert_close(steps["scores"], q @ k.transpose(-2, -1))
    torch.testing.assert_close(steps["scaled"], steps["scores"] / 4.0)
    assert torch.all(torch.isneginf(steps["masked"][..., ~mask]))
    torch.testing.assert_close(steps["weights"], torch.softmax(steps["masked"], -1))
    torch.testing.assert_close(steps["output"], steps["weights"] @ v)


@pytest.mark.parametrize("d_k", [4, 64, 512])
def test_footnote_4_dot_product_variance_is_d_k(d_k):
    g = torch.Generator().manual_seed(d_k)
    q, k = torch.randn(20000, d_k, generator=g), torch.randn(20000, d_k, generator=g)
    dots = (q * k).sum(-1)
    # Standard errors: mean sqrt(d_k / n), variance about d_k * sqrt(2 / n) (q·k is close to normal).
    assert abs(dots.mean().item()) < 5 * math.sqrt(d_k / 20000)
    assert abs(dots.var().item() / d_k - 1) < 0.06
    assert abs((dots / math.sqrt(d_k)).var().item() - 1) < 0.06


# --- the no-autograd path: weights written in place, huge pages for large ones ------------------------

LARGE = dict(B=1, H=4, Q=512, K=512, d_k=64, d_v=32)  # scores of 4 MiB: hugepages.MIN_BYTES
SMALL = dict(B=2, H=3, Q=9, K=11, d_k=24, d_v=8)  # 1/√24 is not a power of two: the scores are scaled
MEDIUM = dict(B=2, H=2, Q=100, K=200, d_k=16, d_v=8)  # attention.MANY_SCORES or more: torch.where


def masks_for(B, H, Q, K, **_):
    """Every mask shape the model passes, and one with a fully hidden query row."""
    full = random_mask((B, H, Q, K), seed=5)
    full[0, H - 1, Q // 2] = False  # a query row with every key hidden
    padding = torch.ones(B, 1, 1, K, dtype=torch.bool)
    padding[..., -(K // 4):] = False
    causal = torch.ones(Q, K, dtype=torch.bool).tril()
    return {"none": None, "full": full, "causal": causal, "causal+padding": causal & padding, "padding": padding}


@pytest.mark.parametrize("size", ["small", "medium", "large"])
@pytest.mark.parametrize("masking", ["none", "full", "causal", "causal+padding", "padding"])
@pytest.mark.parametrize("scale", ["sqrt_dk", "none", 0.37, 0.25])
def test_the_fast_kernel_is_bitwise_the_reference(monkeypatch, size, masking, scale):
    assert (math.prod(SMALL[a] for a in "BHQK") < MANY_SCORES <= math.prod(MEDIUM[a] for a in "BHQK")
            and math.prod(MEDIUM[a] for a in "BHQK") * 4 < hugepages.MIN_BYTES <= math.prod(LARGE[a] for a in "BHQK") * 4)
    advised = []
    monkeypatch.setattr(hugepages, "_madvise", lambda: lambda *args: advised.append(args) or 0)
    shape = {"small": SMALL, "medium": MEDIUM, "large": LARGE}[size]
    q, k, v = qkv(**shape, seed=4)
    mask = masks_for(**shape)[masking]
    with torch.inference_mode():
        out, weights = fast.scaled_dot_product_attention(q, k, v, mask, scale)
    assert len(advised) == (size == "large"), "only large weights are put on huge pages"
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask, scale)  # the core's reference Eq. 1
    assert len(advised) == (size == "large")
    assert torch.equal(weights, ref_weights) and torch.equal(out, ref_out)
    q_grad = q.clone().requires_grad_()  # with autograd the fast kernel is the reference itself
    grad_out, grad_weights = fast.scaled_dot_product_attention(q_grad, k, v, mask, scale)
    assert torch.equal(grad_weights.detach(), ref_weights) and grad_out.requires_grad
    torch_scale = {"sqrt_dk": None, "none": 1.0}.get(scale, scale)
    if masking != "full":  # torch gives NaN on the fully masked row, where ours gives zeros
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=torch_scale),
                                   atol=1e-5, rtol=1e-5)
    live = torch.ones(()) if mask is None else mask.any(-1, keepdim=True).float()
    torch.testing.assert_close(weights.sum(-1, keepdim=True), torch.ones_like(weights[..., :1]) * live)
    if mask is not None:
        assert torch.all(weights.masked_select(~mask.expand_as(weights)) == 0.0)
    assert not torch.isnan(weights).any() and not torch.isnan(out).any()


@pytest.mark.parametrize("size", ["small", "medium", "large"])
@pytest.mark.parametrize("masking", ["none", "full", "causal+padding"])
@pytest.mark.parametrize("softcap, sinks", [(2.0, False), (None, True), (5.0, True)])
def test_the_fast_kernel_is_bitwise_the_reference_with_a_soft_cap_and_sinks(monkeypatch, size, masking, softcap,
                                                                             sinks):
    monkeypatch.setattr(hugepages, "_madvise", lambda: lambda *args: 0)
    shape = {"small": SMALL, "medium": MEDIUM, "large": LARGE}[size]
    q, k, v = qkv(**shape, seed=6)
    sink = torch.linspace(-1.0, 2.0, shape["H"]) if sinks else None  # (H,)
    mask = masks_for(**shape)[masking]
    with torch.inference_mode():
        out, weights = fast.scaled_dot_product_attention(q, k, v, mask, 0.25, softcap=softcap, sink=sink)
    ref_out, ref_weights = scaled_dot_product_attention(q, k, v, mask, 0.25, softcap=softcap, sink=sink)
    assert torch.equal(weights, ref_weights) and torch.equal(out, ref_out)
    rows = weights.sum(-1)  # (B, H, Q): 1 less the sink's share, never over
    assert (rows <= 1 + 1e-6).all() and (sinks or mask is not None or torch.allclose(rows, torch.ones_like(rows)))


def test_large_inputs_with_autograd_still_train():
    q, k, v = (t.requires_grad_() for t in qkv(**LARGE, seed=6))
    out, weights = fast.scaled_dot_product_attention(q, k, v, masks_for(**LARGE)["causal+padding"])
    (out.square().sum() + weights[..., 0].sum()).backward()
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (q, k, v))


def test_large_inputs_under_no_grad_keep_a_graph_when_an_input_requires_grad():
    q, k, v = qkv(**LARGE, seed=7)
    k.requires_grad_()
    out, weights = fast.scaled_dot_product_attention(q, k, v)
    assert weights.requires_grad and out.requires_grad
    with torch.no_grad():
        out_ng, weights_ng = fast.scaled_dot_product_attention(q, k, v)
    assert torch.equal(weights_ng, weights.detach()) and torch.equal(out_ng, out.detach())


# --- multi-head attention -------------------------------------------------------------------------

def torch_mha(E=32, H=4, seed=0):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, batch_first=True, dropout=0.0)
    with torch.no_grad():  # nonzero biases so that a bias mix-up would show
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    return mha.eval()


@pytest.mark.parametrize("masks", ["none", "padding", "causal+padding"])
def test_multihead_matches_torch(masks):
    mha = torch_mha()
    ours = multihead_attention_from_torch(mha).eval()
    g = torch.Generator().manual_seed(3)
    query, memory = torch.randn(2, 6, 32, generator=g), torch.randn(2, 6, 32, generator=g)
    key_pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])  # PyTorch: True = ignore
    kwargs, our_mask = {}, None
    if masks != "none":
        kwargs["key_padding_mask"] = key_pad
        our_mask = ~key_pad[:, None, None, :]
    if masks == "causal+padding":
        kwargs["attn_mask"] = ~causal_mask(6)  # PyTorch: True = not allowed
        our_mask = our_mask & causal_mask(6)
    ref_out, ref_w = mha(query, memory, memory, need_weights=True, average_attn_weights=False, **kwargs)
    out, w = ours(query, memory, memory, our_mask)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)
    assert w.shape == (2, 4, 6, 6)


def test_multihead_with_d_k_unlike_d_model_over_h_matches_per_head_reference():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=24, n_heads=3, d_k=40, d_v=5).eval()
    x = torch.randn(2, 7, 24)
    out, weights = mha(x, x, x)
    assert out.shape == (2, 7, 24) and weights.shape == (2, 3, 7, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 7))
    heads = []
    for h in range(3):  # each head by hand: its own slice of W_Q, W_K, W_V
        wq = mha.q_proj.weight[h * 40:(h + 1) * 40]; bq = mha.q_proj.bias[h * 40:(h + 1) * 40]
        wk = mha.k_proj.weight[h * 40:(h + 1) * 40]; bk = mha.k_proj.bias[h * 40:(h + 1) * 40]
        wv = mha.v_proj.weight[h * 5:(h + 1) * 5]; bv = mha.v_proj.bias[h * 5:(h + 1) * 5]
        q, k, v = x @ wq.T + bq, x @ wk.T + bk, x @ wv.T + bv
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(40), -1)
        torch.testing.assert_close(weights[:, h], w, atol=1e-6, rtol=1e-5)
        heads.append(w @ v)
    torch.testing.assert_close(out, mha.out_proj(torch.cat(heads, -1)), atol=1e-5, rtol=1e-5)


# --- additive attention --------------------------------------------------------------------------

def test_additive_attention_matches_its_formula_and_respects_masks():
    torch.manual_seed(0)
    att = AdditiveAttention(d_query=8, d_key=6, d_attn=10)
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 4)
    mask = torch.tensor([True, True, True, False, False])
    out, weights = att(q, k, v, mask)
    scores = torch.empty(2, 3, 5)
    for b in range(2):
        for i in range(3):
            for j in range(5):
                hidden = torch.tanh(att.q_proj(q[b, i]) + att.k_proj(k[b, j]))
                scores[b, i, j] = att.score(hidden).squeeze()
    ref = torch.softmax(scores.masked_fill(~mask, -math.inf), -1)
    torch.testing.assert_close(weights, ref)
    assert torch.all(weights[..., 3:] == 0.0)
    torch.testing.assert_close(out, ref @ v)


@pytest.mark.parametrize("causal,padding", [(True, True), (False, True), (True, False)])
def test_a_model_on_the_fast_kernel_gives_bitwise_the_same_logits_and_maps(causal, padding):
    from attention_viz.core.config import TransformerConfig
    from attention_viz.core.model import Transformer

    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=20, n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4,
                               d_k=8, d_v=8, d_ff=64, dropout=0.0)
    model = Transformer(config).eval()
    src = torch.randint(1, 20, (2, 60))
    src[1, -5:] = config.pad_id
    tgt = torch.randint(1, 20, (2, 50))
    with torch.inference_mode():
        logits, maps = model(src, tgt, causal_mask=causal, padding_mask=padding)
        fast_logits, fast_maps = model.use_kernel(fast.scaled_dot_product_attention)(
            src, tgt, causal_mask=causal, padding_mask=padding)
    assert torch.equal(logits, fast_logits)
    assert list(maps) == list(fast_maps) and all(torch.equal(maps[key], fast_maps[key]) for key in maps)


def test_a_soft_cap_and_a_sink_are_part_of_the_compatibility_function_in_both_kernels():
    """softcap: c·tanh(s·q·k / c) before the mask; sink: one more logit per head in each row's softmax, with no value,
    so the kept weights sum to 1 minus its share (float64, written out by hand)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) * 3 for _ in range(3))
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    sink = torch.randn(3, generator=g, dtype=torch.float64)
    logits = 2.0 * torch.tanh(q @ k.transpose(-2, -1) * 0.5 / 2.0)
    logits = logits.masked_fill(~mask, float("-inf"))
    full = torch.softmax(torch.cat([logits, sink.view(1, 3, 1, 1).expand(2, 3, 5, 1)], -1), -1)
    for kernel in (scaled_dot_product_attention, fast.scaled_dot_product_attention):
        out, weights = kernel(q, k, v, mask, 0.5, softcap=2.0, sink=sink)
        torch.testing.assert_close(weights, full[..., :-1], rtol=0, atol=1e-12)
        torch.testing.assert_close(out, full[..., :-1] @ v, rtol=0, atol=1e-12)
        assert (weights.sum(-1) < 1).all() and (weights[..., ~mask] == 0).all()
        capped, _ = kernel(q, k, v, mask, 0.5, softcap=2.0)
        torch.testing.assert_close(capped.sum(), (torch.softmax(logits, -1) @ v).sum(), rtol=1e-12, atol=0)
