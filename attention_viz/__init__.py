"""attention_viz: the Transformer of "Attention Is All You Need" (§3.1-3.2), every attention map exposed."""

from .core.attention import (
    AdditiveAttention,
    MultiHeadAttention,
    attention_steps,
    causal_mask,
    padding_mask,
    scale_factor,
    scaled_dot_product_attention,
)
from .core.config import TransformerConfig
from .core.device import resolve_device
from .core.interop import multihead_attention_from_torch, transformer_from_torch
from .core.maps import KINDS, AttentionMaps, head_statistics
from .core.model import Decoder, Encoder, Transformer

__all__ = [
    "AdditiveAttention",
    "AttentionMaps",
    "Decoder",
    "Encoder",
    "KINDS",
    "MultiHeadAttention",
    "Transformer",
    "TransformerConfig",
    "attention_steps",
    "causal_mask",
    "head_statistics",
    "multihead_attention_from_torch",
    "padding_mask",
    "resolve_device",
    "scale_factor",
    "scaled_dot_product_attention",
    "transformer_from_torch",
]
