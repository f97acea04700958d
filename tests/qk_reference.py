"""A hand-written float64 reference for attention_viz.qkstats: one text at a time, unpadded, loops over tokens."""

from __future__ import annotations

import math

import numpy as np


def reference(per_text: list[tuple[np.ndarray, np.ndarray, bool]]) -> dict:
    """per_text: (q [Q, H, d], k [K, H, d], causal) of each text, real tokens only -> per head (lists of H floats):
    logit_var, q_var, k_var, entropy_scaled, entropy_unscaled, and n_pairs."""
    H, d = per_text[0][0].shape[1:]
    out = {name: [] for name in ("logit_var", "q_var", "k_var", "row_var", "entropy_scaled", "entropy_unscaled")}
    n_pairs = 0
    for h in range(H):
        logits, q_components, k_components, row_vars = [], [], [], []
        entropies = {1 / math.sqrt(d): [], 1.0: []}
        for q, k, causal in per_text:
            q, k = np.asarray(q, np.float64), np.asarray(k, np.float64)
            for i in range(q.shape[0]):
                row = []
                for j in range(k.shape[0]):
                    if causal and j > i:
                        continue
                    row.append(float(np.dot(q[i, h], k[j, h])))
                    q_components.append(q[i, h])
                    k_components.append(k[j, h])
                logits.extend(row)
                row_vars.append(_population_var(row))
                for factor, found in entropies.items():
                    z = [x * factor for x in row]
                    top = max(z)
                    e = [math.exp(v - top) for v in z]
                    p = [v / sum(e) for v in e]
                    found.append(-sum(v * math.log(v) for v in p if v > 0))
        n_pairs = len(logits)
        out["logit_var"].append(_population_var(logits))
        out["q_var"].append(_population_var(np.concatenate(q_components)))
        out["k_var"].append(_population_var(np.concatenate(k_components)))
        out["row_var"].append(float(np.mean(row_vars)))
        out["entropy_scaled"].append(float(np.mean(entropies[1 / math.sqrt(d)])))
        out["entropy_unscaled"].append(float(np.mean(entropies[1.0])))
    out["n_pairs"] = n_pairs
    return out


def _population_var(values) -> float:
    values = np.asarray(values, np.float64)
    mean = values.sum() / values.size
    return float(((values - mean) ** 2).sum() / values.size)


def assert_matches(stats, expected: dict, rtol: float = 1e-4) -> None:
    """A QKStatistics equals the reference (float32 models: q and k agree to ~1e-6 relative between passes)."""
    assert stats.n_pairs == expected["n_pairs"]
    for name in ("logit_var", "q_var", "k_var", "row_var", "entropy_scaled", "entropy_unscaled"):
        np.testing.assert_allclose(getattr(stats, name), expected[name], rtol=rtol, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(stats.predicted, stats.d_k * np.array(expected["q_var"]) * np.array(expected["k_var"]),
                               rtol=rtol)
