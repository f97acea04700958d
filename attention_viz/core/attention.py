"""Attention (§3.2): masks, scaled dot-product attention (Eq. 1), additive attention, multi-head attention.

Axes: B batch, H heads, Q query positions, K key positions, d_k / d_v per-head widths.

Mask convention, the one used everywhere in this package: a boolean tensor broadcastable to
[B, H, Q, K] in which **True means "may attend"**. Masked weights are exactly 0, and a query row
whose keys are all masked gets all-zero weights (never NaN). PyTorch's `attn_mask` uses the same
meaning for booleans; its `key_padding_mask` and `nn.Transformer`'s masks use the opposite one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.fast import hugepages

# How QKᵀ is scaled before the softmax: "sqrt_dk" multiplies by 1/√d_k (the paper), "none"
# leaves the plain dot products (factor 1), and a positive float is used as the factor itself.
Scale = str | float
SCALE_MODES = ("sqrt_dk", "none")


def scale_factor(scale: Scale, d_k: int) -> float:
    """The number QKᵀ is multiplied by for a scaling mode and a key width d_k."""
    if scale == "sqrt_dk":
        return 1.0 / math.sqrt(d_k)
    if scale == "none":
        return 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise ValueError(f"scale must be 'sqrt_dk', 'none' or a positive number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"a scale factor must be a positive finite number, got {scale!r}")
    return float(scale)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[Q, K] lower-triangular mask: position i may attend to positions j <= i (§3.2.3)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[B, 1, 1, K] mask from token ids [B, K]: keys that are padding may not be attended to."""
    return (ids != pad_id)[:, None, None, :]


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: Scale = "sqrt_dk",
    dropout_p: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 1, softmax(QKᵀ·scale)V, returning (output, weights).

    Args:
        q: queries [..., Q, d_k]; k: keys [..., K, d_k]; v: values [..., K, d_v].
        mask: boolean, broadcastable to [..., Q, K]; True = may attend.
        scale: "sqrt_dk" (1/√d_k), "none" (factor 1) or a positive float factor.
        dropout_p: dropout on the weights before they multiply V (training only).

    Returns:
        output [..., Q, d_v] and weights [..., Q, K], the weights recorded after the softmax and
        before dropout. Masked weights are exactly 0; fully masked rows are all 0.
    """
    factor = scale_factor(scale, q.size(-1))
    n_scores = q.numel() // q.size(-1) * k.size(-2)  # the size of QKᵀ when q carries the batch axes
    if n_scores >= MANY_SCORES and not (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad)):
        weights = _many_weights(q, k, mask, factor)
    else:
        weights = _weights(q, k, mask, factor)
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return torch.matmul(attended, v), weights  # (..., Q, d_v), (..., Q, K)


def _weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, factor: float) -> torch.Tensor:
    """softmax(QKᵀ·factor) with hidden keys at exactly 0, in as few calls as possible (few scores, or autograd)."""
    scores = torch.matmul(q, k.transpose(-2, -1))  # (..., Q, K)
    if factor != 1.0:
        scores = scores.mul_(factor)
    hidden = None if mask is None else ~mask
    if not (torch.is_grad_enabled() and scores.requires_grad) and (mask is None or _fits(mask.shape, scores.shape)):
        # Without autograd every step can write into `scores`, which becomes the weights.
        if hidden is not None:
            scores.masked_fill_(hidden, float("-inf"))
        weights = torch.softmax(scores, dim=-1, out=scores)
        if hidden is not None:
            weights.masked_fill_(hidden, 0.0)  # a row with every key masked is NaN before this
        return weights
    if hidden is not None:
        scores = scores.masked_fill(hidden, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if hidden is not None:
        weights = weights.masked_fill(hidden, 0.0)
    return weights


# From this many scores on (all heads together), without autograd, the weights are computed by
# _many_weights, which streams the [..., Q, K] tensor fewer times but makes more calls (a few µs each).
# Chosen by timing both inside the model benchmark (app model, h=4, one thread): the fewer calls win
# ~5% of a forward at n=16 (1K scores per map), the two tie at n=64 (16K), fewer passes win ~15% at
# n=256 (262K).
MANY_SCORES = 2**15


def _many_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, factor: float) -> torch.Tensor:
    """_weights without autograd for many scores: bitwise the same weights, streamed fewer times.

    - A large scores tensor is allocated on huge pages (see hugepages: 4 KiB page faults cost as much as QKᵀ).
    - A power-of-two factor (1/√d_k for d_k = 4, 16, 64, 256) scales q instead of the scores: exact in
      floating point, and n·d_k multiplications instead of n² (other factors scale the scores as before).
    - torch.where(mask, ...) hides keys without inverting the mask first (twice as fast as masked_fill_
      with a broadcast mask).
    - softmax already gives exactly 0 to a hidden key in a row that can see some key, so only rows with
      every key hidden (NaN after the softmax) are zeroed, and on the CPU only when there are some.
    """
    shape = _scores_shape(q, k)
    if mask is not None and not _fits(mask.shape, shape):
        return _weights(q, k, mask, factor)  # the mask enlarges the scores: they cannot hold the weights
    exact = factor == 1.0 or math.frexp(factor)[0] == 0.5  # a power of two: scaling never rounds
    if factor != 1.0 and exact:
        q = q * factor  # (..., Q, d_k)
    keys_t = k.transpose(-2, -1)  # (..., d_k, K)
    if math.prod(shape) * q.element_size() >= hugepages.MIN_BYTES:
        scores = torch.matmul(q, keys_t, out=hugepages.empty(shape, q))  # (..., Q, K)
    else:
        scores = torch.matmul(q, keys_t)  # (..., Q, K)
    if not exact:
        scores.mul_(factor)
    if mask is not None:
        torch.where(mask, scores, scores.new_full((), float("-inf")), out=scores)
    weights = torch.softmax(scores, dim=-1, out=scores)
    if mask is not None:
        live = mask.any(-1, keepdim=True)  # (..., Q, 1): rows that may attend to some key
        if weights.device.type != "cpu" or not bool(live.all()):  # no host sync on an accelerator
            weights.masked_fill_(~live, 0.0)
    return weights


def _scores_shape(q: torch.Tensor, k: torch.Tensor) -> tuple[int, ...]:
    """The shape of QKᵀ, [..., Q, K], with the batch axes of q and k broadcast."""
    if q.dim() == k.dim() and q.shape[:-2] == k.shape[:-2]:
        return (*q.shape[:-1], k.size(-2))
    return (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.size(-2), k.size(-2))


def _fits(small: tuple[int, ...], large: tuple[int, ...]) -> bool:
    """True when a tensor of shape `small` broadcasts to `large` without enlarging it (checked by hand:
    torch.broadcast_shapes costs ~14 µs)."""
    return len(small) <= len(large) and all(a == 1 or a == b for a, b in zip(reversed(small), reversed(large)))


def attention_steps(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, scale: Scale = "sqrt_dk"
) -> dict[str, torch.Tensor]:
    """Every intermediate of Figure 2 (left): scores QKᵀ, scaled, masked (-inf where hidden), weights, output."""
    scores = torch.matmul(q, k.transpose(-2, -1))  # (..., Q, K)
    scaled = scores * scale_factor(scale, q.size(-1))
    masked = scaled if mask is None else scaled.masked_fill(~mask, float("-inf"))
    output, weights = scaled_dot_product_attention(q, k, v, mask, scale)
    return {"scores": scores, "scaled": scaled, "masked": masked, "weights": weights, "output": output}


class AdditiveAttention(nn.Module):
    """Additive attention (Bahdanau et al.), the compatibility function §3.2.1 compares against.

    score(q, k) = wᵀ tanh(W_q q + W_k k); weights = softmax over keys; output = weights · V.
    It materialises a [B, Q, K, d_attn] tensor, which is why it is slower and larger than Eq. 1.
    """

    def __init__(self, d_query: int, d_key: int, d_attn: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(d_query, d_attn, bias=False)
        self.k_proj = nn.Linear(d_key, d_attn, bias=False)
        self.score = nn.Linear(d_attn, 1, bias=False)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q [..., Q, d_query], k [..., K, d_key], v [..., K, d_v] -> (output [..., Q, d_v], weights [..., Q, K])."""
        hidden = torch.tanh(self.q_proj(q).unsqueeze(-2) + self.k_proj(k).unsqueeze(-3))  # (..., Q, K, d_attn)
        scores = self.score(hidden).squeeze(-1)  # (..., Q, K)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        if mask is not None:
            weights = weights.masked_fill(~mask, 0.0)
        return torch.matmul(weights, v), weights


class MultiHeadAttention(nn.Module):
    """§3.2.2: h heads, each attending with its own projections W_Q, W_K (to d_k) and W_V (to d_v); W_O back to d_model."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.n_heads, self.d_k, self.d_v, self.dropout = n_heads, d_k, d_v, dropout
        self.q_proj = nn.Linear(d_model, n_heads * d_k)  # W_Q of every head, stacked
        self.k_proj = nn.Linear(d_model, n_heads * d_k)  # W_K
        self.v_proj = nn.Linear(d_model, n_heads * d_v)  # W_V
        self.out_proj = nn.Linear(n_heads * d_v, d_model)  # W_O

    def project(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-head q [B, H, Q, d_k], k [B, H, K, d_k], v [B, H, K, d_v] from inputs [B, *, d_model]."""
        return (self.project_query(query), *self.project_keys_values(key, value))

    def project_query(self, query: torch.Tensor) -> torch.Tensor:
        """query [B, Q, d_model] -> q [B, H, Q, d_k]."""
        B, Q = query.shape[:2]
        return self.q_proj(query).view(B, Q, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, Q, d_k)

    def project_keys_values(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """key, value [B, K, d_model] -> k [B, H, K, d_k], v [B, H, K, d_v]: what a decoder may keep between steps."""
        B, K, H = key.size(0), key.size(1), self.n_heads
        k = self.k_proj(key).view(B, K, H, self.d_k).transpose(1, 2)  # (B, H, K, d_k)
        v = self.v_proj(value).view(B, K, H, self.d_v).transpose(1, 2)  # (B, H, K, d_v)
        return k, v

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
        scale: Scale = "sqrt_dk",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. 1 in every head on projected q, k, v, then W_O: (out [B, Q, d_model], weights [B, H, Q, K])."""
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask, scale, dropout_p)  # (B, H, Q, d_v)
        concat = heads.transpose(1, 2).reshape(q.size(0), q.size(2), -1)  # (B, Q, H·d_v)
        return self.out_proj(concat), weights

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        scale: Scale = "sqrt_dk",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query [B, Q, d_model], key/value [B, K, d_model], mask -> [B, H, Q, K] -> (out [B, Q, d_model], weights [B, H, Q, K])."""
        return self.attend(*self.project(query, key, value), mask, scale)
