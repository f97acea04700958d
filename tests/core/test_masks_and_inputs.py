"""attention_masks is the mask forward applies; attention_inputs gives what each attention receives in forward."""

import pytest
import torch

from attention_viz import Transformer, TransformerConfig, attention_steps
from attention_viz.core.attention import attention_masks
from attention_viz.core.maps import KINDS, kind_key

SWITCHES = [(True, True), (True, False), (False, True), (False, False)]


def random_case(seed: int):
    """A random small model (eval mode) and a batch with padding in both src and tgt."""
    g = torch.Generator().manual_seed(seed)
    pick = lambda *options: options[int(torch.randint(len(options), (1,), generator=g))]  # noqa: E731
    config = TransformerConfig(vocab_size=13, n_encoder_layers=pick(1, 2, 3), n_decoder_layers=pick(1, 2, 3),
                               d_model=pick(8, 16), n_heads=pick(1, 2, 3), d_k=pick(3, 4, 8), d_v=pick(2, 5),
                               d_ff=pick(8, 24), dropout=0.1, pad_id=pick(0, 3), final_norm=pick(False, True),
                               share_embeddings=pick(False, True))
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    B, S, T = pick(1, 2, 3), pick(1, 4, 6), pick(1, 3, 5)
    src, tgt = torch.randint(0, 13, (B, S), generator=g), torch.randint(0, 13, (B, T), generator=g)
    src[0, -1], tgt[-1, -1] = config.pad_id, config.pad_id  # some padding in every batch
    return model, src, tgt


def captured_masks(model: Transformer, src, tgt, **switches) -> tuple[dict, object]:
    """The mask argument every MultiHeadAttention got in one forward pass, by map key, and the maps."""
    seen, handles = {}, []
    for kind in KINDS:
        n_layers = len(model.encoder.layers if kind.startswith("encoder") else model.decoder.layers)
        for i in range(n_layers):
            record = lambda module, args, key=kind_key(kind, i): seen.__setitem__(key, args[3])  # noqa: E731
            handles.append(model.attention_module(kind, i).register_forward_pre_hook(record))
    with torch.no_grad():
        _, maps = model(src, tgt, **switches)
    for handle in handles:
        handle.remove()
    return seen, maps


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("causal, padding", SWITCHES)
def test_attention_masks_are_the_masks_forward_applies(one_thread, seed, causal, padding):
    model, src, tgt = random_case(seed)
    seen, maps = captured_masks(model, src, tgt, causal_mask=causal, padding_mask=padding)
    masks = attention_masks(src, tgt, model.config.pad_id, causal, padding)
    dense = attention_masks(src, tgt, model.config.pad_id, causal, padding, dense=True)
    for key, mask in seen.items():
        kind = key.split(".")[0] + "." + key.split(".")[2]
        assert (mask is None and masks[kind] is None) or torch.equal(mask, masks[kind])
        weights = maps[key]  # (B, H, Q, K)
        allowed = dense[kind]  # (B, Q, K)
        assert allowed.dtype == torch.bool and allowed.shape == weights.shape[:1] + weights.shape[2:]
        assert torch.all(weights.masked_select(~allowed[:, None]) == 0)  # masked weights exactly 0
        live = allowed.any(-1)  # (B, Q): rows with a key to attend to sum to 1, the others are all 0
        torch.testing.assert_close(weights.sum(-1), live[:, None].expand_as(weights.sum(-1)).to(weights.dtype))


def test_dense_masks_spell_out_the_rules():
    src = torch.tensor([[5, 6, 0]])
    tgt = torch.tensor([[1, 7, 0, 8]])
    dense = attention_masks(src, tgt, 0, causal_mask=True, padding_mask=True, dense=True)
    assert dense["encoder.self_attn"].tolist() == [[[True, True, False]] * 3]
    assert dense["decoder.cross_attn"].tolist() == [[[True, True, False]] * 4]
    assert dense["decoder.self_attn"].tolist() == [[[True, False, False, False], [True, True, False, False],
                                                    [True, True, False, False], [True, True, False, True]]]
    off = attention_masks(src, tgt, 0, causal_mask=False, padding_mask=False)
    assert all(mask is None for mask in off.values())
    assert attention_masks(src, tgt, 0, False, False, dense=True)["decoder.cross_attn"].all()


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("causal, padding", SWITCHES)
@pytest.mark.parametrize("scale", ["sqrt_dk", "none", 0.7])
def test_attention_inputs_and_steps_reproduce_every_map_exactly(one_thread, seed, causal, padding, scale):
    model, src, tgt = random_case(seed)
    switches = dict(scale=scale, causal_mask=causal, padding_mask=padding)
    with torch.no_grad():
        _, maps = model(src, tgt, **switches)
        for kind in KINDS:
            n_layers = len(model.encoder.layers if kind.startswith("encoder") else model.decoder.layers)
            for layer in range(n_layers):
                query, key, value, mask = model.attention_inputs(src, tgt, kind, layer, **switches)
                module = model.attention_module(kind, layer)
                q, k, v = module.project(query, key, value)  # (B, H, Q, d_k), (B, H, K, d_k), (B, H, K, d_v)
                steps = attention_steps(q, k, v, mask, scale)
                assert torch.equal(steps["weights"], maps[kind_key(kind, layer)]), (kind, layer)
                head = layer % model.config.n_heads  # one head on its own, as the app shows it
                one = attention_steps(q[:, head], k[:, head], v[:, head],
                                      None if mask is None else mask[:, 0] if mask.dim() == 4 else mask, scale)
                assert torch.equal(one["weights"], maps[kind_key(kind, layer)][:, head])


def test_attention_inputs_refuse_unknown_kinds_and_layers():
    model, src, tgt = random_case(0)
    with pytest.raises(KeyError):
        model.attention_inputs(src, tgt, "encoder.cross_attn", 0)
    with pytest.raises(IndexError):
        model.attention_inputs(src, tgt, "decoder.self_attn", len(model.decoder.layers))
