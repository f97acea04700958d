"""core.trace: one traced pass keeps, at each map key, what its attention computed there (checked against the inputs
each module received, caught by a hook, and Eq. 1 recomputed from them); its switches act at the heads as forward's;
the plain pass has no probes; both kinds of model answer core.protocol's AttentionModel."""

import pytest
import torch

from attention_viz.core.attention import attention
from attention_viz.core.maps import KINDS, kind_key
from attention_viz.core.protocol import AttentionModel
from attention_viz.core.trace import POINTS, trace
from attention_viz.core.variation import PAPER, Variation
from tests.core.test_masks_and_inputs import random_case


def received(model, src, tgt, variation: Variation) -> dict:
    """What every MultiHeadAttention received in forward (query, key, value, mask), by map key, caught by hooks."""
    seen, handles = {}, []
    for kind in KINDS:
        for i in range(len(model.encoder.layers if kind.startswith("encoder") else model.decoder.layers)):
            hook = lambda module, args, key=kind_key(kind, i): seen.__setitem__(key, args[:4])  # noqa: E731
            handles.append(model.attention_module(kind, i).register_forward_pre_hook(hook))
    with torch.no_grad():
        model(src, tgt, variation=variation)
    for handle in handles:
        handle.remove()
    return seen


@pytest.mark.parametrize("seed", range(4))
def test_a_traced_pass_keeps_what_each_attention_computed(seed):
    model, src, tgt = random_case(seed)
    key0 = model.map_keys[0]
    variation = Variation(scale=0.5, heads_off={key0: [0]})
    with torch.no_grad():
        logits, maps = model(src, tgt, variation=variation)
        traced = model.traced(src, tgt, variation=variation, keep=POINTS)
    assert torch.equal(traced.logits, logits) and list(traced.maps) == list(maps) == model.map_keys
    for key, inputs in received(model, src, tgt, variation).items():
        kept = traced.kept[key]
        stack, layer, name = key.split(".")
        module = model.attention_module(f"{stack}.{name}", int(layer))
        assert all(torch.equal(a, b) for a, b in zip(kept["inputs"][:3], inputs[:3]))
        with torch.no_grad():
            q, k, v = module.project(*inputs[:3])
            heads, weights = attention(q, k, v, inputs[3], 0.5)
        assert torch.equal(kept["q"], q) and torch.equal(kept["k"], k) and torch.equal(kept["v"], v), key
        assert torch.equal(kept["weights"], weights) and torch.equal(weights, maps[key]), key
        assert torch.equal(kept["heads"], heads), key  # before the switch: a head off is kept as computed
    assert kept["heads"].abs().sum() > 0 and traced.kept[key0]["heads"][:, 0].abs().sum() > 0


def test_keep_at_some_keys_and_the_plain_pass():
    model, src, tgt = random_case(1)
    key, key0 = model.map_keys[-1], model.map_keys[0]
    with torch.no_grad():
        traced = model.traced(src, tgt, keep=("v",), at=(key,))
        assert list(traced.kept) == [key] and list(traced.kept[key]) == ["v"]
        assert model.probes(PAPER) is None and model.traced(src, tgt).kept == {}
        assert torch.equal(model.attention_inputs(src, tgt, "decoder.cross_attn", 0)[1],
                           model.traced(src, tgt, keep=("inputs",)).kept["decoder.0.cross_attn"]["inputs"][1])
        ran = []  # attention_inputs' pass stops at those inputs: nothing after them runs
        handle = model.decoder.layers[0].register_forward_pre_hook(lambda *args: ran.append(1))
        query = model.attention_inputs(src, tgt, "encoder.self_attn", 0)[0]
        handle.remove()
        assert not ran and torch.equal(query, model.traced(src, tgt, keep=("inputs",)).kept[key0]["inputs"][0])
    with pytest.raises(ValueError, match="keeps the points inputs, q, k, v, weights, heads; got \\['logits'\\]"):
        trace(model.map_keys, keep=("logits",))


def test_our_model_answers_the_protocol_and_other_things_do_not():
    model, _, _ = random_case(2)
    assert isinstance(model, AttentionModel) and not model.pretrained and model.abilities.writes_text
    assert model.abilities.scalings == ("sqrt_dk", "none") and model.abilities.compatibility == "dot_product"
    assert not any(isinstance(thing, AttentionModel) for thing in ({}, "model", model.encoder, None))


def test_value_norms_are_each_values_length_through_its_heads_columns_of_w_o():
    """Passes.value_norms (one for ours and a real model): ‖v_j^h W_O^h‖ [B, H, K], against a float64 loop over the
    heads with W_O^h the d_v columns head h's output meets; value_flows are the maps times them."""
    model, src, tgt = random_case(6)  # 3 heads of d_v = 5
    variation = Variation(heads_off={model.map_keys[0]: [1]})
    with torch.no_grad():
        traced = model.traced(src, tgt, variation=variation, keep=("v",))
        norms = model.value_norms(src, tgt, variation=variation)
        flows = model.value_flows(src, tgt, variation=variation)
    assert list(norms) == list(flows) == model.map_keys
    d_v = model.config.d_v
    for key, points in traced.kept.items():
        w_o = model.w_o(key).double()  # (D, H·d_v)
        expected = torch.stack([(points["v"][:, h].double() @ w_o[:, h * d_v:(h + 1) * d_v].T).norm(dim=-1)
                                for h in range(model.n_heads)], dim=1)  # (B, H, K)
        torch.testing.assert_close(norms[key].double(), expected)
        assert torch.equal(flows[key], traced.maps[key] * norms[key][:, :, None, :])
