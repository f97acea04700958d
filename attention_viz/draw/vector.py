"""Figures for papers: heads of attention as matplotlib Figures saved as SVG, PDF or PNG, text kept as text.

The same views as the exported PNGs (raster.py, sheet.py): one head, or a grid of heads (core.maps.head_grid: every
layer × head of a kind, one layer's heads, one head down the layers), the tokens on the axes (queries beside the
first column, keys under the last row, thinned to what the panel's length holds legibly), layers and heads named, a
colour bar, and the settings written into the file (SVG and PDF metadata, PNG text chunks). In SVG every label is a
<text> element and in PDF a TrueType font (svg.fonttype "none", pdf.fonttype 42), so a journal's typesetting and a
reader's search find the tokens. No pyplot: each figure is a matplotlib.figure.Figure, saved and let go.

Axes: R rows of heads (layers), C columns of heads, Q query positions, K key positions.
"""

from __future__ import annotations

import io
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from attention_viz.core.alignment import Comparison
from attention_viz.core.maps import KINDS, HeadGrid, TextMaps, head_grid
from attention_viz.draw.raster import MASKED_RGB, WEIGHT_CMAP, display_token

FORMATS = {".svg": "svg", ".pdf": "pdf", ".png": "png"}
DIFFERENCE_CMAP = "RdBu_r"  # a − b: red where a puts more weight, blue where b does
MASKED = tuple(c / 255 for c in MASKED_RGB)
TICK_PT, LABEL_PT, TITLE_PT = 7.0, 8.0, 9.0  # font sizes in points: legible at a paper's column width
PAGE_WIDTH = 6.75  # inches: a two-column paper's text width; a grid fits within it
HEAD_WIDTH = 2.6  # inches of one head on its own: a one-column figure with its labels and colour bar
MIN_PANEL, MAX_PANEL = 0.55, 3.0  # inches a panel's longer side may take
MAX_HEIGHT = 8.0  # inches the panels of a grid may take together, top to bottom (a page is 9)
PNG_DPI = 300
LABEL_CHARS = 20  # a token label's characters at most
RC = {"svg.fonttype": "none", "pdf.fonttype": 42, "svg.hashsalt": "attention_viz"}  # every size is set where drawn
_SAVING = threading.Lock()  # rcParams are the process's: one figure saved at a time under RC


def thinned(tokens: Sequence[str], length_pt: float, font_pt: float = TICK_PT) -> list[tuple[int, str]]:
    """(position, label) of the tokens an axis of `length_pt` points shows: every k-th, so that labels stand at
    least 1.25 font sizes apart (every one when they fit)."""
    n = len(tokens)
    room = max(1, int(length_pt / (1.25 * font_pt)))
    step = max(1, math.ceil(n / room))
    return [(i, _short(display_token(tokens[i]))) for i in range(0, n, step)]


def _short(label: str) -> str:
    """A label cut to LABEL_CHARS characters with an ellipsis: one long piece must not squeeze every panel."""
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def _panel_size(n_rows: int, n_cols: int, n_q: int, n_k: int) -> tuple[float, float]:
    """(width, height) in inches of one panel: cells square, the grid within a page's width and MAX_HEIGHT."""
    longest = HEAD_WIDTH if n_cols == 1 else min(MAX_PANEL, (PAGE_WIDTH - 1.6) / n_cols)
    scale = max(MIN_PANEL, longest) / max(n_q, n_k)  # inches per cell
    scale = min(scale, MAX_HEIGHT / (n_rows * n_q))  # many layers: shorter panels, not a taller page
    return max(MIN_PANEL, n_k * scale), max(MIN_PANEL * 0.6, n_q * scale)


def _tokens(tokens, n: int, axis: str) -> list[str]:
    if tokens is None:
        return [str(i) for i in range(n)]
    tokens = [str(t) for t in tokens]
    if len(tokens) != n:
        raise ValueError(f"{n} {axis} positions but {len(tokens)} {axis} tokens")
    return tokens


def grid_figure(weights: np.ndarray, query_tokens: Sequence[str] | None, key_tokens: Sequence[str] | None,
                title: str, layers: Sequence[int], heads: Sequence[int], *, mask: np.ndarray | None = None,
                per_head_max: bool = False, cmap: str = WEIGHT_CMAP, limits: tuple[float, float] | None = None,
                bar_label: str = "attention weight") -> Figure:
    """Heads [R, C, Q, K] as one figure: row r is layer layers[r], column c head heads[c].

    mask: [Q, K] bool, True = may attend; the rest (and NaN) is grey. per_head_max: each head's colours run 0 → its
    own max. limits: the colour scale's (low, high) (default 0 → 1).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or w.shape[:2] != (len(layers), len(heads)) or 0 in w.shape:
        raise ValueError(f"weights must be [rows, columns, Q, K] for {len(layers)} layers × {len(heads)} heads, "
                         f"got {list(w.shape)}")
    n_rows, n_cols, n_q, n_k = w.shape
    queries, keys = _tokens(query_tokens, n_q, "query"), _tokens(key_tokens, n_k, "key")
    if mask is not None:
        w = np.where(np.broadcast_to(np.asarray(mask, dtype=bool), (n_q, n_k)), w, np.nan)
    if per_head_max:
        peak = np.nanmax(np.where(np.isnan(w), 0.0, w), axis=(2, 3), keepdims=True)  # (R, C, 1, 1)
        w = w / np.where(peak > 0, peak, 1.0)
        bar_label = "weight / the head's max"
    low, high = limits or (0.0, 1.0)
    colours = matplotlib.colormaps[cmap].with_extremes(bad=MASKED)
    panel_w, panel_h = _panel_size(n_rows, n_cols, n_q, n_k)
    longest_key = max(len(label) for _, label in thinned(keys, panel_w * 72))
    longest_query = max(len(label) for _, label in thinned(queries, panel_h * 72))
    # inches around the panels: the query labels (about 0.06 in a character) and the colour bar across; the title's
    # lines, the axis names and the key labels (turned: about 0.065 in a character) down. Constrained layout then
    # places everything inside the page (tests/draw/test_vector.py checks it)
    key_room = 0.35 + (0.065 * min(longest_key, LABEL_CHARS) if longest_key > 2 else 0.1)
    fig = Figure(figsize=(n_cols * panel_w + 0.9 + 0.06 * min(longest_query, LABEL_CHARS) + 0.25 * (n_rows > 1),
                          n_rows * panel_h + 0.55 + 0.16 * (title.count("\n") + 1) + key_room),
                 layout="constrained")
    fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.03, hspace=0.03)
    # not shared axes: matplotlib's sharing costs time quadratic in the panels (72 heads: ~10 s a file); each panel
    # gets the same ticks instead, labelled on the outer ones
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    image = None
    for r in range(n_rows):
        for c in range(n_cols):
            ax = axes[r, c]
            image = ax.imshow(w[r, c], cmap=colours, vmin=low, vmax=high, interpolation="nearest", aspect="auto")
            ax.tick_params(length=1.5, width=0.4, pad=1, labelsize=TICK_PT)
            for side in ax.spines.values():
                side.set_linewidth(0.4)
            if r == 0 and n_cols > 1:
                ax.set_title(f"head {heads[c]}", fontsize=LABEL_PT, pad=2)
            if c == 0 and n_rows > 1:
                ax.set_ylabel(f"layer {layers[r]}", fontsize=LABEL_PT, labelpad=2)
    x_ticks, y_ticks = thinned(keys, panel_w * 72), thinned(queries, panel_h * 72)
    first = axes[0, 0]
    for (r, c), ax in np.ndenumerate(axes):
        ax.set_xticks([i for i, _ in x_ticks])
        ax.set_yticks([i for i, _ in y_ticks])
        ax.tick_params(labelbottom=r == n_rows - 1, labelleft=c == 0)
    for ax in axes[-1, :]:
        ax.set_xticklabels([label for _, label in x_ticks], rotation=90 if longest_key > 2 else 0,
                           fontsize=TICK_PT, parse_math=False)
    for ax in axes[:, 0]:
        ax.set_yticklabels([label for _, label in y_ticks], fontsize=TICK_PT, parse_math=False)
    if n_rows * n_cols == 1:
        first.set_xlabel("key", fontsize=LABEL_PT)
        first.set_ylabel("query", fontsize=LABEL_PT)
    else:
        fig.supxlabel("key", fontsize=LABEL_PT)
        fig.supylabel("query", fontsize=LABEL_PT)
    bar = fig.colorbar(image, ax=axes, shrink=0.9 if n_rows > 1 else 1.0, aspect=max(12, 20 * n_rows), pad=0.02)
    bar.set_label(bar_label, fontsize=LABEL_PT)
    bar.ax.tick_params(labelsize=TICK_PT, length=1.5, width=0.4)
    bar.outline.set_linewidth(0.4)
    fig.suptitle(title, fontsize=TITLE_PT, parse_math=False)
    return fig


def difference_limits(difference: np.ndarray) -> tuple[float, float]:
    """A colour scale symmetric about 0 that holds every finite value (±1e-6 when all are 0 or none is finite)."""
    finite = np.abs(difference[np.isfinite(difference)])
    largest = float(finite.max()) if finite.size else 0.0
    return -max(largest, 1e-6), max(largest, 1e-6)


def comparison_figure(comparison: Comparison, title: str | None = None) -> Figure:
    """A comparison drawn: one head as a | b | a − b side by side (each with its own tokens; the difference in a's
    positions, grey where the tokens do not align); several heads as the grid of their differences."""
    cmp = comparison
    labels = f"a: {cmp.labels[0]}\nb: {cmp.labels[1]}"
    where = _where(cmp.kind, cmp.layers, cmp.heads)
    limits = difference_limits(cmp.difference)
    mask_a, mask_b = cmp.masks
    if cmp.a.shape[:2] != (1, 1):
        return grid_figure(cmp.difference, *cmp.tokens_a, title or f"{where}: a − b where the tokens align\n{labels}",
                           cmp.layers, cmp.heads, mask=mask_a, cmap=DIFFERENCE_CMAP, limits=limits,
                           bar_label="a − b")
    (qa, ka), (qb, kb) = cmp.tokens_a, cmp.tokens_b
    n_q, n_k = cmp.a.shape[-2:]
    panel_w, panel_h = _panel_size(1, 3, max(n_q, cmp.b.shape[-2]), max(n_k, cmp.b.shape[-1]))
    fig = Figure(figsize=(3 * panel_w + 2.2, panel_h + 1.6 + 0.16 * 3), layout="constrained")
    axes = fig.subplots(1, 3)
    panels = ((cmp.a[0, 0], mask_a, qa, ka, "a", WEIGHT_CMAP, (0.0, 1.0)),
              (cmp.b[0, 0], mask_b, qb, kb, "b", WEIGHT_CMAP, (0.0, 1.0)),
              (cmp.difference[0, 0], mask_a, qa, ka, "a − b (aligned)", DIFFERENCE_CMAP, limits))
    for ax, (w, mask, queries, keys, name, cmap, (low, high)) in zip(axes, panels):
        if mask is not None:  # the cells a side may not attend: grey, as in every other view
            w = np.where(np.asarray(mask, dtype=bool), w, np.nan)
        colours = matplotlib.colormaps[cmap].with_extremes(bad=MASKED)
        image = ax.imshow(w, cmap=colours, vmin=low, vmax=high, interpolation="nearest", aspect="auto")
        x_ticks, y_ticks = thinned(keys, panel_w * 72), thinned(queries, panel_h * 72)
        ax.set_xticks([i for i, _ in x_ticks], [label for _, label in x_ticks], fontsize=TICK_PT, parse_math=False,
                      rotation=90 if max(len(label) for _, label in x_ticks) > 2 else 0)
        ax.set_yticks([i for i, _ in y_ticks], [label for _, label in y_ticks], fontsize=TICK_PT, parse_math=False)
        ax.tick_params(length=1.5, width=0.4, pad=1)
        ax.set_title(name, fontsize=LABEL_PT, pad=2)
        ax.set_xlabel("key", fontsize=LABEL_PT)
        if name != "b":
            bar = fig.colorbar(image, ax=axes[:2] if name == "a" else ax, pad=0.02, shrink=0.9)
            bar.set_label("attention weight" if name == "a" else "a − b", fontsize=LABEL_PT)
            bar.ax.tick_params(labelsize=TICK_PT, length=1.5, width=0.4)
    axes[0].set_ylabel("query", fontsize=LABEL_PT)
    fig.suptitle(title or f"{where}\n{labels}", fontsize=TITLE_PT, parse_math=False)
    return fig


def _where(kind: str, layers: Sequence[int], heads: Sequence[int]) -> str:
    """"encoder self-attention, layer 1, head 3" (or every layer / head) for a title."""
    layer = f"layer {layers[0]}" if len(layers) == 1 else "every layer (rows)"
    head = f"head {heads[0]}" if len(heads) == 1 else "every head (columns)"
    return f"{KINDS[kind]}, {layer}, {head}"


def figure_bytes(fig: Figure, fmt: str, settings: Mapping[str, str] | None = None) -> bytes:
    """The figure as SVG, PDF or PNG bytes (labels as text in SVG and PDF), the settings written in as metadata."""
    if fmt not in FORMATS.values():
        raise ValueError(f"format must be one of {sorted(FORMATS.values())}, got {fmt!r}")
    settings = {str(k): str(v) for k, v in (settings or {}).items()}
    described = "; ".join(f"{k}: {v}" for k, v in settings.items())
    title = fig.get_suptitle().replace("\n", " — ")
    metadata = {
        "svg": {"Title": title, "Description": described, "Creator": "attention_viz", "Date": None},
        "pdf": {"Title": title, "Subject": described, "Creator": "attention_viz", "CreationDate": None},
        "png": {"Title": title, "Software": "attention_viz", **settings},
    }[fmt]
    buffer = io.BytesIO()
    with _SAVING, matplotlib.rc_context(RC):
        fig.savefig(buffer, format=fmt, dpi=PNG_DPI, metadata=metadata, facecolor="white")  # constrained layout:
        # everything inside the page already (tests/draw/test_vector.py), so no second, "tight" drawing
    return buffer.getvalue()


def write_figure(fig: Figure, path: str | Path, settings: Mapping[str, str] | None = None) -> Path:
    """Save a figure where the suffix of `path` says (.svg, .pdf or .png); the path."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"the file name must end in .svg, .pdf or .png (it picks the format), got {path.name!r}")
    path.write_bytes(figure_bytes(fig, fmt, settings))
    return path


def tokens_for(maps: Mapping, kind: str, tokens) -> tuple[list[str] | None, list[str] | None]:
    """(query tokens, key tokens) of a kind: a TextMaps' own, or `tokens`: one list for both, a (queries, keys) pair,
    or {"source": [...], "target": [...]} (each kind takes its axes: encoder-decoder attention's queries are the
    decoder's input, its keys the source); None when neither is given (positions are written)."""
    if tokens is None:
        return maps.tokens(kind) if isinstance(maps, TextMaps) else (None, None)
    if isinstance(tokens, Mapping):
        unknown = set(tokens) - {"source", "target"}
        if unknown:
            raise ValueError(f"tokens as a dict takes 'source' and 'target', not {sorted(unknown)}")
        return TextMaps({}, tokens.get("source", ()), tokens.get("target", ())).tokens(kind)
    if isinstance(tokens, tuple) and len(tokens) == 2 and all(not isinstance(t, str) for t in tokens):
        return list(tokens[0]), list(tokens[1])
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of tokens (or a pair of lists: queries, keys), not one string")
    return list(tokens), list(tokens)


def save_figure(maps: Mapping, key: str, head: int | None, path: str | Path, *, tokens=None,
                settings: Mapping[str, str] | str | None = None, title: str | None = None, index: int = 0,
                per_head_max: bool = False, mask: np.ndarray | None = None) -> Path:
    """Save heads of attention as a figure for a paper: the suffix of `path` picks SVG, PDF or PNG.

    Args:
        maps: AttentionMaps (batch element `index`), a mapping key -> [H, Q, K], or TextMaps (maps_of(model, text):
            its tokens, masks and settings come with it).
        key, head: which heads (core.maps.head_grid): a kind ("encoder.self_attn") with head None is every layer ×
            head, as the exported PNG grid; a map key ("encoder.1.self_attn") with a head is that head; a map key
            with None is that layer's heads; a kind with a head is that head in every layer.
        tokens: a list (queries and keys alike), a (queries, keys) pair, or {"source": ..., "target": ...}; default
            a TextMaps' own, else positions.
        settings: what the maps were made with (a dict, or one line), written into the file's metadata.
        title: the figure's title (default: the kind, layer and head, and the text when known).
        mask: [Q, K] bool (True = may attend); masked cells are grey (default a TextMaps' own mask of the kind).

    Returns the path written.
    """
    grid: HeadGrid = head_grid(maps, key, head, index)
    queries, keys = tokens_for(maps, grid.kind, tokens)
    record = dict(maps.settings) if isinstance(maps, TextMaps) else {}
    if isinstance(settings, str):
        record["settings"] = settings
    elif settings is not None:
        record.update({str(k): str(v) for k, v in settings.items()})
    if mask is None and isinstance(maps, TextMaps):
        mask = maps.masks.get(grid.kind)
    if title is None:
        title = _where(grid.kind, grid.layers, grid.heads)
        if "text" in record:
            title = f"“{record['text']}”" + (f" on {record['model']}" if "model" in record else "") + f"\n{title}"
    fig = grid_figure(grid.weights, queries, keys, title, grid.layers, grid.heads, mask=mask,
                      per_head_max=per_head_max)
    record.update({"attention": KINDS[grid.kind], "layers": " ".join(map(str, grid.layers)),
                   "heads": " ".join(map(str, grid.heads)),
                   "colour scale": "per_head" if per_head_max else "absolute"})
    return write_figure(fig, path, record)


def save_comparison(comparison: Comparison, path: str | Path, title: str | None = None) -> Path:
    """Save a comparison (attention_viz.compare) as a figure; the suffix of `path` picks SVG, PDF or PNG."""
    fig = comparison_figure(comparison, title)
    record = {"a": comparison.labels[0], "b": comparison.labels[1], "attention": KINDS[comparison.kind],
              "layers": " ".join(map(str, comparison.layers)), "heads": " ".join(map(str, comparison.heads))}
    return write_figure(fig, path, record)
