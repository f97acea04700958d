"""The Transformer's building blocks (§3.1, §3.3-3.5): embeddings, positional encoding, feed-forward, layers.

Axes: B batch, S source positions, T target positions, D d_model.
Every layer is post-norm as in the paper: x = LayerNorm(x + Dropout(Sublayer(x))).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from attention_viz.core.trace import Probe
from attention_viz.core.attention import MultiHeadAttention
from attention_viz.core.variation import Variation


class Embeddings(nn.Module):
    """§3.4: token embeddings multiplied by √d_model."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.lookup = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] -> [B, T, D]."""
        return self.lookup(ids) * math.sqrt(self.d_model)


def positional_encoding(length: int, d_model: int, device: torch.device | str | None = None) -> torch.Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), shape [length, D]."""
    position = torch.arange(length, dtype=torch.float32, device=device)[:, None]  # (T, 1)
    inv_freq = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / d_model)
    )  # (ceil(D/2),)
    angles = position * inv_freq  # (T, ceil(D/2))
    pe = torch.zeros(length, d_model, device=device)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return pe


class FeedForward(nn.Module):
    """§3.3: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, inner width d_ff."""

    def __init__(self, d_model: int, d_ff: int, dropout: float) -> None:
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, D] -> [B, T, D]."""
        return self.linear2(self.dropout(torch.relu(self.linear1(x))))


class EncoderLayer(nn.Module):
    """§3.1 encoder layer: self-attention, then feed-forward, each wrapped in residual + LayerNorm."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, d_ff: int, dropout: float, eps: float,
                 compatibility: str = "dot_product") -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout, compatibility=compatibility)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, variation: Variation, probe: Probe | None = None
    ) -> torch.Tensor:
        """x [B, S, D], mask -> [B, H, S, S] -> x [B, S, D]; the self-attention's weights [B, H, S, S] go to the
        probe (core.trace)."""
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask, variation.scale, probe)[0]))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    """§3.1 decoder layer: masked self-attention, encoder-decoder attention, feed-forward; each post-norm."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, d_ff: int, dropout: float, eps: float,
                 compatibility: str = "dot_product") -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout, compatibility=compatibility)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, d_k, d_v, dropout, compatibility=compatibility)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model, eps=eps)
        self.norm2 = nn.LayerNorm(d_model, eps=eps)
        self.norm3 = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None,
        cross_mask: torch.Tensor | None,
        variation: Variation,
        self_probe: Probe | None = None,
        cross_probe: Probe | None = None,
    ) -> torch.Tensor:
        """y [B, T, D], memory [B, S, D] -> y [B, T, D]; the self [B, H, T, T] and cross weights [B, H, T, S] go to
        the probes (core.trace)."""
        y = self.norm1(y + self.dropout(self.self_attn(y, y, y, self_mask, variation.scale, self_probe)[0]))
        y = self.norm2(y + self.dropout(self.cross_attn(y, memory, memory, cross_mask, variation.scale,
                                                        cross_probe)[0]))
        return self.norm3(y + self.dropout(self.feed_forward(y)))

    def step(
        self,
        y: torch.Tensor,
        memory_kv: tuple[torch.Tensor, torch.Tensor],
        past_kv: tuple[torch.Tensor, torch.Tensor] | None,
        cross_mask: torch.Tensor | None,
        variation: Variation,
        self_mask: torch.Tensor | None = None,
        self_probe: Probe | None = None,
        cross_probe: Probe | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One new position under the causal mask: y [B, 1, D] attends to itself and the positions before it,
        whose self-attention keys and values (past_kv, [B, H, t, d_k] and [B, H, t, d_v]) are not recomputed;
        memory_kv are the cross-attention's keys and values of the memory. self_mask [B, 1, 1, t + 1] hides
        keys of the self-attention (the padding mask of the decoder input: the last row of forward's mask).
        Returns (y [B, 1, D], past_kv + this position's). Row for row what forward computes for the last
        position, in O(t) instead of O(t²)."""
        k, v = self.self_attn.project_keys_values(y, y)  # (B, H, 1, d_k), (B, H, 1, d_v)
        if past_kv is not None:
            k, v = torch.cat([past_kv[0], k], dim=2), torch.cat([past_kv[1], v], dim=2)  # (B, H, t + 1, ...)
        attended, _ = self.self_attn.attend(self.self_attn.project_query(y), k, v, self_mask, variation.scale,
                                            self_probe)
        y = self.norm1(y + self.dropout(attended))
        attended, _ = self.cross_attn.attend(self.cross_attn.project_query(y), *memory_kv, cross_mask,
                                             variation.scale, cross_probe)
        y = self.norm2(y + self.dropout(attended))
        y = self.norm3(y + self.dropout(self.feed_forward(y)))
        return y, (k, v)
