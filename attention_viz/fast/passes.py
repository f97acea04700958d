"""Core's Transformer in eval mode written out flat: the same operations in the same order on the same tensors as its
modules' forward, without the modules' calls. Bit-identical to Transformer.encode, Transformer.decode and
DecoderLayer.step where they apply (eval mode, dot-product attention); anything else is the modules' pass itself.

Chosen explicitly (fast/decode.py's greedy decode runs on these). What is written out: each module's weights handed to
torch.nn.functional directly (what nn.Linear, nn.LayerNorm and nn.Embedding do in forward), no call of dropout (the
identity in eval mode), and the positional encoding of each length computed once (its rows depend only on their
position, so any length's table is the same numbers). A model of d_model 64 runs a pass of its encoder and one of its
decoder ~1/4 faster this way (docs/benchmarks.md): at that size a pass's time is its calls, not its arithmetic.

Axes: B batch, H heads, S source positions, T target positions, D d_model, V vocabulary.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from attention_viz.core.attention import MultiHeadAttention, source_mask, target_mask
from attention_viz.core.layers import DecoderLayer, Embeddings, positional_encoding
from attention_viz.core.model import Transformer, decoder_probes, encoder_probe
from attention_viz.core.trace import Probe, Trace
from attention_viz.core.variation import Variation


def flat(network: Transformer) -> bool:
    """Whether the flat passes apply: eval mode and dot-product attention (else the modules' own pass runs). Their
    callers run them without autograd (torch.no_grad or inference_mode), as the app's runs do."""
    return not network.training and network.config.compatibility == "dot_product"


def encode(network: Transformer, src: torch.Tensor, variation: Variation,
           probes: Trace | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """network.encode(src, variation, probes), bit for bit: src [B, S] -> (memory [B, S, D], source mask
    [B, 1, 1, S] or None); the probes record as the modules' pass records."""
    if not flat(network):
        return network.encode(src, variation, probes)
    src_mask = source_mask(src, network.config.pad_id, variation.padding_mask)  # (B, 1, 1, S) or None
    x = embed(network.src_embed, src)  # (B, S, D)
    for i, layer in enumerate(network.encoder.layers):
        sa = layer.self_attn
        attended = attend(sa, heads(sa, x, sa.q_proj, sa.d_k), heads(sa, x, sa.k_proj, sa.d_k),
                          heads(sa, x, sa.v_proj, sa.d_v), src_mask, variation.scale, encoder_probe(probes, i))
        x = norm(layer.norm1, x + attended)
        x = norm(layer.norm2, x + feed_forward(layer, x))
    if network.encoder.norm is not None:
        x = norm(network.encoder.norm, x)
    return x, src_mask


def decode(network: Transformer, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
           variation: Variation, probes: Trace | None = None, memory_kv: list | None = None
           ) -> torch.Tensor:
    """network.decode(tgt, memory, src_mask, variation, probes), bit for bit: tgt [B, T] -> logits [B, T, V].
    memory_kv: each layer's cross-attention keys
    and values of the memory (project_keys_values), when the caller keeps them."""
    if not flat(network):
        return network.decode(tgt, memory, src_mask, variation, probes)
    layers = network.decoder.layers
    if memory_kv is None:
        memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in layers]
    mask = target_mask(tgt, network.config.pad_id, variation.causal_mask, variation.padding_mask)
    y = embed(network.tgt_embed, tgt)  # (B, T, D)
    for i, layer in enumerate(layers):
        y, _ = step(layer, y, memory_kv[i], None, src_mask, variation.scale, mask, *decoder_probes(probes, i))
    if network.decoder.norm is not None:
        y = norm(network.decoder.norm, y)
    return linear(network.generator, y)  # (B, T, V)


def step(layer: DecoderLayer, y: torch.Tensor, memory_kv, past_kv, cross_mask, scale, self_mask, self_probe=None,
         cross_probe=None) -> tuple[torch.Tensor, tuple]:
    """DecoderLayer.step in eval mode (past_kv None and y every position: the layer's forward): y [B, Q, D] ->
    (y [B, Q, D], past_kv + these positions' keys and values [B, H, t + Q, d])."""
    sa, ca = layer.self_attn, layer.cross_attn
    k, v = heads(sa, y, sa.k_proj, sa.d_k), heads(sa, y, sa.v_proj, sa.d_v)  # (B, H, Q, d_k), (B, H, Q, d_v)
    if past_kv is not None:
        k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)  # (B, H, t + Q, ...)
    y = norm(layer.norm1, y + attend(sa, heads(sa, y, sa.q_proj, sa.d_k), k, v, self_mask, scale, self_probe))
    y = norm(layer.norm2, y + attend(ca, heads(ca, y, ca.q_proj, ca.d_k), *memory_kv, cross_mask, scale,
                                     cross_probe))
    return norm(layer.norm3, y + feed_forward(layer, y)), (k, v)


def attend(attention: MultiHeadAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, scale,
           probe: Probe | None) -> torch.Tensor:
    """MultiHeadAttention.attend in eval mode (dot product): q [B, H, Q, d_k] -> out [B, Q, D]; the probe
    records, keeps and switches as attend's does."""
    out, weights = attention.kernel(q, k, v, mask, scale, 0.0)  # (B, H, Q, d_v), (B, H, Q, K)
    if probe is not None:
        out = probe.attended(q, k, v, weights, out)
    return linear(attention.out_proj, out.transpose(1, 2).reshape(q.size(0), q.size(2), -1))


def heads(attention: MultiHeadAttention, x: torch.Tensor, projection, width: int) -> torch.Tensor:
    """x [B, Q, D] through one of the attention's projections, split into heads: [B, H, Q, width]."""
    B, Q = x.shape[:2]
    return linear(projection, x).view(B, Q, attention.n_heads, width).transpose(1, 2)


def feed_forward(layer, x: torch.Tensor) -> torch.Tensor:
    """FeedForward's forward in eval mode: [B, T, D] -> [B, T, D]."""
    ff = layer.feed_forward
    return linear(ff.linear2, torch.relu(linear(ff.linear1, x)))


def embed(embeddings: Embeddings, ids: torch.Tensor) -> torch.Tensor:
    """Transformer._embed in eval mode: ids [B, T] -> embeddings · √d_model + positional encoding [B, T, D]."""
    lookup = embeddings.lookup
    x = F.embedding(ids, lookup.weight, lookup.padding_idx) * math.sqrt(embeddings.d_model)
    return x + encoding(ids.size(1), embeddings.d_model, ids.device)


@functools.lru_cache(maxsize=256)
def encoding(length: int, d_model: int, device: torch.device) -> torch.Tensor:
    """core.layers.positional_encoding, computed once per length (read only: never written in place)."""
    return positional_encoding(length, d_model, device)


def linear(module, x: torch.Tensor) -> torch.Tensor:
    """nn.Linear's forward."""
    return F.linear(x, module.weight, module.bias)


def norm(module, x: torch.Tensor) -> torch.Tensor:
    """nn.LayerNorm's forward."""
    return F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)
