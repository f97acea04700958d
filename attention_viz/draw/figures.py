"""Detailed figures of attention, drawn with matplotlib: Figure 2's steps, differences, the √d_k lab.

The images redrawn on every interaction (the grid of every head, one head in detail) are in
raster.py; these are the views that need axes, legends and curves. No pyplot: every figure is a
`matplotlib.figure.Figure` drawn on the Agg canvas, so nothing is left open between calls and two
users never share a figure. Weights use viridis, fixed 0 → 1; signed quantities a diverging map
centred at 0; masked positions are grey.

Axes: Q query positions, K key positions.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from matplotlib.ticker import FuncFormatter, NullLocator
from matplotlib.transforms import Affine2D

from attention_viz.lab import Sweep, entropy
from attention_viz.draw.png import array_to_png
from attention_viz.draw.raster import MAX_TICK_LABELS, WEIGHT_CMAP, as_matrix, cell_labels, display_token

SIGNED_CMAP = "RdBu_r"  # logits and differences, symmetric about 0
MASKED_COLOR = "#c8c8c8"  # masked positions and non-finite values (raster.MASKED_RGB)
ANNOTATE_MAX = 24  # difference_figure writes values in cells up to 24 × 24
STEPS_ANNOTATE_MAX = 10  # steps_figure, five panels, up to 10 × 10
UNSCALED_COLOR, SCALED_COLOR = "tab:red", "tab:blue"
CELL_VALUES_GID = "cell-values"  # gid of the PathCollection holding the values written in cells


def figure_to_array(fig: Figure) -> np.ndarray:
    """Draw a figure on the Agg canvas and return its pixels as uint8 [height, width, 3]."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


@dataclass(frozen=True)
class LogAxes:
    """Where one axes with a log x axis lies in a drawn figure's pixels: to mark an x value without redrawing."""

    left: float  # pixel columns of the x limits
    right: float
    top: int  # pixel rows of the axes' top and bottom edges
    bottom: int
    log_min: float  # log₂ of the x limits
    log_max: float

    def column(self, x: float) -> int:
        """The pixel column of x (positive), on this axes' log scale."""
        fraction = (math.log2(x) - self.log_min) / (self.log_max - self.log_min)
        return round(self.left + fraction * (self.right - self.left))


def log_x_axes(fig: Figure) -> list[LogAxes]:
    """Every axes of a figure already drawn (figure_to_array), as pixel boxes with their log₂ x limits."""
    height = fig.bbox.height
    placed = []
    for ax in fig.axes:
        box = ax.get_window_extent()  # display units = pixels at the figure's dpi, origin bottom-left
        low, high = ax.get_xlim()
        placed.append(LogAxes(box.x0, box.x1, round(height - box.y1), round(height - box.y0),
                              math.log2(low), math.log2(high)))
    return placed


def figure_to_png(fig: Figure, compress_level: int = 1) -> bytes:
    """PNG bytes of a figure, drawn on the Agg canvas (no pyplot, nothing left open)."""
    return array_to_png(figure_to_array(fig), compress_level)


# ------------------------------------------------------------------------ heatmaps


def _token_ticks(ax, axis: str, tokens: list[str], n: int) -> None:
    """Label positions 0..n-1 of the x or y axis with tokens (every k-th when there are many)."""
    if len(tokens) != n:
        raise ValueError(f"{n} positions on the {axis} axis but {len(tokens)} tokens")
    step = math.ceil(n / MAX_TICK_LABELS)
    positions = list(range(0, n, step))
    labels = [display_token(tokens[i]).replace("$", r"\$") for i in positions]  # no mathtext
    size = 9 if n <= 16 else 8 if n <= 32 else 7
    if axis == "x":
        rotate = 90 if max(map(len, labels)) > 2 else 0
        ax.set_xticks(positions, labels, fontsize=size, rotation=rotate)
    else:
        ax.set_yticks(positions, labels, fontsize=size)


@functools.lru_cache(maxsize=4096)
def _glyphs(text: str, size: float) -> Path:
    """text as a vector path in points, centred on (0, 0)."""
    path = TextPath((0.0, 0.0), text, size=size)
    box = path.get_extents()
    return path.transformed(Affine2D().translate(-(box.x0 + box.x1) / 2, -(box.y0 + box.y1) / 2))


def _annotate(fig: Figure, ax, values: np.ndarray, cmap: Colormap, norm: Normalize, fmt: str, size: float) -> None:
    """Write cell_labels in the cells, dark on light colours and light on dark.

    One PathCollection of glyph outlines instead of a Text per cell, far faster (see docs/benchmarks.md).
    """
    labels = cell_labels(values, fmt)  # (rows, cols)
    rgb = cmap(norm(np.nan_to_num(values, posinf=0.0, neginf=0.0)))[..., :3]  # (rows, cols, 3)
    light = rgb @ np.array([0.299, 0.587, 0.114]) > 0.5  # (rows, cols)
    rows, cols = np.nonzero(labels != "")
    if rows.size == 0:
        return
    values_layer = PathCollection(
        [_glyphs(labels[i, j], size) for i, j in zip(rows, cols)],
        offsets=np.column_stack([cols, rows]),  # (n, 2) data (x, y) of each cell centre
        offset_transform=ax.transData,
        transform=Affine2D().scale(1.0 / 72.0) + fig.dpi_scale_trans,  # glyphs in points, at any dpi
        facecolors=np.where(light[rows, cols, None], 0.0, 1.0).repeat(3, axis=1),
        edgecolors="none",
    )
    values_layer.set_gid(CELL_VALUES_GID)
    values_layer.set_in_layout(False)
    ax.add_collection(values_layer, autolim=False)


def _heatmap(fig: Figure, ax, values, cmap_name, norm, annotate, fmt, label, colorbar=True) -> None:
    """imshow with masked/non-finite cells grey, optional values in cells, and a colorbar.

    colorbar: True for one beside ax, False for none, or a list of axes that share it.
    """
    cmap = matplotlib.colormaps[cmap_name].with_extremes(bad=MASKED_COLOR)
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, interpolation="nearest", aspect="auto")
    if annotate:
        _annotate(fig, ax, values, cmap, norm, fmt, size=7.0 if max(values.shape) <= 12 else 5.5)
    if colorbar is not False:
        fig.colorbar(image, ax=ax if colorbar is True else colorbar, shrink=0.85, label=label)


def _cell_figure(n_rows: int, n_cols: int, panels: int = 1) -> Figure:
    """A constrained-layout figure sized for `panels` heatmaps of n_rows × n_cols cells."""
    width = min(18.0, panels * min(9.0, 2.2 + 0.3 * n_cols))
    height = min(9.0, 1.8 + 0.3 * n_rows)
    return Figure(figsize=(max(width, 4.0), max(height, 3.0)), layout="constrained")


def _matrix_figure(m, query_tokens, key_tokens, title, annotate, cmap_name, norm, fmt, label) -> Figure:
    """One [Q, K] heatmap with tokens on both axes, a colorbar and, when small, values in cells."""
    n_q, n_k = m.shape
    fig = _cell_figure(n_q, n_k)
    ax = fig.add_subplot()
    annotate = max(n_q, n_k) <= ANNOTATE_MAX if annotate is None else annotate
    _heatmap(fig, ax, m, cmap_name, norm, annotate, fmt, label)
    _token_ticks(ax, "x", key_tokens, n_k)
    _token_ticks(ax, "y", query_tokens, n_q)
    ax.set_xlabel("key (position)")
    ax.set_ylabel("query (position)")
    ax.set_title(title)
    return fig


def difference_figure(
    a: np.ndarray,
    b: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    annotate: bool | None = None,
) -> Figure:
    """a − b for two [Q, K] maps, diverging colours centred at 0 with symmetric limits ±max|a − b|."""
    a, b = as_matrix(a, "a"), as_matrix(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    diff = a - b  # (Q, K)
    peak = float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() else 0.0
    norm = Normalize(-peak, peak) if peak > 0 else Normalize(-1.0, 1.0)
    title = f"{title}\nmax |a − b| = {peak:.3g}"
    return _matrix_figure(diff, query_tokens, key_tokens, title, annotate, SIGNED_CMAP, norm, "+.2f", "a − b")


STEPS = (  # (key of attention_steps, panel title), in the order of Figure 2 (left)
    ("scores", "QKᵀ"), ("scaled", "scaled"), ("masked", "masked"), ("weights", "softmax"), ("output", "weights·V"),
)
LOGIT_STEPS = ("scores", "scaled", "masked")


def steps_figure(
    steps: dict[str, np.ndarray],
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    annotate: bool | None = None,
) -> Figure:
    """Figure 2 (left) of the paper as panels: QKᵀ → scaled → masked → softmax → weights·V.

    Args:
        steps: arrays from attention_steps for one batch item and head: "scores", "scaled",
            "masked" ([Q, K], −∞ where masked), "weights" ([Q, K]) and "output" ([Q, d_v]);
            missing keys are skipped, leading axes of size 1 dropped.
        annotate: values in cells; None does so up to 10 × 10.

    The logit panels share one symmetric colour scale and colorbar, so the scale's shrinking
    of the logits shows; masked cells are grey (−∞ written in them), in the softmax panel too.
    """
    panels = [(key, name, as_matrix(steps[key], key)) for key, name in STEPS if key in steps]
    if not panels:
        raise ValueError(f"steps has none of the keys {[key for key, _ in STEPS]}")
    n_q = len(query_tokens)
    for key, _, m in panels:
        if m.shape[0] != n_q:
            raise ValueError(f"steps[{key!r}] has {m.shape[0]} query rows for {n_q} query tokens")
    if annotate is None:
        annotate = max(n_q, len(key_tokens)) <= STEPS_ANNOTATE_MAX
    finite = [m[np.isfinite(m)] for key, _, m in panels if key in LOGIT_STEPS]
    limit = max([float(np.abs(v).max()) for v in finite if v.size] + [1e-12])
    blocked = np.isneginf(as_matrix(steps["masked"], "masked")) if "masked" in steps else False
    fig = _cell_figure(n_q, min(len(key_tokens), 16), panels=len(panels))
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    logit_axes = [ax for ax, (key, _, _) in zip(axes, panels) if key in LOGIT_STEPS]
    for ax, (key, name, m) in zip(axes, panels):
        if key == "output":
            peak = float(np.abs(m).max()) or 1.0
            _heatmap(fig, ax, m, SIGNED_CMAP, Normalize(-peak, peak), annotate and m.shape[1] <= 10, ".2f", "")
            ax.set_xlabel("d_v")
        else:
            if key == "weights":
                _heatmap(fig, ax, np.where(blocked, np.nan, m), WEIGHT_CMAP, Normalize(0.0, 1.0), annotate, ".2f", "")
            else:
                colorbar = logit_axes if ax is logit_axes[-1] else False  # one bar for all logit panels
                _heatmap(fig, ax, m, SIGNED_CMAP, Normalize(-limit, limit), annotate, ".1f", "logit", colorbar)
            _token_ticks(ax, "x", key_tokens, m.shape[1])
            ax.set_xlabel("key (position)")
        ax.set_title(name)
    _token_ticks(axes[0], "y", query_tokens, n_q)
    axes[0].set_ylabel("query (position)")
    fig.suptitle(title)
    return fig


# ---------------------------------------------------------------------- the lab


def dot_product_histogram(samples: np.ndarray, d_k: int, scaled: bool, x_limit: float | None = None) -> Figure:
    """Histogram of q·k samples with the N(0, d_k) density (N(0, 1) when scaled) drawn over it.

    x_limit fixes the x range to ±x_limit (hold it fixed across d_k to watch the spread grow);
    None uses ±4 standard deviations of the theory. Bars are densities over all samples.
    """
    samples = np.asarray(samples, dtype=np.float64).ravel()
    if samples.size < 2 or not np.isfinite(samples).all():
        raise ValueError("samples must hold at least two finite values")
    variance = 1.0 if scaled else float(d_k)
    limit = float(x_limit) if x_limit is not None else 4.0 * math.sqrt(variance)
    bins = np.linspace(-limit, limit, 61)
    name = "q·k / √d_k" if scaled else "q·k"
    fig = Figure(figsize=(6.0, 3.6))
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.15, top=0.9)  # fixed text: no layout engine
    ax = fig.add_subplot()
    per_sample = np.full(samples.size, 1.0 / (samples.size * (bins[1] - bins[0])))
    ax.hist(samples, bins=bins, weights=per_sample, color="tab:gray", alpha=0.6, label=f"{samples.size:,} samples")
    x = np.linspace(-limit, limit, 400)
    density = np.exp(-0.5 * x * x / variance) / math.sqrt(2.0 * math.pi * variance)
    theory = "N(0, 1)" if scaled else f"N(0, d_k = {d_k})"
    ax.plot(x, density, color=SCALED_COLOR if scaled else UNSCALED_COLOR, label=theory)
    ax.set_xlim(-limit, limit)
    ax.set_xlabel(name)
    ax.set_ylabel("density")
    ax.legend(loc="upper right", fontsize=8)
    stats = f"mean {samples.mean():.2f}, variance {samples.var():.3g} (theory {variance:g})"
    ax.set_title(f"{name} for d_k = {d_k}: {stats}", fontsize=10)
    return fig


def softmax_bars(weights: np.ndarray, logits: np.ndarray | None = None, title: str | None = None) -> Figure:
    """One query's softmax weights over its keys as bars (its logits above, when given)."""
    p = np.asarray(weights, dtype=np.float64).ravel()
    n = p.size
    edges = np.arange(n + 1) - 0.5  # one step per key: a single patch, fast for 4096 keys
    fig = Figure(figsize=(6.0, 4.2 if logits is not None else 2.8))
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.15 if logits is None else 0.11, top=0.86, hspace=0.08)
    axes = fig.subplots(2 if logits is not None else 1, 1, sharex=True, squeeze=False)[:, 0]
    if logits is not None:
        z = np.asarray(logits, dtype=np.float64).ravel()
        if z.size != n:
            raise ValueError(f"{z.size} logits for {n} weights")
        axes[0].stairs(z, edges, fill=True, color="tab:gray", baseline=0.0)
        axes[0].axhline(0.0, color="black", linewidth=0.5)
        axes[0].set_ylabel("logit")
    axes[-1].stairs(p, edges, fill=True, color="tab:purple")
    axes[-1].axhline(1.0 / n, color="black", linestyle=":", linewidth=1, label=f"uniform 1/{n}")
    axes[-1].set(ylim=(0.0, 1.02), xlim=(edges[0], edges[-1]), ylabel="softmax weight", xlabel="key")
    axes[-1].legend(loc="upper right", fontsize=8)
    summary = f"max weight {p.max():.3f}, entropy {float(entropy(p)):.2f} of {math.log(n):.2f} nats"
    axes[0].set_title(f"{title}\n{summary}" if title else f"softmax over {n} keys: {summary}", fontsize=10)
    return fig


def sweep_figure(sweep: Sweep) -> Figure:
    """Four panels over d_k (log axis), unscaled vs scaled: logit variance, max weight, entropy, gradient."""
    fig = Figure(figsize=(9.0, 6.0))
    # Fixed margins: the text here never changes length, and a layout engine would double the cost.
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.08, top=0.9, hspace=0.22, wspace=0.16)
    axes = fig.subplots(2, 2, sharex=True).ravel()
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # "1000", "0.001": no mathtext to parse, unlike 10^k
    panels = (
        ("logit_var", "logit variance", "log"),
        ("max_weight", "max softmax weight (median)", "linear"),
        ("entropy", "softmax entropy, nats (median)", "linear"),
        ("grad_norm", "‖∂softmax/∂logits‖_F (median)", "log"),
    )
    for ax, (stat, name, yscale) in zip(axes, panels):
        ax.plot(sweep.d_k, getattr(sweep.unscaled, stat), "o-", color=UNSCALED_COLOR, markersize=3, label="q·k")
        ax.plot(sweep.d_k, getattr(sweep.scaled, stat), "o-", color=SCALED_COLOR, markersize=3, label="q·k / √d_k")
        ax.set_xscale("log", base=2)
        ax.set_yscale(yscale)
        for axis in (ax.xaxis, ax.yaxis) if yscale == "log" else (ax.xaxis,):
            axis.set_major_formatter(plain)
            axis.set_minor_locator(NullLocator())  # every minor tick is an object to lay out
        ax.set_title(name, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].plot(sweep.d_k, sweep.d_k, ":", color="black", linewidth=1, label="theory: d_k, and 1")
    axes[0].axhline(1.0, linestyle=":", color="black", linewidth=1)
    axes[1].axhline(1.0 / sweep.n_keys, linestyle=":", color="gray", linewidth=1)
    axes[1].set_ylim(0.0, 1.02)
    axes[2].axhline(sweep.max_entropy, linestyle=":", color="gray", linewidth=1)
    axes[2].set_ylim(0.0, sweep.max_entropy * 1.05)
    for ax in axes[2:]:
        ax.set_xlabel("d_k")
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"Without 1/√d_k the softmax saturates as d_k grows ({sweep.n_keys} keys, "
        f"{sweep.n_queries} queries per point; grey dotted: uniform softmax)",
        fontsize=10,
    )
    return fig


def family_figure(cards: dict[tuple[int, str], dict]) -> Figure:
    """The d_k family's training: loss (log scale, top row) and batch exact match (bottom row) against step,
    one column per d_k; `cards` are the checkpoints' cards keyed by (d_k, "sqrt_dk" | "none")."""
    d_ks = sorted({d_k for d_k, _ in cards})
    fig = Figure(figsize=(3.2 * len(d_ks), 5.6), layout="constrained")
    axes = fig.subplots(2, len(d_ks), sharex=True, sharey="row", squeeze=False)
    style = {
        "sqrt_dk": {"color": "tab:blue", "label": "scaled ÷√d_k"},
        "none": {"color": "tab:red", "linestyle": "--", "label": "unscaled"},
    }
    for col, d_k in enumerate(d_ks):
        for scale in style:
            card = cards.get((d_k, scale))
            if card is None:
                continue
            curve = card["curve"]
            axes[0, col].plot(curve["step"], curve["loss"], **style[scale])
            axes[1, col].plot(curve["step"], curve["exact_match"], **style[scale])
        axes[0, col].set_title(f"d_k = {d_k}")
        axes[0, col].set_yscale("log")
        axes[1, col].set_xlabel("step")
        axes[1, col].set_ylim(-0.02, 1.02)
    axes[0, 0].set_ylabel("training loss (fresh batches)")
    axes[1, 0].set_ylabel("exact match (fresh batches)")
    axes[0, 0].legend(loc="upper right", fontsize="small")
    task = next(iter(cards.values()))["task"] if cards else "?"
    fig.suptitle(f"√d_k scaling in training: the {task} task, same seed, data and steps for every curve")
    return fig
