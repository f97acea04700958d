"""The √d_k experiment (§3.2.1, footnote 4): why dot products are scaled by 1/√d_k.

If the components of q and k are independent with mean 0 and variance 1, then
q·k = Σ_i q_i k_i has mean 0 and variance d_k. Unscaled, the logits grow like √d_k,
the softmax saturates towards one-hot and its gradients vanish; dividing by √d_k
restores unit variance whatever d_k is.

Sampling. q and k have i.i.d. N(0, 1) components. Given q, each q·k_j is N(0, ‖q‖²),
and ‖q‖² ~ χ²(d_k), so a query's logits against n keys are drawn exactly as
sqrt(χ²(d_k)) · z_j with z_j ~ N(0, 1): the same distribution as forming the vectors,
at O(n) instead of O(n·d_k) cost, which keeps every call fast up to d_k = 4096.
Every function is seeded and deterministic; draws depend only on (seed, d_k), so
the scaled and unscaled variants of one call see the same q and k.

The exact law. Footnote 4 states the mean and the variance; the shape of q·k is normal only as d_k
grows. Mixing N(0, s) over s ~ χ²(d_k) gives the variance-gamma law, density
|x|^(d_k−1)/2 K_(d_k−1)/2(|x|) / (2^(d_k−1)/2 √π Γ(d_k/2)): K₀(|x|)/π at d_k = 1 (a cusp at 0),
the Laplace e^−|x|/2 at d_k = 2, (1 + |x|) e^−|x|/4 at d_k = 4, N(0, d_k) in the limit.
dot_product_cdf computes its CDF as that mixture, so a histogram of the samples can be held
against the probability the law gives each of its bins, at every d_k.

Axes: N queries (or samples), n keys, D values of d_k.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_D_K = 4096
MAX_KEYS = 4096
MAX_SAMPLES = 1_000_000
MAX_SWEEP_LOGITS = 1 << 16  # n_queries × n_keys per d_k: bounds a sweep's time (see docs/benchmarks.md)
MAX_SWEEP_POINTS = 32
DEFAULT_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _check_int(name: str, value: object, low: int, high: int) -> int:
    """Return value as an int in [low, high], or raise ValueError saying why not."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not isinstance(value, numbers.Integral) and not (math.isfinite(value) and float(value).is_integer()):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    value = int(value)
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _check_seed(seed: object) -> int:
    """Return seed as a non-negative int."""
    return _check_int("seed", seed, 0, 2**63 - 1)


def _logits(d_k: int, n_queries: int, n_keys: int, seed: int, rows: int | None = None) -> np.ndarray:
    """Unscaled q·k for n_queries independent queries, each against its own n_keys keys; `rows`: the first this many
    queries only, the same numbers (the generator fills the array in order)."""
    rng = np.random.default_rng([seed, d_k])
    q_norm = np.sqrt(rng.chisquare(d_k, size=(n_queries, 1)))  # (N, 1) ‖q‖
    rows = n_queries if rows is None else min(rows, n_queries)
    return q_norm[:rows] * rng.standard_normal((rows, n_keys))  # (rows, n)


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, stable for any logit magnitude."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def entropy(weights: np.ndarray) -> np.ndarray:
    """Shannon entropy in nats of distributions on the last axis (0·log 0 = 0); max is log(n)."""
    p = np.asarray(weights, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p), 0.0)
    return -terms.sum(axis=-1)


def softmax_jacobian_norm(weights: np.ndarray) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian diag(p) − p pᵀ, for distributions p on the last axis.

    ‖J‖²_F = Σ_i p_i²(1 − p_i)² + Σ_{i≠j} p_i² p_j²: 0 for one-hot p (a saturated softmax
    passes no gradient back), √(1/n − 1/n²) for uniform p over n keys. It is summed around
    the largest weight p_m, with 1 − p_m = Σ of the others, so it stays accurate when p is
    nearly one-hot, down to norms of ~1e-150 (the textbook Σp² − 2Σp³ + (Σp²)² cancels to
    noise below ~1e-8).
    """
    p = np.asarray(weights, dtype=np.float64)
    top = p.argmax(axis=-1)[..., None]  # (..., 1)
    p_m = np.take_along_axis(p, top, axis=-1)[..., 0]  # (...,) the largest weight
    rest = p.copy()
    np.put_along_axis(rest, top, 0.0, axis=-1)  # (..., n) the others, largest zeroed
    s = rest.sum(axis=-1)  # 1 − p_m
    r = (rest * rest).sum(axis=-1)
    diagonal = p_m**2 * s**2 + (rest**2 * (1.0 - rest) ** 2).sum(axis=-1)  # Σ_i J_ii²
    off_diagonal = 2.0 * p_m**2 * r + np.maximum(r * r - (rest**4).sum(axis=-1), 0.0)  # Σ_{i≠j} J_ij²
    return np.sqrt(diagonal + off_diagonal)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Φ(x), the N(0, 1) CDF, elementwise; relative error below 1.2e-7 (erfc by Chebyshev fit, Numerical Recipes)."""
    z = np.abs(np.asarray(x, dtype=np.float64)) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    with np.errstate(invalid="ignore"):  # x = ±inf: t = 0 and exp(−inf) = 0
        tail = 0.5 * np.nan_to_num(t * np.exp(-z * z + poly))  # Φ(−|x|) = erfc(|x|/√2) / 2
    return np.where(np.asarray(x) >= 0, 1.0 - tail, tail)


@functools.lru_cache(maxsize=64)
def _chi_square_nodes(d_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes s_j and weights w_j (Σ w_j = 1) with Σ w_j g(s_j) ≈ E[g(s)] for s ~ χ²(d_k), g smooth in log s.

    Trapezoid rule in u = log s, where the density of u ∝ exp(d_k u/2 − e^u/2) is smooth and peaks at
    u = log d_k with width √(2/d_k); spectrally accurate. The grid reaches e^−32 of the peak on
    either side: the left tail decays like e^(d_k u/2), the right one double-exponentially.
    """
    centre, width = math.log(d_k), math.sqrt(2.0 / d_k)
    low, high = centre - max(8.0 * width, 64.0 / d_k), centre + 8.0 * width + 1.0
    step = min(0.05, width / 8.0)
    u = np.arange(low, high + step, step)  # (S,)
    log_w = 0.5 * d_k * u - 0.5 * np.exp(u - centre) * d_k  # log density of u, up to a constant
    w = np.exp(log_w - log_w.max())
    return np.exp(u), w / w.sum()


def dot_product_cdf(x: np.ndarray, d_k: int, scaled: bool = False) -> np.ndarray:
    """P(q·k ≤ x) (or P(q·k/√d_k ≤ x) when scaled), exact, for q, k with i.i.d. N(0, 1) components.

    Given q, q·k ~ N(0, ‖q‖²) with ‖q‖² ~ χ²(d_k), so the CDF is E[Φ(x/‖q‖)]; the expectation is
    taken by quadrature (_chi_square_nodes), accurate to ~1e-7. Edges may be ±inf.

    Shape: x any shape; returns the same shape, float64.
    """
    d_k = _check_int("d_k", d_k, 1, MAX_D_K)
    x = np.asarray(x, dtype=np.float64)
    if np.isnan(x).any():
        raise ValueError("x must not hold NaN")
    s, w = _chi_square_nodes(d_k)  # (S,)
    if scaled:
        x = x * math.sqrt(d_k)
    flat = x.reshape(-1, 1)  # (X, 1)
    with np.errstate(invalid="ignore"):
        ratio = np.where(np.isinf(flat), np.sign(flat) * np.inf, flat / np.sqrt(s))  # (X, S)
    return (normal_cdf(ratio) @ w).reshape(x.shape)


def bin_probabilities(edges: np.ndarray, d_k: int, scaled: bool = False) -> tuple[np.ndarray, float, float]:
    """The exact law's probability of each bin [edges[i], edges[i+1]), and of the tails below and above.

    Shape: edges [B + 1], increasing; returns ([B], below, above).
    """
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or edges.size < 2 or not np.all(np.diff(edges) > 0):
        raise ValueError("edges must be an increasing 1-D array of at least two values")
    cdf = dot_product_cdf(edges, d_k, scaled)  # (B + 1,)
    return np.diff(cdf), float(cdf[0]), float(1.0 - cdf[-1])


def dot_products(d_k: int, n_samples: int, seed: int, scaled: bool = False) -> np.ndarray:
    """Samples of q·k (or q·k/√d_k when scaled) for independent q, k with N(0, 1) components.

    Unscaled samples have mean 0 and variance d_k; scaled ones mean 0 and variance 1.

    Shape: returns [n_samples] float64.
    """
    d_k = _check_int("d_k", d_k, 1, MAX_D_K)
    n_samples = _check_int("n_samples", n_samples, 1, MAX_SAMPLES)
    samples = _logits(d_k, n_samples, 1, _check_seed(seed))[:, 0]  # (N,)
    return samples / math.sqrt(d_k) if scaled else samples


def softmax_row(d_k: int, n_keys: int, scaled: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One query against n_keys keys: the logits q·k_j (÷ √d_k when scaled) and their softmax.

    The same seed and d_k give the same q and keys whether scaled or not.

    Shape: returns (logits [n_keys], weights [n_keys]), float64; weights sum to 1.
    """
    d_k = _check_int("d_k", d_k, 1, MAX_D_K)
    n_keys = _check_int("n_keys", n_keys, 2, MAX_KEYS)
    logits = _logits(d_k, 1, n_keys, _check_seed(seed))[0]  # (n,)
    if scaled:
        logits = logits / math.sqrt(d_k)
    return logits, np.exp(_log_softmax(logits))


def typical_query(d_k: int, n_keys: int, n_queries: int, seed: int) -> int:
    """The index of the typical query among sweep()'s n_queries at this d_k: the one whose largest unscaled softmax
    weight is the median (the lower middle for an even count), so that one query drawn shows what the medians say."""
    logits = _logits(d_k, n_queries, n_keys, seed)  # (N, n)
    largest = np.exp(_log_softmax(logits)).max(axis=-1)  # (N,)
    return int(np.argsort(largest, kind="stable")[(n_queries - 1) // 2])


def query_row(d_k: int, n_keys: int, scaled: bool, seed: int, index: int, n_queries: int) -> tuple[np.ndarray,
                                                                                                    np.ndarray]:
    """Query `index` of sweep()'s n_queries at this d_k: its logits q·k_j (÷ √d_k when scaled) and their softmax.

    Shape: returns (logits [n_keys], weights [n_keys]), float64; weights sum to 1."""
    return softmax_input(_logits(d_k, n_queries, n_keys, seed, rows=index + 1)[index], d_k, scaled)  # (n,), (n,)


def softmax_input(logits: np.ndarray, d_k: int, scaled: bool) -> tuple[np.ndarray, np.ndarray]:
    """A query's unscaled logits q·k_j [n] as the softmax takes them (÷ √d_k when scaled), and their softmax."""
    if scaled:
        logits = logits / math.sqrt(d_k)
    return logits, np.exp(_log_softmax(logits))


@dataclass(frozen=True)
class SoftmaxStats:
    """Statistics of one scaling mode, one entry per d_k; per-query ones are medians over queries."""

    logit_var: np.ndarray  # [D] measured variance of the softmax input logits
    max_weight: np.ndarray  # [D] median of max_j p_j (1/n_keys uniform ... 1 one-hot)
    entropy: np.ndarray  # [D] median entropy in nats (log n_keys uniform ... 0 one-hot)
    grad_norm: np.ndarray  # [D] median ‖diag(p) − p pᵀ‖_F (see softmax_jacobian_norm)


@dataclass(frozen=True)
class Sweep:
    """Result of sweep(): softmax saturation with and without the 1/√d_k scale."""

    d_k: np.ndarray  # [D] int, increasing
    n_keys: int
    n_queries: int
    max_entropy: float  # log(n_keys): the entropy of a uniform softmax
    unscaled: SoftmaxStats
    scaled: SoftmaxStats

    def table(self) -> tuple[list[str], list[list[float]]]:
        """Column headers and one row per d_k, ready for a table widget."""
        headers = ["d_k"] + [
            f"{stat} ({mode})"
            for stat in ("logit variance", "max weight", "entropy [nats]", "gradient norm")
            for mode in ("unscaled", "scaled")
        ]
        columns = [self.d_k.astype(float)]
        for stat in ("logit_var", "max_weight", "entropy", "grad_norm"):
            columns += [getattr(self.unscaled, stat), getattr(self.scaled, stat)]
        rows = np.stack(columns, axis=1)  # (D, 9)
        return headers, rows.tolist()


def _stats(logits: np.ndarray) -> tuple[float, float, float, float]:
    """Logit variance and median saturation statistics of softmax over the last axis of [N, n]."""
    log_p = _log_softmax(logits)  # (N, n)
    p = np.exp(log_p)
    row_entropy = -(p * log_p).sum(axis=-1)  # (N,) p underflows to 0 where log_p is very negative
    return (
        float(logits.var()),
        float(np.median(p.max(axis=-1))),
        float(np.median(row_entropy)),
        float(np.median(softmax_jacobian_norm(p))),
    )


def sweep(
    d_ks: Sequence[int] = DEFAULT_D_KS, n_keys: int = 64, n_queries: int = 256, seed: int = 0
) -> Sweep:
    """Softmax saturation over d_k, unscaled vs scaled by 1/√d_k (footnote 4).

    For each d_k, n_queries independent queries each meet n_keys independent keys
    (N(0, 1) components); the same draws serve both modes. Per mode and d_k it records
    the measured logit variance (≈ d_k unscaled, ≈ 1 scaled) and, as medians over
    queries, the max weight, the entropy in nats (at most log n_keys) and the Frobenius
    norm of the softmax Jacobian ∂p/∂z = diag(p) − p pᵀ with respect to its input
    logits z, which → 0 as p → one-hot: the vanishing gradient the paper avoids.
    Medians describe the typical query: unscaled means are dominated by the rare
    queries whose top two logits nearly tie (at d_k = 1024, 64 keys, the mean gradient
    norm is only ~3× below the scaled one while the median is ~500× below).
    d_ks are sorted and duplicates dropped.

    Args:
        d_ks: key dimensions, each in [1, 4096], at most 32 of them.
        n_keys: keys per query, in [2, 4096].
        n_queries: queries per d_k; n_queries × n_keys ≤ 65,536.
        seed: non-negative integer.
    """
    if isinstance(d_ks, (str, bytes)) or not isinstance(d_ks, Sequence | np.ndarray):
        raise ValueError(f"d_ks must be a sequence of integers, got {d_ks!r}")
    if not 1 <= len(d_ks) <= MAX_SWEEP_POINTS:
        raise ValueError(f"d_ks must hold 1 to {MAX_SWEEP_POINTS} values, got {len(d_ks)}")
    dims = sorted({_check_int("each d_k", d, 1, MAX_D_K) for d in d_ks})
    n_keys = _check_int("n_keys", n_keys, 2, MAX_KEYS)
    n_queries = _check_int("n_queries", n_queries, 1, MAX_SWEEP_LOGITS)
    if n_queries * n_keys > MAX_SWEEP_LOGITS:
        raise ValueError(
            f"n_queries × n_keys must be at most {MAX_SWEEP_LOGITS:,}, got "
            f"{n_queries} × {n_keys} = {n_queries * n_keys:,}"
        )
    seed = _check_seed(seed)

    rows = {"unscaled": [], "scaled": []}
    for d_k in dims:
        logits = _logits(d_k, n_queries, n_keys, seed)  # (N, n)
        rows["unscaled"].append(_stats(logits))
        rows["scaled"].append(_stats(logits / math.sqrt(d_k)))
    modes = {
        mode: SoftmaxStats(*(np.array(column) for column in zip(*values)))
        for mode, values in rows.items()
    }
    return Sweep(
        d_k=np.array(dims),
        n_keys=n_keys,
        n_queries=n_queries,
        max_entropy=math.log(n_keys),
        unscaled=modes["unscaled"],
        scaled=modes["scaled"],
    )
