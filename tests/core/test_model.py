"""The encoder-decoder model: parity with nn.Transformer, the map record, switches and decoding."""

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

from attention_viz import KINDS, AttentionMaps, Transformer, TransformerConfig, head_statistics
from attention_viz.core.interop import transformer_from_torch
from attention_viz.core.trace import recorded
from attention_viz.core.variation import PAPER

PAD = 0


def torch_transformer(seed=0, final_norm=True):
    torch.manual_seed(seed)
    ref = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=3,
                         dim_feedforward=48, dropout=0.0, batch_first=True)
    if not final_norm:
        ref.encoder.norm = None
        ref.decoder.norm = None
    with torch.no_grad():  # random LayerNorm affine parameters and biases, so a mix-up shows
        for name, p in ref.named_parameters():
            if p.dim() == 1:
                p.normal_(mean=1.0 if name.endswith("norm1.weight") else 0.0, std=0.5)
    return ref.eval()


@pytest.mark.parametrize("final_norm", [True, False])
def test_encoder_and_decoder_match_nn_transformer(final_norm):
    ref = torch_transformer(final_norm=final_norm)
    ours = transformer_from_torch(ref, vocab_size=11).eval()
    assert ours.config.final_norm is final_norm
    g = torch.Generator().manual_seed(1)
    src, tgt = torch.randn(2, 7, 32, generator=g), torch.randn(2, 5, 32, generator=g)
    src_pad = torch.tensor([[False] * 7, [False] * 5 + [True] * 2])  # PyTorch: True = padding
    tgt_causal = nn.Transformer.generate_square_subsequent_mask(5)  # float, -inf above the diagonal
    with torch.no_grad():
        ref_memory = ref.encoder(src, src_key_padding_mask=src_pad)
        ref_out = ref.decoder(tgt, ref_memory, tgt_mask=tgt_causal, memory_key_padding_mask=src_pad,
                              tgt_is_causal=True)
        src_mask = ~src_pad[:, None, None, :]
        probes = ours.probes(PAPER, records=("weights",))
        memory = ours.encoder(src, src_mask, probes=probes)
        out = ours.decoder(tgt, memory, torch.ones(5, 5, dtype=torch.bool).tril(), src_mask, probes=probes)
        maps = AttentionMaps(recorded(probes, "weights"))
        enc_weights, self_w, cross_w = (maps.kind(kind).unbind(0) for kind in KINDS)
    keep = ~src_pad  # PyTorch's fast path leaves padded positions of the memory at 0
    torch.testing.assert_close(memory[keep], ref_memory[keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    assert len(enc_weights) == 2 and len(self_w) == len(cross_w) == 3
    assert torch.all(cross_w[0][1, :, :, 5:] == 0.0)


def test_importer_refuses_pre_norm_and_gelu():
    with pytest.raises(ValueError, match="post-norm"):
        transformer_from_torch(nn.Transformer(16, 2, 1, 1, 32, norm_first=True), vocab_size=5)
    with pytest.raises(ValueError, match="ReLU"):
        transformer_from_torch(nn.Transformer(16, 2, 1, 1, 32, activation="gelu"), vocab_size=5)


def small_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return Transformer(TransformerConfig.small(vocab_size=20, dropout=0.0, **overrides)).eval()


def batch():
    src = torch.tensor([[4, 5, 6, 7, 8, 9], [4, 5, 6, PAD, PAD, PAD]])
    tgt = torch.tensor([[1, 9, 8, 7, 6], [1, 6, 5, PAD, PAD]])
    return src, tgt


def test_one_forward_records_every_map_under_stable_keys():
    model = small_model(n_decoder_layers=3)
    src, tgt = batch()
    logits, maps = model(src, tgt)
    assert logits.shape == (2, 5, 20)
    assert list(maps) == [
        "encoder.0.self_attn", "encoder.1.self_attn",
        "decoder.0.self_attn", "decoder.0.cross_attn",
        "decoder.1.self_attn", "decoder.1.cross_attn",
        "decoder.2.self_attn", "decoder.2.cross_attn",
    ]
    assert maps["encoder.1.self_attn"].shape == (2, 4, 6, 6)
    assert maps["decoder.2.self_attn"].shape == (2, 4, 5, 5)
    assert maps["decoder.0.cross_attn"].shape == (2, 4, 5, 6)
    assert maps.kind("decoder.cross_attn").shape == (3, 2, 4, 5, 6)
    assert set(KINDS) == {"encoder.self_attn", "decoder.self_attn", "decoder.cross_attn"}
    arrays = maps.to_numpy()
    assert all(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in arrays.values())
    assert maps.nbytes == sum(a.nbytes for a in arrays.values())
    with pytest.raises(KeyError):
        maps.kind("decoder.feed_forward")


def test_maps_obey_the_masks():
    model = small_model()
    src, tgt = batch()
    _, maps = model(src, tgt)
    upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
    for key, w in maps.items():
        live_rows = w.sum(-1)
        assert torch.all((live_rows - 1).abs() < 1e-5), key  # every query here has a real key
        if key.startswith("decoder") and key.endswith("self_attn"):
            assert torch.all(w[..., upper] == 0.0), key
            assert torch.all(w[1, ..., 3:] == 0.0), key  # padded target keys
        else:
            assert torch.all(w[1, ..., 3:] == 0.0), key  # padded source keys


def test_switches_change_the_computation_without_state():
    model = small_model()
    src, tgt = batch()
    _, masked = model(src, tgt)
    _, unmasked = model(src, tgt, causal_mask=False, padding_mask=False)
    upper = torch.ones(5, 5, dtype=torch.bool).triu(1)
    assert torch.all(unmasked["decoder.0.self_attn"][..., upper] > 0)
    assert torch.all(unmasked["encoder.0.self_attn"][1, ..., 3:] > 0)
    _, again = model(src, tgt)  # switches are per call: nothing leaked into the modules
    torch.testing.assert_close(again["decoder.1.cross_attn"], masked["decoder.1.cross_attn"])
    _, off = model(src, tgt, scale="none")
    _, one = model(src, tgt, scale=1.0)
    torch.testing.assert_close(off["encoder.1.self_attn"], one["encoder.1.self_attn"])
    assert not torch.allclose(off["encoder.1.self_attn"], masked["encoder.1.self_attn"])


def test_greedy_decode_agrees_with_teacher_forcing():
    model = small_model(seed=3)
    src, _ = batch()
    tokens, maps = model.greedy_decode(src, 6)
    assert tokens.shape[0] == 2 and 1 <= tokens.shape[1] <= 6
    tgt_in = torch.cat([torch.ones(2, 1, dtype=torch.long), tokens[:, :-1]], dim=1)
    logits, forced = model(src, tgt_in)
    first_row_steps = (tokens[0] != PAD).sum()
    assert torch.equal(logits[0, :first_row_steps].argmax(-1), tokens[0, :first_row_steps])
    assert maps["decoder.1.cross_attn"].shape[2] == tokens.shape[1]
    torch.testing.assert_close(maps["decoder.1.cross_attn"][0], forced["decoder.1.cross_attn"][0])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("scale", ["sqrt_dk", "none", 0.3])
def test_greedy_decode_reusing_keys_matches_rerunning_every_step(seed, scale):
    """The O(n) decoder (each step on the new position, keys and values kept) decodes the same tokens and returns
    the same maps as rerunning the whole decoder input at every step."""
    model = small_model(seed=seed)
    src, _ = batch()
    full_passes = []
    decode = model.decode
    model.decode = lambda tgt, *args: full_passes.append(tgt.size(1)) or decode(tgt, *args)
    fast, fast_maps = model.greedy_decode(src, 7, scale=scale)
    assert full_passes == [fast.size(1)]  # one pass over the decoder input, for the maps
    slow, slow_maps = model.greedy_decode(src, 7, scale=scale, reuse_keys=False)
    assert full_passes[1:] == list(range(1, slow.size(1) + 1))  # every step reruns every position
    assert torch.equal(fast, slow)
    assert list(fast_maps) == list(slow_maps)
    for key in fast_maps:
        torch.testing.assert_close(fast_maps[key], slow_maps[key], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("causal_mask", [True, False])
@pytest.mark.parametrize("heads_off", [None, {"encoder.0.self_attn": [1], "decoder.1.cross_attn": [0]}])
def test_greedy_decode_gives_the_value_norms_of_its_maps_pass_as_a_second_pass_does(causal_mask, heads_off):
    """value_norms filled by the decode (from the pass its maps come from) are, bit for bit, value_norms of a pass
    over the same source and decoder input with the same switches: the app keeps them without a second pass."""
    model = small_model(seed=2)
    src, _ = batch()
    norms: dict = {}
    tokens, maps = model.greedy_decode(src, 6, causal_mask=causal_mask,
                                       heads_off=heads_off, value_norms=norms)
    plain, plain_maps = model.greedy_decode(src, 6, causal_mask=causal_mask,
                                            heads_off=heads_off)
    assert torch.equal(tokens, plain) and all(torch.equal(maps[key], plain_maps[key]) for key in maps)  # unchanged
    tgt_in = torch.cat([torch.ones(2, 1, dtype=torch.long), tokens[:, :-1]], dim=1)  # (B, T)
    second = model.value_norms(src, tgt_in, causal_mask=causal_mask, heads_off=heads_off)
    assert list(norms) == list(maps) == list(second)
    for key in norms:
        assert norms[key].shape == maps[key].shape[:2] + maps[key].shape[3:]  # (B, H, K)
        assert torch.equal(norms[key], second[key]), key


def test_greedy_decode_without_the_causal_mask_reruns_every_step():
    """Without the causal mask earlier positions attend to later ones, so kept keys would be stale: the same path
    is taken whatever reuse_keys says."""
    model = small_model(seed=1)
    src, _ = batch()
    kept, kept_maps = model.greedy_decode(src, 6, causal_mask=False)
    rerun, rerun_maps = model.greedy_decode(src, 6, causal_mask=False, reuse_keys=False)
    assert torch.equal(kept, rerun)
    for key in kept_maps:
        assert torch.equal(kept_maps[key], rerun_maps[key])


def test_greedy_decode_stops_at_eos():
    model = small_model()
    with torch.no_grad():  # force <eos> (id 2) to win every step
        model.generator.bias.zero_()
        model.generator.bias[2] = 1e4
    tokens, _ = model.greedy_decode(torch.tensor([[4, 5, 6]]), 10)
    assert tokens.tolist() == [[2]]


def test_paper_defaults_and_small_preset():
    paper = TransformerConfig()
    assert (paper.n_encoder_layers, paper.d_model, paper.n_heads, paper.d_k, paper.d_v, paper.d_ff,
            paper.dropout) == (6, 512, 8, 64, 64, 2048, 0.1)
    small = TransformerConfig.small()
    assert TransformerConfig(**small.to_dict()) == small
    with pytest.raises(dataclasses.FrozenInstanceError):
        small.d_k = 3
    with pytest.raises(ValueError):
        TransformerConfig(d_k=0)


def test_shared_embeddings_tie_the_output_projection():
    model = small_model()
    assert model.generator.weight is model.src_embed.lookup.weight is model.tgt_embed.lookup.weight
    untied = small_model(share_embeddings=False)
    assert untied.generator.weight is not untied.src_embed.lookup.weight


def test_head_statistics_on_known_patterns():
    eye = np.eye(4)[None]  # one head attending to its own position
    uniform = np.full((1, 4, 4), 0.25)
    stats = head_statistics(np.concatenate([eye, uniform]))
    np.testing.assert_allclose(stats["entropy"], [0.0, np.log(4)])
    np.testing.assert_allclose(stats["max_weight"], [1.0, 0.25])
    np.testing.assert_allclose(stats["diagonal"], [1.0, 0.25])
    np.testing.assert_allclose(stats["mean_distance"], [0.0, np.mean([1.5, 1.0, 1.0, 1.5])])
    anti = np.eye(4)[::-1][None]
    np.testing.assert_allclose(head_statistics(anti)["mean_distance"], [2.0])
    masked_row = np.array([[[1.0, 0.0], [0.0, 0.0]]])  # second row fully masked: left out of the means
    np.testing.assert_allclose(head_statistics(masked_row)["max_weight"], [1.0])


def test_maps_select_one_example():
    model = small_model()
    src, tgt = batch()
    _, maps = model(src, tgt)
    one = maps.select(1)
    assert isinstance(one, AttentionMaps) and one["encoder.0.self_attn"].shape == (1, 4, 6, 6)
    torch.testing.assert_close(one["encoder.0.self_attn"][0], maps["encoder.0.self_attn"][1])
