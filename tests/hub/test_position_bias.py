"""A position bias on QKᵀ: T5, mT5 and UMT5 (tiny models built from their configs and saved offline by
devtools.tiny_archs) run with our Eq. 1 inside, softmax(QKᵀ + B) as their eager attention computes it. Each is proven
on load; its maps, logits, greedy decode and heads off equal transformers' eager model; B is kept per map key as the
model computed it; position_bias=False equals transformers' eager model with its relative_attention_bias tables
zeroed. T5 has no 1/√d_k: its factor is 1 and the scale switch says so. One test per model type."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from attention_viz.core.variation import Variation  # noqa: E402
from attention_viz.hub import load_pretrained  # noqa: E402
from attention_viz.hub.long_kept import LongRunError  # noqa: E402
from attention_viz.qkstats import qk_statistics  # noqa: E402
from devtools import tiny_archs  # noqa: E402

TEXTS = ("Attention is all you need.", "Hi there")


def loaded(model_type: str, tmp_path):
    """(ours: the saved tiny model loaded by hub.load_pretrained, theirs: the same weights in eager attention)."""
    ours = load_pretrained(tiny_archs.save(model_type, tmp_path / model_type))
    theirs, _ = tiny_archs.tiny(model_type)
    return ours, theirs


def batch(ours):
    """Two texts as one right-padded batch: ids [2, S], attention mask [2, S], decoder input [2, 4]."""
    rows = [ours.encode(text).ids for text in TEXTS]
    S = max(len(r) for r in rows)
    ids = torch.full((2, S), ours.pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    decoder = torch.cat([torch.full((2, 1), ours.start_id), ids[:, :3]], 1)  # (2, 4)
    return ids, (ids != ours.pad_id).long(), decoder


def eager(model, ids, mask, decoder):
    """transformers' eager pass: (logits, {map key: weights}) under our keys."""
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder, output_attentions=True,
                    use_cache=False)
    maps = {f"encoder.{i}.self_attn": a for i, a in enumerate(out.encoder_attentions)}
    maps |= {f"decoder.{i}.self_attn": a for i, a in enumerate(out.decoder_attentions)}
    maps |= {f"decoder.{i}.cross_attn": a for i, a in enumerate(out.cross_attentions)}
    return out.logits, maps


def assert_same(ours_logits, ours_maps, theirs: tuple) -> None:
    logits, maps = theirs
    assert sorted(ours_maps.keys()) == sorted(maps)
    for key in maps:
        torch.testing.assert_close(ours_maps[key], maps[key], atol=1e-5, rtol=0, msg=key)
    torch.testing.assert_close(ours_logits, logits, atol=1e-4, rtol=1e-4)


def own_bias(model, module_name: str, Q: int, K: int) -> torch.Tensor:
    """The bias transformers computes for an attention module: its own table's (UMT5: every self-attention), or its
    stack's first layer's (T5, mT5: one table a stack, shared by its layers); [1, H, Q, K]."""
    module = model.get_submodule(module_name)
    if not module.has_relative_attention_bias:
        stack = module_name.split(".")[0]
        module = next(m for n, m in model.named_modules()
                      if n.startswith(stack + ".") and getattr(m, "has_relative_attention_bias", False))
    with torch.no_grad():
        return module.compute_bias(Q, K)


@pytest.mark.parametrize("model_type", ["t5", "mt5", "umt5"])
def test_t5s_kin_run_with_their_position_bias_as_transformers_eager_computes_them(model_type, tmp_path):
    ours, theirs = loaded(model_type, tmp_path)
    assert ours.fidelity.proven and "position_bias" in ours.fidelity.honoured, ours.fidelity
    assert "with its position bias" in str(ours.fidelity)
    assert ours.layout == "encoder-decoder" and ours.abilities.position_bias and ours.abilities.writes_text
    assert ours.factor == 1.0 and "not by 1/√d_k" in ours.scaling_note and "W_Q" in ours.scaling_note

    ids, mask, decoder = batch(ours)
    recorded = ours.traced(ids, decoder, attention_mask=mask)
    assert_same(recorded.logits, recorded.maps, eager(theirs, ids, mask, decoder))

    # B, per map key: every self-attention's, as the model computes it; its cross-attention adds none
    names = {key: name for name, key in ours.family.keys}
    self_keys = [key for key in ours.map_keys if key.endswith("self_attn")]
    assert sorted(recorded.biases) == sorted(self_keys)
    for key in self_keys:
        Q = K = ids.size(1) if key.startswith("encoder.") else decoder.size(1)
        torch.testing.assert_close(recorded.biases[key], own_bias(theirs, names[key], Q, K), atol=0, rtol=0)

    # the switch: B taken out, as transformers computes the model with its bias tables zeroed
    off = ours.traced(ids, decoder, attention_mask=mask, variation=Variation(position_bias=False))
    assert off.biases == {}
    zeroed = copy.deepcopy(theirs)
    with torch.no_grad():
        for name, module in zeroed.named_modules():
            if name.endswith("relative_attention_bias"):
                module.weight.zero_()
    assert_same(off.logits, off.maps, eager(zeroed, ids, mask, decoder))
    key = self_keys[0]
    assert float((off.maps[key] - recorded.maps[key]).abs().max().detach()) > 1e-3  # the switch changes the map
    logits, maps = ours.forward(ids, decoder, attention_mask=mask, position_bias=False)  # the keyword front
    torch.testing.assert_close(logits, off.logits, atol=0, rtol=0)

    # heads off: as the eager model with that head's columns of W_O zeroed
    d = ours.d_k
    cut = copy.deepcopy(theirs)
    with torch.no_grad():
        for key, w_o_name, _ in ours.family.w_o:
            cut.get_submodule(w_o_name).weight[:, d:2 * d] = 0  # head 1
    logits, _ = ours.forward(ids, decoder, attention_mask=mask, heads_off={key: [1] for key in ours.map_keys})
    torch.testing.assert_close(logits, eager(cut, ids, mask, decoder)[0], atol=1e-4, rtol=1e-4)

    # greedy decoding writes what generate writes, keys kept between steps (the bias of each new row) or not
    src = ids[:1, : int(mask[0].sum())]  # (1, S)
    with torch.no_grad():
        expected = theirs.generate(src, max_new_tokens=5, do_sample=False, num_beams=1)[:, 1:]
    for reuse_keys in (True, False):
        written, _ = ours.greedy_decode(src, 5, reuse_keys=reuse_keys)
        assert written.tolist() == expected[:, : written.size(1)].tolist() and written.size(1) > 0
    assert sorted(ours.greedy_pass(src, 5)[1].biases) == sorted(self_keys)  # the encoder's kept with the decoder's


def test_t5s_scale_switch_acts_on_its_factor_of_1_and_its_own_qk_is_measured(tmp_path):
    ours, theirs = loaded("t5", tmp_path)
    ids, mask, decoder = batch(ours)
    plain, _ = ours.forward(ids, decoder, attention_mask=mask)
    unscaled, _ = ours.forward(ids, decoder, attention_mask=mask, scale="none")
    torch.testing.assert_close(unscaled, plain, atol=0, rtol=0)  # its own factor is 1: "none" changes nothing
    # the paper's 1/√d_k as a custom factor: eager with every attention module's factor on QKᵀ set to it, B added after
    factor = ours.d_k ** -0.5
    scaled = copy.deepcopy(theirs)
    for name, _ in ours.family.keys:
        scaled.get_submodule(name).scaling = factor
    logits, maps = ours.forward(ids, decoder, attention_mask=mask, scale=factor)
    assert_same(logits, maps, eager(scaled, ids, mask, decoder))
    assert float((logits - plain).abs().max().detach()) > 1e-3

    # footnote 4 on its own q and k: every attention measured, q·k without B (the pooled logits are q·k)
    stats = qk_statistics(ours, list(TEXTS), max_new_tokens=4, keep_logits=True)
    assert list(stats) == ours.map_keys
    first = stats["encoder.0.self_attn"]
    assert first.d_k == ours.d_k and first.n_pairs > 0 and bool((first.logit_var > 0).all())
    kept = ours.traced(ids[:1, : int(mask[0].sum())], decoder[:1], keep=("q", "k"),
                       at=("encoder.0.self_attn",)).kept["encoder.0.self_attn"]
    q, k = kept["q"], kept["k"]
    assert first.logits[0, 0] == pytest.approx(float(q[0, 0, 0] @ k[0, 0, 0]), rel=1e-5)  # head 0, (query 0, key 0)

    with pytest.raises(LongRunError, match="position bias"):  # the long pass computes no bias: said, not wrong
        ours.long_run("Attention is all you need.", warn=False)


def test_byt5_a_t5_config_with_its_byte_tokenizer_loads_from_its_folder_and_runs(tmp_path):
    import transformers

    folder = tmp_path / "byt5"
    config = transformers.T5Config(vocab_size=384, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    theirs = transformers.T5ForConditionalGeneration(config).eval()
    theirs.save_pretrained(folder, safe_serialization=True)
    transformers.ByT5Tokenizer().save_pretrained(folder)  # no vocabulary file: the bytes are its vocabulary
    theirs.set_attn_implementation("eager")
    ours = load_pretrained(folder)
    assert len(ours.encode("Grüße").ids) == len("Grüße".encode()) + 1  # a token a byte, then </s>
    ids, mask, decoder = batch(ours)
    recorded = ours.traced(ids, decoder, attention_mask=mask)
    assert_same(recorded.logits, recorded.maps, eager(theirs, ids, mask, decoder))
    assert sorted(recorded.biases) == sorted(key for key in ours.map_keys if key.endswith("self_attn"))


def test_blooms_alibi_is_routed_through_our_eq1_as_a_position_bias(tmp_path):
    ours, theirs = loaded("bloom", tmp_path)
    assert ours.fidelity.proven and ours.abilities.position_bias and ours.layout == "decoder", ours.fidelity
    assert ours.factor == pytest.approx(ours.d_k ** -0.5) and ours.scaling_note == ""
    rows = [ours.encode(text).ids for text in TEXTS]
    ids = torch.full((2, max(len(r) for r in rows)), ours.pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = r
    mask = (ids != ours.pad_id).long()

    def eager_bloom(model):
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, output_attentions=True, use_cache=False)
        return out.logits, {f"decoder.{i}.self_attn": a for i, a in enumerate(out.attentions)}

    def real_rows(logits, maps, reference):  # a padded query's row is no text (hub.proof leaves it out too)
        keep = mask.bool()
        torch.testing.assert_close(logits[keep], reference[0][keep], atol=1e-4, rtol=1e-4)
        for key, expected in reference[1].items():
            torch.testing.assert_close(maps[key][keep[:, None, :].expand(-1, ours.n_heads, -1)],
                                       expected[keep[:, None, :].expand(-1, ours.n_heads, -1)], atol=1e-5, rtol=0)

    recorded = ours.traced(ids, attention_mask=mask)
    real_rows(recorded.logits, recorded.maps, eager_bloom(theirs))
    # B: each head's slope times the key's position (counted over the row's real tokens), one row for every query
    slopes = torch.tensor([2 ** (-8 * (h + 1) / ours.n_heads) for h in range(ours.n_heads)])
    positions = (mask.cumsum(-1) - 1).clamp(min=0) * mask  # (2, K)
    expected = slopes[None, :, None, None] * positions[:, None, None, :].float()  # (2, H, 1, K)
    assert sorted(recorded.biases) == ours.map_keys
    torch.testing.assert_close(recorded.biases["decoder.0.self_attn"], expected)

    off = ours.traced(ids, attention_mask=mask, variation=Variation(position_bias=False))
    flat = copy.deepcopy(theirs)
    flat.transformer.build_alibi_tensor = lambda m, heads, dtype: torch.zeros(m.size(0) * heads, 1, m.size(1),
                                                                              dtype=dtype)
    real_rows(off.logits, off.maps, eager_bloom(flat))
    assert float((off.logits - recorded.logits).abs().max().detach()) > 1e-3
    unscaled = copy.deepcopy(theirs)
    for name, _ in ours.family.keys:
        unscaled.get_submodule(name).inv_norm_factor = 1.0
    logits, maps = ours.forward(ids, attention_mask=mask, scale="none")
    real_rows(logits, maps, eager_bloom(unscaled))
    cut = copy.deepcopy(theirs)
    with torch.no_grad():
        for key, w_o_name, _ in ours.family.w_o:
            cut.get_submodule(w_o_name).weight[:, ours.d_k:2 * ours.d_k] = 0  # head 1
    logits, maps = ours.forward(ids, attention_mask=mask, heads_off={key: [1] for key in ours.map_keys})
    real_rows(logits, maps, eager_bloom(cut))

    src = ids[:1, : int(mask[0].sum())]
    with torch.no_grad():
        expected_tokens = theirs.generate(src, max_new_tokens=5, do_sample=False, num_beams=1)[:, src.size(1):]
    for reuse_keys in (True, False):
        written, _ = ours.greedy_decode(src, 5, reuse_keys=reuse_keys)
        assert written.tolist() == expected_tokens[:, : written.size(1)].tolist() and written.size(1) > 0


def test_the_notebook_view_of_t5_carries_its_position_bias_for_the_explorer(tmp_path):
    from attention_viz.explorer import unpack_biases
    from attention_viz.explorer.notebook import run_pretrained

    ours, _ = loaded("t5", tmp_path)
    payload = run_pretrained(ours, TEXTS[0], max_new_tokens=3)
    biases = unpack_biases(payload)
    S, T = len(payload["tokens"]["source"]), len(payload["tokens"]["target"])
    assert {key.split(".")[0] for key in biases} == {"encoder", "decoder"} and not any("cross" in k for k in biases)
    for key, bias in biases.items():
        Q = S if key.startswith("encoder") else T
        module = next(name for name, k in ours.family.keys if k == key)
        expected = own_bias(ours.model, module, Q, Q)  # (1, H, Q, Q)
        torch.testing.assert_close(torch.from_numpy(bias.copy()), expected[0], atol=0, rtol=0)
