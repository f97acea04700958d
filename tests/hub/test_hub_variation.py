"""A real model's public calls take the switches as one core.variation.Variation as well as keywords: the two give
the same pass, bit for bit (an encoder-decoder and a decoder-only family, tiny and random). The passes under them
take the Variation only, and its heads off are the pass's: mean ablation given by the Variation (with head_means
beside it) gives what core.ablation switches built by hand and handed to the attention give."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.core.ablation import mean_outputs, switches  # noqa: E402
from attention_viz.core.protocol import AttentionModel  # noqa: E402
from attention_viz.core.trace import kept, trace  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.attention import RECORDED, Pass, switched  # noqa: E402
from attention_viz.hub.text_run import run_text, run_value_norms  # noqa: E402
from attention_viz.importance.real import decoder_logits, encoder_states, final_states, real_head_means  # noqa: E402
from tests.core.test_variation import equal  # noqa: E402 - bit for bit, through tuples, dicts and maps

HEADS_OFF = {"marian": {"encoder.1.self_attn": [0, 3], "decoder.0.cross_attn": [2]},
             "gpt2": {"decoder.0.self_attn": [3], "decoder.1.self_attn": [1]}}


def inputs(model, family):
    ids = model.encode("the cat sat on the mat").ids[None]
    return ids, (torch.tensor([[model.start_id, 5, 9, 11, 7]]) if family == "marian" else None)


@pytest.mark.parametrize("family", list(HEADS_OFF))
def test_the_keyword_front_and_the_value_give_the_same_pass_bit_for_bit(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    assert isinstance(model, AttentionModel) and model.pretrained  # core.protocol, as our Transformer
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
            recorded = model.traced(ids, decoder, variation=v, head_means=means)  # the pass under forward
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


def prebuilt(model, run_variation: Variation, heads: dict | None, keep: tuple[str, ...] = ()) -> Pass:
    """A Pass as the attention takes it, its switches built by hand (core.ablation.switches, as core.trace's probes
    keeping `keep`) and its variation's heads off left empty: the heads off reach the attention only through the
    switches given."""
    keys = {id(module): key for name, module in model.model.named_modules()
            if (key := model.family.key_of(name)) is not None}
    return Pass(run_variation, keys, trace=trace(list(keys.values()), heads, keep, records=RECORDED))


@pytest.mark.parametrize("family", list(HEADS_OFF))
def test_mean_ablation_given_by_the_variation_alone_equals_prebuilt_switches(tiny_folders, family):
    """Heads off given only by the Variation (mean ablation, head_means beside it) through every pass that takes
    them (traced, run_text's decode, run_value_norms, the scoring's encoder, decoder and final states) give bit
    for bit the maps and logits that switches built by hand and handed to the attention give; an encoder's head off
    reaches the decoder through the states."""
    model = load_pretrained(tiny_folders[family])
    ids, decoder = inputs(model, family)
    v = Variation("none", heads_off=HEADS_OFF[family], ablation="mean")
    plain = Variation("none")
    with torch.no_grad():
        means = mean_outputs(model.head_outputs(*inputs(model, family)))
        heads = switches({key: model.n_heads for key in model.map_keys}, v.off, "mean", means)
        run = prebuilt(model, plain, heads)
        with switched(run):
            expected = model.model(**model.model_inputs(ids, decoder, None)).logits
        recorded = model.traced(ids, decoder, variation=v, head_means=means)
        equal(recorded.logits, expected)
        equal(dict(recorded.maps.items()), {key: run.maps[key] for key in recorded.maps})
        assert not torch.equal(expected, model.traced(ids, decoder, variation=plain).logits)

        with switched(prebuilt(model, plain, heads)):
            hidden = model.model.base_model(**model.model_inputs(ids, decoder, None)).last_hidden_state
        equal(final_states(model, ids, decoder, variation=v, head_means=means), hidden)
        if family == "marian":
            mask = model.padding_of(ids)
            with switched(prebuilt(model, plain, heads)):
                states = model.model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
            equal(encoder_states(model, ids, variation=v, head_means=means), states)
            with switched(prebuilt(model, plain, heads)):
                logits = model.model(encoder_outputs=(states,), attention_mask=mask, decoder_input_ids=decoder,
                                     use_cache=False).logits
            equal(decoder_logits(model, states, decoder, attention_mask=mask, variation=v, head_means=means), logits)

    text = run_text(model, "the cat sat on the mat", max_new_tokens=4, variation=v, head_means=means, values=True)
    ran = [torch.tensor([list(x)]) for x in (text.src_ids, text.tgt_ids) if x] + [None]  # the last step's pass
    with torch.no_grad():
        run = prebuilt(model, plain, heads, keep=("v",))
        with switched(run):
            model.model(**model.model_inputs(ran[0], ran[1], None))
    for key, weights in run.maps.items():  # the decode's last pass: its encoder once, then the decoder
        torch.testing.assert_close(torch.from_numpy(text.maps[key]), weights[0], atol=0, rtol=0, msg=key)
    norms = run_value_norms(model, text.src_ids, text.tgt_ids, variation=v, head_means=means)
    for key, value in model.norms_of(kept(run.trace)).items():
        torch.testing.assert_close(torch.from_numpy(norms[key]), value[0], atol=0, rtol=0, msg=key)
        torch.testing.assert_close(torch.from_numpy(text.norms[key]), value[0], atol=0, rtol=0, msg=key)
