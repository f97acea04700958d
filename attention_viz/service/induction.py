"""Induction heads, scored on demand: one extra pass of the chosen model on n random tokens repeated twice (Olsson et
al. 2022), through the package's one definition (analysis.pattern_scores, core.patterns), cached per model.

A head's induction score is its mean weight, over the second half's queries, on the token after the current token's
first occurrence (1: it does exactly that); `chance` is an evenly spread head's. Scored on self-attention only.

Payload format "attention_viz.induction/1":

    {"format", "model": the picker's value, "n": the random sequence's length, "kinds": [{"kind", "label",
     "values": [[H floats or null] x L], "chance": float}], "best": {"kind", "layer", "head", "score"} | null,
     "text": Markdown: what was run, the strongest heads, and a table of every head}

Axes: L layers, H heads.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import numpy as np

from attention_viz.analysis.patterns import DEFAULT_REPEAT, pattern_scores
from attention_viz.core.maps import KINDS
from attention_viz.service.catalog import SizedCache
from attention_viz.service.requests import Settings
from attention_viz.service.runs import Runs
from attention_viz.service.texts import code

FORMAT = "attention_viz.induction/1"
SEED = 0
KEPT = 16  # models whose scores are kept (each a few [L, H] arrays)
CLEAR = 0.5  # a head "is" an induction head here when more than half its weight goes to the induction target


def model_only(settings: Settings) -> Settings:
    """The settings less what does not decide the model (text, pads, heads off): the cache's key."""
    return replace(settings.switched(heads_off=(), ablation="zero"), text="", typed=None, pad_tokens=0)


class Induction:
    """Each model's induction scores, computed once on the repeated random sequence and kept (KEPT models)."""

    def __init__(self, runs: Runs, n: int = DEFAULT_REPEAT) -> None:
        self.runs, self.n = runs, n
        self._cache = SizedCache(self._score, KEPT, lambda _: 1)

    def scores(self, settings: Settings) -> dict:
        """The induction payload (module docstring) of the model `settings` runs."""
        return self._cache(model_only(settings))

    def _score(self, settings: Settings) -> dict:
        model = self.runs.attention_model(settings)
        network = getattr(model, "network", None) or model.model  # ours (OwnModel) or a real one (HubModel)
        busy = getattr(model, "busy", None) or contextlib.nullcontext()
        with busy:
            scored = pattern_scores(network, n=self.n, seed=SEED, patterns=("induction",))
        kinds, best = [], None
        for kind, by_pattern in scored.scores.items():
            if "induction" not in by_pattern or np.isnan(by_pattern["induction"]).all():
                continue
            values = by_pattern["induction"]  # (L, H)
            kinds.append({"kind": kind, "label": KINDS[kind], "chance": round(float(scored.chance[kind]["induction"]), 4),
                          "values": [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in values]})
            layer, head = np.unravel_index(np.nanargmax(values), values.shape)
            if best is None or values[layer, head] > best["score"]:
                best = {"kind": kind, "layer": int(layer), "head": int(head), "score": round(float(values[layer, head]), 4)}
        return {"format": FORMAT, "model": settings.model, "n": self.n, "kinds": kinds, "best": best,
                "text": summary(settings.name, self.n, kinds, best)}


def summary(model: str, n: int, kinds: list[dict], best: dict | None) -> str:
    """What was run on `model` (as the picker names it), the strongest head, and every head's score as a Markdown
    table per kind."""
    lines = [f"**Induction heads of {code(model)}**: one pass on {n} random tokens repeated twice; a head's score is its "
             "mean weight, over the second half, on the token after the current token's first occurrence "
             "(1: exactly that; an evenly spread head scores the chance shown)."]
    if best is None:
        return lines[0] + "\n\nThis model has no self-attention to score."
    clear = sum(v is not None and v > CLEAR for k in kinds for row in k["values"] for v in row)
    lines.append(f"Strongest: {KINDS[best['kind']]} L{best['layer']}·H{best['head']}, {best['score']:.2f}; "
                 f"{clear} head{'s' if clear != 1 else ''} above {CLEAR}.")
    for k in kinds:
        n_heads = len(k["values"][0])
        header = "| layer | " + " | ".join(f"H{h}" for h in range(n_heads)) + " |"
        rows = [f"| L{layer} | " + " | ".join("–" if v is None else f"{v:.2f}" for v in row) + " |"
                for layer, row in enumerate(k["values"])]
        lines.append(f"*{k['label']}* (chance {k['chance']:.2f})\n\n" + "\n".join(
            [header, "|---|" + "---|" * n_heads, *rows]))
    return "\n\n".join(lines)
