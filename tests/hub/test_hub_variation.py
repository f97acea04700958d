"""A real model takes the switches as one core.variation.Variation as well as keywords: the two give the same pass,
bit for bit (an encoder-decoder and a decoder-only family, tiny and random), and the value reaches the pass."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.core.ablation import mean_outputs  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.text_run import run_text, run_value_norms  # noqa: E402
from attention_viz.importance.real import real_head_means  # noqa: E402
from tests.core.test_variation import equal  # noqa: E402 - bit for bit, through tuples, dicts and maps

HEADS_OFF = {"marian": {"encoder.1.self_attn": [0, 3], "decoder.0.cross_attn": [2]},
             "gpt2": {"decoder.0.self_attn": [3], "decoder.1.self_attn": [1]}}


@pytest.mark.parametrize("family", list(HEADS_OFF))
def test_the_keyword_front_and_the_value_give_the_same_pass_bit_for_bit(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    ids = model.encode("the cat sat on the mat").ids[None]
    decoder = torch.tensor([[model.start_id, 5, 9, 11, 7]]) if family == "marian" else None
    for switches in (dict(scale="none", causal_mask=False), dict(scale=0.7, padding_mask=False),
                     dict(heads_off=HEADS_OFF[family]), dict(heads_off=HEADS_OFF[family], ablation="mean")):
        v = Variation(**switches)
        masks = {k: switches[k] for k in ("scale", "causal_mask", "padding_mask") if k in switches}
        with torch.no_grad():
            means = mean_outputs(model.head_outputs(ids, decoder)) if switches.get("ablation") == "mean" else None
            equal(model.forward(ids, decoder, head_means=means, **switches),
                  model.forward(ids, decoder, head_means=means, variation=v))
            equal(model.greedy_decode(ids, 4, head_means=means, **switches),
                  model.greedy_decode(ids, 4, head_means=means, variation=v))
            heads = model.head_switches(v.off, v.ablation, means)
            equal(model.value_norms(ids, decoder, heads=heads, **masks),
                  model.value_norms(ids, decoder, heads=heads, variation=Variation(**masks)))
            equal(model.head_outputs(ids, decoder, **masks), model.head_outputs(ids, decoder,
                                                                                variation=Variation(**masks)))
        with pytest.raises(ValueError, match="not both"):
            model.forward(ids, decoder, scale="none", variation=v)
        if switches.get("ablation") != "mean":  # a value's heads off apply where no switches are given (zero)
            equal(model.forward(ids, decoder, **switches),
                  (model.forward_pass(ids, decoder, variation=v).logits, model.forward_pass(ids, decoder,
                                                                                           variation=v).maps))
        assert not torch.equal(model.forward(ids, decoder, head_means=means, variation=v)[0],
                               model.forward(ids, decoder)[0])  # the value reaches the pass
    text = run_text(model, "the cat sat", max_new_tokens=3, scale="none", causal_mask=False)
    again = run_text(model, "the cat sat", max_new_tokens=3, variation=Variation("none", causal_mask=False))
    assert text.written == again.written and all((text.maps[k] == again.maps[k]).all() for k in text.maps)
    norms = run_value_norms(model, text.src_ids, text.tgt_ids, scale="none")
    assert all((norms[k] == n).all() for k, n in run_value_norms(model, text.src_ids, text.tgt_ids,
                                                                 variation=Variation("none")).items())
    with torch.no_grad():
        equal(real_head_means(model, ["the cat"], max_new_tokens=3, scale="none"),
              real_head_means(model, ["the cat"], max_new_tokens=3, variation=Variation("none")))
