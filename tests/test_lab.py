"""The √d_k experiment (footnote 4): q·k has variance d_k, and unscaled softmax saturates."""

import math

import numpy as np
import pytest
from scipy import integrate, special  # the reference for d_k = 1: scipy's Bessel K₀ (requirements-dev.txt)

from attention_viz import lab


@pytest.mark.parametrize("d_k", [1, 16, 256, 1024])
def test_dot_product_mean_0_variance_d_k_within_sampling_error(d_k):
    n = 40_000
    x = lab.dot_products(d_k, n, seed=1)
    assert x.shape == (n,) and x.dtype == np.float64
    # q·k = Σ q_i k_i with N(0, 1) parts: variance d_k, fourth moment 3 d_k² + 6 d_k.
    assert abs(x.mean()) < 5 * math.sqrt(d_k / n)
    var_se = math.sqrt((2 * d_k**2 + 6 * d_k) / n)
    assert abs(x.var() - d_k) < 5 * var_se


@pytest.mark.parametrize("d_k", [4, 256, 4096])
def test_scaled_dot_products_have_unit_variance_and_are_the_same_draws(d_k):
    x = lab.dot_products(d_k, 40_000, seed=2, scaled=True)
    assert abs(x.var() - 1.0) < 5 * math.sqrt((2 + 6 / d_k) / 40_000)
    np.testing.assert_allclose(x * math.sqrt(d_k), lab.dot_products(d_k, 40_000, seed=2))


def _ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov distance between empirical distributions."""
    grid = np.sort(np.concatenate([a, b]))
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / a.size
    cdf_b = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.abs(cdf_a - cdf_b).max())


@pytest.mark.parametrize("d_k", [1, 3, 32])
def test_chi_square_sampler_matches_explicit_vectors(d_k):
    """Parity: sqrt(χ²(d_k))·z has the law of Σ q_i k_i with explicit Gaussian vectors."""
    n = 20_000
    rng = np.random.default_rng(123)
    explicit = (rng.standard_normal((n, d_k)) * rng.standard_normal((n, d_k))).sum(axis=1)
    ours = lab.dot_products(d_k, n, seed=7)
    critical = 1.95 * math.sqrt(2 / n)  # two-sample KS at α = 0.001
    assert _ks_statistic(ours, explicit) < critical
    # Sanity of the test itself: at d_k = 1 the law (a product of normals) is far from N(0, 1).
    if d_k == 1:
        assert _ks_statistic(explicit, rng.standard_normal(n)) > critical


def test_seeded_and_deterministic():
    np.testing.assert_array_equal(lab.dot_products(64, 100, 5), lab.dot_products(64, 100, 5))
    assert not np.array_equal(lab.dot_products(64, 100, 5), lab.dot_products(64, 100, 6))
    a, b = lab.sweep((4, 64), 16, 32, seed=3), lab.sweep((4, 64), 16, 32, seed=3)
    np.testing.assert_array_equal(a.unscaled.entropy, b.unscaled.entropy)


def test_softmax_row_scaled_and_unscaled_share_draws_and_sum_to_one():
    z_u, p_u = lab.softmax_row(256, 50, scaled=False, seed=4)
    z_s, p_s = lab.softmax_row(256, 50, scaled=True, seed=4)
    assert z_u.shape == p_u.shape == (50,)
    np.testing.assert_allclose(z_s, z_u / 16.0)
    np.testing.assert_allclose([p_u.sum(), p_s.sum()], 1.0)
    np.testing.assert_allclose(p_s, np.exp(z_s) / np.exp(z_s).sum())
    assert p_u.max() > p_s.max()  # unscaled is peakier for the same q and keys


def test_entropy_and_jacobian_norm_closed_forms():
    n = 8
    uniform, one_hot = np.full(n, 1 / n), np.eye(n)[2]
    assert lab.entropy(uniform) == pytest.approx(math.log(n))
    assert lab.entropy(one_hot) == 0.0  # 0·log 0 = 0, no NaN
    assert lab.softmax_jacobian_norm(uniform) == pytest.approx(math.sqrt(1 / n - 1 / n**2))
    assert lab.softmax_jacobian_norm(one_hot) == 0.0


def test_jacobian_norm_matches_autograd():
    """Parity with torch autograd's Jacobian of softmax, on random logits of three scales."""
    torch = pytest.importorskip("torch")
    z = torch.tensor(np.random.default_rng(0).standard_normal((3, 7)) * [[0.5], [3.0], [20.0]])
    for row in z:
        jac = torch.autograd.functional.jacobian(lambda x: torch.softmax(x, -1), row)
        p = torch.softmax(row, -1).numpy()
        np.testing.assert_allclose(np.diag(p) - np.outer(p, p), jac.numpy(), atol=1e-12)
        assert lab.softmax_jacobian_norm(p) == pytest.approx(float(torch.linalg.norm(jac)), rel=1e-6, abs=0.0)


@pytest.mark.parametrize("gap", [5.0, 20.0, 40.0, 300.0])
def test_jacobian_norm_stays_accurate_when_saturated(gap):
    """Two keys, logits (0, −gap): J = p₁p₂ [[1, −1], [−1, 1]], so ‖J‖ = 2 p₁ p₂ exactly."""
    p2 = math.exp(-gap) / (1 + math.exp(-gap))
    p = np.array([1 - p2, p2])
    expected = pytest.approx(2 * (1 - p2) * p2, rel=1e-12, abs=0.0)
    assert lab.softmax_jacobian_norm(p) == expected
    assert lab.softmax_jacobian_norm(p[::-1].copy()) == expected


def test_sweep_variance_entropy_max_weight_and_gradient_trends():
    d_ks = (4, 16, 64, 256, 1024)
    s = lab.sweep(d_ks, n_keys=64, n_queries=512, seed=0)
    np.testing.assert_array_equal(s.d_k, d_ks)
    assert s.max_entropy == pytest.approx(math.log(64))
    np.testing.assert_allclose(s.unscaled.logit_var, d_ks, rtol=0.1)
    np.testing.assert_allclose(s.scaled.logit_var, 1.0, rtol=0.1)
    # Unscaled: entropy falls and the max weight rises with d_k, towards one-hot.
    assert np.all(np.diff(s.unscaled.entropy) < 0) and s.unscaled.entropy[-1] < 0.1
    assert np.all(np.diff(s.unscaled.max_weight) > 0) and s.unscaled.max_weight[-1] > 0.99
    # Scaled: flat, close to a spread-out softmax.
    assert np.ptp(s.scaled.entropy) < 0.05 * s.max_entropy and s.scaled.entropy.min() > 0.8 * s.max_entropy
    assert np.ptp(s.scaled.max_weight) < 0.05
    # Vanishing gradient: at d_k = 1024 unscaled is far below scaled.
    assert s.unscaled.grad_norm[-1] < 0.05 * s.scaled.grad_norm[-1]
    assert np.ptp(s.scaled.grad_norm) < 0.2 * s.scaled.grad_norm.mean()


def test_sweep_sorts_dedupes_and_tabulates():
    s = lab.sweep([64, 4, 64], n_keys=8, n_queries=16, seed=0)
    np.testing.assert_array_equal(s.d_k, [4, 64])
    headers, rows = s.table()
    assert len(headers) == 9 and headers[0] == "d_k"
    assert [r[0] for r in rows] == [4.0, 64.0]
    assert rows[1][headers.index("gradient norm (scaled)")] == s.scaled.grad_norm[1]


def test_accepts_whole_floats_as_sent_by_sliders():
    np.testing.assert_array_equal(lab.dot_products(16.0, 10, 0), lab.dot_products(16, 10, 0))


@pytest.mark.parametrize(
    "call",
    [
        lambda: lab.dot_products(0, 10, 0),
        lambda: lab.dot_products(4097, 10, 0),
        lambda: lab.dot_products(16.5, 10, 0),
        lambda: lab.dot_products("16", 10, 0),
        lambda: lab.dot_products(True, 10, 0),
        lambda: lab.dot_products(float("nan"), 10, 0),
        lambda: lab.dot_products(16, 0, 0),
        lambda: lab.dot_products(16, 10, -1),
        lambda: lab.softmax_row(16, 1, True, 0),
        lambda: lab.softmax_row(16, 4097, True, 0),
        lambda: lab.softmax_row(None, 8, True, 0),
        lambda: lab.sweep([], 8, 8, 0),
        lambda: lab.sweep("16", 8, 8, 0),
        lambda: lab.sweep([16, 0], 8, 8, 0),
        lambda: lab.sweep(list(range(1, 40)), 8, 8, 0),
        lambda: lab.sweep([16], 4096, 32, 0),
        lambda: lab.sweep([16], 8, 0, 0),
    ],
)
def test_bad_arguments_raise_value_error(call):
    with pytest.raises(ValueError, match="must"):
        call()


# ---------------------------------------------------------------------- the exact law of q·k


def test_normal_cdf_matches_erf():
    x = np.array([-np.inf, -8.0, -2.5, -1.0, -0.1, 0.0, 0.3, 1.0, 2.0, 6.0, np.inf])
    expected = [0.5 * math.erfc(-v / math.sqrt(2)) for v in x]
    np.testing.assert_allclose(lab.normal_cdf(x), expected, rtol=2e-7, atol=1e-15)


@pytest.mark.parametrize("d_k, closed_form", [
    (2, lambda x: np.where(x >= 0, 1 - np.exp(-x) / 2, np.exp(x) / 2)),  # Laplace: density e^−|x| / 2
    (4, lambda x: np.where(x >= 0, 1 - np.exp(-x) * (2 + x) / 4, np.exp(x) * (2 - x) / 4)),  # (1 + |x|) e^−|x| / 4
])
def test_dot_product_cdf_matches_closed_forms(d_k, closed_form):
    x = np.linspace(-12, 12, 97)
    np.testing.assert_allclose(lab.dot_product_cdf(x, d_k), closed_form(x), atol=1e-7)


def test_dot_product_cdf_at_d_k_1_integrates_the_bessel_density():
    """d_k = 1: q·k is a product of two normals, density K₀(|x|)/π (a log cusp at 0)."""
    for x in (0.05, 0.5, 1.0, 3.0, 7.0):
        expected = 0.5 + integrate.quad(lambda t: special.k0(t) / math.pi, 0, x, limit=200)[0]
        assert lab.dot_product_cdf(np.array([x]), 1)[0] == pytest.approx(expected, abs=1e-7)


@pytest.mark.parametrize("d_k", [1, 3, 16, 257, 4096])
def test_dot_product_law_is_symmetric_with_variance_d_k_and_tends_to_normal(d_k):
    sd = math.sqrt(d_k)
    x = np.linspace(-30, 30, 6001) * sd
    cdf = lab.dot_product_cdf(x, d_k)
    assert cdf[0] < 1e-9 and cdf[-1] > 1 - 1e-9 and np.all(np.diff(cdf) >= -1e-12)
    np.testing.assert_allclose(cdf + cdf[::-1], 1.0, atol=1e-7)  # F(−x) = 1 − F(x)
    mids, p = (x[1:] + x[:-1]) / 2, np.diff(cdf)
    assert (p * mids**2).sum() == pytest.approx(d_k, rel=1e-3)
    # Scaled, it is the same law on x / √d_k; its largest CDF gap to N(0, 1) shrinks like 1/d_k (kurtosis 3 + 6/d_k).
    z = np.linspace(-4, 4, 33)
    np.testing.assert_allclose(lab.dot_product_cdf(z, d_k, scaled=True), lab.dot_product_cdf(z * sd, d_k), atol=1e-12)
    gap = np.abs(lab.dot_product_cdf(z, d_k, scaled=True) - lab.normal_cdf(z)).max()
    assert gap < 0.15 / d_k and (d_k > 1 or gap > 0.1)  # at d_k = 1 the law is far from normal


def test_bin_probabilities_and_tails_add_up_and_refuse_bad_edges():
    edges = np.linspace(-3, 3, 13)
    p, below, above = lab.bin_probabilities(edges, 64, scaled=True)
    assert p.shape == (12,) and p.min() > 0 and p.sum() + below + above == pytest.approx(1.0, abs=1e-12)
    assert below == pytest.approx(above, abs=1e-9)
    for bad in ([0.0], [1.0, 0.0], [[0.0, 1.0]]):
        with pytest.raises(ValueError, match="edges must"):
            lab.bin_probabilities(np.array(bad), 4)
    with pytest.raises(ValueError, match="d_k must"):
        lab.dot_product_cdf(np.zeros(3), 0)


@pytest.mark.parametrize("d_k", [1, 2, 64, 4096])
def test_samples_follow_the_exact_law_bin_for_bin(d_k):
    """The sampler and the law agree: chi-square test of 20,000 samples in 40 bins (plus tails), α = 0.001."""
    samples = lab.dot_products(d_k, 20_000, seed=11, scaled=True)
    edges = np.linspace(-4, 4, 41)
    p, below, above = lab.bin_probabilities(edges, d_k, scaled=True)
    expected = 20_000 * np.concatenate([[below], p, [above]])
    observed = np.concatenate([[(samples < -4).sum()], np.histogram(samples, edges)[0], [(samples >= 4).sum()]])
    keep = expected > 5
    chi2 = (((observed - expected) ** 2 / expected)[keep]).sum()
    assert chi2 < 80, chi2  # χ²(≤ 41) exceeds 74.7 with probability 0.001


def test_a_query_row_is_that_row_of_the_sweeps_draw_to_the_bit():
    """lab.query_row draws the queries only up to the one it shows: the same numbers as row `index` of the sweep's
    whole draw (lab._logits), for every index, both modes."""
    from attention_viz import lab

    rng = np.random.default_rng(0)
    for _ in range(12):
        d_k, n_keys, n_queries = int(2 ** rng.integers(0, 13)), int(rng.integers(2, 300)), int(rng.integers(1, 64))
        whole = lab._logits(d_k, n_queries, n_keys, 7)  # (N, n)
        for index in {0, n_queries // 2, n_queries - 1}:
            for scaled in (False, True):
                logits, weights = lab.query_row(d_k, n_keys, scaled, 7, index, n_queries)
                expected = lab.softmax_input(whole[index], d_k, scaled)
                assert np.array_equal(logits, expected[0]) and np.array_equal(weights, expected[1])
    with pytest.raises(IndexError):
        lab.query_row(4, 8, True, 7, 5, 5)  # past the last query
