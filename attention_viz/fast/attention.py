"""The attention pipeline made faster on the CPU for inference, bit-identical to attention_viz.core.attention's.

Chosen explicitly: `model.use_kernel(fast.scaled_dot_product_attention)` (the app and the benchmarks do);
the core never imports this module. Same signature and contract as the reference: (output, weights), weights
after the softmax and before dropout, masked weights exactly 0, fully masked rows all 0.

Where it differs from the reference, and why (measured in docs/benchmarks.md):
- without autograd, every stage (core.attention.weights_of) writes into the one fresh scores tensor, which becomes
  the weights;
- from MANY_SCORES scores on, that tensor is allocated on huge pages (see hugepages: 4 KiB page faults cost
  as much as QKᵀ), a power-of-two factor (1/√d_k for d_k = 4, 16, 64, 256) scales q instead of the scores
  (exact in floating point), and two stages are computed another way to the same numbers: torch.where hides keys
  without inverting the mask, and only rows with every key hidden are re-zeroed.
With autograd (training), another compatibility function than the dot product, or a mask or bias that would
enlarge the scores, it is the reference itself.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attention_viz.core import attention as reference
from attention_viz.core.attention import (DOT_PRODUCT, Compatibility, Scale, added, hide, scale_factor, scaled,
                                         soft_capped, softmax)
from attention_viz.fast import hugepages

# From this many scores on (all heads together) the weights are computed by _many_weights, which streams the
# [..., Q, K] tensor fewer times but makes more calls; below it, the reference's stages in place (docs/benchmarks.md).
MANY_SCORES = 2**15


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
                                 scale: Scale = "sqrt_dk", dropout_p: float = 0.0, *,
                                 compatibility: Compatibility = DOT_PRODUCT, bias: torch.Tensor | None = None,
                                 softcap: float | None = None, sink: torch.Tensor | None = None
                                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """core.attention.attention computed bit for bit in fewer passes (each stage in place)."""
    shape = _scores_shape(q, k)
    if (compatibility is not DOT_PRODUCT
            or torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
            or mask is not None and not _fits(mask.shape, shape)  # a mask or bias that enlarges the scores:
            or bias is not None and not _fits(bias.shape, shape)):  # they cannot hold it
        return reference.attention(q, k, v, mask, scale, dropout_p, compatibility=compatibility, bias=bias,
                                   softcap=softcap, sink=sink)
    factor = scale_factor(scale, q.size(-1))
    if math.prod(shape) >= MANY_SCORES:
        weights = _many_weights(q, k, mask, factor, shape, bias, softcap, sink)
    else:
        scores = torch.matmul(q, k.transpose(-2, -1))  # (..., Q, K)
        weights = reference.weights_of(scores, factor, mask, bias, softcap, sink, True)  # each stage in place
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    return torch.matmul(attended, v), weights  # (..., Q, d_v), (..., Q, K)


def _many_weights(q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, factor: float,
                  shape: tuple[int, ...], bias: torch.Tensor | None = None, softcap: float | None = None,
                  sink: torch.Tensor | None = None) -> torch.Tensor:
    """The weights streamed fewer times, on huge pages when large (see the module's docstring)."""
    exact = factor == 1.0 or math.frexp(factor)[0] == 0.5  # a power of two: scaling never rounds
    if exact:
        q = scaled(q, factor)  # (..., Q, d_k)
    keys_t = k.transpose(-2, -1)  # (..., d_k, K)
    if math.prod(shape) * q.element_size() >= hugepages.MIN_BYTES:
        scores = torch.matmul(q, keys_t, out=hugepages.empty(shape, q))  # (..., Q, K)
    else:
        scores = torch.matmul(q, keys_t)  # (..., Q, K)
    if not exact:
        scaled(scores, factor, out=scores)
    added(soft_capped(scores, softcap, inplace=True), bias, inplace=True)
    if mask is not None:
        torch.where(mask, scores, scores.new_full((), float("-inf")), out=scores)
    weights = softmax(scores, sink, inplace=True)
    if mask is not None:
        live = mask.any(-1, keepdim=True)  # (..., Q, 1): rows that may attend to some key
        if weights.device.type != "cpu" or not bool(live.all()):  # no host sync on an accelerator
            hide(weights, ~live, 0.0, inplace=True)
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
