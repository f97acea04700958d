"""Pattern scores: how much of each head's weight falls on the keys a simple pattern names, one definition for the
package (attention_viz.pattern_scores) and the app's head scores (service.scores).

Each pattern is a [Q, K] bool grid of target keys; a head's score is core.maps.weight_on's mean, over the query
rows that have a target, of the row's weight on its targets (1 = the head does exactly that):

    previous   key i − 1 for query i (rows from 1)                                         self-attention
    first      key 0 (often a "sink" where a head parks weight it has no use for)          every kind
    duplicate  the keys j < i holding the same token as query i (its earlier occurrences)  self-attention
    induction  the keys j + 1 after each earlier occurrence j < i of query i's token: on a random sequence of n
               tokens repeated twice, query i of the second half looks at i − n + 1 (Olsson et al. 2022,
               "In-context learning and induction heads")                                   self-attention

Only keys a row may see are targets (`allowed`, True = may attend), and a row that may see nothing but its targets
(the causal mask's first row for "first") is left out: every head, even an evenly spread one, would score 1 there.
`chance` is what a head spreading its weight evenly over the keys it may see would score: the bar to beat.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from attention_viz.core.maps import KINDS, kind_key, weight_on

PATTERNS = {"previous": "previous token", "first": "first token", "duplicate": "duplicate token",
            "induction": "induction"}
SELF_ONLY = ("previous", "duplicate", "induction")  # patterns that compare a query with keys of its own sequence


def previous_targets(n_q: int, n_k: int) -> np.ndarray:
    """[Q, K] bool: key i − 1 for query i."""
    return np.eye(n_q, n_k, k=-1, dtype=bool)


def first_targets(n_q: int, n_k: int) -> np.ndarray:
    """[Q, K] bool: key 0 for every query."""
    grid = np.zeros((n_q, n_k), dtype=bool)
    grid[:, :1] = True
    return grid


def duplicate_targets(tokens: Sequence[Hashable]) -> np.ndarray:
    """[T, T] bool: for query i, the keys j < i whose token equals token i."""
    t = np.asarray(_codes(tokens))
    return (t[:, None] == t[None, :]) & np.tri(len(t), k=-1, dtype=bool)


def induction_targets(tokens: Sequence[Hashable]) -> np.ndarray:
    """[T, T] bool: for query i, the key j + 1 after each earlier occurrence j < i of token i."""
    grid = np.zeros((len(tokens),) * 2, dtype=bool)
    grid[:, 1:] = duplicate_targets(tokens)[:, :-1]  # j < i, so j + 1 <= i
    return grid


def _codes(tokens: Sequence[Hashable]) -> list[int]:
    """Each token as a small integer, equal tokens equal (compares any hashable tokens: ids or strings)."""
    seen: dict = {}
    return [seen.setdefault(token, len(seen)) for token in tokens]


def pattern_targets(query_tokens: Sequence[Hashable], key_tokens: Sequence[Hashable], self_attention: bool,
                    names: Sequence[str] = tuple(PATTERNS)) -> dict[str, np.ndarray]:
    """Pattern name -> [Q, K] bool target keys, for the names that apply (SELF_ONLY ones to self-attention only)."""
    n_q, n_k = len(query_tokens), len(key_tokens)
    makers = {"previous": lambda: previous_targets(n_q, n_k), "first": lambda: first_targets(n_q, n_k),
              "duplicate": lambda: duplicate_targets(key_tokens), "induction": lambda: induction_targets(key_tokens)}
    unknown = [name for name in names if name not in makers]
    if unknown:
        raise ValueError(f"unknown patterns {unknown}; choose from {list(PATTERNS)}")
    if self_attention and n_q != n_k:
        raise ValueError(f"self-attention maps must be square, got {n_q} queries and {n_k} keys")
    return {name: makers[name]() for name in names if self_attention or name not in SELF_ONLY}


def scored_targets(targets: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The targets a score counts: those a row may see, in the rows that may see something else too."""
    grid = np.asarray(targets, dtype=bool) & allowed  # a masked key is no target: its weight is 0 by construction
    grid[(allowed <= grid).all(-1)] = False  # a row that may see only its targets says nothing about the head
    return grid


def score(weights: np.ndarray, targets: np.ndarray,
          allowed: np.ndarray | None = None) -> tuple[np.ndarray, float | np.ndarray]:
    """(every head's score [...], chance) for weights [..., Q, K] and targets [Q, K]; NaN where no row counts.
    Several patterns at once: targets [P, Q, K] -> (scores [P, ...], chance [P])."""
    targets = np.asarray(targets, dtype=bool)
    allowed = np.ones(targets.shape[-2:], dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    grid = scored_targets(targets, allowed)  # ([P,] Q, K)
    uniform = allowed / np.maximum(allowed.sum(-1, keepdims=True), 1)  # (Q, K): even over what a row may see
    if grid.ndim == 2:
        return weight_on(weights, grid), float(weight_on(uniform, grid))
    each = grid.reshape(len(grid), *[1] * (np.ndim(weights) - 2), *grid.shape[-2:])  # (P, 1.., Q, K): every head
    return weight_on(weights, each), weight_on(uniform, grid)


def default_allowed(kind: str, n_q: int, n_k: int) -> np.ndarray:
    """[Q, K] bool: the causal mask for decoder self-attention, every key elsewhere."""
    allowed = np.ones((n_q, n_k), dtype=bool)
    return np.tril(allowed) if kind == "decoder.self_attn" else allowed


@dataclass(frozen=True)
class PatternScores:
    """Every head's pattern scores, kind by kind: scores[kind][pattern] is [L, H] (NaN where no row counts)."""

    scores: dict[str, dict[str, np.ndarray]]
    chance: dict[str, dict[str, float]]  # an evenly spread head's score: the bar to beat
    tokens: dict[str, tuple[list[str], list[str]]] = field(repr=False)  # kind -> (query, key) tokens scored
    repeated: int | None = None  # n, when the tokens are a random sequence of n tokens repeated twice

    def rows(self) -> list[dict]:
        """One dict per head: kind, layer, head and each pattern's score (e.g. for pandas.DataFrame)."""
        rows = []
        for kind, by_pattern in self.scores.items():
            if not by_pattern:
                continue
            n_layers, n_heads = next(iter(by_pattern.values())).shape
            for layer in range(n_layers):
                for head in range(n_heads):
                    rows.append({"kind": kind, "layer": layer, "head": head,
                                 **{name: float(v[layer, head]) for name, v in by_pattern.items()}})
        return rows

    def best(self, pattern: str) -> tuple[str, int, int, float]:
        """(kind, layer, head, score) of the head that scores highest on a pattern."""
        found = [(float(np.nanmax(v[pattern])), kind, *np.unravel_index(np.nanargmax(v[pattern]), v[pattern].shape))
                 for kind, v in self.scores.items() if pattern in v and not np.isnan(v[pattern]).all()]
        if not found:
            raise ValueError(f"no head has a {pattern!r} score here")
        value, kind, layer, head = max(found, key=lambda item: item[0])
        return kind, int(layer), int(head), value

    def table(self) -> str:
        """The scores as a plain-text table, one line per head, chance on the first line of each kind."""
        lines = []
        for kind, by_pattern in self.scores.items():
            names = list(by_pattern)
            lines.append(f"{KINDS[kind]:<34}" + "".join(f"{PATTERNS[n]:>17}" for n in names))
            lines.append(f"{'  (evenly spread)':<34}" + "".join(f"{self.chance[kind][n]:>17.3f}" for n in names))
            for row in (r for r in self.rows() if r["kind"] == kind):
                lines.append(f"{'  L' + str(row['layer']) + '·H' + str(row['head']):<34}"
                             + "".join(f"{row[n]:>17.3f}" for n in names))
        return "\n".join(lines)


def maps_layers(maps: Mapping, kind: str) -> np.ndarray | None:
    """Every layer of one kind as float [L, H, Q, K] (one example: a batch axis must be 1), or None if absent."""
    layers = []
    while kind_key(kind, len(layers)) in maps:
        value = maps[kind_key(kind, len(layers))]
        if hasattr(value, "detach"):
            value = value.detach().cpu().float().numpy()
        value = np.asarray(value)
        if value.ndim == 4:
            if value.shape[0] != 1:
                raise ValueError(f"pattern scores read one example, and these maps hold a batch of {value.shape[0]}: "
                                 "pass maps.select(i)")
            value = value[0]
        layers.append(value)
    return np.stack(layers) if layers else None


def pattern_scores_of_maps(maps: Mapping, source: Sequence[Hashable] = (), target: Sequence[Hashable] = (),
                           masks: Mapping[str, np.ndarray] | None = None,
                           names: Sequence[str] = tuple(PATTERNS)) -> PatternScores:
    """Pattern scores of every head of every kind the maps hold, for one example.

    source, target: the tokens the encoder read and the decoder's input (a decoder-only model's text is its target);
    any hashable tokens, ids or strings: equal tokens are the same token for "duplicate" and "induction".
    masks: kind -> [Q, K] bool (True = may attend); default the causal mask in decoder self-attention only.
    """
    axes = {"encoder.self_attn": (source, source), "decoder.self_attn": (target, target),
            "decoder.cross_attn": (target, source)}
    scores, chance, tokens = {}, {}, {}
    for kind, (queries, keys) in axes.items():
        weights = maps_layers(maps, kind)  # (L, H, Q, K)
        if weights is None:
            continue
        n_q, n_k = weights.shape[-2:]
        if (len(queries), len(keys)) != (n_q, n_k):
            raise ValueError(f"{KINDS[kind]} has {n_q} queries and {n_k} keys, but {len(queries)} and {len(keys)} "
                             "tokens were given for them (source= the encoder's, target= the decoder's input)")
        allowed = default_allowed(kind, n_q, n_k) if masks is None or kind not in masks else \
            np.asarray(masks[kind], dtype=bool)
        scores[kind], chance[kind] = {}, {}
        for name, grid in pattern_targets(queries, keys, kind != "decoder.cross_attn", names).items():
            scores[kind][name], chance[kind][name] = score(weights, grid, allowed)
        tokens[kind] = ([str(t) for t in queries], [str(t) for t in keys])
    if not scores:
        raise ValueError(f"no attention maps under the package's keys here (e.g. encoder.0.self_attn); "
                         f"got {list(maps)[:4]}")
    return PatternScores(scores, chance, tokens)
