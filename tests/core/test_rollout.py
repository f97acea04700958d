"""Attention rollout and attention flow (Abnar & Zuidema 2020) against float64 references written here, apart from
the package: rollout as an explicit loop of matrix products, flow as the minimum cut found by trying every cut of a
tiny layered graph (max-flow = min-cut) and as scipy's integer maximum flow; and their invariants."""

import itertools

import numpy as np
import pytest
import torch

from attention_viz import Transformer, TransformerConfig, attention_flow, rollout
from attention_viz.core.flow import MAX_FLOW_TOKENS, FlowTooLargeError


def random_maps(n_layers=3, n_heads=2, n=4, seed=0, stack="encoder", batch=1, sharp=3.0) -> dict:
    """key -> [B, H, T, T] float64 rows summing to 1 (powered uniforms: some weights large, most small)."""
    rng = np.random.default_rng(seed)
    maps = {}
    for layer in range(n_layers):
        a = rng.random((batch, n_heads, n, n)) ** sharp
        maps[f"{stack}.{layer}.self_attn"] = a / a.sum(-1, keepdims=True)
    return maps


def reference_mixing(maps: dict, stack: str, residual: float) -> list[np.ndarray]:
    """Ã_l for batch element 0, written from the paper's words: the heads' mean, residual·I added, rows renormalised."""
    layers = []
    layer = 0
    while f"{stack}.{layer}.self_attn" in maps:
        a = np.asarray(maps[f"{stack}.{layer}.self_attn"], dtype=np.float64)[0]  # (H, T, T)
        n = a.shape[-1]
        mean = sum(a[h] for h in range(a.shape[0])) / a.shape[0]
        mixed = residual * np.eye(n) + (1 - residual) * mean
        layers.append(np.array([row / row.sum() for row in mixed]))
        layer += 1
    return layers


def reference_rollout(maps: dict, stack: str = "encoder", residual: float = 0.5) -> np.ndarray:
    layers = reference_mixing(maps, stack, residual)
    result = np.eye(layers[0].shape[0])
    for mixing in layers:  # first layer first: R_l = Ã_l R_{l-1}
        result = mixing @ result
    return result


def min_cut(mixing: list[np.ndarray], source: int, sink: int) -> float:
    """The smallest capacity of a cut separating input token `source` from output token `sink`: every subset of the
    other nodes tried on the source's side (max-flow = min-cut)."""
    n, n_layers = mixing[0].shape[0], len(mixing)
    nodes = [(l, t) for l in range(n_layers + 1) for t in range(n)]
    s, t = (0, source), (n_layers, sink)
    others = [v for v in nodes if v not in (s, t)]
    best = np.inf
    for chosen in itertools.product((False, True), repeat=len(others)):
        side = {s} | {v for v, keep in zip(others, chosen) if keep}
        cut = sum(mixing[l][i, j] for l in range(n_layers) for i in range(n) for j in range(n)
                  if (l, j) in side and (l + 1, i) not in side)
        best = min(best, cut)
    return best


def test_rollout_is_the_product_of_the_layers_mixing_matrices():
    maps = random_maps(n_layers=3, n_heads=2, n=5)
    for residual in (0.0, 0.5, 0.8):
        got = rollout(maps, "encoder", residual)
        assert got.shape == (1, 5, 5) and got.dtype == np.float64
        np.testing.assert_allclose(got[0], reference_rollout(maps, "encoder", residual), rtol=1e-12, atol=1e-14)


def test_rollout_rows_sum_to_one_and_its_limits_are_the_identity_and_one_layers_head_mean():
    maps = random_maps(n_layers=4, n=6, batch=2)
    np.testing.assert_allclose(rollout(maps).sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(rollout(maps, residual=1.0), np.broadcast_to(np.eye(6), (2, 6, 6)))
    one = {"encoder.0.self_attn": maps["encoder.0.self_attn"]}
    np.testing.assert_allclose(rollout(one, residual=0.0), maps["encoder.0.self_attn"].mean(1), atol=1e-12)
    assert not np.allclose(rollout(maps)[0], rollout(maps)[1])  # each batch element its own


def test_rollout_of_a_models_maps_takes_torch_tensors_and_the_decoder_stack_reads_self_attention_only():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.small(vocab_size=20, n_encoder_layers=2, n_decoder_layers=3, d_model=16,
                                                n_heads=2, d_k=4, d_v=4, d_ff=16, dropout=0.0)).eval()
    with torch.no_grad():
        _, maps = model(torch.randint(4, 20, (1, 6)), torch.randint(4, 20, (1, 5)))
    as_numpy = {k: v.double().numpy() for k, v in maps.items()}
    np.testing.assert_allclose(rollout(maps), reference_rollout(as_numpy)[None], atol=1e-6)
    decoder = rollout(maps, "decoder")
    assert decoder.shape == (1, 5, 5)
    np.testing.assert_allclose(decoder[0], reference_rollout(as_numpy, "decoder"), atol=1e-6)
    assert np.allclose(np.triu(decoder[0], 1), 0)  # the causal mask holds through the product
    changed = dict(as_numpy, **{"decoder.0.cross_attn": np.ones_like(as_numpy["decoder.0.cross_attn"])})
    np.testing.assert_allclose(rollout(changed, "decoder"), rollout(as_numpy, "decoder"))  # cross maps never enter


def test_flow_equals_the_minimum_cut_of_every_pair():
    maps = random_maps(n_layers=2, n_heads=2, n=3, seed=1)
    flows = attention_flow(maps)
    mixing = reference_mixing(maps, "encoder", 0.5)
    for i in range(3):
        for j in range(3):
            assert flows[0, i, j] == pytest.approx(min_cut(mixing, j, i), abs=1e-12)


def test_flow_equals_scipys_maximum_flow_on_integer_capacities():
    scipy_flow = pytest.importorskip("scipy.sparse.csgraph")
    from scipy.sparse import csr_matrix

    maps = random_maps(n_layers=3, n_heads=3, n=4, seed=2)
    mixing = reference_mixing(maps, "encoder", 0.3)
    unit = 10**9  # capacities as integers of 1e-9: the integer flow is within T·L·1e-9 of the real one
    n, n_layers = 4, 3
    capacity = np.zeros(((n_layers + 1) * n,) * 2, dtype=np.int64)
    for l, m in enumerate(mixing):
        capacity[l * n:(l + 1) * n, (l + 1) * n:(l + 2) * n] = np.rint(m.T * unit)  # edge (l, j) -> (l + 1, i)
    graph = csr_matrix(capacity)
    flows = attention_flow(maps, residual=0.3)
    for i in range(n):
        for j in range(n):
            expected = scipy_flow.maximum_flow(graph, j, n_layers * n + i).flow_value / unit
            assert flows[0, i, j] == pytest.approx(expected, abs=1e-7)


def test_flow_is_bounded_by_the_capacities_and_one_layers_flow_is_its_matrix():
    maps = random_maps(n_layers=3, n=6, seed=3, sharp=6.0)
    flows = attention_flow(maps)[0]
    first = reference_mixing(maps, "encoder", 0.5)[0]
    assert (flows >= 0).all() and (flows <= 1 + 1e-12).all()  # into output i: at most its row's 1
    assert (flows <= first.sum(0)[None, :] + 1e-12).all()  # out of input j: at most what leaves it
    one = {"encoder.0.self_attn": maps["encoder.0.self_attn"]}
    np.testing.assert_allclose(attention_flow(one)[0], first, atol=1e-12)
    np.testing.assert_allclose(attention_flow(maps, normalise=True).sum(-1), 1.0, atol=1e-12)


def test_bad_requests_are_refused_with_a_sentence():
    maps = random_maps()
    with pytest.raises(ValueError, match="no decoder self-attention"):
        rollout(maps, "decoder")
    with pytest.raises(ValueError, match="stack must be"):
        rollout(maps, "middle")
    with pytest.raises(ValueError, match="residual must be in"):
        rollout(maps, residual=1.5)
    with pytest.raises(ValueError, match="no self-attention"):
        rollout({"decoder.0.cross_attn": np.ones((1, 1, 2, 3))})
    with pytest.raises(FlowTooLargeError, match=f"at most {MAX_FLOW_TOKENS} tokens"):
        attention_flow(random_maps(n_layers=1, n_heads=1, n=MAX_FLOW_TOKENS + 1))


@pytest.mark.parametrize("n_layers", [1, 2])
def test_a_short_stacks_flow_in_closed_form_is_dinics_bit_for_bit(n_layers):
    """One or two layers: the closed form (core.flow.short_stack_flows) gives what Dinic's algorithm gives on the
    layered graph, to the bit, on soft and sharp maps, the causal mask's zeros, and capacities near EPSILON."""
    from attention_viz.core.flow import EPSILON, layered_graph, short_stack_flows

    for seed, sharp in ((4, 1.0), (5, 8.0), (6, 30.0)):
        mixing = np.stack(reference_mixing(random_maps(n_layers=n_layers, n=7, seed=seed, sharp=sharp), "encoder", 0.5))
        mixing[0, 2, 3] = EPSILON  # an edge at the threshold carries nothing
        mixing[-1, 4, 1] = 2 * EPSILON
        mixing[0] = np.tril(mixing[0])  # keys after the query masked
        graph = layered_graph(mixing)
        dinic = np.array([[graph.max_flow(j, n_layers * 7 + i) for j in range(7)] for i in range(7)])
        assert np.array_equal(short_stack_flows(mixing), dinic), seed
        assert not np.array_equal(short_stack_flows(mixing[::-1]), dinic) or n_layers == 1
