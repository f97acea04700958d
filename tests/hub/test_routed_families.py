"""Families whose attention does not go through transformers' attention interface, routed through it (hub.routes):
each loads from a saved folder and is proven on load, its routed attention is the model's own rule (GPT-Neo's
local window, the original GPT's causal buffer), and its long pass equals its maps. Each switch against transformers'
own eager model (maps, scale, causal, heads off, greedy decoding) is devtools.coverage's, run for every type by
tests/hub/test_coverage.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.long_kept import LongRunError  # noqa: E402
from attention_viz.hub.routes import ROUTED, SCORES_AS_ATTENTIONS  # noqa: E402
from devtools import tiny_archs  # noqa: E402

FACTORS = {"gpt_neo": lambda d_k: 1.0, "openai-gpt": lambda d_k: d_k ** -0.5,  # each family's own factor on QKᵀ
           "fsmt": lambda d_k: d_k ** -0.5, "megatron-bert": lambda d_k: d_k ** -0.5,
           "rembert": lambda d_k: d_k ** -0.5, "xglm": lambda d_k: d_k ** -0.5, "trocr": lambda d_k: d_k ** -0.5,
           "mvp": lambda d_k: d_k ** -0.5, "xlm": lambda d_k: d_k ** -0.5, "flaubert": lambda d_k: d_k ** -0.5,
           "mpnet": lambda d_k: d_k ** -0.5, "roformer": lambda d_k: d_k ** -0.5,
           "tapas": lambda d_k: d_k ** -0.5, "gpt_neox_japanese": lambda d_k: d_k ** -0.5,
           "ibert": lambda d_k: d_k ** -0.5, "squeezebert": lambda d_k: d_k ** -0.5, "luke": lambda d_k: d_k ** -0.5,
           "xlnet": lambda d_k: d_k ** -0.5}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    root = tmp_path_factory.mktemp("routed")
    return {kind: load_pretrained(tiny_archs.save(kind, root / kind)) for kind in FACTORS}


@pytest.mark.parametrize("kind", list(FACTORS))
def test_a_routed_family_loads_is_proven_and_its_long_pass_equals_its_maps(loaded, kind):
    model = loaded[kind]
    assert model.fidelity.proven and getattr(model.model, ROUTED, False), model.fidelity
    assert model.factor == pytest.approx(FACTORS[kind](model.d_k))
    ids = torch.randint(5, 100, (1, 24), generator=torch.Generator().manual_seed(0))
    _, maps = model.forward(ids, ids[:, :4] if model.layout == "encoder-decoder" else None)
    if model.abilities.position_bias:  # MPNet's, XLNet's: the long pass does not add a position bias
        with pytest.raises(LongRunError, match="position bias"):
            model.long_run(ids, warn=False)
        return
    run = model.long_run(ids, warn=False)  # an encoder-decoder reads the page with its encoder
    try:
        assert run.keys == [key for key in model.map_keys if model.layout != "encoder-decoder"
                            or key.startswith("encoder.")]
        for key in run.keys:
            for head in range(model.n_heads):
                region = np.asarray(run.region(key, head, slice(0, 24), slice(0, 24)))
                np.testing.assert_allclose(region, maps[key][0, head].detach().numpy(), atol=1e-5, err_msg=key)
    finally:
        run.close()


def test_gpt_neos_local_layers_see_their_window_and_its_qk_has_no_factor(loaded):
    """GPT-Neo's tiny model: layer 0 global, layer 1 local with a window of 4: the local map gives keys 4 or more
    back exactly 0 while the global one does not; without the causal mask both see every position; its scale switch
    says its factor is 1."""
    model = loaded["gpt_neo"]
    window = model.model.config.window_size
    assert model.model.config.attention_layers == ["global", "local"] and window == 4
    ids = torch.randint(5, 100, (1, 12), generator=torch.Generator().manual_seed(1))
    _, maps = model.forward(ids)
    far = torch.ones(12, 12, dtype=torch.bool).tril(-window)  # key j at least `window` before query i
    assert bool((maps["decoder.1.self_attn"][0][:, far] == 0).all())
    assert bool((maps["decoder.0.self_attn"][0][:, far] > 0).all())
    _, open_maps = model.forward(ids, causal_mask=False)
    for key in model.map_keys:
        assert bool((open_maps[key] > 0).all()), key
    assert "multiplies QKᵀ by 1" in model.scaling_note


def padded(model, decoder: bool):
    """Two texts as one right-padded batch: ids [2, S] and their attention mask; an encoder-decoder's decoder input."""
    rows = [model.encode(text).ids for text in ("Attention is all you need.", "Hi")]
    S = max(len(row) for row in rows)
    ids = torch.full((2, S), model.pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return ids, (ids != model.pad_id).long(), (torch.randint(5, 60, (2, 5)) if decoder else None)


def eager(model, ids, mask, decoder=None):
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True, use_cache=False,
                    **({"decoder_input_ids": decoder} if decoder is not None else {}))
    if decoder is None:
        return out.logits, {f"decoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}
    maps = {f"encoder.{i}.self_attn": a for i, a in enumerate(out.encoder_attentions)}
    maps |= {f"decoder.{i}.self_attn": a for i, a in enumerate(out.decoder_attentions)}
    return out.logits, maps | {f"decoder.{i}.cross_attn": a for i, a in enumerate(out.cross_attentions)}


def assert_same(ours: tuple, theirs: tuple, real: torch.Tensor) -> None:
    """Logits and every map on the real (unpadded) rows the same, to float32's rounding."""
    (logits, maps), (own_logits, own_maps) = ours, theirs
    assert sorted(maps.keys()) == sorted(own_maps)
    for key, weights in own_maps.items():
        rows = real if key.startswith("encoder.") or "decoder" not in key and real is not None else None
        a, b = maps[key].detach(), weights
        if rows is not None and a.size(-2) == rows.size(-1):
            a, b = a[rows.bool()[:, None, :, None].expand_as(a)], b[rows.bool()[:, None, :, None].expand_as(b)]
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0, msg=key)
    torch.testing.assert_close(logits.detach(), own_logits, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", ["fsmt", "openai-gpt"])
def test_the_padding_and_causal_switches_act_on_a_routed_familys_own_masks(kind, monkeypatch):
    """FSMT and the original GPT build their masks themselves (not through transformers' mask interface): the
    padding switch off equals eager given a mask of ones; the causal switch off equals eager with its own causal
    rule made all-seeing (FSMT's causal mask of zeros; the original GPT's buffer of ones), on a padded batch."""
    import copy

    import transformers.models.fsmt.modeling_fsmt as fsmt
    from attention_viz.hub import PretrainedTransformer

    theirs, tokenizer = tiny_archs.tiny(kind)
    ours = PretrainedTransformer(copy.deepcopy(theirs), tokenizer)
    ids, mask, decoder = padded(ours, decoder=kind == "fsmt")
    assert_same(ours.forward(ids, decoder), eager(theirs, ids, mask, decoder), mask)
    assert_same(ours.forward(ids, decoder, padding_mask=False), eager(theirs, ids, torch.ones_like(mask), decoder),
                None)
    on, off = ours.forward(ids, decoder), ours.forward(ids, decoder, causal_mask=False)  # before eager is changed
    if kind == "fsmt":
        prepare = fsmt._prepare_fsmt_decoder_inputs

        def no_causal(*args, **kwargs):
            decoder_ids, padding, causal = prepare(*args, **kwargs)
            return decoder_ids, padding, torch.zeros_like(causal)

        monkeypatch.setattr(fsmt, "_prepare_fsmt_decoder_inputs", no_causal)
        lifted = theirs
    else:
        lifted = copy.deepcopy(theirs)
        for module in lifted.modules():
            if type(module).__name__ == "Attention":
                module.bias.fill_(1)
    unmasked = eager(lifted, ids, mask, decoder)
    with pytest.raises(AssertionError):  # the switch changes the maps: the comparison below can fail
        assert_same(on, unmasked, mask)
    assert_same(off, unmasked, mask)


@pytest.mark.parametrize("kind", ["megatron-bert", "rembert", "xlm", "flaubert", "mpnet", "roformer", "tapas",
                                  "ibert", "squeezebert", "luke"])
def test_encoders_from_before_the_interface_take_the_scale_and_padding_switches(kind, monkeypatch):
    """MegatronBERT's, RemBERT's, XLM's and Flaubert's attention (and I-BERT's, SqueezeBERT's, LUKE's) divide by
    math.sqrt(d) in their own code (no factor to set): the scale switch off equals their eager model with that square
    root made 1; the padding switch off equals it given a mask of ones (XLM's and Flaubert's: their attention's mask
    of ones, their hidden states still zeroed at the padding, which is no part of attention). SqueezeBERT's eager
    `attentions` are its scores before the softmax: compared after it."""
    import copy
    import importlib
    from types import SimpleNamespace

    from attention_viz.hub import PretrainedTransformer

    theirs, tokenizer = tiny_archs.tiny(kind)
    ours = PretrainedTransformer(copy.deepcopy(theirs), tokenizer)
    ids, mask, _ = padded(ours, decoder=False)

    def encoder_eager(model, attention_mask):
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=attention_mask, output_attentions=True)
        logits = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
        return logits, {f"encoder.{i}.self_attn": a.softmax(-1) if kind in SCORES_AS_ATTENTIONS else a
                        for i, a in enumerate(out.attentions)}

    assert_same(ours.forward(ids), encoder_eager(theirs, mask), mask)
    unpadded = ours.forward(ids, padding_mask=False)
    module = importlib.import_module(type(theirs).__module__)
    if hasattr(module, "get_masks"):  # XLM's, Flaubert's: (the mask its hidden states are multiplied by, attention's)
        get_masks = module.get_masks
        with monkeypatch.context() as patched:
            patched.setattr(module, "get_masks", lambda *args, **kwargs: (
                lambda masks: (masks[0], torch.ones_like(masks[1])))(get_masks(*args, **kwargs)))
            assert_same(unpadded, encoder_eager(theirs, mask), None)
    else:
        assert_same(unpadded, encoder_eager(theirs, torch.ones_like(mask)), None)
    unscaled = ours.forward(ids, scale="none")
    with pytest.raises(AssertionError):
        assert_same(unscaled, encoder_eager(theirs, mask), mask)
    import math

    monkeypatch.setattr(module, "math", SimpleNamespace(**{**vars(math), "sqrt": lambda x: 1.0}))
    assert_same(unscaled, encoder_eager(theirs, mask), mask)


def test_mvp_with_prompts_is_refused_naming_them():
    """MVP's prompts put learned keys before every attention's own: refused by name, before the probe."""
    import copy

    from transformers import MvpForConditionalGeneration

    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    plain, tokenizer = tiny_archs.tiny("mvp")
    config = copy.deepcopy(plain.config)
    config.use_prompt, config.prompt_length, config.prompt_mid_dim = True, 3, 16
    with pytest.raises(UnsupportedModelError, match="with prompts \\(use_prompt\\) is not supported"):
        PretrainedTransformer(MvpForConditionalGeneration(config).eval(), tokenizer)


def test_mpnets_relative_position_bias_is_kept_and_switched_like_t5s(loaded):
    """MPNet adds T5's bucketed relative-position bias to QKᵀ/√d_k: its abilities say so, B is kept per map key equal
    to its encoder's compute_position_bias, and position_bias=False equals the maps with it left out."""
    model = loaded["mpnet"]
    assert model.abilities.position_bias
    ids = torch.randint(5, 100, (1, 10), generator=torch.Generator().manual_seed(2))
    traced = model.traced(ids)
    hidden = model.model.get_input_embeddings()(ids)
    own = model.model.base_model.encoder.compute_position_bias(hidden)  # (1, H, Q, K)
    for key in model.map_keys:
        torch.testing.assert_close(traced.biases[key].detach().expand_as(own), own.detach(), msg=key)
    _, with_bias = model.forward(ids)
    _, without = model.forward(ids, position_bias=False)
    assert not torch.allclose(with_bias[model.map_keys[0]], without[model.map_keys[0]])


def test_fsmts_decoder_stays_causal_in_a_pass_given_its_encoders_output(loaded):
    """FSMT's forward builds its decoder's causal mask only when given input_ids without a cache; greedy decoding's
    last pass (the maps') hands it the encoder's output instead: the route keeps the decoder causal there too, and
    those maps equal forward's on the same tokens."""
    model = loaded["fsmt"]
    ids = torch.randint(5, 60, (1, 7), generator=torch.Generator().manual_seed(3))
    written, maps = model.greedy_decode(ids, 5)
    decoder = torch.cat([torch.full((1, 1), model.start_id), written[:, :-1]], 1)  # what the last pass read
    _, direct = model.forward(ids, decoder)
    for key, weights in maps.items():
        if key.startswith("decoder.") and key.endswith("self_attn"):
            assert bool((weights[0].triu(1) == 0).all()), key
        torch.testing.assert_close(weights, direct[key], atol=1e-6, rtol=0, msg=key)


def test_bigbirds_full_attention_is_routed_and_its_block_sparse_one_refused_by_name():
    """BigBird with attention_type='original_full' is BERT's self-attention: routed, its maps and output equal its
    eager model's on a padded batch; block-sparse (its default) is refused naming what each query sees."""
    import copy

    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    sparse, tokenizer = tiny_archs.tiny("big_bird")
    with pytest.raises(UnsupportedModelError, match="block-sparse attention is not supported"):
        PretrainedTransformer(copy.deepcopy(sparse), tokenizer)
    config = copy.deepcopy(sparse.config)
    config.attention_type = "original_full"
    torch.manual_seed(0)
    theirs = type(sparse)(config).eval()
    ours = PretrainedTransformer(copy.deepcopy(theirs), tokenizer)
    assert ours.fidelity.proven and getattr(ours.model, ROUTED, False)
    ids, mask, _ = padded(ours, decoder=False)
    with torch.no_grad():
        out = theirs(input_ids=ids, attention_mask=mask, output_attentions=True)
    own = (out.logits, {f"encoder.{i}.self_attn": a for i, a in enumerate(out.attentions)})
    assert_same(ours.forward(ids), own, mask)


def test_a_quantised_ibert_and_lukes_entity_inputs_are_refused_by_what_they_are(loaded):
    """I-BERT with quant_mode (8-bit q, k, v and an integer softmax) is refused on load, naming it; LUKE's entity
    inputs (entity-aware queries over words and entities) are refused with a sentence, its words-only pass proven."""
    import copy

    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    plain, tokenizer = tiny_archs.tiny("ibert")
    config = copy.deepcopy(plain.config)
    config.quant_mode = True
    with pytest.raises(UnsupportedModelError, match="quantised IBert model \\(quant_mode\\) is not supported: its q, k"):
        PretrainedTransformer(type(plain)(config).eval(), tokenizer)
    luke = loaded["luke"]
    ids = torch.randint(5, 100, (1, 6), generator=torch.Generator().manual_seed(4))
    entities = torch.ones(1, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="LUKE's entity inputs are not supported: its entity tokens attend"):
        luke.model(input_ids=ids, entity_ids=entities, entity_attention_mask=torch.ones_like(entities),
                   entity_position_ids=torch.zeros(1, 2, 1, dtype=torch.long))


def test_xlnets_relative_attention_is_eq1_with_its_position_and_segment_terms_as_a_bias(loaded):
    """XLNet's content stream: (ac + bd + ef)/√d, ac = (q + r_w_bias)·k through Eq. 1, bd (relative positions) and ef
    (segments) the position bias, each kept apart; maps and logits equal eager's on a padded batch, bd equals what its
    own rel_attn_core computes, the position bias off equals eager with bd and ef 0, a pass given token_type_ids (ef)
    equals eager's; the query stream (target_mapping) and attn_type 'uni' are refused with a sentence."""
    import copy

    from attention_viz.hub import PretrainedTransformer, UnsupportedModelError

    theirs, tokenizer = tiny_archs.tiny("xlnet")
    ours = loaded["xlnet"]
    ids, mask, _ = padded(ours, decoder=False)
    own_bd = []

    def core(module, q_head, k_head_h, v_head_h, k_head_r, seg_mat=None, attn_mask=None, output_attentions=False):
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + module.r_r_bias, k_head_r)
        own_bd.append(module.rel_shift_bnij(bd, klen=k_head_h.size(0)) * module.scale)
        return type(module).rel_attn_core(module, q_head, k_head_h, v_head_h, k_head_r, seg_mat, attn_mask,
                                          output_attentions)

    spied = copy.deepcopy(theirs)
    for module in spied.modules():
        if type(module).__name__ == "XLNetRelativeAttention":
            module.rel_attn_core = core.__get__(module)
    reference = eager(spied, ids, mask)
    reference = (reference[0], {key.replace("decoder.", "encoder."): a for key, a in reference[1].items()})
    traced = ours.traced(ids, attention_mask=mask)
    assert_same((traced.logits, traced.maps), reference, mask)
    real = mask.bool()[:, None, :, None] & mask.bool()[:, None, None, :]
    for key, bd in zip(ours.map_keys, own_bd):
        assert list(traced.terms[key]) == ["c2c", "bd"]
        torch.testing.assert_close(traced.terms[key]["bd"][real.expand_as(bd)], bd[real.expand_as(bd)])
    flat = copy.deepcopy(theirs)
    for module in flat.modules():
        if type(module).__name__ == "XLNetRelativeAttention":
            module.rel_shift_bnij = lambda x, klen=-1: x.new_zeros(*x.shape[:3], klen)
    off = eager(flat, ids, mask)
    assert_same(ours.forward(ids, position_bias=False), (off[0], {k.replace("decoder.", "encoder."): a
                                                                  for k, a in off[1].items()}), mask)
    segments = torch.zeros_like(ids)
    segments[:, 4:] = 1
    with torch.no_grad():
        direct = ours.model(input_ids=ids, attention_mask=mask, token_type_ids=segments, output_attentions=True)
        own = theirs(input_ids=ids, attention_mask=mask, token_type_ids=segments, output_attentions=True)
    torch.testing.assert_close(direct.logits[mask.bool()], own.logits[mask.bool()], atol=1e-4, rtol=1e-4)
    for a, b in zip(direct.attentions, own.attentions):
        torch.testing.assert_close(a[real.expand_as(a)], b[real.expand_as(b)], atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="XLNet's two-stream attention is not supported: with target_mapping"):
        ours.model(input_ids=ids[:1], perm_mask=torch.zeros(1, ids.size(1), ids.size(1)),
                   target_mapping=torch.eye(ids.size(1))[None, :2])
    config = copy.deepcopy(theirs.config)
    config.attn_type = "uni"
    with pytest.raises(UnsupportedModelError, match="attn_type='uni' is not supported: its one mask holds"):
        PretrainedTransformer(type(theirs)(config).eval(), tokenizer)


def test_cpmant_is_routed_with_its_position_bias_and_refused_with_its_prompts(monkeypatch):
    """CPM-Ant's segment-and-position bias is handed over as the position bias: without prompts (prompt_length 0)
    every check of devtools.coverage passes against its eager model (maps, heads off, the bias off against its table
    zeroed); as released, with prompt tokens before the text in every pass, it is refused naming them."""
    from devtools import coverage

    released = coverage.check("cpmant")
    assert released.result == "refused" and "with prompts (prompt_length 32)" in released.reason, released
    monkeypatch.setitem(tiny_archs.QUIRKS, "cpmant", {**tiny_archs.QUIRKS["cpmant"], "prompt_length": 0})
    result = coverage.check("cpmant")
    assert result.result == "passed", result
    assert not result.checks["heads"].startswith("n/a") and not result.checks["bias"].startswith("n/a"), result
    assert "position_bias" in result.fidelity.honoured
