"""Heads switched off in real models (the same forward argument as ours): zero and mean ablation equal the same
change made by hand in each family's own W_O, in float64; nothing off is bit-identical; bad switches refused."""

from __future__ import annotations

import copy

import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.core.ablation import mean_outputs  # noqa: E402
from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import PretrainedTransformer, load_pretrained  # noqa: E402
from attention_viz.importance.real import decoder_logits, encoder_states  # noqa: E402


def w_o(model, family: str, key: str):
    """(the module that is W_O for a map key, whether its weight is [in, out] (GPT-2's Conv1D))."""
    stack, layer, name = key.split(".")
    hf = model.model
    if family == "marian":
        layers = hf.model.encoder.layers if stack == "encoder" else hf.model.decoder.layers
        return getattr(layers[int(layer)], "encoder_attn" if name == "cross_attn" else "self_attn").out_proj, False
    if family == "bert":
        base = getattr(hf, "bert", hf)  # BertForMaskedLM holds a BertModel; a BertModel is its own base
        return base.encoder.layer[int(layer)].attention.output.dense, False
    if family == "gpt2":
        return hf.transformer.h[int(layer)].attn.c_proj, True
    return hf.model.layers[int(layer)].self_attn.o_proj, False


def surgery(model, family, heads_off, means=None):
    changed = PretrainedTransformer(copy.deepcopy(model.model), model.tokenizer)  # its own modules, its own keys
    d = model.d_k
    with torch.no_grad():
        for key, heads in heads_off.items():
            proj, transposed = w_o(changed, family, key)
            for h in heads:
                cols = slice(h * d, (h + 1) * d)
                block = proj.weight[cols, :].T if transposed else proj.weight[:, cols]  # (out, d)
                if means is not None:
                    if proj.bias is None:
                        proj.bias = torch.nn.Parameter(torch.zeros(block.size(0), dtype=block.dtype))
                    proj.bias += block @ means[key][h]
                if transposed:
                    proj.weight[cols, :] = 0.0
                else:
                    proj.weight[:, cols] = 0.0
    return changed


CASES = {
    "marian": {"encoder.1.self_attn": [0, 3], "decoder.0.cross_attn": [2]},
    "bert": {"encoder.0.self_attn": [1], "encoder.1.self_attn": [0, 2]},
    "gpt2": {"decoder.0.self_attn": [3], "decoder.1.self_attn": [1]},
    "llama": {"decoder.1.self_attn": [0, 1]},
}


def inputs(model, family):
    ids = model.encode("the cat sat on the mat").ids[None]
    decoder = None
    if family == "marian":
        decoder = torch.tensor([[model.start_id, 5, 9, 11, 7]])
    return ids, decoder


@pytest.mark.parametrize("family", list(CASES))
@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_ablation_equals_the_same_change_in_the_familys_w_o(tiny_folders, family, ablation):
    check_ablation(load_pretrained(tiny_folders[family], dtype=torch.float64), family, CASES[family], ablation)


def check_ablation(model, family, heads_off, ablation, logits_atol=1e-10):
    """heads_off with this ablation (a float64 model) equals the same change made by hand in the family's W_O."""
    ids, decoder = inputs(model, family)
    means = None
    with torch.no_grad():
        if ablation == "mean":
            reference_ids = model.encode("attention is all you need, and the students learn").ids[None]
            reference_decoder = None if decoder is None else torch.tensor([[model.start_id, 4, 8, 6, 12, 3, 5]])
            means = mean_outputs(model.head_outputs(reference_ids, reference_decoder))
        logits, maps = model.forward(ids, decoder, heads_off=heads_off, ablation=ablation, head_means=means)
        ref_logits, ref_maps = surgery(model, family, heads_off, means).forward(ids, decoder)
        plain, _ = model.forward(ids, decoder)
    torch.testing.assert_close(logits, ref_logits, atol=logits_atol, rtol=0)
    for key in maps:
        torch.testing.assert_close(maps[key], ref_maps[key], atol=1e-12, rtol=0, msg=key)
    assert (logits - plain).abs().max() > 1e-8


@pytest.mark.parametrize("family", list(CASES))
def test_nothing_off_is_bit_identical_and_decoding_takes_the_switch(tiny_folders, family):
    model = load_pretrained(tiny_folders[family])
    ids, decoder = inputs(model, family)
    with torch.no_grad():
        logits, maps = model.forward(ids, decoder)
        again, again_maps = model.forward(ids, decoder, heads_off={})
        assert torch.equal(logits, again) and all(torch.equal(maps[k], again_maps[k]) for k in maps)
        if family != "bert":
            kept, kept_maps = model.greedy_decode(ids, 5, heads_off=CASES[family])
            rerun, rerun_maps = model.greedy_decode(ids, 5, heads_off=CASES[family], reuse_keys=False)
            assert torch.equal(kept, rerun)
            for key in kept_maps:
                torch.testing.assert_close(kept_maps[key], rerun_maps[key], atol=1e-6, rtol=0)


def test_bad_switches_on_a_real_model_are_refused(tiny_folders):
    model = load_pretrained(tiny_folders["gpt2"])
    ids = model.encode("the cat").ids[None]
    for heads_off, message in (({"decoder.0.cross_attn": [0]}, "does not have"),
                               ({"decoder.0.self_attn": [9]}, "head 9 does not exist"),
                               ({f"decoder.{i}.self_attn": [0, 1, 2, 3] for i in range(2)}, "every head")):
        with pytest.raises(ValueError, match=message):
            model.forward(ids, heads_off=heads_off)


@pytest.mark.parametrize("family", list(CASES))
def test_value_flows_equal_a_hand_written_loop_with_the_familys_w_o(tiny_folders, family):
    check_value_flows(load_pretrained(tiny_folders[family], dtype=torch.float64), family)


def check_value_flows(model, family):
    """value_flows (a float64 model) equal α_ij · ‖v_j^h W_O^h‖ written as a loop over heads and keys."""
    ids, decoder = inputs(model, family)
    with torch.no_grad():
        flows = model.value_flows(ids, decoder)
        _, maps = model.forward(ids, decoder)
    assert list(flows) == list(maps)
    key = list(maps)[-1]
    proj, transposed = w_o(model, family, key)
    weight = proj.weight.T if transposed else proj.weight  # (D, H·d)
    with torch.no_grad():
        recorded = model.traced(ids, decoder, keep=("v",), at=(key,)).kept[key]["v"]  # (B, H, K, d), as attention used it
    d = model.d_k
    B, H, Q, K = maps[key].shape
    expected = torch.zeros(B, H, Q, K, dtype=torch.float64)
    for h in range(H):
        for j in range(K):
            moved = (weight[:, h * d:(h + 1) * d] @ recorded[0, h, j]).norm()
            expected[0, h, :, j] = maps[key][0, h, :, j] * moved
    torch.testing.assert_close(flows[key], expected, atol=1e-12, rtol=0)


def test_value_norms_follow_the_heads_switched_off_and_give_the_flows(tiny_folders):
    model = load_pretrained(tiny_folders["marian"], dtype=torch.float64)
    ids, decoder = inputs(model, "marian")
    heads_off = {"encoder.0.self_attn": [0, 1]}
    with torch.no_grad():
        norms, plain = model.value_norms(ids, decoder, heads_off=heads_off), model.value_norms(ids, decoder)
        flows = model.value_flows(ids, decoder, heads_off=heads_off)
        _, maps = model.forward(ids, decoder, heads_off={"encoder.0.self_attn": [0, 1]})
    assert list(norms) == list(maps)
    for key in maps:
        assert norms[key].shape == maps[key].shape[:2] + maps[key].shape[3:] and bool((norms[key] >= 0).all())
        torch.testing.assert_close(flows[key], maps[key] * norms[key][:, :, None, :], atol=1e-12, rtol=0)
    torch.testing.assert_close(norms["encoder.0.self_attn"], plain["encoder.0.self_attn"])  # nothing below it
    assert not torch.allclose(norms["encoder.1.self_attn"], plain["encoder.1.self_attn"])


def test_the_encoder_alone_then_the_decoder_give_the_whole_passs_logits(tiny_folders):
    """What real_head_importance shares between variants: encoder_states then decoder_logits equal traced,
    heads off in both stacks; the encoder alone sees only its own switches."""
    model = load_pretrained(tiny_folders["marian"], dtype=torch.float64)
    ids, decoder = inputs(model, "marian")
    off = Variation("none", heads_off={"encoder.1.self_attn": [0], "decoder.0.cross_attn": [1, 2]})
    with torch.no_grad():
        whole = model.traced(ids, decoder, variation=off).logits
        states = encoder_states(model, ids, variation=off)
        split = decoder_logits(model, states, decoder, attention_mask=model.padding_of(ids), variation=off)
        plain = decoder_logits(model, encoder_states(model, ids, variation=Variation("none")), decoder,
                               attention_mask=model.padding_of(ids), variation=off)
    torch.testing.assert_close(split, whole, atol=1e-12, rtol=0)
    assert not torch.allclose(plain, whole)  # the encoder's head off matters
    with pytest.raises(ValueError, match="no separate encoder"):
        encoder_states(load_pretrained(tiny_folders["gpt2"]), ids)
