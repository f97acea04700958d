"""A real model's public calls take the switches as one core.variation.Variation as well as keywords: the two give
the same pass, bit for bit (an encoder-decoder and a decoder-only family, tiny and random). The passes under them
take the Variation only."""

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


def inputs(model, family):
    ids = model.encode("the cat sat on the mat").ids[None]
    return ids, (torch.tensor([[model.start_id, 5, 9, 11, 7]]) if family == "marian" else None)


@pytest.mark.parametrize("family", list(HEADS_OFF))
def test_the_keyword_front_and_the_value_give_the_same_pass_bit_for_bit(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    ids, decoder = inputs(model, family)
    for keywords in (dict(scale="none", causal_mask=False), dict(scale=0.7, padding_mask=False),
                     dict(heads_off=HEADS_OFF[family]), dict(heads_off=HEADS_OFF[family], ablation="mean")):
        v = Variation(**keywords)
        masks = {k: keywords[k] for k in ("scale", "causal_mask", "padding_mask") if k in keywords}
        with torch.no_grad():
            means = mean_outputs(model.head_outputs(ids, decoder)) if keywords.get("ablation") == "mean" else None
            equal(model.forward(ids, decoder, head_means=means, **keywords),
                  model.forward(ids, decoder, head_means=means, variation=v))
            equal(model.greedy_decode(ids, 4, head_means=means, **keywords),
                  model.greedy_decode(ids, 4, head_means=means, variation=v))
            equal(model.value_norms(ids, decoder, head_means=means, **keywords),
                  model.value_norms(ids, decoder, head_means=means, variation=v))
            equal(model.value_flows(ids, decoder, head_means=means, **keywords),
                  model.value_flows(ids, decoder, head_means=means, variation=v))
            equal(model.head_outputs(ids, decoder, **masks), model.head_outputs(ids, decoder,
                                                                                variation=Variation(**masks)))
            recorded = model.forward_pass(ids, decoder, variation=v, head_means=means)  # the pass under forward
            equal(model.forward(ids, decoder, head_means=means, **keywords), (recorded.logits, recorded.maps))
        with pytest.raises(ValueError, match="not both"):
            model.forward(ids, decoder, scale="none", variation=v)
        assert not torch.equal(model.forward(ids, decoder, head_means=means, variation=v)[0],
                               model.forward(ids, decoder)[0])  # the value reaches the pass
    v = Variation("none", causal_mask=False)
    text = run_text(model, "the cat sat", max_new_tokens=3, variation=v)
    with torch.no_grad():
        written, maps = model.greedy_decode(model.encode("the cat sat").ids[None], 3, scale="none", causal_mask=False)
        ran = [torch.tensor([list(x)]) for x in (text.src_ids, text.tgt_ids) if x]
        plain = model.value_norms(*ran, scale="none")
    assert text.written_ids == tuple(written[0].tolist()) and all((text.maps[k] == maps[k][0].numpy()).all()
                                                                  for k in text.maps)
    norms = run_value_norms(model, text.src_ids, text.tgt_ids, variation=Variation("none"))
    assert all((norms[k] == n[0].numpy()).all() for k, n in plain.items())
    with torch.no_grad():
        assert not all(torch.equal(a, b) for a, b in zip(
            real_head_means(model, ["the cat"], max_new_tokens=3, variation=Variation("none")).values(),
            real_head_means(model, ["the cat"], max_new_tokens=3).values()))  # the value reaches the pass

