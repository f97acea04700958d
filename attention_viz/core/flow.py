"""Attention flow (Abnar & Zuidema 2020, §3): a maximum flow through the stack's layered graph of attention.

The graph has a node for every token at every layer boundary (layer 0 is the input, layer l the output of
self-attention layer l) and an edge from token j at boundary l − 1 to token i at boundary l whose capacity is
Ã_l[i, j], rollout's mixing matrix (residual · I + (1 − residual) · the head mean, rows renormalised). The flow of
output token i from input token j is the value of a maximum flow from (0, j) to (L, i): rollout multiplies the paths'
weights, flow asks how much can pass through them at once. Each value is at most 1 (the capacity into (L, i)) and at
most what leaves (0, j). `normalise=True` divides each output row by its sum, as the paper's code does.

Cost: T² maximum flows (Dinic's algorithm, exact up to float rounding) on (L + 1)·T nodes and L·T² edges, in plain
Python; MAX_FLOW_TOKENS bounds T (about 20 s at T = 32 over 6 layers; docs/research.md). A stack of one or two layers
needs no search: from (0, j) to (L, i) the graph is one edge, or parallel paths (0, j) -> (1, m) -> (2, i), one per
m, that share no edge, so the flow is the edge's capacity, or Σ_m min(Ã_1[m, j], Ã_2[i, m]) (short_stack_flows:
what Dinic's algorithm finds, summed in the order it finds it).

Axes: B batch, L layers, H heads, T positions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

import numpy as np

from attention_viz.core.rollout import mixing_matrices, self_attention_layers

MAX_FLOW_TOKENS = 32  # T beyond this is refused: the work grows as L·T⁴
EPSILON = 1e-12  # a residual capacity this small counts as none (float rounding of the capacities)


class FlowTooLargeError(ValueError):
    """Attention flow asked of more tokens than MAX_FLOW_TOKENS."""


class LayeredGraph:
    """A directed graph with float capacities for Dinic's maximum flow: edges in pairs (forward, its residual)."""

    def __init__(self, n_nodes: int) -> None:
        self.n = n_nodes
        self.adjacent: list[list[int]] = [[] for _ in range(n_nodes)]  # node -> its edges' indices
        self.head: list[int] = []  # edge -> the node it points to
        self.capacity: list[float] = []  # edge -> its capacity (the reverse edge of a pair starts at 0)

    def add_edge(self, u: int, v: int, capacity: float) -> None:
        for a, b, c in ((u, v, capacity), (v, u, 0.0)):
            self.adjacent[a].append(len(self.head))
            self.head.append(b)
            self.capacity.append(c)

    def max_flow(self, source: int, sink: int) -> float:
        """The value of a maximum flow from source to sink (the capacities are left as they were)."""
        residual = list(self.capacity)
        total = 0.0
        while True:
            level = self._levels(source, residual)
            if level[sink] < 0:
                return total
            cursor = [0] * self.n
            while True:
                pushed = self._push(source, sink, float("inf"), level, cursor, residual)
                if pushed <= EPSILON:
                    break
                total += pushed

    def _levels(self, source: int, residual: list[float]) -> list[int]:
        """Breadth-first distances from source over edges with residual capacity (−1: unreachable)."""
        level = [-1] * self.n
        level[source] = 0
        queue = deque([source])
        while queue:
            u = queue.popleft()
            for e in self.adjacent[u]:
                v = self.head[e]
                if level[v] < 0 and residual[e] > EPSILON:
                    level[v] = level[u] + 1
                    queue.append(v)
        return level

    def _push(self, u: int, sink: int, limit: float, level: list[int], cursor: list[int],
              residual: list[float]) -> float:
        """One augmenting path of the level graph from u (depth-first, each edge tried once per phase)."""
        if u == sink:
            return limit
        edges = self.adjacent[u]
        while cursor[u] < len(edges):
            e = edges[cursor[u]]
            v = self.head[e]
            if residual[e] > EPSILON and level[v] == level[u] + 1:
                pushed = self._push(v, sink, min(limit, residual[e]), level, cursor, residual)
                if pushed > EPSILON:
                    residual[e] -= pushed
                    residual[e ^ 1] += pushed
                    return pushed
            cursor[u] += 1
        return 0.0


def layered_graph(mixing: np.ndarray) -> LayeredGraph:
    """The graph of one example's mixing matrices [L, T, T]: node l·T + t is token t at boundary l."""
    n_layers, n = mixing.shape[0], mixing.shape[-1]
    graph = LayeredGraph((n_layers + 1) * n)
    for layer in range(n_layers):
        for i in range(n):
            for j in range(n):
                if mixing[layer, i, j] > 0:
                    graph.add_edge(layer * n + j, (layer + 1) * n + i, float(mixing[layer, i, j]))
    return graph


def short_stack_flows(mixing: np.ndarray) -> np.ndarray:
    """The maximum flows [T, T] ([i, j]: from input token j to output token i) of one example's mixing matrices
    [L, T, T] with L = 1 or 2, in closed form: the capacity Ã_1[i, j], or Σ_m min(Ã_1[m, j], Ã_2[i, m]), each edge
    of capacity at most EPSILON counted as none and the paths summed in m's order, as LayeredGraph.max_flow does."""
    kept = np.where(mixing > EPSILON, mixing, 0.0)  # (L, T, T)
    if len(kept) == 1:
        return kept[0].copy()
    first, second = kept  # first[m, j]: the edge (0, j) -> (1, m); second[i, m]: (1, m) -> (2, i)
    flows = np.zeros(first.shape)
    for m in range(first.shape[0]):  # one path per middle token m, as Dinic's depth-first search takes them
        flows += np.minimum(second[:, m, None], first[None, m, :])  # (T, T): the path's bottleneck for every i, j
    return flows


def attention_flow(maps: Mapping, stack: str | None = None, residual: float = 0.5,
                   normalise: bool = False) -> np.ndarray:
    """Attention flow of one stack (Abnar & Zuidema 2020): float64 [B, T, T], [b, i, j] the maximum flow from input
    token j to output token i through the stack's self-attention layers.

    Args:
        maps, stack, residual: as rollout's (the same mixing matrices are the capacities).
        normalise: divide each output row by its sum (the paper's code does), so rows sum to 1 like rollout's.

    Raises FlowTooLargeError past MAX_FLOW_TOKENS positions.
    """
    stack, layers = self_attention_layers(maps, stack)
    n = layers.shape[-1]
    if n > MAX_FLOW_TOKENS:
        raise FlowTooLargeError(f"attention flow over {n} tokens would take too long (it solves T² maximum-flow "
                                f"problems, each on L·T² edges): at most {MAX_FLOW_TOKENS} tokens; rollout has no "
                                "such limit")
    mixing = mixing_matrices(layers, residual)  # (B, L, T, T)
    n_layers = mixing.shape[1]
    flows = np.zeros((mixing.shape[0], n, n))
    for b in range(mixing.shape[0]):
        if n_layers <= 2:
            flows[b] = short_stack_flows(mixing[b])
            continue
        graph = layered_graph(mixing[b])
        for i in range(n):
            for j in range(n):
                flows[b, i, j] = graph.max_flow(j, n_layers * n + i)
    if normalise:
        total = flows.sum(-1, keepdims=True)
        flows = np.divide(flows, total, out=np.zeros_like(flows), where=total > 0)
    return flows
