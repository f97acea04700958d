"""Heads scored: how much of each head's weight falls where a pattern says it should, and what to look for.

For each kind of attention, a few patterns, each a [Q, K] bool of target keys scored by core.patterns.score
(the mean, over query rows, of the weight on the row's targets; 1 = the head does exactly that; the previous and
first tokens as core.patterns defines them for the package's pattern_scores too):

    alignment  encoder-decoder attention of a task model: the source positions data.tasks.alignment names for
               the character each decoder row writes (copy: the diagonal; reverse: the anti-diagonal; ...)
    previous   self-attention: the key just before the query (rows from position 1)
    first      key 0: the first source character, or <bos> in decoder self-attention
    duplicate  self-attention: the earlier keys holding the query's own token (a text without a repeated token
               has no such row, and no duplicate score)
    eos        the <eos> key of the source: a "sink" where a head parks weight it does not use

`chance` is what a head spreading its weight evenly over the keys it may see would score: the bar to beat.
Targets are only keys a row may see, and a row that may see nothing but its targets (the causal mask's first
row) is left out of a pattern's score: every head, even an evenly spread one, would put all its weight there.
The sentence for each kind is written from these numbers, so it says what this run's heads do.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attention_viz.core.patterns import PATTERNS as CORE_PATTERNS
from attention_viz.core.patterns import duplicate_targets, first_targets, previous_targets, score
from attention_viz.data.tasks import alignment

PATTERNS = {"alignment": "task alignment", "previous": CORE_PATTERNS["previous"], "first": CORE_PATTERNS["first"],
            "duplicate": CORE_PATTERNS["duplicate"], "eos": "<eos> sink"}
EOS = "<eos>"
CLEAR = 0.5   # a head "does" a pattern when more than half its weight goes there
# What each task's alignment looks like, as the sentences name it.
ALIGNMENT_SHAPES = {"copy": "copy's diagonal", "reverse": "reverse's anti-diagonal",
                    "sort": "sort's permutation (each output letter looks at a source position holding it)",
                    "dates": ("the date's reordering (the year's digits read the year, the month's the month's name, "
                              "the day's the day's words)")}


def pattern_targets(kind: str, query_tokens: Sequence[str], key_tokens: Sequence[str],
                    aligned: Sequence[Sequence[int]] | None = None, sink: str = EOS) -> dict[str, np.ndarray]:
    """Pattern name -> [Q, K] bool target keys for one kind (only the patterns that apply to it).

    aligned: for decoder row t, the source positions it should read (data.tasks.alignment), rows past its end
    have none; given for encoder-decoder attention of a task model only.
    sink: the end token whose keys the "eos" pattern scores (a real model's own, e.g. "</s>" or "[SEP]").
    """
    n_q, n_k = len(query_tokens), len(key_tokens)
    targets = {}
    if kind == "decoder.cross_attn" and aligned is not None:
        grid = np.zeros((n_q, n_k), dtype=bool)
        for t, positions in enumerate(aligned[:n_q]):
            for j in positions:
                if 0 <= j < n_k:
                    grid[t, j] = True
        if grid.any():
            targets["alignment"] = grid
    if kind != "decoder.cross_attn":
        targets["previous"] = previous_targets(n_q, n_k)
    targets["first"] = first_targets(n_q, n_k)
    if kind.endswith("self_attn") and n_q == n_k:
        duplicate = duplicate_targets(list(query_tokens))
        if duplicate.any():
            targets["duplicate"] = duplicate
    eos = np.array([token == sink for token in key_tokens], dtype=bool) if sink else np.zeros(n_k, dtype=bool)
    if eos.any() and kind != "decoder.self_attn":
        targets["eos"] = np.broadcast_to(eos, (n_q, n_k)).copy()
    return targets


def head_name(layer: int, head: int) -> str:
    return f"L{layer}·H{head}"


def heads(n: int, of: int, verb: str = "put") -> str:
    """"1 of 8 heads puts" / "3 of 8 heads put" / "its one head puts": a count of heads with its verb agreeing."""
    if of == 1:
        return f"its one head {verb}s" if n == 1 else f"its one head does not {verb}"
    return f"{n} of {of} heads {verb}" if n != 1 else f"1 of {of} heads {verb}s"


def look_for(kind: str, values: dict[str, np.ndarray], chance: dict[str, float], task: str | None,
             labels: dict[str, str] | None = None) -> str:
    """One sentence or two, from the scores [L, H] of one kind: the pattern to look for and the heads that show it."""
    if not values:
        return ("Too short to score: every query here may see only keys a pattern would pick anyway, so no head "
                "shows a choice of its own.")
    n_heads = next(iter(values.values())).size
    if "alignment" in values:
        scores = values["alignment"]
        layer, head = np.unravel_index(np.nanargmax(scores), scores.shape)
        clear = int(np.sum(scores > CLEAR))
        shape = ALIGNMENT_SHAPES.get(task or "", f"the {task} task's alignment")
        first = (f"Look for {shape}: each row, labelled with the decoder's input, writes the next output "
                 f"character, and its weight should sit on the source character(s) that character is written from. ")
        if clear == 0:
            return first + (f"No head has learnt it here: the closest, {head_name(layer, head)}, puts "
                            f"{scores[layer, head]:.2f} of its weight there (a head spread evenly would put "
                            f"{chance['alignment']:.2f}).")
        return first + (f"Head {head_name(layer, head)} puts {scores[layer, head]:.2f} of its weight there (a head "
                        f"spread evenly would put {chance['alignment']:.2f}); {heads(clear, n_heads)} more than half.")
    labels = labels or PATTERNS
    best = {name: np.nan_to_num(v, nan=-1.0) for name, v in values.items()}
    stacked = np.stack(list(best.values()))  # (patterns, L, H)
    names = list(best)
    winner = stacked.argmax(0)  # (L, H): each head's strongest pattern
    top = stacked.max(0)
    parts = []
    for i, name in enumerate(names):
        doing = (winner == i) & (top > CLEAR)
        if doing.any():
            layer, head = np.unravel_index(np.argmax(np.where(doing, top, -1.0)), top.shape)
            parts.append(f"{heads(int(doing.sum()), n_heads, 'look')} mostly at the {labels[name]} "
                         f"(strongest {head_name(layer, head)}, {top[layer, head]:.2f})")
    if parts:
        sink = (f" A {labels['eos'].removesuffix(' sink')} sink is where a head parks weight it has no use for."
                if any(labels.get("eos", "\0") in p for p in parts) else "")
        return "Here " + "; ".join(parts) + "." + sink
    layer, head = np.unravel_index(np.argmax(top), top.shape)
    return (f"No head here puts more than half its weight on a simple pattern (previous token, first token, "
            f"{labels.get('eos', PATTERNS['eos']).removesuffix(' sink')}); the closest is {head_name(layer, head)}, "
            f"{labels[names[winner[layer, head]]]} "
            f"{top[layer, head]:.2f}.")


def score_kind(kind: str, weights: np.ndarray, allowed: np.ndarray, query_tokens: Sequence[str],
               key_tokens: Sequence[str], aligned: Sequence[Sequence[int]] | None = None,
               task: str | None = None, sink: str = EOS) -> dict:
    """The scores of every head of one kind: weights [L, H, Q, K], allowed [Q, K] bool (True = may attend).

    Returns {"values": {pattern: [L, H] floats}, "labels": {pattern: str}, "chance": {pattern: float},
    "look_for": str}, patterns in PATTERNS order (those that apply).
    """
    allowed = np.asarray(allowed, dtype=bool)
    targets = pattern_targets(kind, query_tokens, key_tokens, aligned, sink)
    values, chance = {}, {}
    names = [name for name in PATTERNS if name in targets]
    if names:  # every pattern at once (core.patterns: one definition): (P, L, H), (P,)
        scored, evens = score(weights, np.stack([targets[name] for name in names]), allowed)
        for name, value, even in zip(names, scored, evens):
            if not np.isnan(value).all():
                values[name], chance[name] = value, float(np.nan_to_num(even))
    labels = {**PATTERNS, "eos": f"{sink} sink"}
    return {"values": values, "labels": {name: labels[name] for name in values}, "chance": chance,
            "look_for": look_for(kind, values, chance, task, labels)}


def task_alignment(task: str | None, text: str) -> list[tuple[int, ...]] | None:
    """data.tasks.alignment for a task model's text, or None (no task, or a text the task has no answer for)."""
    if not task:
        return None
    try:
        return alignment(task, text)
    except ValueError:
        return None
