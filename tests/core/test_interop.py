"""The importer is exact or refuses: nn.Transformer / nn.MultiheadAttention weights give our model the same outputs
(per-stack final norms, any sizes, float32 and float64), keep the source's mode and dtype, and anything ours would
not reproduce is refused with a ValueError naming it, before anything is built or copied."""

import json
import random

import pytest
import torch
from torch import nn

from attention_viz import MultiHeadAttention, TransformerConfig
from attention_viz.core import interop
from attention_viz.core.interop import multihead_attention_from_torch, transformer_from_torch
from attention_viz.data.checkpoints import load_checkpoint, save_checkpoint

# PyTorch runs other kernels (its fused fast path among them): float32 outputs of size ~1-8 differ by a few ulps
# (at most 2.9e-6 over 150 random configurations); float64 differs by rounding only.
TOLERANCE = {torch.float32: dict(atol=5e-6, rtol=1e-6), torch.float64: dict(atol=1e-12, rtol=1e-12)}


def randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Random biases and LayerNorm affine parameters (PyTorch starts them at 0 and 1), so a mix-up shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5 + (1.0 if "norm" in name else 0.0))
    return module


def reference(d_model=16, nhead=2, layers=(2, 2), d_ff=24, encoder_norm=True, decoder_norm=True, seed=0, **kwargs):
    torch.manual_seed(seed)
    ref = nn.Transformer(d_model, nhead, *layers, d_ff, dropout=kwargs.pop("dropout", 0.0),
                         batch_first=kwargs.pop("batch_first", True), **kwargs)
    if not encoder_norm:
        ref.encoder.norm = None
    if not decoder_norm:
        ref.decoder.norm = None
    return randomized(ref, seed).eval()


def assert_same_outputs(ref: nn.Transformer, ours, dtype=torch.float32, seed=1):
    """ref's full forward (padded source, causal target) equals our stacks', within TOLERANCE[dtype]."""
    g = torch.Generator().manual_seed(seed)
    D = ours.config.d_model
    src, tgt = torch.randn(3, 7, D, generator=g, dtype=dtype), torch.randn(3, 5, D, generator=g, dtype=dtype)
    src_pad = torch.zeros(3, 7, dtype=torch.bool)
    src_pad[1, 5:], src_pad[2, 2:] = True, True  # PyTorch: True = padding
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    with torch.no_grad():
        args = (src, tgt) if ref.batch_first else (src.transpose(0, 1), tgt.transpose(0, 1))
        expected = ref(*args, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
                       tgt_mask=nn.Transformer.generate_square_subsequent_mask(5, dtype=dtype), tgt_is_causal=True)
        expected = expected if ref.batch_first else expected.transpose(0, 1)
        src_mask = ~src_pad[:, None, None, :]
        out = ours.decoder(tgt, ours.encoder(src, src_mask), causal, src_mask)
    assert out.dtype == dtype
    torch.testing.assert_close(out, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("encoder_norm, decoder_norm", [(True, False), (False, True), (True, True), (False, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_final_norm_of_either_stack_imports_exactly(encoder_norm, decoder_norm, dtype):
    ref = reference(encoder_norm=encoder_norm, decoder_norm=decoder_norm).to(dtype)
    ours = transformer_from_torch(ref, vocab_size=11)
    assert (ours.encoder.norm is not None, ours.decoder.norm is not None) == (encoder_norm, decoder_norm)
    assert (ours.config.encoder_norm, ours.config.decoder_norm) == (encoder_norm, decoder_norm)
    assert all(p.dtype == dtype for p in ours.parameters())
    assert_same_outputs(ref, ours, dtype)
    if encoder_norm != decoder_norm:  # without the per-stack flags both stacks would get (or lack) the norm
        assert not ours.config.final_norm


def test_config_with_per_stack_norms_round_trips_and_old_cards_load(tmp_path):
    config = TransformerConfig.small(vocab_size=11, encoder_final_norm=True, decoder_final_norm=False)
    as_json = json.loads(json.dumps(config.to_dict()))
    assert as_json["encoder_final_norm"] is True and as_json["decoder_final_norm"] is False
    assert TransformerConfig(**as_json) == config
    plain = TransformerConfig.small(vocab_size=11, final_norm=True)
    assert "encoder_final_norm" not in plain.to_dict() and "decoder_final_norm" not in plain.to_dict()
    old_card_config = {k: v for k, v in plain.to_dict().items()}  # what cards held before the fields existed
    assert TransformerConfig(**old_card_config) == plain and plain.encoder_norm and plain.decoder_norm
    with pytest.raises(ValueError, match="encoder_final_norm"):
        TransformerConfig.small(encoder_final_norm=1)
    # an imported one-sided model survives a checkpoint: same card config, same weights, same outputs
    ref = reference(encoder_norm=False, decoder_norm=True)
    ours = transformer_from_torch(ref, vocab_size=11)
    save_checkpoint(ours, {"task": "none"}, tmp_path / "imported")
    loaded, card = load_checkpoint(tmp_path / "imported")
    assert loaded.config == ours.config and card["config"]["decoder_final_norm"] is True
    assert loaded.encoder.norm is None and loaded.decoder.norm is not None
    assert_same_outputs(ref, loaded)


def test_random_configurations_import_exactly():
    rng = random.Random(0)
    for seed in range(20):
        d_model = rng.choice([4, 6, 8, 12, 16])
        nhead = rng.choice([h for h in range(1, d_model + 1) if d_model % h == 0])
        layers = (rng.randint(1, 3), rng.randint(1, 3))
        d_ff, eps, dropout = rng.randint(2, 40), rng.choice([1e-5, 1e-6, 1e-3, 0.1]), rng.choice([0.0, 0.1, 0.3])
        norms = dict(encoder_norm=rng.random() < 0.5, decoder_norm=rng.random() < 0.5)
        ref = reference(d_model, nhead, layers, d_ff, seed=seed, layer_norm_eps=eps, dropout=dropout,
                        batch_first=rng.random() < 0.5, **norms)
        for dtype in (torch.float32, torch.float64):
            ours = transformer_from_torch(ref.to(dtype), vocab_size=7, pad_id=3).eval()
            c = ours.config
            assert (c.n_encoder_layers, c.n_decoder_layers, c.d_model, c.n_heads, c.d_ff) == (*layers, d_model, nhead, d_ff)
            assert (c.d_k, c.layer_norm_eps, c.dropout, c.pad_id) == (d_model // nhead, eps, dropout, 3), seed
            assert (c.encoder_norm, c.decoder_norm) == tuple(norms.values()), seed
            assert_same_outputs(ref, ours, dtype, seed=seed)


def test_result_keeps_the_source_mode():
    ref = reference()
    assert not any(m.training for m in transformer_from_torch(ref, vocab_size=5).modules())
    assert all(m.training for m in transformer_from_torch(ref.train(), vocab_size=5).modules())
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    assert all(m.training for m in multihead_attention_from_torch(mha.train()).modules())
    assert not any(m.training for m in multihead_attention_from_torch(mha.eval()).modules())


# --- refusals: each names the feature, and nothing is built or copied ------------------------------------------

class CustomEncoderLayer(nn.TransformerEncoderLayer):
    pass


def replace_encoder_layer(i, **kwargs):
    def edit(ref):
        ref.encoder.layers[i] = nn.TransformerEncoderLayer(16, batch_first=True, **{"nhead": 2, "dim_feedforward": 24,
                                                                                     "dropout": 0.0, **kwargs})
    return edit


def set_attr(path, value):
    def edit(ref):
        *parents, name = path.split(".")
        owner = ref
        for part in parents:
            owner = owner[int(part)] if part.isdigit() else getattr(owner, part)
        setattr(owner, name, value() if callable(value) else value)
    return edit


def mixed_modes(ref):
    ref.train()
    ref.encoder.layers[0].eval()


REFUSED_TRANSFORMERS = {
    "norm_first=True": (dict(norm_first=True), None),
    "activation.*gelu": (dict(activation="gelu"), None),
    "add_bias_kv": ({}, set_attr("encoder.layers.1.self_attn", lambda: nn.MultiheadAttention(16, 2, add_bias_kv=True))),
    "add_zero_attn": ({}, set_attr("decoder.layers.0.multihead_attn",
                                   lambda: nn.MultiheadAttention(16, 2, add_zero_attn=True))),
    "kdim": ({}, set_attr("decoder.layers.1.multihead_attn", lambda: nn.MultiheadAttention(16, 2, kdim=8, vdim=8))),
    "layer class CustomEncoderLayer": ({}, set_attr("encoder.layers.0", lambda: CustomEncoderLayer(16, 2, 24, 0.0))),
    "custom encoder": ({}, set_attr("encoder", lambda: nn.Sequential())),
    "differ in d_ff": ({}, replace_encoder_layer(1, dim_feedforward=32)),
    "differ in n_heads": ({}, replace_encoder_layer(0, nhead=4)),
    "differ in dropout": ({}, replace_encoder_layer(1, dropout=0.2)),
    "differ in layer_norm_eps": ({}, set_attr("decoder.norm", lambda: nn.LayerNorm(16, eps=1e-3))),
    "elementwise_affine": ({}, set_attr("encoder.norm", lambda: nn.LayerNorm(16, elementwise_affine=False))),
    "norm class RMSNorm": ({}, set_attr("decoder.layers.0.norm2", lambda: nn.RMSNorm(16))),
    "mixture of train and eval": ({}, mixed_modes),
    "dtype": ({}, lambda ref: ref.decoder.double()),
}


@pytest.mark.parametrize("feature", list(REFUSED_TRANSFORMERS))
def test_importer_refuses_what_it_cannot_reproduce_before_copying(feature, monkeypatch):
    kwargs, edit = REFUSED_TRANSFORMERS[feature]
    ref = reference(**kwargs)
    if edit is not None:
        edit(ref)
    before = {k: v.clone() for k, v in ref.state_dict().items()}
    modes = [m.training for m in ref.modules()]
    built = []
    monkeypatch.setattr(interop, "Transformer", lambda *a, **k: built.append(a) or pytest.fail("built a model"))
    with pytest.raises(ValueError, match=feature) as refusal:
        transformer_from_torch(ref, vocab_size=5)
    assert "cannot import" in str(refusal.value)
    assert built == []
    after = ref.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], v) for k, v in before.items())
    assert [m.training for m in ref.modules()] == modes


class CustomAttention(nn.MultiheadAttention):
    pass


@pytest.mark.parametrize("feature, make", [
    ("add_bias_kv", lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True)),
    ("add_zero_attn", lambda: nn.MultiheadAttention(8, 2, add_zero_attn=True)),
    ("kdim", lambda: nn.MultiheadAttention(8, 2, kdim=4)),
    ("kdim or vdim", lambda: nn.MultiheadAttention(8, 2, vdim=6)),
    ("attention class CustomAttention", lambda: CustomAttention(8, 2)),
])
def test_multihead_importer_refuses_before_building(feature, make, monkeypatch):
    mha = make()
    before = {k: v.clone() for k, v in mha.state_dict().items()}
    built = []
    monkeypatch.setattr(interop, "MultiHeadAttention", lambda *a, **k: built.append(a) or pytest.fail("built"))
    with pytest.raises(ValueError, match=feature):
        multihead_attention_from_torch(mha)
    assert built == [] and all(torch.equal(mha.state_dict()[k], v) for k, v in before.items())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transformer_without_biases_imports_exactly(dtype):
    """nn.Transformer(bias=False) has no bias in any Linear or LayerNorm: ours gets exactly zero there, the same outputs
    and (as its attentions are imported alone below) the same maps."""
    ref = reference(bias=False, seed=3).to(dtype)
    assert all(m.bias is None for m in ref.modules() if isinstance(m, (nn.Linear, nn.LayerNorm)))
    for m in ref.modules():  # random gains, so that a norm copied wrongly shows
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(torch.rand_like(m.weight) + 0.5)
    ours = transformer_from_torch(ref, vocab_size=11)
    biases = [p for name, p in ours.named_parameters() if name.endswith("bias") and "coder." in name]  # the stacks'
    assert biases and all(torch.count_nonzero(b) == 0 for b in biases)
    assert_same_outputs(ref, ours, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multihead_without_biases_imports_exactly(dtype):
    torch.manual_seed(4)
    mha = nn.MultiheadAttention(12, 3, bias=False, batch_first=True).to(dtype).eval()
    ours = multihead_attention_from_torch(mha)
    g = torch.Generator().manual_seed(5)
    query, memory = torch.randn(2, 5, 12, generator=g, dtype=dtype), torch.randn(2, 4, 12, generator=g, dtype=dtype)
    key_pad = torch.tensor([[False] * 4, [False, False, True, True]])  # PyTorch: True = ignore
    with torch.no_grad():
        ref_out, ref_w = mha(query, memory, memory, key_padding_mask=key_pad, need_weights=True,
                             average_attn_weights=False)
        out, w = ours(query, memory, memory, ~key_pad[:, None, None, :])
    torch.testing.assert_close(out, ref_out, **TOLERANCE[dtype])
    torch.testing.assert_close(w, ref_w, **TOLERANCE[dtype])
    assert torch.all(w[1, :, :, 2:] == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multihead_import_keeps_dtype_and_matches(dtype):
    torch.manual_seed(0)
    mha = randomized(nn.MultiheadAttention(12, 3, batch_first=True)).to(dtype).eval()
    ours = multihead_attention_from_torch(mha)
    assert isinstance(ours, MultiHeadAttention) and not ours.training
    assert all(p.dtype == dtype for p in ours.parameters())
    g = torch.Generator().manual_seed(2)
    query, memory = torch.randn(2, 5, 12, generator=g, dtype=dtype), torch.randn(2, 4, 12, generator=g, dtype=dtype)
    key_pad = torch.tensor([[False] * 4, [False, False, True, True]])  # PyTorch: True = ignore
    with torch.no_grad():
        ref_out, ref_w = mha(query, memory, memory, key_padding_mask=key_pad, need_weights=True,
                             average_attn_weights=False)
        out, w = ours(query, memory, memory, ~key_pad[:, None, None, :])
    assert out.dtype == w.dtype == dtype
    torch.testing.assert_close(out, ref_out, **TOLERANCE[dtype])
    torch.testing.assert_close(w, ref_w, **TOLERANCE[dtype])
