"""Attention (§3.2): masks, the attention pipeline (Eq. 1 and what models add to it), multi-head attention.

One function, `attention`, computes Eq. 1 stage by stage, and every attention in the package runs it (our model's,
a real model's through transformers, the fast kernels' in place or over blocks):

    scores = compatibility(Q, K)            QKᵀ (Eq. 1) or additive attention's w_hᵀ tanh(q_h + k_h)
    scores · scale                          1/√d_k, 1 or a model's own factor (dot product only)
    c·tanh(scores / c)                      a soft-cap (Gemma 2)
    + B                                     a bias on the scores (a position bias)
    −∞ where hidden; softmax                with a sink: one more logit per head in each row (gpt-oss)
    0 where hidden                          a row with every key hidden is 0, never NaN
    weights @ V

The compatibility function is a value chosen once (DOT_PRODUCT, or Additive with its parameter, a constructor
choice of MultiHeadAttention since it has parameters); scaling is a forward argument.

Axes: B batch, H heads, Q query positions, K key positions, d_k / d_v per-head widths.

Mask convention, the one used everywhere in this package: a boolean tensor broadcastable to
[B, H, Q, K] in which **True means "may attend"**. Masked weights are exactly 0, and a query row
whose keys are all masked gets all-zero weights (never NaN). PyTorch's conventions differ by function:
`F.scaled_dot_product_attention`'s boolean `attn_mask` means the same as ours (True = takes part), while
`nn.MultiheadAttention`'s boolean `attn_mask` and `key_padding_mask`, and `nn.Transformer`'s masks, mean
the opposite (True = masked out): pass them `~mask`.

The reference pipeline below is what the model runs unless told otherwise; attention_viz.fast has a
bit-identical kernel for inference, chosen explicitly with `Transformer.use_kernel`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from attention_viz.core.trace import Probe

# How QKᵀ is scaled before the softmax: "sqrt_dk" multiplies by 1/√d_k (the paper), "none"
# leaves the plain dot products (factor 1), and a positive float is used as the factor itself.
Scale = str | float
SCALE_MODES = ("sqrt_dk", "none")


def check_scale(scale: object) -> Scale:
    """A scaling mode as given, or a factor as a float; ValueError for anything else."""
    if type(scale) is float and 0 < scale < math.inf:  # the common case first (docs/benchmarks.md)
        return scale
    if isinstance(scale, str) and scale in SCALE_MODES:
        return scale
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):  # NumPy's floats and ints too
        raise ValueError(f"scale must be 'sqrt_dk', 'none' or a positive number, got {scale!r}")
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"a scale factor must be a positive finite number, got {scale!r}")
    return float(scale)


def scale_factor(scale: Scale, d_k: int) -> float:
    """The number QKᵀ is multiplied by for a scaling mode and a key width d_k."""
    if scale == "sqrt_dk":
        return 1.0 / math.sqrt(d_k)
    if scale == "none":
        return 1.0
    return check_scale(scale)


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[Q, K] lower-triangular mask: position i may attend to positions j <= i (§3.2.3)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def padding_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """[B, 1, 1, K] mask from token ids [B, K]: keys that are padding may not be attended to."""
    return (ids != pad_id)[:, None, None, :]


@dataclass(frozen=True)
class Window:
    """A local attention's mask as its rule (Longformer's sliding window, LongT5's radius): query i may attend to
    key j where |i − j| ≤ radius, and every query to the global tokens and a global token to every key (`overall`
    [B, K] bool, True = global; None: none). What a [T, T] mask would hold, built a block of rows at a time."""

    radius: int
    overall: torch.Tensor | None = None

    def allowed(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """The mask of query positions rows [R] and key positions cols [C]: [B or 1, R, C], True = may attend."""
        near = ((rows[:, None] - cols[None]).abs() <= self.radius)[None]  # (1, R, C)
        if self.overall is None:
            return near
        return near | self.overall[:, None, cols] | self.overall[:, rows, None]  # (B, R, C)


# The public names of the mask builders are also argument names below (and in the model): aliases keep them reachable.
causal_mask_of, padding_mask_of = causal_mask, padding_mask


def source_mask(src: torch.Tensor, pad_id: int, padding_mask: bool = True) -> torch.Tensor | None:
    """The mask of every attention whose keys are the source: src [B, S] -> [B, 1, 1, S], or None when off."""
    return padding_mask_of(src, pad_id) if padding_mask else None


def target_mask(tgt: torch.Tensor, pad_id: int, causal_mask: bool = True, padding_mask: bool = True
                ) -> torch.Tensor | None:
    """The decoder self-attention's mask from tgt [B, T]: causal [T, T], padding [B, 1, 1, T], both [B, 1, T, T]."""
    mask = causal_mask_of(tgt.size(1), tgt.device) if causal_mask else None  # (T, T)
    if padding_mask:
        pad = padding_mask_of(tgt, pad_id)  # (B, 1, 1, T)
        mask = pad if mask is None else mask & pad  # (B, 1, T, T)
    return mask


def attention_masks(
    src: torch.Tensor, tgt: torch.Tensor, pad_id: int, causal_mask: bool = True, padding_mask: bool = True,
    dense: bool = False,
) -> dict[str, torch.Tensor | None]:
    """The mask each kind of attention gets in Transformer.forward, from token ids src [B, S] and tgt [B, T].

    Keys are the kinds "encoder.self_attn" (Q=K=S), "decoder.self_attn" (Q=K=T), "decoder.cross_attn" (Q=T, K=S).
    By default the values are exactly the tensors forward passes on (broadcastable to [B, H, Q, K]; None when
    nothing is hidden); dense=True gives each as a boolean [B, Q, K] instead (all True where None).
    """
    src_mask = source_mask(src, pad_id, padding_mask)
    masks = {"encoder.self_attn": src_mask, "decoder.self_attn": target_mask(tgt, pad_id, causal_mask, padding_mask),
             "decoder.cross_attn": src_mask}
    if not dense:
        return masks
    B, S, T = src.size(0), src.size(1), tgt.size(1)
    sizes = {"encoder.self_attn": (S, S), "decoder.self_attn": (T, T), "decoder.cross_attn": (T, S)}
    return {kind: dense_mask(mask, B, *sizes[kind], src.device) for kind, mask in masks.items()}


def dense_mask(mask: torch.Tensor | None, B: int, Q: int, K: int, device: torch.device | str | None = None
               ) -> torch.Tensor:
    """A mask broadcastable to [B, 1, Q, K] (or None: nothing hidden) as a boolean [B, Q, K]."""
    if mask is None:
        return torch.ones(B, Q, K, dtype=torch.bool, device=device)
    return torch.broadcast_to(mask, (B, 1, Q, K))[:, 0]  # (B, Q, K)


# -- the pipeline: Eq. 1 and what models add to it, stage by stage


class Compatibility(Protocol):
    """A compatibility function (§3.2.1): the scores of every query against every key, scaled or not."""

    scaled: bool  # whether the scale switch multiplies its scores

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor: ...

    def head(self, h: int) -> Compatibility: ...  # the same function for head h's q, k alone ([·, d_k])


class DotProduct:
    """Eq. 1's compatibility function: q·k for every query and key (QKᵀ), scaled by the scale switch."""

    scaled = True

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q [..., Q, d_k], k [..., K, d_k] -> [..., Q, K]."""
        return torch.matmul(q, k.transpose(-2, -1))

    def head(self, h: int) -> DotProduct:
        return self


class Additive:
    """Additive attention's (§3.2.1, Bahdanau et al.): w_hᵀ tanh(q_h + k_h) per head, nothing scaling it.

    q_h = W_Q,h x and k_h = W_K,h y are the head's usual projections, so W_q, W_k of Bahdanau's wᵀ tanh(W_q q + W_k k)
    are the multi-head attention's own W_Q, W_K (hidden width d_k) and w [H, d_k] is the only extra parameter (the
    module's own, trained in place)."""

    scaled = False

    def __init__(self, w: torch.Tensor) -> None:
        self.w = w  # (H, d_k), or one head's (d_k,)

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q [B, H, Q, d_k], k [B, H, K, d_k] -> [B, H, Q, K]; one head's q [Q, d_k], k [K, d_k] -> [Q, K]."""
        hidden = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))  # (B, H, Q, K, d_k), or one head's (Q, K, d_k)
        return torch.einsum("qkd,d->qk" if self.w.dim() == 1 else "bhqkd,hd->bhqk", hidden, self.w)

    def head(self, h: int) -> Additive:
        return Additive(self.w[h])


DOT_PRODUCT = DotProduct()


def compatibility_of(name: str, w: torch.Tensor | None = None) -> Compatibility:
    """The compatibility function a config names ("dot_product" or "additive", whose w [H, d_k] it is handed)."""
    if name == "dot_product":
        return DOT_PRODUCT
    if name == "additive":
        return Additive(w)
    raise ValueError(f"compatibility must be 'dot_product' or 'additive', got {name!r}")


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None,
              scale: Scale = "sqrt_dk", dropout_p: float = 0.0, *, compatibility: Compatibility = DOT_PRODUCT,
              bias: torch.Tensor | None = None, softcap: float | None = None, sink: torch.Tensor | None = None,
              steps: dict[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 1, softmax(QKᵀ·scale)V, and what models add to it, returning (output, weights).

    Args:
        q: queries [..., Q, d_k]; k: keys [..., K, d_k]; v: values [..., K, d_v].
        mask: boolean, broadcastable to [..., Q, K]; True = may attend.
        scale: "sqrt_dk" (1/√d_k), "none" (factor 1) or a positive float factor (a compatibility function
            that is not scaled, the additive one, ignores it).
        dropout_p: dropout on the weights before they multiply V (training only).
        compatibility: how q and k become scores: DOT_PRODUCT (QKᵀ, Eq. 1) or Additive(w).
        bias: B, broadcastable to [..., Q, K], added to the scaled scores (a position bias: T5, ALiBi).
        softcap: c, where a model caps its logits as c·tanh(x/c) (Gemma 2: the scale still multiplies QKᵀ inside
            the tanh, a bias is added after it, as transformers' eager attention adds one).
        sink: a logit per head [H] that joins every row's softmax as one more key with no value (gpt-oss's learned
            sinks): the row's weights then sum to 1 minus the sink's share.
        steps: a dict to fill with every intermediate by name (Figure 2, left): "scores", "scaled", "capped" and
            "biased" (where applied), "masked" (−∞ where hidden), "weights", "output".

    Returns:
        output [..., Q, d_v] and weights [..., Q, K], the weights recorded after the softmax and
        before dropout. Masked weights are exactly 0; fully masked rows are all 0.
    """
    scores = compatibility.scores(q, k)  # (..., Q, K)
    factor = scale_factor(scale, q.size(-1)) if compatibility.scaled else 1.0
    weights = weights_of(scores, factor, mask, bias=bias, softcap=softcap, sink=sink, steps=steps)  # (..., Q, K)
    attended = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    output = torch.matmul(attended, v)  # (..., Q, d_v)
    if steps is not None:
        steps["output"] = output
    return output, weights


def weights_of(scores: torch.Tensor, factor: float = 1.0, mask: torch.Tensor | None = None,
               bias: torch.Tensor | None = None, softcap: float | None = None, sink: torch.Tensor | None = None,
               inplace: bool = False, steps: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """The stages from scores [..., Q, K] to weights [..., Q, K], in order: ·factor, soft-cap, + bias, −∞ where
    hidden, softmax (with a sink), 0 where hidden (a row with every key hidden is NaN before). inplace: each stage
    written into `scores` (no autograd; attention_viz.fast's kernel); steps: as `attention`'s (not in place)."""
    raw = scores
    scores = scaled_scores = scaled(scores, factor, scores if inplace else None)
    scores = capped = soft_capped(scores, softcap, inplace)
    scores = biased = added(scores, bias, inplace)
    hidden = None if mask is None else ~mask
    scores = hide(scores, hidden, float("-inf"), inplace)
    weights = hide(softmax(scores, sink, inplace), hidden, 0.0, inplace)
    if steps is not None:
        steps.update(scores=raw, scaled=scaled_scores, **({"capped": capped} if softcap is not None else {}),
                     **({"biased": biased} if bias is not None else {}), masked=scores, weights=weights)
    return weights


# -- the stages, each one function: the pipeline above runs them on the whole scores, attention_viz.fast's kernels
# in place and over blocks of rows (each stage returns its input itself where it has nothing to do)


def scaled(x: torch.Tensor, factor: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """x·factor (scores, or q before QKᵀ), written into `out` where given (x itself: in place)."""
    if factor != 1.0:
        return torch.mul(x, factor, out=out)
    return x if out is None or out is x else out.copy_(x)


def soft_capped(scores: torch.Tensor, softcap: float | None, inplace: bool = False) -> torch.Tensor:
    """c·tanh(x / c): logits kept within (−c, c)."""
    if softcap is None:
        return scores
    if inplace:
        return scores.div_(softcap).tanh_().mul_(softcap)
    return torch.tanh(scores / softcap) * softcap


def added(scores: torch.Tensor, bias: torch.Tensor | None, inplace: bool = False) -> torch.Tensor:
    """scores + B, a bias broadcastable to them (a position bias)."""
    if bias is None:
        return scores
    return scores.add_(bias) if inplace else scores + bias


def hide(x: torch.Tensor, hidden: torch.Tensor | None, value: float, inplace: bool = False) -> torch.Tensor:
    """`value` where `hidden` (a boolean broadcastable to x, True = hidden: the mask inverted): −∞ on the scores
    before the softmax, 0 on the weights after it (a long pass: the dtype's lowest number on its scores)."""
    if hidden is None:
        return x
    return x.masked_fill_(hidden, value) if inplace else x.masked_fill(hidden, value)


def softmax(logits: torch.Tensor, sink: torch.Tensor | None = None, inplace: bool = False) -> torch.Tensor:
    """softmax over each row's keys; with a sink (a logit per head [H], gpt-oss's, or per head and query
    [B or 1, H, Q, 1], Inkling 2's), over the keys and the sink, the sink's share dropped.
    Half-precision logits (bfloat16, float16) take it in float32, rounded once to their dtype (as transformers'
    eager attention takes it: softmax(..., dtype=torch.float32).to(query.dtype))."""
    if sink is not None:
        sinks = sink.to(logits.dtype)
        sinks = (sinks.reshape(-1, 1, 1) if sinks.dim() == 1 else sinks).expand(*logits.shape[:-1], 1)  # (..., H, Q, 1)
        logits = torch.cat([logits, sinks], dim=-1)  # (..., Q, K + 1)
    if logits.dtype in (torch.float16, torch.bfloat16):
        wide = torch.softmax(logits, dim=-1, dtype=torch.float32)
        weights = logits.copy_(wide) if inplace else wide.to(logits.dtype)
    else:
        weights = torch.softmax(logits, dim=-1, out=logits) if inplace else torch.softmax(logits, dim=-1)
    return weights if sink is None else weights[..., :-1]


scaled_dot_product_attention = attention  # Eq. 1: the pipeline with its default compatibility function


def attention_steps(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, scale: Scale = "sqrt_dk"
) -> dict[str, torch.Tensor]:
    """Every intermediate of Figure 2 (left): scores QKᵀ, scaled, masked (-inf where hidden), weights, output."""
    steps: dict[str, torch.Tensor] = {}
    attention(q, k, v, mask, scale, steps=steps)
    return steps


# An implementation of Eq. 1 with `attention`'s contract: (q, k, v, mask, scale, dropout_p, *, compatibility, bias,
# softcap, sink) -> (output, weights).
Kernel = Callable[..., tuple[torch.Tensor, torch.Tensor]]


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

    scaled = False  # a compatibility function of its own, for `attention`

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q [..., Q, d_query], k [..., K, d_key] -> [..., Q, K]."""
        hidden = torch.tanh(self.q_proj(q).unsqueeze(-2) + self.k_proj(k).unsqueeze(-3))  # (..., Q, K, d_attn)
        return self.score(hidden).squeeze(-1)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """q [..., Q, d_query], k [..., K, d_key], v [..., K, d_v] -> (output [..., Q, d_v], weights [..., Q, K])."""
        return attention(q, k, v, mask, compatibility=self)


class MultiHeadAttention(nn.Module):
    """§3.2.2: h heads, each attending with its own projections W_Q, W_K (to d_k) and W_V (to d_v); W_O back to d_model."""

    def __init__(self, d_model: int, n_heads: int, d_k: int, d_v: int, dropout: float = 0.0,
                 kernel: Kernel = scaled_dot_product_attention, compatibility: str = "dot_product") -> None:
        super().__init__()
        compatibility_of(compatibility)  # a ValueError for an unknown name, before anything is built
        self.n_heads, self.d_k, self.d_v, self.dropout = n_heads, d_k, d_v, dropout
        self.kernel = kernel  # the pipeline: the reference, or a bit-identical one from attention_viz.fast
        self.q_proj = nn.Linear(d_model, n_heads * d_k)  # W_Q of every head, stacked
        self.k_proj = nn.Linear(d_model, n_heads * d_k)  # W_K
        self.v_proj = nn.Linear(d_model, n_heads * d_v)  # W_V
        self.out_proj = nn.Linear(n_heads * d_v, d_model)  # W_O
        if compatibility == "additive":
            self.score = nn.Parameter(torch.randn(n_heads, d_k) / math.sqrt(d_k))  # w_h of every head, [H, d_k]
        self.compatibility = compatibility_of(compatibility, getattr(self, "score", None))  # chosen once

    def init_unit_qk(self) -> None:
        """Footnote 4's premise: W_Q, W_K ~ N(0, 1/d_model), so unit-variance inputs give q, k components of variance ≈ 1."""
        d_model = self.q_proj.in_features
        for proj in (self.q_proj, self.k_proj):
            nn.init.normal_(proj.weight, std=1.0 / math.sqrt(d_model))
            nn.init.zeros_(proj.bias)
        if isinstance(self.compatibility, Additive):
            nn.init.normal_(self.score, std=1.0 / math.sqrt(self.d_k))  # wᵀ tanh(·) of variance ≤ 1

    def scores(self, q: torch.Tensor, k: torch.Tensor, scale: Scale = "sqrt_dk") -> torch.Tensor:
        """The softmax's logits before masking: q [B, H, Q, d_k], k [B, H, K, d_k] -> [B, H, Q, K]."""
        factor = scale_factor(scale, q.size(-1)) if self.compatibility.scaled else 1.0
        return scaled(self.compatibility.scores(q, k), factor)  # (B, H, Q, K)

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
        scale: Scale = "sqrt_dk", probe: Probe | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention pipeline (additive attention ignores `scale`) in every head on projected q, k, v, then W_O:
        (out [B, Q, d_model], weights [B, H, Q, K]). probe (core.trace): the points kept, and the switch of the
        heads' outputs [B, H, Q, d_v] before W_O (heads switched off); the weights are recorded as computed."""
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = self.kernel(q, k, v, mask, scale, dropout_p, compatibility=self.compatibility)
        # (B, H, Q, d_v), (B, H, Q, K)
        if probe is not None:
            heads = probe.attended(q, k, v, weights, heads)  # (B, H, Q, d_v)
        concat = heads.transpose(1, 2).reshape(q.size(0), q.size(2), -1)  # (B, Q, H·d_v)
        return self.out_proj(concat), weights

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        scale: Scale = "sqrt_dk",
        probe: Probe | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """query [B, Q, d_model], key/value [B, K, d_model], mask -> [B, H, Q, K] -> (out [B, Q, d_model], weights [B, H, Q, K])."""
        if probe is not None:
            probe("inputs", (query, key, value, mask))
        return self.attend(*self.project(query, key, value), mask, scale, probe)
