"""Bring your own model: build ours from PyTorch's `nn.MultiheadAttention` and `nn.Transformer`.

PyTorch's modules never return the per-head maps of a full `nn.Transformer` (its layers call
attention with need_weights=False). Copying the weights into ours gives the same outputs *and*
every map. Only the paper's variant is accepted: post-norm (norm_first=False) and ReLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.core.attention import MultiHeadAttention
from attention_viz.core.config import TransformerConfig
from attention_viz.core.layers import DecoderLayer, EncoderLayer
from attention_viz.core.model import Transformer


def _copy_linear(dst: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    dst.weight.copy_(weight)
    if bias is None:
        dst.bias.zero_()
    else:
        dst.bias.copy_(bias)


@torch.no_grad()
def load_multihead_attention(dst: MultiHeadAttention, src: nn.MultiheadAttention) -> MultiHeadAttention:
    """Copy the weights of `src` into `dst` (same d_model and heads, d_k = d_v = d_model / h)."""
    if src.bias_k is not None or src.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn are not part of the paper's attention")
    E, H = src.embed_dim, src.num_heads
    if dst.n_heads != H or dst.q_proj.in_features != E or dst.d_k != E // H or dst.d_v != E // H:
        raise ValueError("destination MultiHeadAttention does not match the source's sizes")
    if src._qkv_same_embed_dim:
        w_q, w_k, w_v = src.in_proj_weight.chunk(3)  # each (E, E)
    else:
        w_q, w_k, w_v = src.q_proj_weight, src.k_proj_weight, src.v_proj_weight
    b_q, b_k, b_v = src.in_proj_bias.chunk(3) if src.in_proj_bias is not None else (None, None, None)
    _copy_linear(dst.q_proj, w_q, b_q)
    _copy_linear(dst.k_proj, w_k, b_k)
    _copy_linear(dst.v_proj, w_v, b_v)
    _copy_linear(dst.out_proj, src.out_proj.weight, src.out_proj.bias)
    return dst


def multihead_attention_from_torch(src: nn.MultiheadAttention) -> MultiHeadAttention:
    """A MultiHeadAttention with the weights of `src`; it returns per-head weights [B, H, Q, K]."""
    if src.kdim != src.embed_dim or src.vdim != src.embed_dim:
        raise ValueError("only kdim = vdim = embed_dim is supported")
    d_head = src.embed_dim // src.num_heads
    ours = MultiHeadAttention(src.embed_dim, src.num_heads, d_head, d_head, src.dropout)
    return load_multihead_attention(ours, src).to(src.out_proj.weight.device)


def _check_paper_layer(layer: nn.Module) -> None:
    if getattr(layer, "norm_first", False):
        raise ValueError("only post-norm layers (norm_first=False), as in the paper, can be imported")
    if layer.activation is not F.relu and not isinstance(layer.activation, nn.ReLU):
        raise ValueError("only the ReLU feed-forward of the paper can be imported")


@torch.no_grad()
def _load_feed_forward_and_norms(dst: EncoderLayer | DecoderLayer, src: nn.Module, norms: int) -> None:
    _copy_linear(dst.feed_forward.linear1, src.linear1.weight, src.linear1.bias)
    _copy_linear(dst.feed_forward.linear2, src.linear2.weight, src.linear2.bias)
    for i in range(1, norms + 1):
        getattr(dst, f"norm{i}").load_state_dict(getattr(src, f"norm{i}").state_dict())


def transformer_from_torch(
    src: nn.Transformer, vocab_size: int, pad_id: int = 0, share_embeddings: bool = True
) -> Transformer:
    """Our Transformer with the encoder and decoder weights of `src`.

    `nn.Transformer` has no embeddings or output projection: ours are freshly initialised (copy
    yours into `src_embed`, `tgt_embed`, `generator` if you have them). Ours returns every map.
    """
    enc_layers, dec_layers = src.encoder.layers, src.decoder.layers
    first = enc_layers[0]
    d_model, n_heads = first.self_attn.embed_dim, first.self_attn.num_heads
    for layer in [*enc_layers, *dec_layers]:
        _check_paper_layer(layer)
    config = TransformerConfig(
        vocab_size=vocab_size,
        n_encoder_layers=len(enc_layers),
        n_decoder_layers=len(dec_layers),
        d_model=d_model,
        n_heads=n_heads,
        d_k=d_model // n_heads,
        d_v=d_model // n_heads,
        d_ff=first.linear1.out_features,
        dropout=first.dropout.p,
        pad_id=pad_id,
        share_embeddings=share_embeddings,
        final_norm=src.encoder.norm is not None,
        layer_norm_eps=first.norm1.eps,
    )
    ours = Transformer(config)
    for dst, layer in zip(ours.encoder.layers, enc_layers):
        load_multihead_attention(dst.self_attn, layer.self_attn)
        _load_feed_forward_and_norms(dst, layer, norms=2)
    for dst, layer in zip(ours.decoder.layers, dec_layers):
        load_multihead_attention(dst.self_attn, layer.self_attn)
        load_multihead_attention(dst.cross_attn, layer.multihead_attn)
        _load_feed_forward_and_norms(dst, layer, norms=3)
    for ours_norm, torch_norm in ((ours.encoder.norm, src.encoder.norm), (ours.decoder.norm, src.decoder.norm)):
        if ours_norm is not None and torch_norm is not None:
            ours_norm.load_state_dict(torch_norm.state_dict())
    return ours.to(first.linear1.weight.device)
