"""Settings hold the pass's switches as one core.variation.Variation, parsed once by parse_settings; the switch names
stay readable and replaceable on Settings; the run the service makes is the model's pass under that value."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from attention_viz.core.variation import Variation
from tests.service.conftest import own


def settings(runs, scale="sqrt_dk", factor=1.0, causal=True, padding=True, off="", ablation=None):
    return runs.settings("hello", "reverse/sqrt_dk", 16, scale, factor, causal, padding, 0, 64, 4, None, off, ablation)


def test_parse_settings_builds_one_variation_and_the_switch_names_read_it(runs):
    s = settings(runs, "custom", 0.5, False, True, "decoder.1.cross_attn: 1 0")
    assert s.variation == Variation(0.5, False, True, {"decoder.1.cross_attn": [0, 1]}, "zero")
    assert (s.scale, s.causal_mask, s.padding_mask, s.ablation) == (0.5, False, True, "zero")
    assert s.heads_off == (("decoder.1.cross_attn", (0, 1)),) and s.off == {"decoder.1.cross_attn": [0, 1]}
    assert settings(runs, "none").variation == Variation("none")
    assert settings(runs, off="", ablation="mean").variation == Variation()  # nothing off: the plain pass's key


def test_switching_by_name_replaces_it_in_the_variation_and_in_the_cache_key(runs):
    s = settings(runs)
    t = s.switched(scale="none", padding_mask=False)
    assert t.variation == Variation("none", padding_mask=False) and t.text == s.text and t != s
    assert t.switched(scale="sqrt_dk", padding_mask=True) == s
    assert hash(t.switched(scale="sqrt_dk", padding_mask=True)) == hash(s)
    assert replace(s, variation=Variation("none", padding_mask=False)) == t
    with pytest.raises(ValueError, match="a scale factor must be a positive finite number"):
        s.switched(scale=-1.0)  # checked by the value, whichever way it is changed
    with pytest.raises(TypeError):
        s.switched(dropout=0.1)  # not a switch


def test_an_export_record_keeps_every_setting_flat(runs):
    s = settings(runs, "custom", 0.25, off="encoder.0.self_attn: 1", ablation="mean")
    record = s.as_record()
    assert list(record) == ["text", "model", "checkpoint", "d_k", "scale", "causal_mask", "padding_mask",
                            "pad_tokens", "d_model", "n_heads", "compatibility", "typed", "name", "heads_off",
                            "ablation"]
    assert record["name"] == s.name == "reverse (trained with 1/√d_k), d_k = 16"  # the model as the picker says it
    assert (record["scale"], record["heads_off"], record["ablation"]) == (0.25, (("encoder.0.self_attn", (1,)),),
                                                                           "mean")


def test_a_run_is_the_models_greedy_decode_under_the_settings_variation(runs):
    s = settings(runs, "custom", 0.3, False, True, "decoder.0.cross_attn: 1")
    run = runs.run(s)
    model, _ = own(runs, s)
    src = torch.tensor([run.src_ids])
    with torch.inference_mode():
        written, maps = model.greedy_decode(src, len(run.generated), variation=s.variation)
    assert [runs.tokenizer.tokens(written[0].tolist())] == [list(run.generated)]
    assert all((maps[key][0].numpy() == run.maps[key]).all() for key in run.maps)
