"""The √d_k experiment (footnote 4): q·k has variance d_k, and unscaled softmax saturates."""

import math

import numpy as np
import pytest

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
