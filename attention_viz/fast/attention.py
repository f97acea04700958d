"""Eq. 1 made faster on the CPU for inference, bit-identical to attention_viz.core.attention's reference.

Chosen explicitly: `model.use_kernel(fast.scaled_dot_product_attention)` (the app and the benchmarks do);
the core never imports this module. Same signature and contract as the reference: (output, weights), weights
after the softmax and before dropout, masked weights exactly 0, fully masked rows all 0.

Where it differs from the reference, and why (measured in docs/benchmarks.md):
- without autograd, every step writes into the one fresh scores tensor, which becomes the weights;
- from MANY_SCORES scores on, that tensor is allocated on huge pages (see hugepages: 4 KiB page faults cost
  as much as QKᵀ), a power-of-two factor (1/√d_k for d_k = 4, 16, 64, 256) scales q instead of the scores
  (exact in floating point), torch.where hides keys without inverting the mask, and only rows with every key
  hidden are re-zeroed.
With autograd (training) it is the reference itself.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_viz.core import attention as reference
from attention_viz.core.attention import Scale, scale_factor
from attention_viz.fast import hugepages

# From this many scores on (all heads together) the weights are computed by _many_weights, which streams the
# [..., Q, K] tensor fewer times but makes more calls; below it, _few_weights (see docs/benchmarks.md).
MANY_SCORES = 2**15


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: Scale = "sqrt_dk",
    dropout_p: float = 0.0,
    *,
    softcap: float | None = None,
    sink: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 1 as core.attention.scaled_dot_product_attention computes it, bit for bit, in fewer passes (a soft cap
    and a sink included: the same operations, in place)."""
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
        return reference.scaled_dot_product_attention(q, k, v, mask, scale, dropout_p, softcap=softcap, sink=sink)
    factor = scale_factor(scale, q.size(-1))
    shape = _scores_shape(q, k)
    if mask is not None and not _fits(mask.shape, shape):  # the mask enlarges the scores: they cannot hold it
        return reference.scaled_dot_product_attention(q, k, v, mask, scale, dropout_p, softcap=softcap, sink=sink)
    if math.prod(shape) >= MANY_SCORES:
        weights = _many_weights(q, k, mask, factor, shape, softcap, sink)
    else:
        weights = _few_weights(q, k, mask, factor, softcap, sink)
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return torch.matmul(attended, v), weights  # (..., Q, d_v), (..., Q, K)


def _capped(scores: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """The reference's c·tanh(x / c), in place."""
    return scores if softcap is None else scores.div_(softcap).tanh_().mul_(softcap)


def _softmax(scores: torch.Tensor, sink: torch.Tensor | None) -> torch.Tensor:
    """softmax over each row's keys, in place; with a sink [H], over the keys and the sink, its share dropped (the
    reference's concatenation, written once)."""
    if sink is None:
        return torch.softmax(scores, dim=-1, out=scores)
    sinks = sink.to(scores.dtype).reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)  # (..., H, Q, 1)
    joined = torch.cat([scores, sinks], dim=-1)  # (..., Q, K + 1)
    return torch.softmax(joined, dim=-1, out=joined)[..., :-1]


def _few_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, factor: float,
                 softcap: float | None = None, sink: torch.Tensor | None = None) -> torch.Tensor:
    """The reference's steps, each written into the one scores tensor."""
    scores = torch.matmul(q, k.transpose(-2, -1))  # (..., Q, K)
    if factor != 1.0:
        scores.mul_(factor)
    scores = _capped(scores, softcap)
    if mask is None:
        return _softmax(scores, sink)
    hidden = ~mask
    scores.masked_fill_(hidden, float("-inf"))
    weights = _softmax(scores, sink)
    return weights.masked_fill_(hidden, 0.0)  # a row with every key masked is NaN before this


def _many_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, factor: float,
                  shape: tuple[int, ...], softcap: float | None = None, sink: torch.Tensor | None = None
                  ) -> torch.Tensor:
    """The weights streamed fewer times, on huge pages when large (see the module's docstring)."""
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
    scores = _capped(scores, softcap)
    if mask is not None:
        torch.where(mask, scores, scores.new_full((), float("-inf")), out=scores)
    weights = _softmax(scores, sink)
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
    """True when a tensor of shape `small` broadcasts to `large` without enlarging it (checked by hand,
    cheaper than torch.broadcast_shapes; see docs/benchmarks.md)."""
    return len(small) <= len(large) and all(a == 1 or a == b for a, b in zip(reversed(small), reversed(large)))
