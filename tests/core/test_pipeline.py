"""The attention pipeline (core.attention.attention) stage by stage: scale, soft-cap, bias, mask, softmax with a sink,
the zero-fill, weights @ V, against a float64 reference written out row by row and against PyTorch's
F.scaled_dot_product_attention; the fast kernel bit for bit the same with every stage; the intermediates it
records; the compatibility function chosen once."""

import math

import pytest
import torch
import torch.nn.functional as F

from attention_viz.core.attention import (
    DOT_PRODUCT,
    Additive,
    MultiHeadAttention,
    attention,
    attention_steps,
    causal_mask,
    compatibility_of,
)
from attention_viz.fast import attention as fast
from attention_viz.fast import hugepages

B, H, Q, K, D_K, D_V = 2, 3, 5, 6, 8, 4


def inputs(seed=0, dtype=torch.float64, shape=(B, H, Q, K, D_K, D_V)):
    b, h, q_len, k_len, d_k, d_v = shape
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, q_len, d_k, generator=g, dtype=dtype) * 2
    k = torch.randn(b, h, k_len, d_k, generator=g, dtype=dtype) * 2
    v = torch.randn(b, h, k_len, d_v, generator=g, dtype=dtype)
    return q, k, v


def masks(seed=1, shape=(B, H, Q, K)):
    """None, a random mask, the causal one, and one with a query row whose every key is hidden."""
    b, h, q_len, k_len = shape
    g = torch.Generator().manual_seed(seed)
    random = torch.rand(b, h, q_len, k_len, generator=g) > 0.4
    random[..., 0] = True
    dead = torch.ones(b, 1, q_len, k_len, dtype=torch.bool)
    dead[b - 1, 0, q_len // 2] = False
    return {"none": None, "random": random, "causal": torch.ones(q_len, k_len, dtype=torch.bool).tril(),
            "dead row": dead}


def by_hand(q, k, v, mask, factor, bias=None, softcap=None, sink=None):
    """Each row written out in float64: l_j = c·tanh(factor·q·k_j / c) + B_j over the keys it may see, p_j =
    exp(l_j) / (Σ exp(l) + exp(σ_h)), output Σ p_j v_j; a row that sees no key is 0."""
    q, k, v = q.double(), k.double(), v.double()
    b_, h_, q_len, _ = q.shape
    k_len = k.size(2)
    allowed = torch.ones(b_, h_, q_len, k_len, dtype=torch.bool) if mask is None else mask.expand(b_, h_, q_len, k_len)
    bias = None if bias is None else bias.double().expand(b_, h_, q_len, k_len)
    weights = torch.zeros(b_, h_, q_len, k_len, dtype=torch.float64)
    for b in range(b_):
        for h in range(h_):
            for i in range(q_len):
                keys = [j for j in range(k_len) if allowed[b, h, i, j]]
                if not keys:
                    continue
                logits = []
                for j in keys:
                    x = factor * float(q[b, h, i] @ k[b, h, j])
                    if softcap is not None:
                        x = softcap * math.tanh(x / softcap)
                    if bias is not None:
                        x += float(bias[b, h, i, j])
                    logits.append(x)
                top = max(logits + ([float(sink[h])] if sink is not None else []))
                e = [math.exp(x - top) for x in logits]
                total = sum(e) + (math.exp(float(sink[h]) - top) if sink is not None else 0.0)
                for j, e_j in zip(keys, e):
                    weights[b, h, i, j] = e_j / total
    return weights @ v, weights


def extras(with_bias, softcap, with_sink, seed=2, shape=(B, H, Q, K), dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    bias = torch.randn(*shape, generator=g, dtype=dtype) if with_bias else None
    sink = torch.randn(shape[1], generator=g, dtype=dtype) if with_sink else None
    return dict(bias=bias, softcap=softcap, sink=sink)


STAGES = [(False, None, False), (True, None, False), (False, 1.5, False), (False, None, True), (True, 1.5, True)]


@pytest.mark.parametrize("masking", ["none", "random", "causal", "dead row"])
@pytest.mark.parametrize("with_bias, softcap, with_sink", STAGES)
def test_every_stage_is_the_float64_hand_reference(masking, with_bias, softcap, with_sink):
    q, k, v = inputs()
    mask = masks()[masking]
    added = extras(with_bias, softcap, with_sink)
    out, weights = attention(q, k, v, mask, 0.3, **added)
    ref_out, ref_weights = by_hand(q, k, v, mask, 0.3, **added)
    torch.testing.assert_close(weights, ref_weights, rtol=0, atol=1e-12)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    if mask is not None:
        hidden = ~mask.expand_as(weights)
        assert (weights[hidden] == 0).all()  # exactly 0
        dead = ~mask.expand_as(weights).any(-1)
        assert (weights[dead] == 0).all() and (out[dead] == 0).all()  # a row that sees nothing: 0, not NaN
    assert not weights.isnan().any()
    rows = weights.sum(-1)
    assert (rows <= 1 + 1e-12).all()
    if not with_sink and mask is None:
        torch.testing.assert_close(rows, torch.ones_like(rows))


@pytest.mark.parametrize("masking", ["none", "random", "causal"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("scale, torch_scale", [("sqrt_dk", None), ("none", 1.0), (0.3, 0.3)])
def test_scale_bias_and_mask_are_torchs_scaled_dot_product_attention(masking, with_bias, scale, torch_scale):
    """PyTorch takes B as a float attn_mask, added to QKᵀ·scale (−∞ where hidden)."""
    q, k, v = inputs(dtype=torch.float32)
    mask = masks()[masking]
    bias = extras(with_bias, None, False, dtype=torch.float32)["bias"]
    out, _ = attention(q, k, v, mask, scale, bias=bias)
    torch_mask = mask
    if bias is not None:
        torch_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask, scale=torch_scale)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


SIZES = {"few": (B, H, Q, K, D_K, D_V), "many": (2, 2, 100, 200, 16, 8), "huge pages": (1, 4, 512, 512, 64, 32)}
FAST_CASES = [(size, masking, *stages, scale) for size in SIZES for masking in ("none", "random", "causal", "dead row")
              for stages in STAGES for scale in ("sqrt_dk", 0.3)
              if size != "huge pages" or scale == 0.3 and masking in ("causal", "dead row")]


@pytest.mark.parametrize("size, masking, with_bias, softcap, with_sink, scale", FAST_CASES)
def test_the_fast_kernel_runs_every_stage_bit_for_bit(monkeypatch, size, masking, with_bias, softcap, with_sink,
                                                       scale):
    monkeypatch.setattr(hugepages, "_madvise", lambda: lambda *args: 0)
    shape = SIZES[size]
    q, k, v = inputs(3, torch.float32, shape)
    mask = masks(4, shape[:4])[masking]
    added = extras(with_bias, softcap, with_sink, 5, shape[:4], torch.float32)
    with torch.inference_mode():
        out, weights = fast.scaled_dot_product_attention(q, k, v, mask, scale, **added)
    ref_out, ref_weights = attention(q, k, v, mask, scale, **added)
    assert torch.equal(weights, ref_weights) and torch.equal(out, ref_out)


def test_every_stage_trains_its_gradients_are_torchs_numerical_ones():
    with_bias, softcap, with_sink = STAGES[-1]
    q, k, v = (t.requires_grad_() for t in inputs(shape=(1, 2, 2, 3, 3, 2)))
    added = extras(with_bias, softcap, with_sink, shape=(1, 2, 2, 3))
    for t in added.values():
        if isinstance(t, torch.Tensor):
            t.requires_grad_()
    tensors = [added[name] for name in ("bias", "sink") if added[name] is not None]

    def run(q, k, v, *extra):
        given = dict(zip([name for name in ("bias", "sink") if added[name] is not None], extra))
        return attention(q, k, v, causal_mask(3)[1:], 0.3, softcap=softcap, **given)

    assert torch.autograd.gradcheck(run, (q, k, v, *tensors))


def test_a_bias_that_enlarges_the_scores_runs_the_reference_in_the_fast_kernel():
    q, k, v = inputs(dtype=torch.float32)
    q, k, v = q[:1], k[:1], v[:1]  # [1, H, ·, ·] against a bias of [B, H, Q, K]
    bias = extras(True, None, False, dtype=torch.float32)["bias"]
    with torch.inference_mode():
        out, weights = fast.scaled_dot_product_attention(q, k, v, causal_mask(K)[:Q], bias=bias)
    ref_out, ref_weights = attention(q, k, v, causal_mask(K)[:Q], bias=bias)
    assert weights.shape == (B, H, Q, K) and torch.equal(weights, ref_weights) and torch.equal(out, ref_out)


@pytest.mark.parametrize("with_bias, softcap, with_sink", STAGES)
def test_the_steps_are_the_stages_of_the_one_pass(with_bias, softcap, with_sink):
    q, k, v = inputs()
    mask = masks()["dead row"]
    added = extras(with_bias, softcap, with_sink)
    steps = {}
    out, weights = attention(q, k, v, mask, 0.3, **added, steps=steps)
    names = ["scores", "scaled", *(["capped"] if softcap else []), *(["biased"] if with_bias else []), "masked",
             "weights", "output"]
    assert sorted(steps) == sorted(names)
    assert steps["weights"] is weights and steps["output"] is out  # recorded, not computed again
    assert torch.equal(steps["scores"], q @ k.transpose(-2, -1))
    assert torch.equal(steps["scaled"], steps["scores"] * 0.3)
    logits = steps["scaled"]
    if softcap:
        assert torch.equal(steps["capped"], torch.tanh(logits / softcap) * softcap)
        logits = steps["capped"]
    if with_bias:
        assert torch.equal(steps["biased"], logits + added["bias"])
        logits = steps["biased"]
    assert torch.equal(steps["masked"], logits.masked_fill(~mask, float("-inf")))
    assert list(attention_steps(q, k, v, mask, 0.3)) == ["scores", "scaled", "masked", "weights", "output"]


def test_the_compatibility_function_is_chosen_once_and_runs_in_every_kernel():
    torch.manual_seed(0)
    dot = MultiHeadAttention(12, 3, 8, 4).eval()
    additive = MultiHeadAttention(12, 3, 8, 4, compatibility="additive").eval()
    assert dot.compatibility is DOT_PRODUCT and compatibility_of("dot_product") is DOT_PRODUCT
    assert isinstance(additive.compatibility, Additive) and additive.compatibility.w is additive.score
    additive.load_state_dict({name: p + 1 for name, p in additive.state_dict().items()})
    assert additive.compatibility.w is additive.score  # trained or loaded in place: still the module's own
    x, y = torch.randn(2, 4, 12), torch.randn(2, 5, 12)
    mask = torch.rand(2, 1, 4, 5) > 0.3
    q, k, v = additive.project(x, y, y)
    by_formula = torch.einsum("bhqkd,hd->bhqk", torch.tanh(q[:, :, :, None] + k[:, :, None]), additive.score)
    assert torch.equal(additive.compatibility.scores(q, k), by_formula)
    for h in range(3):  # one head's own scores, as the steps view computes them
        assert torch.equal(additive.compatibility.head(h).scores(q[0, h], k[0, h]), additive.scores(q, k)[0, h])
    with torch.inference_mode():
        for module in (dot, additive):
            ref = module(x, y, y, mask, 0.3)
            module.kernel = fast.scaled_dot_product_attention  # additive attention: the reference itself
            got = module(x, y, y, mask, 0.3)
            assert all(torch.equal(a, b) for a, b in zip(ref, got))
    with pytest.raises(ValueError, match="compatibility must be"):
        MultiHeadAttention(12, 3, 8, 4, compatibility="multiplicative")


def test_a_sink_per_query_joins_its_own_rows_softmax():
    """A sink logit per head and query ([B, H, Q, 1]: Inkling 2's, from each token's state) joins that row's softmax
    only, in both kernels: the weights are softmax([logits, s])[:-1], float64 by hand."""
    q, k, v = inputs()
    sink = torch.randn(B, H, Q, 1, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    expected = torch.cat([q @ k.transpose(-1, -2) * 0.3, sink], dim=-1).softmax(-1)[..., :-1]
    for kernel in (attention, fast.scaled_dot_product_attention):
        out, weights = kernel(q, k, v, None, 0.3, sink=sink)
        torch.testing.assert_close(weights, expected, rtol=0, atol=1e-12)
        torch.testing.assert_close(out, expected @ v, rtol=0, atol=1e-12)
