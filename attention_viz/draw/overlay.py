"""Attention over a picture: where one query (the class token, or a patch) looks, drawn over the picture the model
read, one panel per head (or per map: a layer's heads, rollout), saved as SVG, PDF or PNG like the other figures.

    enc = model.encode(picture)                                   # an image model (hub.images)
    out, maps = model.forward(enc.ids[None])
    av.save_overlay(model.modality.seen(enc.ids), maps["encoder.5.self_attn"][0], model.modality, "layer5.png")
    av.save_overlay(model.modality.seen(enc.ids), av.rollout(maps)[0], model.modality, "rollout.png")

The special tokens (class, distillation, registers) have no place in the picture: each panel names the weight the
query gives them beneath it. Axes: n panels, T tokens (specials, then the patches row by row), H x W pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from attention_viz.draw.raster import WEIGHT_CMAP, colour_index, colormap_lut
from attention_viz.draw.vector import LABEL_PT, PAGE_WIDTH, TICK_PT, TITLE_PT, write_figure

ALPHA = 0.6       # the weights' colour over the picture
PANEL = 1.6       # inches a panel's side takes in a grid
COLUMNS = 4       # panels per row at most
MARK_RGB = (255, 64, 64)  # the outline of the patch that looks, in overlay_pixels


def query_rows(weights: np.ndarray, query: int) -> np.ndarray:
    """weights [T, T] (one map) or [n, T, T] (n maps) -> the query's row of each, [n, T]."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim == 2:
        weights = weights[None]
    if weights.ndim != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"weights must be one map [T, T] or maps [n, T, T] of self-attention, got {list(weights.shape)}")
    if not 0 <= query < weights.shape[1]:
        raise ValueError(f"query {query} is not one of the map's {weights.shape[1]} tokens")
    return weights[:, query]


def overlay_pixels(picture: np.ndarray, row: np.ndarray, grid: tuple[int, int], n_special: int,
                   marked: int | None = None, zoom: int = 1) -> np.ndarray:
    """One query's row [T] over the picture [H, W, 3] uint8, as pixels [H·zoom, W·zoom, 3] uint8: each patch coloured
    by its weight ÷ the row's largest on a patch (WEIGHT_CMAP, ALPHA over the picture), the patch `marked` (its index
    among the patches) outlined. Every pixel stays where the model saw it (zoomed), so a click finds its patch."""
    rows, columns = grid
    if row.shape != (n_special + rows * columns,):
        raise ValueError(f"the row has {row.shape[0]} weights, not {n_special} special tokens and {rows} x {columns} "
                         "patches")
    weights = np.asarray(row[n_special:], dtype=np.float64).reshape(grid)
    top = weights.max()
    colours = colormap_lut()[colour_index(weights / top if top > 0 else weights)]  # (rows, columns, 3)
    height, width = picture.shape[:2]
    cover = np.repeat(np.repeat(colours, height // rows, axis=0), width // columns, axis=1)  # (H, W, 3)
    blended = np.rint(ALPHA * cover + (1 - ALPHA) * picture.astype(np.float64)).astype(np.uint8)
    image = np.repeat(np.repeat(blended, zoom, axis=0), zoom, axis=1)  # (H·zoom, W·zoom, 3)
    if marked is not None:
        side_y, side_x = height // rows * zoom, width // columns * zoom
        top_y, left = marked // columns * side_y, marked % columns * side_x
        edge = max(2, zoom)
        for y0, y1, x0, x1 in ((top_y, top_y + edge, left, left + side_x), (top_y + side_y - edge, top_y + side_y,
                               left, left + side_x), (top_y, top_y + side_y, left, left + edge),
                               (top_y, top_y + side_y, left + side_x - edge, left + side_x)):
            image[y0:y1, x0:x1] = MARK_RGB
    return image


def overlay_figure(picture: np.ndarray, rows: np.ndarray, grid: tuple[int, int], specials: Sequence[str],
                   titles: Sequence[str], title: str) -> Figure:
    """picture [H, W, 3] uint8, rows [n, T] (T = len(specials) + grid's patches) -> a figure of n panels, each the
    patches' weights (scaled to the panel's largest) over the picture, the specials' weights written beneath."""
    n, T = rows.shape
    n_special = len(specials)
    if T != n_special + grid[0] * grid[1]:
        raise ValueError(f"the maps have {T} tokens, but the picture's {grid[0]} x {grid[1]} patches and "
                         f"{n_special} special tokens make {n_special + grid[0] * grid[1]}")
    columns = min(COLUMNS, n)
    lines = 1 + (n_special > 0) * ((n_special + 2) // 3)
    fig = Figure(figsize=(min(PAGE_WIDTH, PANEL * columns + 0.9),
                          (PANEL + 0.15 * lines) * -(-n // columns) + 0.45))
    fig.suptitle(title, fontsize=TITLE_PT)
    height, width = picture.shape[:2]
    for i, row in enumerate(rows):
        ax = fig.add_subplot(-(-n // columns), columns, i + 1)
        patches = row[n_special:].reshape(grid)
        top = patches.max()
        ax.imshow(picture, extent=(0, width, height, 0))
        image = ax.imshow(patches / top if top > 0 else patches, cmap=WEIGHT_CMAP, vmin=0, vmax=1, alpha=ALPHA,
                          extent=(0, width, height, 0), interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(" · ".join(filter(None, (titles[i], f"top {top:.2f}"))), fontsize=LABEL_PT)
        if n_special:
            named = [f"{name} {weight:.2f}" for name, weight in zip(specials, row[:n_special])]
            ax.set_xlabel("\n".join(" · ".join(named[j:j + 3]) for j in range(0, n_special, 3)), fontsize=TICK_PT)
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    bar = fig.colorbar(image, ax=fig.axes, fraction=0.04, pad=0.02)
    bar.set_label("weight on the patch ÷ the panel's top", fontsize=TICK_PT)
    bar.ax.tick_params(labelsize=TICK_PT)
    return fig


def save_overlay(picture: np.ndarray, weights, patches, path: str | Path, *, query: int = 0,
                 titles: Sequence[str] | None = None, title: str | None = None,
                 settings: dict[str, str] | None = None) -> Path:
    """Save where `query` looks (default 0: the class token where the model has one) over the picture.

    Args:
        picture: [H, W, 3] uint8, the picture as the model read it (hub.images.Patches.seen).
        weights: one map [T, T] or several [n, T, T] (a layer's heads: maps[key][0]; rollout(maps)[0]), a tensor
            or an array; each is a panel.
        patches: the model's hub.images.Patches (anything with its `grid` and `specials`).
        query: the token whose row is drawn: a special's index, or len(specials) + r·columns + c for patch (r, c).
        titles: each panel's (default "H0", "H1", ... for several maps, "" for one).
        title: the figure's (default: which token looks).
    Returns the path written (its suffix picks SVG, PDF or PNG).
    """
    if hasattr(weights, "detach"):
        weights = weights.detach().float().cpu().numpy()
    rows = query_rows(weights, query)
    tokens = list(patches.specials) + [f"patch {r},{c}" for r in range(patches.grid[0]) for c in range(patches.grid[1])]
    if titles is None:
        titles = [f"H{h}" for h in range(len(rows))] if len(rows) > 1 else [""]
    if len(titles) != len(rows):
        raise ValueError(f"{len(titles)} titles for {len(rows)} panels")
    picture = np.asarray(picture)
    if picture.dtype != np.uint8 or picture.ndim != 3 or picture.shape[2] != 3:
        raise ValueError(f"picture must be uint8 [H, W, 3], got {picture.dtype} {list(picture.shape)}")
    if query >= len(tokens):
        raise ValueError(f"query {query} is not one of the {len(tokens)} tokens")
    fig = overlay_figure(picture, rows, patches.grid, patches.specials, titles,
                         title or f"where {tokens[query]} looks")
    return write_figure(fig, path, {"query": tokens[query], **(settings or {})})
