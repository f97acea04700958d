"""core.variation.Variation: every bad field refused with its own message; equal values hash equal (a cache key);
the keyword front and the value give the same pass, bit for bit, in every method of our Transformer that takes
switches."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.core.variation import Variation, variation_of

CONFIG = TransformerConfig(vocab_size=23, n_encoder_layers=2, n_decoder_layers=2, d_model=16, n_heads=4, d_k=3,
                           d_v=5, d_ff=32, dropout=0.0)


@pytest.mark.parametrize("fields, message", [
    (dict(scale="sqrt"), "scale must be 'sqrt_dk', 'none' or a positive number, got 'sqrt'"),
    (dict(scale=True), "scale must be 'sqrt_dk', 'none' or a positive number, got True"),
    (dict(scale=0.0), "a scale factor must be a positive finite number, got 0.0"),
    (dict(scale=float("inf")), "a scale factor must be a positive finite number, got inf"),
    (dict(scale=-2), "a scale factor must be a positive finite number, got -2"),
    (dict(causal_mask="yes"), "causal_mask must be True or False, got 'yes'"),
    (dict(causal_mask=1), "causal_mask must be True or False, got 1"),
    (dict(padding_mask=None), "padding_mask must be True or False, got None"),
    (dict(heads_off="decoder.0.self_attn"), "heads_off must be {map key: \\[heads\\]} or"),
    (dict(heads_off=(("decoder.0.self_attn",),)), "heads_off must be {map key: \\[heads\\]} or"),
    (dict(heads_off={3: [0]}), "heads_off's keys must be map keys"),
    (dict(heads_off=(("encoder.0.self_attn", [0]), ("encoder.0.self_attn", [1]))), "names 'encoder.0.self_attn' twice"),
    (dict(heads_off={"encoder.0.self_attn": "01"}), "heads_off\\['encoder.0.self_attn'\\] must be a list of head"),
    (dict(heads_off={"encoder.0.self_attn": [-1]}), "head -1 does not exist"),
    (dict(heads_off={"encoder.0.self_attn": [1.0]}), "head 1.0 does not exist"),
    (dict(heads_off={"encoder.0.self_attn": [False]}), "head False does not exist"),
    (dict(ablation="half"), "ablation must be one of \\['zero', 'mean'\\], got 'half'"),
    (dict(ablation=None), "ablation must be one of \\['zero', 'mean'\\], got None"),
    (dict(position_bias="off"), "position_bias must be True or False, got 'off'"),
])
def test_each_bad_field_is_refused_with_its_own_message(fields, message):
    with pytest.raises(ValueError, match=message):
        Variation(**fields)


def test_a_refusal_echoes_at_most_40_characters_of_what_it_was_given():
    for fields in (dict(causal_mask="c" * 10_000), dict(ablation="z" * 10_000), dict(heads_off={"k": "0" * 10_000}),
                   dict(heads_off={"k": [0.5] * 10_000})):
        with pytest.raises(ValueError) as refused:
            Variation(**fields)
        assert len(str(refused.value)) < 200, str(refused.value)[:200]


def test_equal_switches_make_equal_values_with_equal_hashes():
    a = Variation(scale=0.5, heads_off={"decoder.1.cross_attn": [2, 0, 2], "encoder.0.self_attn": [1]})
    b = Variation(scale=np.float32(0.5), heads_off=(("decoder.1.cross_attn", (0, 2)), ("encoder.0.self_attn", [1]),
                                                    ("decoder.0.self_attn", ())))
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a.heads_off == (("decoder.1.cross_attn", (0, 2)), ("encoder.0.self_attn", (1,)))
    assert a.off == {"decoder.1.cross_attn": [0, 2], "encoder.0.self_attn": [1]} and Variation().off is None
    assert type(b.scale) is float and Variation(scale=2).scale == 2.0
    assert Variation(causal_mask=np.bool_(False)).causal_mask is False
    for other in (dict(scale="none"), dict(causal_mask=False), dict(padding_mask=False), dict(ablation="mean"),
                  dict(heads_off={"decoder.1.cross_attn": [0]})):
        assert Variation(**{**dict(scale=0.5, heads_off=a.heads_off), **other}) != a
    with pytest.raises(Exception):
        a.scale = "none"  # frozen


def test_the_front_takes_the_value_or_the_keywords_not_both():
    v = Variation(scale="none")
    assert variation_of(v) is v and variation_of(None, "none") == v and variation_of() == Variation()
    assert variation_of(None, heads_off={}) == Variation()
    for keywords in (dict(scale="none"), dict(causal_mask=False), dict(heads_off={"encoder.0.self_attn": [0]})):
        with pytest.raises(ValueError, match="either as a Variation or as keywords"):
            variation_of(v, **keywords)
    with pytest.raises(ValueError, match="variation must be a Variation"):
        variation_of({"scale": "none"})


def model_and_batch():
    torch.manual_seed(0)
    model = Transformer(CONFIG).eval()
    src = torch.randint(4, 23, (3, 7))
    src[2, 5:] = CONFIG.pad_id
    tgt = torch.randint(4, 23, (3, 6))
    return model, src, tgt


SWITCHES = [dict(), dict(scale="none", causal_mask=False), dict(scale=0.3, padding_mask=False),
            dict(heads_off={"decoder.1.cross_attn": [0, 2], "encoder.0.self_attn": [3]}),
            dict(heads_off={"decoder.0.self_attn": [1]}, ablation="mean", causal_mask=False)]


def equal(a, b) -> None:
    """Bit for bit, through tuples, lists, dicts and AttentionMaps."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            equal(x, y)
    elif a is None:
        assert b is None
    else:
        assert list(a.keys()) == list(b.keys())
        for key in a.keys():
            equal(a[key], b[key])


@pytest.mark.parametrize("switches", SWITCHES)
def test_the_keyword_front_and_the_value_give_the_same_pass_bit_for_bit(switches):
    model, src, tgt = model_and_batch()
    means = {key: torch.randn(4, 5) for key in model(src, tgt)[1].keys()} if switches.get("ablation") else None
    v = Variation(**switches)
    with torch.no_grad():
        equal(model(src, tgt, head_means=means, **switches), model(src, tgt, head_means=means, variation=v))
        for reuse in (True, False):
            equal(model.greedy_decode(src, 5, reuse_keys=reuse, head_means=means, **switches),
                  model.greedy_decode(src, 5, reuse_keys=reuse, head_means=means, variation=v))
        equal(model.step_maps(src, tgt, head_means=means, **switches),
              model.step_maps(src, tgt, head_means=means, variation=v))
        for kind in ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"):
            equal(model.attention_inputs(src, tgt, kind, 1, head_means=means, **switches),
                  model.attention_inputs(src, tgt, kind, 1, head_means=means, variation=v))
        equal(model.value_norms(src, tgt, head_means=means, **switches),
              model.value_norms(src, tgt, head_means=means, variation=v))
        equal(model.value_flows(src, tgt, head_means=means, **switches),
              model.value_flows(src, tgt, head_means=means, variation=v))
        masks = {k: switches[k] for k in ("scale", "causal_mask", "padding_mask") if k in switches}
        equal(model.head_outputs(src, tgt, **masks), model.head_outputs(src, tgt, variation=Variation(**masks)))
    if switches:  # the value really reaches the pass: it differs from the paper's model
        assert not torch.equal(model(src, tgt, head_means=means, variation=v)[0], model(src, tgt)[0])


def test_a_value_and_keywords_together_are_refused_before_any_work():
    model, src, tgt = model_and_batch()
    with pytest.raises(ValueError, match="not both"):
        model(src, tgt, scale="none", variation=Variation())
    with pytest.raises(ValueError, match="not both"):
        model.greedy_decode(src, 3, heads_off={"encoder.0.self_attn": [0]}, variation=Variation())
