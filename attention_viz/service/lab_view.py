"""The √d_k lab's answer: footnote 4's numbers (attention_viz.lab) as plain, JSON-able data the browser draws.

No Gradio and no matplotlib here: a request computes numbers only and the page's
own script draws them (attention_viz/labview/static/lab.js). For one (d_k, number of keys, scaled):

- histogram: counts of 20,000 q·k samples in bins of the mode's own range, ±5 standard deviations
  of the mode (±5 scaled, ±5√d_k unscaled), and the exact law's probability of every bin
  (lab.bin_probabilities), so samples and theory are compared bin for bin at every d_k;
- query: one query's logits and softmax weights over its keys, sorted largest first, with `limit`,
  the largest |unscaled logit|: the logit chart's scale for both modes of this d_k and number of keys;
- sweep: statistics over d_k = 1 .. 4096, both modes: read from the shipped table of every number of keys the lab
  allows (attention_viz/data/lab_sweeps.json.gz, written by `python -m devtools.lab_sweeps`): computing one is the
  request's costliest part (docs/benchmarks.md, the √d_k lab), and a class's students each sit at a number of their
  own; what the table lacks is computed and kept;
- numbers: the rows of the table (limits.LAB_HEADERS): the variance of the samples, and the softmax's saturation as
  medians over the sweep's queries at this d_k, read from the same shipped table where it holds this d_k (its
  "saturation": the rows' numbers as shown, and the typical query's index), computed where it does not.

Every part is cached by the controls it depends on; the dict is assembled per request.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
from importlib.resources import files
from dataclasses import dataclass

import numpy as np

from attention_viz import lab
from attention_viz.service.checks import check_bool, check_int
from attention_viz.service.limits import LAB_D_K_RANGE, LAB_KEYS_RANGE, LAB_SAMPLES, LAB_SEED

SWEEP_D_KS = [2**i for i in range(13)]  # 1 .. 4096, the sweep's x axis
HISTOGRAM_RANGE = 5.0  # the histogram spans ± this many standard deviations of its mode
HISTOGRAM_BINS = 50
TOP_KEYS = 5  # the keys whose index the data names (largest weights first)
DIGITS = 5  # significant digits of the floats sent


@dataclass(frozen=True)
class LabView:
    """The √d_k lab for one d_k, number of keys and scaling switch."""

    data: dict                  # what the browser draws (JSON-able); see the module's docstring
    numbers: list[list]         # rows under limits.LAB_HEADERS


def rounded(values, digits: int = DIGITS) -> list[float]:
    """Floats with `digits` significant digits, as a list (keeps the JSON small)."""
    flat = np.asarray(values, dtype=np.float64).ravel().tolist()
    # one %-format of them all, then split: the same digits as f"{v:.{digits}g}" one at a time, at half the cost
    return list(map(float, ((f"%.{digits}g " * len(flat)) % tuple(flat)).split())) if flat else []


SWEEP_TABLE = files("attention_viz.data") / "lab_sweeps.json.gz"  # every number of keys' sweep, as the lab sends it
SWEEP_STATS = ("logit_var", "max_weight", "entropy", "grad_norm")
MODES = ("unscaled", "scaled")


def read_sweep_table(path=SWEEP_TABLE) -> dict[int, dict]:
    """n_keys -> the table's entry; {} when the file is missing or unreadable (the lab then computes every sweep)."""
    try:
        table = json.loads(gzip.decompress(path.read_bytes()))
        return {int(n): entry for n, entry in table["n_keys"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


class LabData:
    """The lab's numbers, cached per part: samples and theory per d_k, the sweep per number of keys."""

    def __init__(self, cache_size: int = 64, table=SWEEP_TABLE) -> None:
        """table: the shipped sweeps (a path; None: compute every sweep, as devtools.lab_sweeps does)."""
        low, high = LAB_KEYS_RANGE
        self._table = {} if table is None else read_sweep_table(table)
        self._samples = functools.lru_cache(maxsize=8)(self._draw_samples)  # 160 kB each
        self._histogram = functools.lru_cache(maxsize=cache_size)(self._histogram_data)
        self._query = functools.lru_cache(maxsize=cache_size)(self._query_data)
        self._sweep = functools.lru_cache(maxsize=high - low + 1)(self._sweep_data)  # every n_keys: 1 MB in all
        self._numbers = functools.lru_cache(maxsize=cache_size)(self._numbers_rows)
        self._saturation = functools.lru_cache(maxsize=cache_size)(self._saturation_data)
        self._row = functools.lru_cache(maxsize=cache_size)(self._unscaled_row)  # the query drawn, both modes' source

    def view(self, d_k: object, n_keys: object, scaled: object) -> LabView:
        """Histogram against the exact law, one query's logits and softmax, the sweep over d_k, the numbers."""
        d_k = check_int("d_k", d_k, *LAB_D_K_RANGE)
        n_keys = check_int("number of keys", n_keys, *LAB_KEYS_RANGE)
        scaled = check_bool("scaled", scaled)
        data = {
            "d_k": d_k,
            "n_keys": n_keys,
            "scaled": scaled,
            "histogram": self._histogram(d_k, scaled),
            "query": self._query(d_k, n_keys, scaled),
            "sweep": self._sweep(n_keys),
        }
        return LabView(data=data, numbers=self._numbers(d_k, n_keys))

    def tabled(self, d_k: object) -> bool:
        """Whether an answer at d_k reads its saturation from the shipped sweeps (d_k one of SWEEP_D_KS, the slider's
        powers of two): a few ms, cached or not. Another d_k computes it, tens of ms the first time (docs/benchmarks.md,
        the √d_k lab)."""
        return bool(self._table) and type(d_k) in (int, float) and d_k in SWEEP_D_KS

    def sweep_cache_info(self):
        """functools' cache statistics of the sweep (hits, misses): one computation per number of keys."""
        return self._sweep.cache_info()

    # ------------------------------------------------------------------ parts

    def _draw_samples(self, d_k: int) -> np.ndarray:
        samples = lab.dot_products(d_k, LAB_SAMPLES, seed=LAB_SEED)  # (N,) unscaled q·k
        samples.setflags(write=False)
        return samples

    def _histogram_data(self, d_k: int, scaled: bool) -> dict:
        sd = 1.0 if scaled else math.sqrt(d_k)
        samples = self._samples(d_k) / math.sqrt(d_k) if scaled else self._samples(d_k)
        edges = np.linspace(-HISTOGRAM_RANGE, HISTOGRAM_RANGE, HISTOGRAM_BINS + 1) * sd  # (B + 1,)
        return histogram_fields(samples, edges, d_k, scaled)

    def _unscaled_row(self, d_k: int, n_keys: int) -> tuple[int, int, np.ndarray, np.ndarray]:
        """The query drawn at this d_k and number of keys: (its index, n_queries, unscaled logits [n], weights [n])."""
        n_queries = self._sweep_frame(n_keys)["n_queries"]
        index = self._saturation(d_k, n_keys)["typical"]  # the sweep's median query, the same both modes
        logits, weights = lab.query_row(d_k, n_keys, False, LAB_SEED, index, n_queries)  # (n,), (n,)
        logits.setflags(write=False)
        weights.setflags(write=False)
        return index, n_queries, logits, weights

    def _query_data(self, d_k: int, n_keys: int, scaled: bool) -> dict:
        index, n_queries, unscaled_logits, unscaled_weights = self._row(d_k, n_keys)
        logits, weights = (lab.softmax_input(unscaled_logits, d_k, True) if scaled
                           else (unscaled_logits, unscaled_weights))  # (n,), (n,)
        order = np.argsort(-logits, kind="stable")  # largest first; the softmax keeps the order
        return {
            "index": index, "n_queries": n_queries,  # which query is drawn: the median by its largest weight
            "logits": rounded(logits[order]),
            "weights": rounded(weights[order]),
            "keys": order[:TOP_KEYS].tolist(),  # the original index of the largest ones
            "limit": float(f"{np.abs(unscaled_logits).max():.{DIGITS}g}"),  # same for both modes
            "logit_sd": float(f"{logits.std():.4g}"),
            "max_weight": float(f"{weights.max():.4g}"),
            "entropy": float(f"{float(lab.entropy(weights)):.4g}"),
            "max_entropy": math.log(n_keys),
            "grad_norm": float(f"{float(lab.softmax_jacobian_norm(weights)):.4g}"),
        }

    def _sweep_data(self, n_keys: int) -> dict:
        entry = self._table.get(n_keys)
        if entry is None:
            return self.sweep_data(n_keys)
        return {**self._sweep_frame(n_keys), **{mode: entry[mode] for mode in MODES}}

    def sweep_data(self, n_keys: int) -> dict:
        """The sweep for this number of keys, computed (the table holds these, rounded as sent)."""
        frame = self._sweep_frame(n_keys)
        sweep = lab.sweep(SWEEP_D_KS, n_keys=n_keys, n_queries=frame["n_queries"], seed=LAB_SEED)
        return {**frame, **_rounded_stats(sweep)}

    def table_entry(self, n_keys: int) -> dict:
        """What the shipped table keeps for this number of keys, computed: the sweep's statistics per mode, rounded as
        sent, and at each of its d_k the saturation the numbers table shows (saturation_at)."""
        n_queries = self._sweep_frame(n_keys)["n_queries"]
        sweep = lab.sweep(SWEEP_D_KS, n_keys=n_keys, n_queries=n_queries, seed=LAB_SEED)
        return {**_rounded_stats(sweep),
                "saturation": [saturation_at(sweep, i, lab.typical_query(d_k, n_keys, n_queries, LAB_SEED))
                               for i, d_k in enumerate(SWEEP_D_KS)]}

    def _saturation_data(self, d_k: int, n_keys: int) -> dict:
        """saturation_at this d_k and number of keys: the table's where it holds this d_k, else computed."""
        saturation = self._table.get(n_keys, {}).get("saturation")
        if saturation is not None and d_k in SWEEP_D_KS:
            return saturation[SWEEP_D_KS.index(d_k)]
        return computed_saturation(d_k, n_keys)

    @staticmethod
    def _sweep_frame(n_keys: int) -> dict:
        """What a sweep's answer says besides its statistics."""
        return {"d_k": list(SWEEP_D_KS), "n_keys": n_keys, "n_queries": min(256, lab.MAX_SWEEP_LOGITS // n_keys),
                "max_entropy": math.log(n_keys)}

    def _numbers_rows(self, d_k: int, n_keys: int) -> list[list]:
        return _numbers(self._samples(d_k), d_k, n_keys, self._saturation(d_k, n_keys))


def _rounded_stats(sweep: lab.Sweep) -> dict:
    """A sweep's statistics per mode, rounded as sent."""
    return {mode: {stat: rounded(getattr(getattr(sweep, mode), stat), 4) for stat in SWEEP_STATS} for mode in MODES}


def saturation_at(sweep: lab.Sweep, i: int, typical: int) -> dict:
    """The softmax's saturation at the sweep's i-th d_k as the numbers table shows it, per mode: [max weight,
    entropy, gradient norm] (medians over the sweep's queries, rounded as shown); and the typical query's index."""
    return {**{mode: [round(float(m.max_weight[i]), 4), round(float(m.entropy[i]), 4),
                      float(f"{float(m.grad_norm[i]):.4g}")] for mode, m in zip(MODES, (sweep.unscaled, sweep.scaled))},
            "typical": typical}


def computed_saturation(d_k: int, n_keys: int) -> dict:
    """saturation_at one d_k and number of keys, computed (what the table holds at its d_k)."""
    n_queries = min(256, lab.MAX_SWEEP_LOGITS // n_keys)
    sweep = lab.sweep([d_k], n_keys=n_keys, n_queries=n_queries, seed=LAB_SEED)
    return saturation_at(sweep, 0, lab.typical_query(d_k, n_keys, n_queries, LAB_SEED))


def _numbers(samples: np.ndarray, d_k: int, n_keys: int, saturation: dict) -> list[list]:
    """The table: variance of the logits (every sample), and the softmax's saturation as medians over the sweep's
    queries at this d_k (the statistic the sweep draws, and the query drawn is the median one: saturation_at), both
    modes, with the theory."""
    variances = [float(samples.var()), float((samples / math.sqrt(d_k)).var())]
    rows = [[f"variance of the logits ({len(samples):,} samples)", *[round(v, 3) for v in variances],
             f"{d_k} and 1"]]
    n_queries = min(256, lab.MAX_SWEEP_LOGITS // n_keys)
    median = f"median over {n_queries} queries"
    (max_u, entropy_u, grad_u), (max_s, entropy_s, grad_s) = saturation["unscaled"], saturation["scaled"]
    rows.append([f"max softmax weight, {median}", max_u, max_s, f"uniform: {1 / n_keys:.4f}"])
    rows.append([f"entropy, nats, {median}", entropy_u, entropy_s, f"uniform: {math.log(n_keys):.4f}"])
    rows.append([f"‖∂softmax/∂logits‖, {median}", grad_u, grad_s,
                 f"uniform: {math.sqrt(1 / n_keys - 1 / n_keys**2):.4f}; one-hot: 0"])
    return rows


def histogram_fields(values: np.ndarray, edges: np.ndarray, d_k: int, scaled: bool) -> dict:
    """The histogram the lab draws: counts of `values` (q·k, or q·k / √d_k when scaled) [N] in bins `edges` [B + 1],
    against footnote 4's exact law at d_k in the same bins (lab.bin_probabilities), with both tails.

    Used for the synthetic samples and for a model's own logits (service.qk_view), so both read the same."""
    sd = 1.0 if scaled else math.sqrt(d_k)  # footnote 4's standard deviation of the shown variable
    counts, _ = np.histogram(values, bins=edges)  # (B,) values outside the edges are not counted
    below, above = int((values < edges[0]).sum()), int((values >= edges[-1]).sum())
    theory, theory_below, theory_above = lab.bin_probabilities(edges, d_k, scaled)
    n = values.size
    observed = np.concatenate([[below], counts, [above]]) / n  # (B + 2,) with both tails
    expected = np.clip(np.concatenate([[theory_below], theory, [theory_above]]), 0.0, 1.0)  # rounding below 0 clipped
    return {
        "variable": "q·k / √d_k" if scaled else "q·k",
        "edges": rounded(edges, 8),
        "counts": counts.tolist(),
        "samples": n,
        "below": below,
        "above": above,
        "theory": rounded(theory),
        "theory_below": float(f"{theory_below:.{DIGITS}g}"),
        "theory_above": float(f"{theory_above:.{DIGITS}g}"),
        "normal_sd": sd,  # N(0, sd²): the normal approximation, drawn for comparison
        "mean": float(f"{values.mean():.4g}"),
        "variance": float(f"{values.var():.4g}"),
        "theory_variance": float(sd * sd),
        # total variation distance between the histogram (tails included) and the exact law, and its
        # expected size from sampling alone, Σ √(2 p (1 − p) / (π N)) / 2
        "tv_distance": float(f"{0.5 * np.abs(observed - expected).sum():.3g}"),
        "tv_noise": float(f"{0.5 * np.sqrt(2 * expected * (1 - expected) / (math.pi * n)).sum():.3g}"),
    }


def lab_numbers(d_k: int, n_keys: int) -> list[list]:
    """The lab's numbers for one d_k and number of keys (uncached, computed: no table)."""
    return _numbers(lab.dot_products(d_k, LAB_SAMPLES, LAB_SEED), d_k, n_keys, computed_saturation(d_k, n_keys))
