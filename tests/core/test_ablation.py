"""Heads switched off (core.ablation): zero and mean ablation equal the same change made by hand in W_O's weights,
in float64; nothing off is bit-identical; a constant head is unchanged by mean ablation; the gates' gradient equals
a finite difference; every bad input is refused naming it."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch

from attention_viz.core.ablation import mean_outputs
from attention_viz.core.config import TransformerConfig
from attention_viz.core.maps import map_key
from attention_viz.core.model import Transformer

CONFIG = TransformerConfig(vocab_size=23, n_encoder_layers=2, n_decoder_layers=2, d_model=16, n_heads=4, d_k=3,
                           d_v=5, d_ff=32, dropout=0.0)


def model_and_batch(seed: int = 0, dtype=torch.float64):
    torch.manual_seed(seed)
    model = Transformer(CONFIG).to(dtype).eval()
    src = torch.randint(4, 23, (3, 7))
    src[2, 5:] = CONFIG.pad_id  # a padded row
    tgt = torch.randint(4, 23, (3, 6))
    return model, src, tgt


def module_of(model: Transformer, key: str):
    stack, layer, name = key.split(".")
    return model.attention_module(f"{stack}.{name}", int(layer))


def surgery(model: Transformer, heads_off: dict, means: dict | None = None) -> Transformer:
    """The same change made in the weights: W_O's columns of each head off set to 0 (and, for mean ablation, what
    they would add for the head's mean output moved into W_O's bias)."""
    changed = copy.deepcopy(model)
    d_v = CONFIG.d_v
    with torch.no_grad():
        for key, heads in heads_off.items():
            out = module_of(changed, key).out_proj
            for h in heads:
                cols = slice(h * d_v, (h + 1) * d_v)
                if means is not None:
                    out.bias += out.weight[:, cols] @ means[key][h]
                out.weight[:, cols] = 0.0
    return changed


RANDOM_OFF = [
    {"encoder.0.self_attn": [1]},
    {"decoder.1.cross_attn": [0, 2], "encoder.1.self_attn": [3]},
    {"decoder.0.self_attn": [0, 1, 2, 3], "decoder.1.self_attn": [2]},
]


def test_nothing_off_is_bit_identical_to_the_plain_pass():
    model, src, tgt = model_and_batch(dtype=torch.float32)
    with torch.no_grad():
        logits, maps = model(src, tgt)
        for empty in ({}, {"encoder.0.self_attn": []}):
            again, again_maps = model(src, tgt, heads_off=empty)
            assert torch.equal(logits, again)
            assert all(torch.equal(maps[k], again_maps[k]) for k in maps)
        out, dmaps = model.greedy_decode(src, 5)
        out2, dmaps2 = model.greedy_decode(src, 5, heads_off={})
        assert torch.equal(out, out2) and all(torch.equal(dmaps[k], dmaps2[k]) for k in dmaps)


@pytest.mark.parametrize("heads_off", RANDOM_OFF)
def test_zero_ablation_equals_zeroing_the_heads_columns_of_w_o(heads_off):
    model, src, tgt = model_and_batch()
    with torch.no_grad():
        logits, maps = model(src, tgt, heads_off=heads_off)
        ref_logits, ref_maps = surgery(model, heads_off)(src, tgt)
        plain, _ = model(src, tgt)
    torch.testing.assert_close(logits, ref_logits, atol=1e-12, rtol=0)
    for key in maps:
        torch.testing.assert_close(maps[key], ref_maps[key], atol=1e-12, rtol=0)
    assert (logits - plain).abs().max() > 1e-6  # and it changed the output


@pytest.mark.parametrize("heads_off", RANDOM_OFF)
def test_mean_ablation_equals_moving_the_heads_mean_into_w_os_bias(heads_off):
    model, src, tgt = model_and_batch()
    with torch.no_grad():
        reference_src, reference_tgt = torch.randint(4, 23, (5, 7)), torch.randint(4, 23, (5, 6))
        means = mean_outputs(model.head_outputs(reference_src, reference_tgt))
        logits, maps = model(src, tgt, heads_off=heads_off, ablation="mean", head_means=means)
        ref_logits, ref_maps = surgery(model, heads_off, means)(src, tgt)
    torch.testing.assert_close(logits, ref_logits, atol=1e-12, rtol=0)
    for key in maps:
        torch.testing.assert_close(maps[key], ref_maps[key], atol=1e-12, rtol=0)


def test_a_switched_off_heads_map_is_still_computed_and_shown():
    model, src, tgt = model_and_batch()
    with torch.no_grad():
        _, plain = model(src, tgt)
        _, off = model(src, tgt, heads_off={"encoder.0.self_attn": [0, 1, 2]})
    torch.testing.assert_close(off["encoder.0.self_attn"], plain["encoder.0.self_attn"], atol=0, rtol=0)


def test_mean_ablation_leaves_a_head_whose_output_is_constant_unchanged():
    model, src, tgt = model_and_batch()
    key, head, d_v = "decoder.0.cross_attn", 2, CONFIG.d_v
    with torch.no_grad():
        module_of(model, key).v_proj.weight[head * d_v:(head + 1) * d_v] = 0.0  # v = its bias: every output the same
        means = mean_outputs(model.head_outputs(src, tgt))
        plain, _ = model(src, tgt)
        ablated, _ = model(src, tgt, heads_off={key: [head]}, ablation="mean", head_means=means)
        zeroed, _ = model(src, tgt, heads_off={key: [head]})
    torch.testing.assert_close(ablated, plain, atol=1e-12, rtol=0)
    assert (zeroed - plain).abs().max() > 1e-6  # zero ablation does remove it


def test_the_gates_gradient_equals_a_finite_difference():
    model, src, tgt = model_and_batch()
    labels = torch.randint(4, 23, tgt.shape)

    def loss(gates):
        logits, _ = model(src, tgt, gates=gates)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, CONFIG.vocab_size), labels.reshape(-1))

    keys = [map_key("encoder", 1, "self_attn"), map_key("decoder", 0, "cross_attn")]
    gates = {key: torch.ones(CONFIG.n_heads, dtype=torch.float64, requires_grad=True) for key in keys}
    loss(gates).backward()
    eps = 1e-6
    for key in keys:
        for h in range(CONFIG.n_heads):
            up = {k: g.detach().clone() for k, g in gates.items()}
            down = {k: g.detach().clone() for k, g in gates.items()}
            up[key][h] += eps
            down[key][h] -= eps
            with torch.no_grad():
                numeric = (loss(up) - loss(down)) / (2 * eps)
            assert gates[key].grad[h].item() == pytest.approx(numeric.item(), rel=1e-5, abs=1e-9)


def test_greedy_decoding_with_heads_off_keeps_keys_as_it_reruns_them():
    model, src, _ = model_and_batch()
    off = {"decoder.1.self_attn": [1], "encoder.0.self_attn": [0, 3]}
    with torch.no_grad():
        kept, maps_kept = model.greedy_decode(src, 6, heads_off=off)
        rerun, maps_rerun = model.greedy_decode(src, 6, heads_off=off, reuse_keys=False)
        _, plain_maps = model.greedy_decode(src, 6)
    assert torch.equal(kept, rerun)
    for key in maps_kept:
        torch.testing.assert_close(maps_kept[key], maps_rerun[key], atol=1e-12, rtol=0)
    # the switched-off heads changed what the layers above them saw
    assert (maps_kept["decoder.1.self_attn"] - plain_maps["decoder.1.self_attn"]).abs().max() > 0


@pytest.mark.parametrize("seed", range(6))
def test_random_switch_sets_equal_their_surgery(seed):
    rng = random.Random(seed)
    model, src, tgt = model_and_batch(seed)
    keys = [map_key("encoder", i, "self_attn") for i in range(2)] + [
        map_key("decoder", i, n) for i in range(2) for n in ("self_attn", "cross_attn")]
    heads_off = {key: rng.sample(range(4), rng.randint(1, 3)) for key in rng.sample(keys, rng.randint(1, 4))}
    with torch.no_grad():
        logits, _ = model(src, tgt, heads_off=heads_off)
        ref, _ = surgery(model, heads_off)(src, tgt)
    torch.testing.assert_close(logits, ref, atol=1e-12, rtol=0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(heads_off={"encoder.9.self_attn": [0]}), "does not have"),
    (dict(heads_off={"decoder.0.cross_attn": [4]}), "head 4 does not exist"),
    (dict(heads_off={"decoder.0.cross_attn": [-1]}), "head -1 does not exist"),
    (dict(heads_off={"decoder.0.cross_attn": [True]}), "head True does not exist"),
    (dict(heads_off={"decoder.0.cross_attn": "01"}), "must be a list of head indices"),
    (dict(heads_off={"decoder.0.cross_attn": [0]}, ablation="half"), "ablation must be one of"),
    (dict(heads_off={"decoder.0.cross_attn": [0]}, ablation="mean"), "mean ablation needs head_means"),
    (dict(heads_off={"decoder.0.cross_attn": [0]}, ablation="mean",
          head_means={"decoder.0.cross_attn": torch.zeros(3, 5)}), "must be \\[H, d_v\\]"),
    (dict(heads_off={f"{s}.{i}.{n}": [0, 1, 2, 3] for s, n in (("encoder", "self_attn"), ("decoder", "self_attn"),
                                                              ("decoder", "cross_attn")) for i in range(2)}),
     "every head of the model is switched off"),
])
def test_bad_switches_are_refused_naming_what_is_wrong(kwargs, message):
    model, src, tgt = model_and_batch()
    with pytest.raises(ValueError, match=message):
        model(src, tgt, **kwargs)


def test_a_refused_switch_echoes_at_most_40_characters_of_what_it_was_given():
    model, src, tgt = model_and_batch()
    for kwargs in (dict(heads_off={"k" * 10_000: [0]}), dict(heads_off={"decoder.0.cross_attn": [10 ** 500]}),
                   dict(heads_off={"decoder.0.cross_attn": "0" * 10_000}), dict(ablation="z" * 10_000),
                   dict(gates={"g" * 10_000: torch.ones(4)})):
        with pytest.raises(ValueError) as refused:
            model(src, tgt, **kwargs)
        assert len(str(refused.value)) < 300, str(refused.value)[:300]


def test_value_flows_equal_a_hand_written_float64_loop():
    model, src, tgt = model_and_batch()
    with torch.no_grad():
        flows = model.value_flows(src, tgt)
        _, maps = model(src, tgt)
    assert list(flows) == list(maps)
    key = "decoder.1.cross_attn"
    module = module_of(model, key)
    with torch.no_grad():
        query, keys, values, _ = model.attention_inputs(src, tgt, "decoder.cross_attn", 1)
        _, _, v = module.project(query, keys, values)  # (B, H, K, d_v)
    d_v = CONFIG.d_v
    B, H, Q, K = maps[key].shape
    expected = torch.zeros(B, H, Q, K, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            w_o = module.out_proj.weight[:, h * d_v:(h + 1) * d_v]  # (D, d_v)
            for j in range(K):
                moved = (w_o @ v[b, h, j]).norm()  # ‖v_j^h W_O^h‖
                expected[b, h, :, j] = maps[key][b, h, :, j] * moved
    torch.testing.assert_close(flows[key], expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_value_flows_with_heads_off_are_the_switched_passs_maps_times_its_own_value_norms(ablation):
    """A head off below changes the values above it: the norms are those of the pass with the heads off, and
    value_flows is that pass's maps times them (the loop of the test above, on the switched pass)."""
    model, src, tgt = model_and_batch()
    off = {"encoder.0.self_attn": [1], "decoder.0.self_attn": [0, 2]}
    means = None
    with torch.no_grad():
        if ablation == "mean":
            means = {k: v.mean(dim=(0, 2)) for k, v in model.head_outputs(src, tgt).items()}
        switches = dict(heads_off=off, ablation=ablation, head_means=means)
        flows, norms = model.value_flows(src, tgt, **switches), model.value_norms(src, tgt, **switches)
        plain = model.value_norms(src, tgt)
        _, maps = model(src, tgt, **switches)
        key = "decoder.1.cross_attn"
        module = module_of(model, key)
        query, keys, values, _ = model.attention_inputs(src, tgt, "decoder.cross_attn", 1, **switches)
        _, _, v = module.project(query, keys, values)  # (B, H, K, d_v), as the switched pass used them
    d_v = CONFIG.d_v
    B, H, Q, K = maps[key].shape
    expected = torch.zeros(B, H, K, dtype=torch.float64)
    for b in range(B):
        for h in range(H):
            for j in range(K):
                expected[b, h, j] = (module.out_proj.weight[:, h * d_v:(h + 1) * d_v] @ v[b, h, j]).norm()
    torch.testing.assert_close(norms[key], expected, atol=1e-12, rtol=0)
    for name in maps:
        torch.testing.assert_close(flows[name], maps[name] * norms[name][:, :, None, :], atol=0, rtol=0)
    torch.testing.assert_close(norms["encoder.0.self_attn"], plain["encoder.0.self_attn"])  # nothing below it
    assert not torch.allclose(norms[key], plain[key])  # above a head off: other values


@pytest.mark.parametrize("seed", range(6))
def test_value_norms_of_random_configurations_equal_a_float64_loop(seed):
    """Odd sizes (1 to 5 heads, d_v 1 to 7, 1 to 3 layers, lengths 1 to 9): every key's norm from its own values."""
    rng = np.random.default_rng(seed)
    H, d_v, d_k = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(1, 8))
    config = TransformerConfig(vocab_size=19, n_encoder_layers=int(rng.integers(1, 4)),
                               n_decoder_layers=int(rng.integers(1, 4)), d_model=int(rng.integers(2, 6)) * 2,
                               n_heads=H, d_k=d_k, d_v=d_v, d_ff=12, dropout=0.0)
    torch.manual_seed(seed)
    model = Transformer(config).double().eval()
    src = torch.randint(4, 19, (2, int(rng.integers(1, 10))))
    tgt = torch.randint(4, 19, (2, int(rng.integers(1, 10))))
    with torch.no_grad():
        norms = model.value_norms(src, tgt, scale="none" if seed % 2 else "sqrt_dk")
        _, maps = model(src, tgt)
    assert list(norms) == list(maps)
    for key in maps:
        stack, layer, name = key.split(".")
        with torch.no_grad():
            query, keys, values, _ = model.attention_inputs(src, tgt, f"{stack}.{name}", int(layer),
                                                            scale="none" if seed % 2 else "sqrt_dk")
            module = model.attention_module(f"{stack}.{name}", int(layer))
            _, _, v = module.project(query, keys, values)  # (B, H, K, d_v)
        expected = torch.tensor([[[float((module.out_proj.weight[:, h * d_v:(h + 1) * d_v] @ v[b, h, j]).norm())
                                   for j in range(v.size(2))] for h in range(H)] for b in range(2)],
                                dtype=torch.float64)
        torch.testing.assert_close(norms[key], expected, atol=1e-12, rtol=0)


def test_a_head_whose_values_carry_nothing_shows_weight_but_no_flow():
    model, src, tgt = model_and_batch()
    key, head, d_v = "encoder.1.self_attn", 1, CONFIG.d_v
    with torch.no_grad():
        module = module_of(model, key)
        module.v_proj.weight[head * d_v:(head + 1) * d_v] = 0.0
        module.v_proj.bias[head * d_v:(head + 1) * d_v] = 0.0
        flows = model.value_flows(src, tgt)
        _, maps = model(src, tgt)
    assert maps[key][:, head].max() > 0.1  # it still looks somewhere
    assert flows[key][:, head].abs().max() == 0  # but moves nothing
    assert flows[key][:, 0].abs().max() > 0
