"""What both kinds of head importance share: the prune curve's tolerance, per-row gates for a batch of variants,
and the rank agreement of two scores."""

from __future__ import annotations

import numpy as np
import torch

ONE_POINT = 0.01       # "at most one point lost" on the prune curve


def variant_gates(keys: list[str], n_heads: int, variants: list[set[tuple[str, int]]], rows: int,
                  dtype: torch.dtype, device) -> dict[str, torch.Tensor]:
    """Per-row gates [V·rows, H] per key: variant v (a set of heads off) on rows v·rows .. (v + 1)·rows - 1."""
    gates = {key: torch.ones(len(variants), n_heads, dtype=dtype, device=device) for key in keys}
    for v, off in enumerate(variants):
        for key, h in off:
            if key in gates:  # heads of other keys are another call's
                gates[key][v, h] = 0.0
    return {key: g.repeat_interleave(rows, dim=0) for key, g in gates.items()}  # (V·rows, H)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two equal-length vectors (average ranks for ties)."""
    def ranks(x):
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for value in np.unique(x):  # ties share their mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])
