"""Bring your own model: build ours from PyTorch's `nn.MultiheadAttention` and `nn.Transformer`.

PyTorch's modules never return the per-head maps of a full `nn.Transformer` (its layers call
attention with need_weights=False). Copying the weights into ours gives the same outputs *and*
every map. Only what ours can reproduce exactly is accepted: post-norm (norm_first=False), ReLU, affine
nn.LayerNorm, the same sizes, dropout and eps in every layer, stock layer classes. A source without biases
(`bias=False`) is imported with ours set to exactly zero where it has none: x + 0 is x in floating point, so the
outputs and maps are the same. Anything else is refused with a ValueError naming the feature, before anything is
built or copied. The result is in the source's mode (train/eval), dtype and device.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.core.attention import MultiHeadAttention
from attention_viz.core.config import TransformerConfig
from attention_viz.core.layers import DecoderLayer, EncoderLayer
from attention_viz.core.model import Transformer


def _refuse_if(condition: bool, feature: str) -> None:
    """Raise the importer's ValueError naming a feature ours cannot reproduce."""
    if condition:
        raise ValueError(f"cannot import: {feature} is not supported (the import would not be exact)")


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Copy a weight and bias into ours; a source without a bias (bias=False) gives ours exactly zero."""
    dst.weight.copy_(weight)
    if bias is None:
        dst.bias.zero_()
    else:
        dst.bias.copy_(bias)


def _copy_norm(dst: nn.LayerNorm, src: nn.LayerNorm) -> None:
    """Copy an affine LayerNorm into ours; a source without a bias (bias=False) gives ours exactly zero."""
    _copy_linear(dst, src.weight, src.bias)


def _mode_dtype_device(src: nn.Module) -> tuple[bool, torch.dtype, torch.device]:
    """(training, dtype, device) shared by every submodule and tensor of `src`; mixtures are refused."""
    modes = {m.training for m in src.modules()}
    _refuse_if(len(modes) != 1, "a mixture of train and eval mode among submodules")
    tensors = [*src.parameters(), *src.buffers()]
    dtypes, devices = {t.dtype for t in tensors}, {t.device for t in tensors}
    _refuse_if(len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point, f"parameter dtypes {dtypes}")
    _refuse_if(len(devices) != 1, f"parameters on several devices {devices}")
    return modes.pop(), dtypes.pop(), devices.pop()


def check_multihead_attention(src: nn.MultiheadAttention) -> None:
    """Refuse an nn.MultiheadAttention that ours cannot reproduce exactly (ValueError naming the feature)."""
    _refuse_if(type(src) is not nn.MultiheadAttention, f"attention class {type(src).__name__}")
    _refuse_if(src.bias_k is not None or src.bias_v is not None, "add_bias_kv")
    _refuse_if(src.add_zero_attn, "add_zero_attn")
    _refuse_if(src.kdim != src.embed_dim or src.vdim != src.embed_dim, "kdim or vdim unlike embed_dim")


@torch.no_grad()
def load_multihead_attention(dst: MultiHeadAttention, src: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy the weights of `src` into `dst` (same d_model and heads, d_k = d_v = d_model / h)."""
    check_multihead_attention(src)
    E, H = src.embed_dim, src.num_heads
    if dst.n_heads != H or dst.q_proj.in_features != E or dst.d_k != E // H or dst.d_v != E // H:
        raise ValueError("destination MultiHeadAttention does not match the source's sizes")
    if src._qkv_same_embed_dim:
        w_q, w_k, w_v = src.in_proj_weight.chunk(3)  # each (E, E)
    else:
        w_q, w_k, w_v = src.q_proj_weight, src.k_proj_weight, src.v_proj_weight
    b_q, b_k, b_v = src.in_proj_bias.chunk(3) if src.in_proj_bias is not None else (None, None, None)  # each (E,)
    _copy_linear(dst.q_proj, w_q, b_q)
    _copy_linear(dst.k_proj, w_k, b_k)
    _copy_linear(dst.v_proj, w_v, b_v)
    _copy_linear(dst.out_proj, src.out_proj.weight, src.out_proj.bias)
    return dst


def multihead_attention_from_torch(src: nn.MultiheadAttention) -> MultiHeadAttention:
    """A MultiHeadAttention with the weights of `src`, in its mode, dtype and device; it returns weights [B, H, Q, K]."""
    check_multihead_attention(src)
    training, dtype, device = _mode_dtype_device(src)
    d_head = src.embed_dim // src.num_heads
    ours = MultiHeadAttention(src.embed_dim, src.num_heads, d_head, d_head, src.dropout).to(device, dtype)
    return load_multihead_attention(ours, src).train(training)


def _norm_eps(norm: nn.Module, d_model: int) -> float:
    """The eps of a LayerNorm ours can hold (affine, with bias, over d_model); anything else is refused."""
    _refuse_if(type(norm) is not nn.LayerNorm, f"norm class {type(norm).__name__} (only nn.LayerNorm)")
    _refuse_if(tuple(norm.normalized_shape) != (d_model,), f"LayerNorm over {tuple(norm.normalized_shape)}")
    _refuse_if(norm.weight is None, "LayerNorm without elementwise_affine")
    return norm.eps


def _layer_settings(layer: nn.Module, decoder: bool) -> dict[str, set]:
    """The settings of one stock post-norm ReLU layer, each as the set of values its parts use; refuses anything else."""
    expected = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    _refuse_if(type(layer) is not expected, f"layer class {type(layer).__name__} (only {expected.__name__})")
    _refuse_if(layer.norm_first, "norm_first=True (only post-norm layers, as in the paper)")
    _refuse_if(layer.activation is not F.relu and type(layer.activation) is not nn.ReLU,
               f"activation {layer.activation!r} (only the ReLU feed-forward of the paper)")
    attentions = [layer.self_attn, layer.multihead_attn] if decoder else [layer.self_attn]
    for attention in attentions:
        check_multihead_attention(attention)
    d_model = layer.self_attn.embed_dim
    n_norms = 3 if decoder else 2
    return {
        "d_model": {d_model, layer.linear1.in_features, layer.linear2.out_features, *(a.embed_dim for a in attentions)},
        "n_heads": {a.num_heads for a in attentions},
        "d_ff": {layer.linear1.out_features, layer.linear2.in_features},
        "dropout": {layer.dropout.p, *(getattr(layer, f"dropout{i}").p for i in range(1, n_norms + 1)),
                    *(a.dropout for a in attentions)},
        "layer_norm_eps": {_norm_eps(getattr(layer, f"norm{i}"), d_model) for i in range(1, n_norms + 1)},
    }


def _stack_config(src: nn.Transformer) -> dict:
    """TransformerConfig fields of `src`'s stacks, every check done first: nothing is copied unless all pass."""
    _refuse_if(type(src.encoder) is not nn.TransformerEncoder, f"custom encoder {type(src.encoder).__name__}")
    _refuse_if(type(src.decoder) is not nn.TransformerDecoder, f"custom decoder {type(src.decoder).__name__}")
    enc_layers, dec_layers = src.encoder.layers, src.decoder.layers
    _refuse_if(len(enc_layers) == 0 or len(dec_layers) == 0, "a stack without layers")
    per_layer = [_layer_settings(layer, False) for layer in enc_layers]
    per_layer += [_layer_settings(layer, True) for layer in dec_layers]
    values = {name: set().union(*(settings[name] for settings in per_layer)) for name in per_layer[0]}
    for name, found in values.items():  # one value per setting across every layer (ours has one config)
        if name == "layer_norm_eps":  # the final norms' eps joins it first
            final_norms = [norm for norm in (src.encoder.norm, src.decoder.norm) if norm is not None]
            found |= {_norm_eps(norm, next(iter(values["d_model"]))) for norm in final_norms}
        _refuse_if(len(found) != 1, f"layers or parts that differ in {name} {sorted(found)}")
    (d_model,), (n_heads,), (d_ff,), (dropout,), (eps,) = (values[name] for name in
                                                        ("d_model", "n_heads", "d_ff", "dropout", "layer_norm_eps"))
    norms = dict(final_norm=src.encoder.norm is not None)  # both stacks alike: one flag, as before
    if (src.encoder.norm is None) != (src.decoder.norm is None):  # only one stack ends with a LayerNorm
        norms = dict(final_norm=False, encoder_final_norm=src.encoder.norm is not None,
                     decoder_final_norm=src.decoder.norm is not None)
    return dict(n_encoder_layers=len(enc_layers), n_decoder_layers=len(dec_layers), d_model=d_model,
                n_heads=n_heads, d_k=d_model // n_heads, d_v=d_model // n_heads, d_ff=d_ff,
                dropout=dropout, layer_norm_eps=eps, **norms)


@torch.no_grad()
def _load_feed_forward_and_norms(dst: EncoderLayer | DecoderLayer, src: nn.Module, norms: int) -> None:
    _copy_linear(dst.feed_forward.linear1, src.linear1.weight, src.linear1.bias)
    _copy_linear(dst.feed_forward.linear2, src.linear2.weight, src.linear2.bias)
    for i in range(1, norms + 1):
        _copy_norm(getattr(dst, f"norm{i}"), getattr(src, f"norm{i}"))


def transformer_from_torch(
    src: nn.Transformer, vocab_size: int, pad_id: int = 0, share_embeddings: bool = True
) -> Transformer:
    """Our Transformer with the encoder and decoder weights of `src`, in its mode, dtype and device.

    `nn.Transformer` has no embeddings or output projection: ours are freshly initialised (copy
    yours into `src_embed`, `tgt_embed`, `generator` if you have them). Ours returns every map.
    Raises ValueError, naming the feature, for anything ours would not reproduce exactly.
    """
    stacks = _stack_config(src)  # every check, before anything is built
    training, dtype, device = _mode_dtype_device(src)
    config = TransformerConfig(vocab_size=vocab_size, pad_id=pad_id, share_embeddings=share_embeddings, **stacks)
    ours = Transformer(config).to(device, dtype)  # the source's dtype before copying: no rounding on the way
    with torch.no_grad():
        for dst, layer in zip(ours.encoder.layers, src.encoder.layers):
            load_multihead_attention(dst.self_attn, layer.self_attn)
            _load_feed_forward_and_norms(dst, layer, norms=2)
        for dst, layer in zip(ours.decoder.layers, src.decoder.layers):
            load_multihead_attention(dst.self_attn, layer.self_attn)
            load_multihead_attention(dst.cross_attn, layer.multihead_attn)
            _load_feed_forward_and_norms(dst, layer, norms=3)
        for ours_norm, torch_norm in ((ours.encoder.norm, src.encoder.norm), (ours.decoder.norm, src.decoder.norm)):
            if torch_norm is not None:
                _copy_norm(ours_norm, torch_norm)
    return ours.train(training)
