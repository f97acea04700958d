"""Half precision (bfloat16 and float16 weights): forward's maps against transformers' eager attention in the same
dtype, the proof's line saying what its figures mean there, and the long pass computing its scores, softmax, lse and
statistics in float32 from the model's own half-precision q, k and v (as eager takes its softmax in float32)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.fast.blockwise import STATISTICS, attend  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.attention import IMPLEMENTATION  # noqa: E402
from attention_viz.hub.proof import SIGNIFICANT_BITS, TOLERANCE  # noqa: E402

HALF = [torch.bfloat16, torch.float16]


@pytest.fixture(scope="module")
def half(tiny_folder):
    """(family, dtype) -> its tiny model loaded in that dtype on the CPU, once."""
    loaded = {}

    def get(family, dtype):
        if (family, dtype) not in loaded:
            loaded[family, dtype] = load_pretrained(tiny_folder(family), device="cpu", dtype=dtype)
        return loaded[family, dtype]

    return get


def eager_maps(model, ids) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """transformers' eager attention on ids: (logits, every layer's map [1, H, T, T]), in the model's dtype."""
    model.model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model.model(input_ids=ids, output_attentions=True, use_cache=False)
    finally:
        model.model.set_attn_implementation(IMPLEMENTATION)
    return out.logits, list(out.attentions)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_forward_in_half_precision_gives_eagers_maps_in_the_same_dtype(half, family, dtype):
    """Our softmax of half-precision scores is taken in float32 and rounded once to the dtype, as Llama's eager takes
    it: at 250 tokens forward's maps are eager's bit for bit (in float16 a softmax taken in the dtype differs there);
    GPT-2's eager calls softmax on the dtype itself (PyTorch computes it in float32 and rounds once, summing in
    another order): the same but for a rare weight a unit in its last place off, within the proof's tolerance. The
    line says what the figures mean in the dtype."""
    model = half(family, dtype)
    kind = str(dtype).removeprefix("torch.")
    assert model.fidelity.proven and model.fidelity.dtype == kind
    assert model.fidelity.tolerance == TOLERANCE[dtype]
    assert (f"({kind}, 2 rows of 8 tokens, one padded; both in {kind}, which rounds each weight to "
            f"{SIGNIFICANT_BITS[kind]} significant bits") in str(model.fidelity)
    ids = torch.randint(5, 60, (1, 250), generator=torch.Generator().manual_seed(2))  # (1, 250)
    logits, maps = model.forward(ids)
    eager_logits, eager = eager_maps(model, ids)
    assert logits.dtype == dtype and len(eager) == len(maps) > 0
    for layer, theirs in enumerate(eager):
        ours = maps[f"decoder.{layer}.self_attn"]
        assert ours.dtype == theirs.dtype == dtype
        if family == "llama":
            assert torch.equal(ours, theirs)
        else:
            ulp = torch.finfo(dtype).eps * theirs.float().abs()  # a unit in the last place of each weight, at most
            assert bool(((ours.float() - theirs.float()).abs() <= ulp).all())
    scale = max(1.0, float(eager_logits.float().abs().max()))
    assert float((logits.detach().float() - eager_logits.float()).abs().max()) / scale <= TOLERANCE[dtype]


def test_the_fidelity_line_says_nothing_of_rounding_in_float32(half):
    assert "significant bits" not in str(half("llama", torch.float32).fidelity)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_attend_takes_half_precision_to_float32(dtype):
    """attend on half-precision q, k, v is attend on the same numbers in float32: lse and every statistic the same
    bits, the output the float32 output rounded once to the dtype."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=g).to(dtype) for shape in ((4, 37, 8), (2, 37, 8), (2, 37, 8)))
    output, lse, sums = attend(q, k, v, 0.7, "causal", rows=8)
    output32, lse32, sums32 = attend(q.float(), k.float(), v.float(), 0.7, "causal", rows=8)
    assert output.dtype == dtype and lse.dtype == torch.float32
    assert torch.equal(output, output32.to(dtype)) and torch.equal(lse, lse32)
    assert all(torch.equal(sums[name], sums32[name]) for name in STATISTICS)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_the_long_pass_in_half_precision_is_exact_in_float32_and_eagers_within_the_dtype(half, dtype):
    """A tiny Llama in half precision read at 90 tokens: every region and summary is the float64 softmax of the q and
    k the model handed over (kept in its dtype) to float32's rounding, not the dtype's; and within the proof's
    tolerance of eager's maps in the dtype, whose scores are rounded to it."""
    model = half("llama", dtype)
    ids = torch.randint(5, 60, (1, 90), generator=torch.Generator().manual_seed(3))  # (1, 90)
    run = model.long_run(ids, rows=16, keep="memory")
    _, eager = eager_maps(model, ids)
    T = ids.size(1)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer, key in enumerate(run.keys):
        kept = run._layers[key]
        for head in range(run.n_heads):
            q = run._kept.rows(key, "q", head, slice(0, T))  # (T, d), as the model handed it over
            k = run._kept.rows(key, "k", head // kept.n_rep, slice(0, T))
            assert q.dtype == k.dtype == dtype and run._kept.rows(key, "lse", head, slice(0, T)).dtype == torch.float32
            scores = (q.double() @ k.double().T * kept.factor).masked_fill(~causal, float("-inf"))
            exact = torch.softmax(scores, -1)  # (T, T), float64
            region = torch.from_numpy(run.region(key, head, slice(0, T), slice(0, T))).double()
            assert float((region - exact).abs().max()) <= 1e-5  # float32's rounding; the dtype's would be ~1e-2
            assert float((region - eager[layer][0, head].double()).abs().max()) <= TOLERANCE[dtype]
            entropy = -(exact * exact.clamp_min(1e-300).log()).sum(-1).mean()
            np.testing.assert_allclose(run.summaries[key]["entropy"][head], float(entropy), rtol=1e-5)
            np.testing.assert_allclose(run.summaries[key]["first_token"][head], float(exact[:, 0].mean()), atol=1e-6)
