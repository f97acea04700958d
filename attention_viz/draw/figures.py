"""The √d_k lab's figures and the d_k family's training curves, drawn with matplotlib.

The exported images of attention (the grid of every head, one head in detail) are in raster.py; Figure 2's
steps and the comparisons are drawn in the browser from numbers (attention_viz.explorer.steps). No pyplot:
every figure is a `matplotlib.figure.Figure` drawn on the Agg canvas, so nothing is left open between calls
and two users never share a figure.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from attention_viz.lab import Sweep, bin_probabilities, entropy
from attention_viz.draw.png import array_to_png

UNSCALED_COLOR, SCALED_COLOR = "tab:red", "tab:blue"


def figure_to_array(fig: Figure) -> np.ndarray:
    """Draw a figure on the Agg canvas and return its pixels as uint8 [height, width, 3]."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def figure_to_png(fig: Figure, compress_level: int = 1) -> bytes:
    """PNG bytes of a figure, drawn on the Agg canvas (no pyplot, nothing left open)."""
    return array_to_png(figure_to_array(fig), compress_level)


# ---------------------------------------------------------------------- the lab


def dot_product_histogram(samples: np.ndarray, d_k: int, scaled: bool, x_limit: float | None = None) -> Figure:
    """Histogram of q·k samples with the N(0, d_k) density (N(0, 1) when scaled) and the exact law drawn over it.

    x_limit fixes the x range to ±x_limit (hold it fixed across d_k to watch the spread grow);
    None uses ±4 standard deviations of the theory. Bars are densities over all samples; the exact law
    (lab.bin_probabilities) is drawn as a step over the same bins, the normal as a curve.
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
    exact, _, _ = bin_probabilities(bins, d_k, scaled)
    ax.stairs(exact / (bins[1] - bins[0]), bins, color="tab:purple", linewidth=1.5, label="exact law, per bin")
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
