"""The long pass's attention: exact softmax over blocks of query rows, each row's statistics formed on the fly, the
weights never kept (hub.long runs it inside a real model and keeps what recomputes any region).

    output, lse, stats = attend(q, k, v, factor, "causal")   # q [H, T, d], k and v [H_kv, T, d]

A block's scores [H, R, K] are computed, summarised, used for the output and dropped; the pipeline's stages
(core.attention's `scaled`, `hide`) scale q and hide a block's cells, the softmax is the kernel's own (its sums kept
per row). Opt-in speed like the rest of `fast`: exponentials in base 2 (log₂e folded into the factor), grouped heads
reading their shared keys unrepeated, key blocks past a causal block's last row never computed. Axes: H query heads,
H_kv key/value heads, R query rows of a block, T positions, K keys, d head width.
"""

from __future__ import annotations

import torch

from attention_viz.core.attention import Window, hide, scaled
from attention_viz.fast import hugepages

STATISTICS = ("entropy", "max_weight", "mean_distance", "first_token", "previous_token", "self")
ROWS = 64            # query rows per block of the pass: [H, 64, T] scores at a time (9.4 MB at H = 9, T = 4,096)
LOG2E = 1.4426950408889634  # log₂e: the pass takes its exponentials in base 2


def _buffer(workspace: dict, name: str, size: int, like: torch.Tensor) -> torch.Tensor:
    """workspace[name], a flat buffer of at least `size` numbers of `like`'s dtype on its device (made, or made
    larger, when it is not)."""
    buffer = workspace.get(name)
    if buffer is None or buffer.numel() < size or buffer.dtype != like.dtype or buffer.device != like.device:
        buffer = workspace[name] = hugepages.empty((size,), like)
    return buffer


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, factor: float, rule: str,
           allowed: torch.Tensor | None = None, rows: int = ROWS, workspace: dict | None = None,
           window: Window | None = None) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """Exact softmax attention over blocks of query rows, with each row's statistics.

    q [H, T, d], k [H_kv, K, d], v [H_kv, K, d_v]; rule "full" (every key), "causal" (j <= i), "mask" (allowed
    [T, K], True = may attend) or "window" (`window`, a core.attention.Window: each block's rows' mask built from its
    rule, no [T, K] mask) -> (output [T, H, d_v] (transformers' layout), lse [H, T] (+inf on a row with every key
    masked), {statistic: its sum over rows [H], float64}). workspace: a dict the blocks' scores and exponentials
    (and q, scaled) are written into, on 2 MiB pages where it can (fresh memory for them each block costs more than the
    arithmetic); reused from block to block, and from call to call when the caller passes one. hub.long passes none:
    kept from layer to layer they would sit beside the MLP and the output head, 28 MB more at the pass's peak.

    A block of R rows: the scores of its R·n_rep rows on one key/value head in one product (grouped heads share
    their keys, never repeated; q scaled once and laid out [H_kv, T, n_rep, d], so the rows are a view), in base 2 (log₂e folded into the factor: exp2 is cheaper than exp, and
    2^(s·log₂e) = e^s); t = s − max, e = 2^t; then e @ V, Σ e, Σ e·j, Σ e·t and the weights on the first, previous
    and own position go into per-row arrays [H_kv, T, n_rep], and every statistic is formed from them once, after
    the last block. Half-precision q, k and v (bfloat16, float16) are taken to float32 first: the scores, the softmax,
    lse and every statistic in float32 (transformers' eager attention takes its softmax in float32, PyTorch's fused
    kernels keep their scores there), the output handed back in the given dtype. A hidden cell's score is the dtype's
    lowest number rather than −∞: its e is 0 all the same, and 0·t stays 0
    (0·(−∞) would be NaN); a row with every key hidden (rule "mask") is set to 0 at the end.
    """
    H, T, d = q.shape
    H_kv, K, d_v = v.shape
    n_rep = H // H_kv
    given = q.dtype
    if given in (torch.float16, torch.bfloat16):  # computed in float32, handed back in the dtype given
        q, k, v = q.float(), k.float(), v.float()
    workspace = {} if workspace is None else workspace
    size = H * min(rows, T) * K
    scores, exps = _buffer(workspace, "scores", size, q), _buffer(workspace, "exps", size, q)
    hidden = torch.finfo(q.dtype).min
    qs = scaled(q.view(H_kv, n_rep, T, d).transpose(1, 2), factor * LOG2E,  # base 2; a block's rows a view
                out=_buffer(workspace, "q", H * T * d, q)[:H * T * d].view(H_kv, T, n_rep, d))
    k_t = k.transpose(1, 2)  # (H_kv, d, K)
    j = torch.arange(K, dtype=q.dtype, device=q.device)
    output = q.new_empty(T, H_kv, n_rep, d_v)  # Σⱼ eⱼvⱼ until the end
    per_row = q.new_zeros(7, H_kv, T, n_rep)
    top, total, et, ej, first, previous, on_self = per_row  # max t, Σ e, Σ e·t, Σ e·j, e₀, e_{i−1}, e_i (base 2)
    after = q.new_zeros(H_kv, T, n_rep) if rule != "causal" else None  # Σ_{j>i} eⱼ·(j − i)
    upper = torch.ones(rows, rows, dtype=torch.bool, device=q.device).triu(1)[:, None]  # (R, 1, R): hidden cells
    for r0 in range(0, T, rows):
        r1 = min(r0 + rows, T)
        R = r1 - r0
        end = min(r1, K) if rule == "causal" else K  # keys past the block's last row: all hidden under the causal mask
        block = H * R * end
        s = torch.bmm(qs[:, r0:r1].view(H_kv, R * n_rep, d), k_t[:, :, :end],  # a block's rows: a view of qs
                      out=scores[:block].view(H_kv, R * n_rep, end)).view(H_kv, R, n_rep, end)  # base-2 scores
        if rule == "causal":
            hide(s[..., r0:r1], upper[:R, :, :R], hidden, inplace=True)
        elif rule == "mask":
            hide(s, ~allowed[r0:r1, None, :end], hidden, inplace=True)
        elif rule == "window":
            near = window.allowed(torch.arange(r0, r1, device=q.device), torch.arange(end, device=q.device))[0]
            hide(s, ~near[:, None], hidden, inplace=True)  # (R, 1, K): outside its window, not a global token
        m = torch.amax(s, -1, keepdim=True)  # (H_kv, R, n_rep, 1)
        top[:, r0:r1] = m[..., 0]
        t = s.sub_(m)  # <= 0
        e = torch.exp2(t, out=exps[:block].view(H_kv, R, n_rep, end))
        o = torch.bmm(e.view(H_kv, R * n_rep, end), v[:, :end])  # (H_kv, R·n_rep, d_v): Σⱼ eⱼvⱼ
        output[r0:r1] = o.view(H_kv, R, n_rep, d_v).transpose(0, 1)  # (R, H_kv, n_rep, d_v)
        total[:, r0:r1] = e.sum(-1)
        ej[:, r0:r1] = torch.mv(e.view(H * R, end), j[:end]).view(H_kv, R, n_rep)
        first[:, r0:r1] = e[..., 0]
        on_self[:, r0:r1] = e[..., r0:r1].diagonal(dim1=1, dim2=3).transpose(1, 2)  # (H_kv, R, n_rep)
        if r0 > 0:
            previous[:, r0:r1] = e[..., r0 - 1:r1 - 1].diagonal(dim1=1, dim2=3).transpose(1, 2)
        else:
            previous[:, 1:r1] = e[..., :R].diagonal(offset=-1, dim1=1, dim2=3).transpose(1, 2)
        if after is not None:  # the block's own keys by a triangle of distances, the keys after it in full
            i = torch.arange(r0, r1, dtype=q.dtype, device=q.device)
            near = (i[None] - i[:, None]).clamp_min_(0)  # (R, R): j − i where j > i
            later = torch.einsum("hrnk,rk->hrn", e[..., r0:r1], near)
            if r1 < end:
                tail = e[..., r1:].reshape(H * R, end - r1)
                later += (torch.mv(tail, j[r1:end]).view(H_kv, R, n_rep)
                          - tail.sum(-1).view(H_kv, R, n_rep) * i[:, None])
            after[:, r0:r1] = later
        et[:, r0:r1] = t.mul_(e).sum(-1)  # Σⱼ eⱼ·tⱼ (the scores are not needed after)
    top, total, et, ej, first, previous, on_self = per_row.transpose(2, 3)  # each (H_kv, n_rep, T)
    after = after.transpose(1, 2) if after is not None else None
    some = total > 0
    if rule == "mask":
        some &= allowed[:T].any(-1)  # a row with every key hidden: its e were 2⁰ = 1, all of them
    total = total.clamp_min(torch.finfo(q.dtype).tiny)
    log_total = total.log()  # natural: ln Σ e
    inv = torch.where(some, 1.0 / total, 0.0)  # the row's largest weight: its largest e is 2⁰ = 1
    output *= inv.permute(2, 0, 1)[..., None]
    lse = torch.where(some, top / LOG2E + log_total, float("inf"))  # ln Σⱼ exp(sⱼ) = max·ln 2 + ln Σ e
    # Σⱼ pᵢⱼ·(i − j): |i − j| for every key at or before i
    distance = torch.arange(T, dtype=q.dtype, device=q.device) - ej * inv
    if after is not None:
        distance += 2 * after * inv
    rows_stats = {
        "entropy": log_total - et * inv / LOG2E,  # −Σ p ln p = ln Σ e − Σ e·t·ln 2 / Σ e
        "max_weight": inv,
        "mean_distance": distance,
        "first_token": first * inv,
        "previous_token": previous * inv,
        "self": on_self * inv,
    }
    sums = {stat: torch.where(some, values, 0.0).sum(-1, dtype=torch.float64).reshape(H)
            for stat, values in rows_stats.items()}
    return output.view(T, H, d_v).to(given), lse.reshape(H, T), sums
