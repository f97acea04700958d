"""Pictures of attention: a fast numpy grid of every head, and detailed matplotlib views.

No pyplot: every figure is a `matplotlib.figure.Figure` drawn on the Agg canvas, so nothing
is left open between calls and two users never share a figure. Weights use one colormap
(viridis, fixed 0 → 1) across the app; signed quantities a diverging one centred at 0;
masked positions are grey.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import io
import math
import numbers
from dataclasses import dataclass
from functools import lru_cache

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import Colormap, Normalize, to_rgb
from matplotlib.figure import Figure
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from matplotlib.ticker import FuncFormatter, NullLocator
from matplotlib.transforms import Affine2D
from PIL import Image, ImageDraw, ImageFont

from attention_viz.lab import Sweep, entropy

WEIGHT_CMAP = "viridis"  # attention weights, 0 → 1
SIGNED_CMAP = "RdBu_r"  # logits and differences, symmetric about 0
MASKED_COLOR = "#c8c8c8"  # masked positions and non-finite values
GAP_COLOR = (255, 255, 255)
LABEL_MARGIN = (14, 24)  # (top, left) pixels taken by grid labels "H0" / "L0"
MAX_GRID_WIDTH = 1024  # automatic cell size keeps the grid about this wide
MAX_GRID_PIXELS = 25_000_000  # ~75 MB of RGB: beyond this, show fewer heads or a smaller cell
MAX_CELL = 8
ANNOTATE_MAX = 24  # head_figure writes values in cells up to 24 × 24
STEPS_ANNOTATE_MAX = 10  # steps_figure, five panels, up to 10 × 10
MAX_TICK_LABELS = 40
UNSCALED_COLOR, SCALED_COLOR = "tab:red", "tab:blue"
CELL_VALUES_GID = "cell-values"  # gid of the PathCollection holding the values written in cells


# ---------------------------------------------------------------------------- grid


@lru_cache(maxsize=16)
def colormap_lut(cmap: str = WEIGHT_CMAP) -> np.ndarray:
    """Read-only [256, 3] uint8 table: row i is the colour of value i/255."""
    if cmap not in matplotlib.colormaps:
        raise ValueError(f"unknown colormap {cmap!r}")
    rgba = matplotlib.colormaps[cmap](np.linspace(0.0, 1.0, 256))  # (256, 4) floats in [0, 1]
    lut = np.rint(rgba[:, :3] * 255).astype(np.uint8)
    lut.setflags(write=False)
    return lut


@dataclass(frozen=True)
class GridLayout:
    """Pixel geometry of grid_image: layer rows × head columns, tiles split by gap pixels."""

    n_layers: int
    n_heads: int
    n_q: int
    n_k: int
    cell: int  # pixels per weight, each way
    gap: int  # pixels between tiles
    top: int  # label margin above the tiles
    left: int  # label margin left of the tiles

    @property
    def shape(self) -> tuple[int, int, int]:
        """(height, width, 3) of the image."""
        height = self.top + self.n_layers * (self.n_q * self.cell + self.gap) - self.gap
        width = self.left + self.n_heads * (self.n_k * self.cell + self.gap) - self.gap
        return height, width, 3

    def origin(self, layer: int, head: int) -> tuple[int, int]:
        """(y, x) pixel of the top-left corner of one head's tile."""
        y = self.top + layer * (self.n_q * self.cell + self.gap)
        return y, self.left + head * (self.n_k * self.cell + self.gap)

    def head_at(self, x: int, y: int) -> tuple[int, int] | None:
        """(layer, head) under pixel (x, y), e.g. a click on the image; None in gaps and margins."""
        layer, dy = divmod(y - self.top, self.n_q * self.cell + self.gap)
        head, dx = divmod(x - self.left, self.n_k * self.cell + self.gap)
        inside = 0 <= layer < self.n_layers and 0 <= head < self.n_heads
        return (layer, head) if inside and dy < self.n_q * self.cell and dx < self.n_k * self.cell else None


def _to_numpy(values) -> np.ndarray:
    """A numpy array from an array-like or a torch tensor (detached, on the CPU), without importing torch."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def _as_grid(weights: np.ndarray) -> np.ndarray:
    """Weights as float [L, H, Q, K]; [H, Q, K] is one layer and [Q, K] one head."""
    w = _to_numpy(weights).astype(np.float32)
    return w.reshape((1,) * (4 - w.ndim) + w.shape)


def grid_layout(shape: tuple[int, ...], cell: int | None = None, gap: int = 2, labels: bool = False) -> GridLayout:
    """Geometry for weights of this shape; cell=None picks 1-8 px so the grid is ≤ ~1024 px wide."""
    if not 2 <= len(shape) <= 4 or 0 in shape:
        raise ValueError(f"weights must be [layers, heads, Q, K], [heads, Q, K] or [Q, K], got {tuple(shape)}")
    n_layers, n_heads, n_q, n_k = (1,) * (4 - len(shape)) + tuple(shape)
    if cell is None:
        cell = min(MAX_CELL, max(1, MAX_GRID_WIDTH // (n_heads * n_k)))
    for name, value, low in (("cell", cell, 1), ("gap", gap, 0)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= 64:
            raise ValueError(f"{name} must be an integer in [{low}, 64], got {value!r}")
    top, left = LABEL_MARGIN if labels else (0, 0)
    layout = GridLayout(n_layers, n_heads, n_q, n_k, int(cell), int(gap), top, left)
    if layout.shape[0] * layout.shape[1] > MAX_GRID_PIXELS:
        raise ValueError(
            f"a {layout.shape[0]} × {layout.shape[1]} pixel grid is too large "
            f"(max {MAX_GRID_PIXELS:,} pixels): show fewer layers or heads, or use a smaller cell"
        )
    return layout


def grid_image(
    weights: np.ndarray,
    cell: int | None = None,
    gap: int = 2,
    cmap: str = WEIGHT_CMAP,
    per_head_max: bool = False,
    labels: bool = False,
) -> np.ndarray:
    """Every head of one attention kind as one RGB image: layer rows × head columns.

    Args:
        weights: [layers, heads, Q, K] in [0, 1] (values outside are clipped; NaN is grey).
            [heads, Q, K] and [Q, K] are read as one layer / one head.
        cell: pixels per weight; None fits the grid to about 1024 px wide (1 to 8).
        gap: white pixels between tiles.
        cmap: matplotlib colormap name; colour runs over 0 → 1.
        per_head_max: stretch each head's colours to 0 → its own max weight.
        labels: write "L0".. left of the rows and "H0".. above the columns (adds LABEL_MARGIN).

    Shape: returns uint8 [height, width, 3] with height, width = grid_layout(...).shape[:2].
    """
    layout = grid_layout(np.shape(weights), cell, gap, labels)  # checks the size before any copy
    w = _as_grid(weights)  # (L, H, Q, K)
    if per_head_max:
        peak = np.where(np.isnan(w), 0.0, w).max(axis=(2, 3), keepdims=True)  # (L, H, 1, 1)
        w = w / np.where(peak > 0, peak, 1.0)
    index = np.clip(w * 255.0 + 0.5, 0.0, 255.0, out=np.zeros_like(w), where=~np.isnan(w))
    index = index.astype(np.uint8).transpose(0, 2, 1, 3)  # (L, Q, H, K)
    c, g = layout.cell, layout.gap
    index = index.repeat(c, axis=1).repeat(c, axis=3)  # (L, Q·c, H, K·c)
    n_l, qc, n_h, kc = index.shape
    tiles = np.empty((n_l, qc + g, n_h, kc + g, 3), dtype=np.uint8)  # each tile padded by the gap
    tiles[...] = GAP_COLOR
    tiles[:, :qc, :, :kc] = colormap_lut(cmap)[index]
    if np.isnan(w).any():
        nan = np.isnan(w).transpose(0, 2, 1, 3).repeat(c, axis=1).repeat(c, axis=3)
        tiles[:, :qc, :, :kc][nan] = np.rint(np.array(to_rgb(MASKED_COLOR)) * 255)
    body = tiles.reshape(n_l * (qc + g), n_h * (kc + g), 3)[: n_l * (qc + g) - g, : n_h * (kc + g) - g]
    if not labels:
        return np.ascontiguousarray(body)
    image = np.full(layout.shape, 255, dtype=np.uint8)
    image[layout.top :, layout.left :] = body
    return _draw_grid_labels(image, layout)


def _draw_grid_labels(image: np.ndarray, layout: GridLayout) -> np.ndarray:
    """Write "L<i>" beside each layer row and "H<j>" above each head column."""
    canvas = Image.fromarray(image)
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default(size=11)
    for layer in range(layout.n_layers):
        y, _ = layout.origin(layer, 0)
        draw.text((1, y), f"L{layer}", fill=(0, 0, 0), font=font)
    for head in range(layout.n_heads):
        _, x = layout.origin(0, head)
        draw.text((x, 0), f"H{head}", fill=(0, 0, 0), font=font)
    return np.array(canvas)  # a writable copy


def array_to_png(image: np.ndarray, compress_level: int = 1) -> bytes:
    """PNG bytes of a uint8 [height, width, 3] image (lossless: heatmap edges stay sharp)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="png", compress_level=compress_level)
    return buffer.getvalue()


def figure_to_array(fig: Figure) -> np.ndarray:
    """Draw a figure on the Agg canvas and return its pixels as uint8 [height, width, 3]."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def figure_to_png(fig: Figure, compress_level: int = 1) -> bytes:
    """PNG bytes of a figure, drawn on the Agg canvas (no pyplot, nothing left open)."""
    return array_to_png(figure_to_array(fig), compress_level)


# ------------------------------------------------------------------------ heatmaps


def _display_token(token: str) -> str:
    """A token as a visible, literal tick label (spaces as ␣, no mathtext)."""
    token = str(token)
    shown = {" ": "␣", "": "∅", "\n": "↵", "\t": "⇥"}.get(token, token)
    return shown.replace("$", r"\$")


def _token_ticks(ax, axis: str, tokens: list[str], n: int) -> None:
    """Label positions 0..n-1 of the x or y axis with tokens (every k-th when there are many)."""
    if len(tokens) != n:
        raise ValueError(f"{n} positions on the {axis} axis but {len(tokens)} tokens")
    step = math.ceil(n / MAX_TICK_LABELS)
    positions = list(range(0, n, step))
    labels = [_display_token(tokens[i]) for i in positions]
    size = 9 if n <= 16 else 8 if n <= 32 else 7
    if axis == "x":
        rotate = 90 if max(map(len, labels)) > 2 else 0
        ax.set_xticks(positions, labels, fontsize=size, rotation=rotate)
    else:
        ax.set_yticks(positions, labels, fontsize=size)


def _as_matrix(values: np.ndarray, name: str) -> np.ndarray:
    """values as float64 [rows, cols], dropping leading axes of size 1."""
    m = _to_numpy(values).astype(np.float64)
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    if m.ndim != 2:
        raise ValueError(f"{name} must be a [Q, K] matrix (select one batch item and head), got {m.shape}")
    return m


def cell_labels(values: np.ndarray, fmt: str) -> np.ndarray:
    """The text written in each cell: values formatted with fmt (minus as −), "−∞" for −∞, "" for NaN."""
    def label(v: float) -> str:
        return "−∞" if v == -np.inf else format(v, fmt).replace("-", "−") if np.isfinite(v) else ""

    return np.array([label(v) for v in np.ravel(values)], dtype=object).reshape(np.shape(values))


@lru_cache(maxsize=4096)
def _glyphs(text: str, size: float) -> Path:
    """text as a vector path in points, centred on (0, 0)."""
    path = TextPath((0.0, 0.0), text, size=size)
    box = path.get_extents()
    return path.transformed(Affine2D().translate(-(box.x0 + box.x1) / 2, -(box.y0 + box.y1) / 2))


def _annotate(fig: Figure, ax, values: np.ndarray, cmap: Colormap, norm: Normalize, fmt: str, size: float) -> None:
    """Write cell_labels in the cells, dark on light colours and light on dark.

    One PathCollection of glyph outlines instead of a Text per cell: 576 cells draw in
    ~50 ms instead of ~600 ms.
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


def head_figure(
    weights: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    annotate: bool | None = None,
    mask: np.ndarray | None = None,
    per_head_max: bool = False,
) -> Figure:
    """One head's weights [Q, K] with tokens on both axes, a colorbar and, when small, values in cells.

    Args:
        weights: [Q, K] attention weights in [0, 1] (leading axes of size 1 are dropped).
        annotate: write each weight in its cell; None does so up to 24 × 24.
        mask: optional bool [Q, K] in the package's convention, True = may attend; the
            blocked positions (False) are drawn grey, without a value.
        per_head_max: colours run 0 → this head's max instead of 0 → 1.
    """
    w = _as_matrix(weights, "weights")  # (Q, K)
    if mask is not None:
        w = np.where(np.broadcast_to(_to_numpy(mask).astype(bool), w.shape), w, np.nan)
    peak = float(np.nanmax(w)) if np.isfinite(w).any() else 0.0
    norm = Normalize(0.0, peak if per_head_max and peak > 0 else 1.0)
    return _matrix_figure(w, query_tokens, key_tokens, title, annotate, WEIGHT_CMAP, norm, ".2f", "attention weight")


def difference_figure(
    a: np.ndarray,
    b: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    annotate: bool | None = None,
) -> Figure:
    """a − b for two [Q, K] maps, diverging colours centred at 0 with symmetric limits ±max|a − b|."""
    a, b = _as_matrix(a, "a"), _as_matrix(b, "b")
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
    panels = [(key, name, _as_matrix(steps[key], key)) for key, name in STEPS if key in steps]
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
    blocked = np.isneginf(_as_matrix(steps["masked"], "masked")) if "masked" in steps else False
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
