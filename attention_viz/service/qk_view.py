"""The √d_k lab's "this model's own q·k": footnote 4 measured on a trained model (attention_viz.qkstats), as the
plain, JSON-able numbers the page draws (attention_viz/labview/static/lab.js, AttentionLab.mountOwn).

For one model (a shipped checkpoint by name, or a real model the server is set up with, "hub:" + its name), one
attention (kind, layer), one head and the scaling switch:
- histogram: the head's pooled logits q·k (× 1/√d_k when scaled) in bins of a range that holds footnote 4's law at
  this d_k (±5 of its standard deviations) and 99.5% of the head's logits, with the law's probability of every bin
  (lab.bin_probabilities): the same fields as the synthetic lab's histogram, drawn by the same chart code;
- numbers: the head's table (NUMBERS_HEADERS): Var q, Var k, Var q·k, d_k·Var q·Var k and their ratio, the variance
  within a query's row, the entropies with and without 1/√d_k.

The statistics of a model are computed once (every attention, every head, a fraction of a second for a shipped model,
a few seconds for opus-mt) and kept, OWN_CACHE_SIZE models at most: a class that moves through heads costs nothing.
Texts: a shipped model reads its task's held-out strings, a real model the fixed sentences REAL_TEXTS.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from attention_viz.core.maps import kind_key, kind_of
from attention_viz.qkstats import QKStatistics
from attention_viz.service.catalog import Catalog
from attention_viz.service.checks import check_bool, check_choice, check_int, shown
from attention_viz.service.lab_view import HISTOGRAM_BINS, HISTOGRAM_RANGE, histogram_fields

OWN_TEXTS = 20  # a shipped model's held-out strings
REAL_TEXTS = ("Attention is all you need.", "The cat sat on the mat.",
              "We propose a new simple network architecture, the Transformer.",
              "Queries and keys of dimension d_k.", "The softmax saturates when the dot products grow large.",
              "Good morning, how are you today?")
OWN_CACHE_SIZE = 8
VIEWS_KEPT = 128  # one head's answers kept (~6 kB each: a histogram and a table)
KIND_LABELS = {"encoder.self_attn": "encoder self-attention", "decoder.self_attn": "decoder self-attention",
               "decoder.cross_attn": "encoder-decoder attention"}
NUMBERS_HEADERS = ["", "this head", "footnote 4"]
DIGITS = 4


def _g(value: float) -> float:
    """A float with DIGITS significant digits (what the page writes)."""
    return float(f"{float(value):.{DIGITS}g}")


class OwnQK:
    """Footnote 4 on the models of one server, cached per model (thread-safe: lru_cache; a model computed twice by
    two first visitors costs a second pass, nothing else)."""

    def __init__(self, catalog: Catalog, cache_size: int = OWN_CACHE_SIZE) -> None:
        self.catalog = catalog
        self._statistics = functools.lru_cache(maxsize=cache_size)(self._compute)
        self._views = functools.lru_cache(maxsize=VIEWS_KEPT)(self._view)  # a class opens the same few heads

    @property
    def choices(self) -> list[tuple[str, str]]:
        """(label, value) for the picker: every shipped dot-product checkpoint (each d_k of a family), then the real
        models set up here."""
        out = []
        for family in self.catalog.families.values():
            if family.compatibility != "dot_product":
                continue  # additive attention has no q·k
            out += [(f"{family.label}, d_k = {d_k}", name) for d_k, name in family.members]
        return out + self.catalog.real_choices

    @property
    def default_model(self) -> str:
        names = [value for _, value in self.choices]
        return "reverse" if "reverse" in names else names[0]

    def check_model(self, model: object) -> str:
        values = [value for _, value in self.choices]
        if isinstance(model, str) and model in values:
            return model
        raise ValueError(f"Unknown model {shown(model)} for this model's own q·k; choose one of "
                         f"{', '.join(repr(v) for v in values)}.")

    def statistics(self, model: object) -> dict[str, QKStatistics]:
        """Every attention's statistics of this model (computed once; real models load on first use)."""
        return self._statistics(self.check_model(model))

    def _title(self, model: str, d_k: int) -> str:
        """The model as the view names it: its picker label, with d_k where its weights fix it (a shipped model's
        label has it already)."""
        label = next(label for label, value in self.choices if value == model)
        return f"{label}, d_k = {d_k}" if self.catalog.attention_model(model).abilities.d_k_fixed else label

    def cache_info(self):
        """functools' statistics of the per-model cache (hits, misses: one computation per model)."""
        return self._statistics.cache_info()

    def _compute(self, model: str) -> dict[str, QKStatistics]:
        return self.catalog.attention_model(model).qk_statistics(OWN_TEXTS, REAL_TEXTS)

    def texts(self, model: str) -> str:
        """What the statistics were measured on, in words."""
        return self.catalog.attention_model(model).qk_texts(OWN_TEXTS, REAL_TEXTS)

    def shape(self, model: object) -> dict:
        """{"kinds": [kinds it has], "layers": {kind: n}, "heads": H, "d_k"} of a model (its statistics computed)."""
        stats = self.statistics(model)
        layers: dict[str, int] = {}
        for key in stats:
            layers[kind_of(key)] = layers.get(kind_of(key), 0) + 1
        first = next(iter(stats.values()))
        return {"kinds": list(layers), "layers": layers, "heads": first.n_heads, "d_k": first.d_k}

    def view(self, model: object, kind: object, layer: object, head: object, scaled: object) -> dict:
        """One head's histogram against footnote 4's law and its table (see the module's docstring); ValueError
        naming a model, kind, layer or head this model does not have."""
        model = self.check_model(model)
        shape = self.shape(model)
        kind = check_choice("attention", kind, {k: KIND_LABELS[k] for k in shape["kinds"]})
        layer = check_int("layer", layer, 0, shape["layers"][kind] - 1)
        head = check_int("head", head, 0, shape["heads"] - 1)
        scaled = check_bool("scaled", scaled)
        return self._views(model, kind, layer, head, scaled)

    def _view(self, model: str, kind: str, layer: int, head: int, scaled: bool) -> dict:
        """view's answer for checked values (kept: shared by every page that asks, never mutated)."""
        shape = self.shape(model)
        key = kind_key(kind, layer)
        s = self.statistics(model)[key]
        return {
            "model": model,
            "label": self._title(model, s.d_k),
            "texts": self.texts(model),
            "key": key,
            "kind": kind,
            "layer": layer,
            "head": head,
            "d_k": s.d_k,
            "scaled": scaled,
            "shape": shape,
            "histogram": _histogram(s.logits[head], s.d_k, scaled),
            "numbers": {"headers": NUMBERS_HEADERS, "data": numbers(s, head)},
        }


def _histogram(raw: np.ndarray, d_k: int, scaled: bool) -> dict:
    """The head's logits [N] against footnote 4's law at d_k, as the lab draws it; the range stretches to the 99.5th
    percentile of |value| where a trained head's logits reach past ±5 standard deviations of the law."""
    values = raw.astype(np.float64) / math.sqrt(d_k) if scaled else raw.astype(np.float64)  # (N,)
    sd = 1.0 if scaled else math.sqrt(d_k)
    span = max(HISTOGRAM_RANGE * sd, float(np.quantile(np.abs(values), 0.995)))
    return histogram_fields(values, np.linspace(-span, span, HISTOGRAM_BINS + 1), d_k, scaled)


def numbers(s: QKStatistics, head: int) -> list[list]:
    """The head's table under NUMBERS_HEADERS: its numbers (DIGITS significant digits), and footnote 4's."""
    d_k, keys = s.d_k, s.n_pairs / s.n_queries
    uniform = f"uniform over {keys:.3g} keys: {math.log(keys):.3g}"
    return [
        ["Var q (components)", _g(s.q_var[head]), "1"],
        ["Var k (components)", _g(s.k_var[head]), "1"],
        ["Var q·k, raw", _g(s.logit_var[head]), f"d_k = {d_k}"],
        ["d_k · Var q · Var k", _g(s.predicted[head]), "= Var q·k when q and k have independent components"],
        ["Var q·k / (d_k · Var q · Var k)", _g(s.ratio[head]), "1"],
        ["Var q·k / d_k (Var of the scaled logits)", _g(s.logit_var[head] / d_k), "1"],
        ["Var q·k within one query's keys", _g(s.row_var[head]), f"d_k = {d_k}"],
        ["softmax entropy with 1/√d_k, nats", _g(s.entropy_scaled[head]), uniform],
        ["softmax entropy without scaling, nats", _g(s.entropy_unscaled[head]), uniform],
        ["pairs (query, key) pooled", s.n_pairs, f"{s.n_queries} queries"],
    ]
