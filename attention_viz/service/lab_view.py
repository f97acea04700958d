"""The √d_k lab's view: footnote 4's numbers (attention_viz.lab) drawn as figures and a table.

Every figure is cached by the controls it depends on; the sweep over d_k is computed and drawn once per
number of keys, and the slider's d_k is marked on a copy of its pixels.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from attention_viz import lab
from attention_viz.draw import figures, raster
from attention_viz.service.checks import check_bool, check_int
from attention_viz.service.limits import IMAGE_CACHE_SIZE, LAB_D_K_RANGE, LAB_KEYS_RANGE, LAB_SAMPLES, LAB_SEED
from attention_viz.service.pngstore import PngStore

SWEEP_D_KS = [2**i for i in range(13)]  # 1 .. 4096, the sweep's x axis


@dataclass(frozen=True)
class LabView:
    """The √d_k lab for one d_k, number of keys and scaling switch."""

    histogram: str              # PNG file: q·k samples against N(0, d_k)
    softmax: str                # PNG file: one query's softmax over its keys
    sweep: str                  # PNG file: statistics over d_k, scaled against unscaled
    numbers: list[list]         # rows under limits.LAB_HEADERS


class LabFigures:
    """The lab's figures as PNG files in `store`, cached."""

    def __init__(self, store: PngStore, cache_size: int = IMAGE_CACHE_SIZE) -> None:
        self.store = store
        self._histogram = functools.lru_cache(maxsize=cache_size)(self._render_histogram)
        self._softmax = functools.lru_cache(maxsize=cache_size)(self._render_softmax)
        self._sweep = functools.lru_cache(maxsize=8)(self._sweep_result)
        self._sweep_image = functools.lru_cache(maxsize=cache_size)(self._render_sweep)
        self._sweep_base = functools.lru_cache(maxsize=2)(self._render_sweep_base)  # pixels: ~1.6 MB each

    def view(self, d_k: object, n_keys: object, scaled: object) -> LabView:
        """Histogram of q·k, one softmax row, the sweep over d_k and the numbers for this d_k."""
        d_k = check_int("d_k", d_k, *LAB_D_K_RANGE)
        n_keys = check_int("number of keys", n_keys, *LAB_KEYS_RANGE)
        scaled = check_bool("scaled", scaled)
        kept = self.store.kept_file
        return LabView(
            histogram=kept(self._histogram, d_k, scaled),
            softmax=kept(self._softmax, d_k, n_keys, scaled),
            sweep=kept(self._sweep_image, d_k, n_keys),
            numbers=lab_numbers(d_k, n_keys),
        )

    def _render_histogram(self, d_k: int, scaled: bool) -> str:
        samples = lab.dot_products(d_k, LAB_SAMPLES, seed=LAB_SEED, scaled=scaled)
        # One x range for both modes (the unscaled spread), so switching the scale visibly narrows the histogram.
        fig = figures.dot_product_histogram(samples, d_k, scaled, x_limit=4.0 * math.sqrt(d_k))
        return self.store.figure_file(fig)

    def _render_softmax(self, d_k: int, n_keys: int, scaled: bool) -> str:
        logits, weights = lab.softmax_row(d_k, n_keys, scaled, seed=LAB_SEED)
        name = "q·k / √d_k" if scaled else "q·k"
        fig = figures.softmax_bars(weights, logits, title=f"one query, {n_keys} keys, d_k = {d_k}, logits {name}")
        return self.store.figure_file(fig)

    def _sweep_result(self, n_keys: int) -> lab.Sweep:
        return lab.sweep(SWEEP_D_KS, n_keys=n_keys, n_queries=min(256, lab.MAX_SWEEP_LOGITS // n_keys), seed=LAB_SEED)

    def _render_sweep_base(self, n_keys: int) -> tuple[np.ndarray, list[figures.LogAxes]]:
        """The curves over d_k for one number of keys, drawn once: pixels and where each panel lies."""
        fig = figures.sweep_figure(self._sweep(n_keys))
        pixels = figures.figure_to_array(fig)
        pixels.setflags(write=False)
        return pixels, figures.log_x_axes(fig)

    def _render_sweep(self, d_k: int, n_keys: int) -> str:
        """The curves with the slider's d_k marked in every panel: a column of pixels, not a new figure."""
        pixels, panels = self._sweep_base(n_keys)
        image = pixels.copy()
        for panel in panels:
            raster.mark_column(image, panel.column(d_k), panel.top, panel.bottom)
        return self.store.png_file(image)


def lab_numbers(d_k: int, n_keys: int) -> list[list]:
    """The lab's numbers for one d_k: variance of the logits, and one softmax row's saturation, both modes."""
    rows = []
    variances = [float(lab.dot_products(d_k, LAB_SAMPLES, LAB_SEED, scaled).var()) for scaled in (False, True)]
    rows.append(["variance of the logits", *[round(v, 3) for v in variances], f"{d_k} and 1"])
    rows_by_mode = [lab.softmax_row(d_k, n_keys, scaled, LAB_SEED)[1] for scaled in (False, True)]
    rows.append(["max softmax weight (one query)", *[round(float(p.max()), 4) for p in rows_by_mode],
                 f"uniform: {1 / n_keys:.4f}"])
    rows.append(["entropy, nats (one query)", *[round(float(lab.entropy(p)), 4) for p in rows_by_mode],
                 f"uniform: {math.log(n_keys):.4f}"])
    rows.append(["‖∂softmax/∂logits‖ (one query)",
                 *[float(f"{float(lab.softmax_jacobian_norm(p)):.4g}") for p in rows_by_mode],
                 f"uniform: {math.sqrt(1 / n_keys - 1 / n_keys**2):.4f}; one-hot: 0"])
    return rows
