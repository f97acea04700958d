"""Two runs' maps compared where their tokens align: a minimal pair of texts, or two models on one text.

Tokens align by identity and order: difflib.SequenceMatcher's matching blocks over the two token lists (the longest
common runs, in order), so "The keys to the cabinet are" and "The key to the cabinets is" align "The", "to" and
"the" and leave the rest unpaired, and two equal lists align position by position. The difference a − b is defined
on the (query, key) cells whose query and key both align, in a's positions; every other cell is NaN, and which
tokens did not align is part of the result.

Axes: R rows of heads (layers), C columns of heads, Q query positions, K key positions.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Alignment:
    """Which positions of a pair with which of b: partner[i] is b's position for a's position i, −1 for none."""

    partner: np.ndarray  # (len(a),) int
    b_length: int

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """(a position, b position) of every aligned pair, in order."""
        return [(i, int(j)) for i, j in enumerate(self.partner) if j >= 0]

    @property
    def a_only(self) -> list[int]:
        """a's positions with no partner in b."""
        return [i for i, j in enumerate(self.partner) if j < 0]

    @property
    def b_only(self) -> list[int]:
        """b's positions with no partner in a."""
        paired = set(int(j) for j in self.partner if j >= 0)
        return [j for j in range(self.b_length) if j not in paired]


def align(a: Sequence[str], b: Sequence[str]) -> Alignment:
    """a's and b's tokens aligned by SequenceMatcher's matching blocks (equal tokens, in order; no junk heuristic)."""
    partner = np.full(len(a), -1, dtype=np.int64)
    matcher = difflib.SequenceMatcher(None, list(a), list(b), autojunk=False)
    for block in matcher.get_matching_blocks():
        partner[block.a: block.a + block.size] = np.arange(block.b, block.b + block.size)
    return Alignment(partner, len(b))


def aligned_difference(a: np.ndarray, b: np.ndarray, queries: Alignment, keys: Alignment) -> np.ndarray:
    """a − b on the cells whose query and key both align, NaN elsewhere: a [..., Qa, Ka], b [..., Qb, Kb] -> float64
    [..., Qa, Ka] (the leading axes must agree)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"the two sides hold different heads: {list(a.shape[:-2])} against {list(b.shape[:-2])}")
    q, k = queries.partner, keys.partner
    if (len(q), len(k)) != a.shape[-2:] or (queries.b_length, keys.b_length) != b.shape[-2:]:
        raise ValueError("the alignments do not match the maps' query and key positions")
    both = (q[:, None] >= 0) & (k[None, :] >= 0)  # (Qa, Ka)
    partner_b = b[..., np.maximum(q, 0)[:, None], np.maximum(k, 0)[None, :]]  # (..., Qa, Ka): b at a's partners
    return np.where(both, a - partner_b, np.nan)


@dataclass(frozen=True)
class Comparison:
    """Two runs' heads side by side: a and b, their difference where the tokens align, and what did not align."""

    kind: str
    layers: tuple[int, ...]  # row r of each grid is layer layers[r]
    heads: tuple[int, ...]  # column c is head heads[c]
    labels: tuple[str, str]  # what a and b are (the two texts, or the two models)
    a: np.ndarray  # (R, C, Qa, Ka)
    b: np.ndarray  # (R, C, Qb, Kb)
    difference: np.ndarray  # (R, C, Qa, Ka): a − b where query and key align, NaN elsewhere
    tokens_a: tuple[list[str], list[str]]  # (query, key) tokens of a
    tokens_b: tuple[list[str], list[str]]
    queries: Alignment
    keys: Alignment
    masks: tuple[np.ndarray | None, np.ndarray | None] = (None, None)  # a's [Qa, Ka] and b's [Qb, Kb] (True = may
                                                                        # attend), where known: drawn grey

    def summary(self) -> str:
        """A few lines: what aligned, what did not, and the largest aligned change."""
        (qa, ka), (qb, kb) = self.tokens_a, self.tokens_b
        lines = [f"a: {self.labels[0]}", f"b: {self.labels[1]}"]
        for name, alignment, a_tokens, b_tokens in (("queries", self.queries, qa, qb), ("keys", self.keys, ka, kb)):
            if name == "keys" and ka == qa and kb == qb:
                continue  # self-attention: the keys are the queries
            lines.append(f"{name}: {len(alignment.pairs)} of {len(a_tokens)} tokens of a align with {len(b_tokens)} "
                         f"of b; not aligned in a: {_listed(alignment.a_only, a_tokens)}; "
                         f"in b: {_listed(alignment.b_only, b_tokens)}")
        if np.isnan(self.difference).all():
            lines.append("no cell aligns: there is no difference to show")
        else:
            r, c, i, j = np.unravel_index(np.nanargmax(np.abs(self.difference)), self.difference.shape)
            lines.append(f"largest change: layer {self.layers[r]}, head {self.heads[c]}, query {i} {qa[i]!r} -> key "
                         f"{j} {ka[j]!r}: {self.difference[r, c, i, j]:+.4f} (a − b); mean |a − b| over aligned cells "
                         f"{np.nanmean(np.abs(self.difference)):.4f}")
        return "\n".join(lines)


def _listed(positions: list[int], tokens: Sequence[str]) -> str:
    return ", ".join(f"{i}:{tokens[i]!r}" for i in positions) or "none"
