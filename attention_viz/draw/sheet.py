"""The grid of every layer × head as a sheet read on its own (the export's PNG): a title, the layers and heads named,
the query tokens beside the first column of tiles, the key tokens under the last row, and a colour bar.

The page draws its own grid; this one is for a file opened in an image viewer or put in a slide, where nothing
around it says what the rows, columns and colours are. Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from attention_viz.draw.raster import (
    COLORBAR,
    INK,
    TEXT_FONT,
    WHITE,
    _paint_colorbar,
    _rotated,
    display_token,
    font,
    grid_indices,
    grid_layout,
    grid_palette,
    to_numpy,
)

SHEET_GAP = 10  # pixels between tiles: room for nothing but air
MIN_LABEL_CELL = 10  # a token is written beside every row (under every column) at least this many pixels apart


def every_nth(tokens: list[str], cell: int, size: int) -> list[tuple[int, str]]:
    """(position, label) of the tokens written along an axis of `cell`-pixel steps: as many as fit without overlap."""
    step = max(1, math.ceil(max(MIN_LABEL_CELL, size + 2) / cell))
    return [(i, display_token(tokens[i])) for i in range(0, len(tokens), step)]


def grid_sheet(weights: np.ndarray, query_tokens: list[str], key_tokens: list[str], title: str,
               cell: int | None = None, per_head_max: bool = False, scale: int = 1) -> np.ndarray:
    """Every head of one kind [L, H, Q, K] as a labelled RGB image, uint8 [height, width, 3].

    Args:
        weights: [layers, heads, Q, K] in [0, 1]; NaN (masked) is grey.
        query_tokens, key_tokens: the labels of the Q rows and K columns of each tile.
        title: one or more lines written above the grid.
        cell: pixels per weight (None: grid_layout's choice); scale: every font and margin times this.
        per_head_max: each head's colours run 0 → its own max (the colour bar says so).
    """
    w = to_numpy(weights).astype(np.float32)
    if w.ndim != 4:
        raise ValueError(f"weights must be [layers, heads, Q, K], got {w.shape}")
    n_layers, n_heads, n_q, n_k = w.shape
    if len(query_tokens) != n_q or len(key_tokens) != n_k:
        raise ValueError(f"{n_q} × {n_k} maps but {len(query_tokens)} query and {len(key_tokens)} key tokens")
    s, size = scale, TEXT_FONT * scale
    gap = SHEET_GAP * s
    layout = grid_layout(w.shape, cell, gap)
    tiles = grid_palette()[grid_indices(w, layout.cell, gap, per_head_max)]  # (height, width, 3)
    c, text_font = layout.cell, font(size)
    rows, columns = every_nth(list(query_tokens), c, size), every_nth(list(key_tokens), c, size)
    line = size + 4 * s
    query_width = max(text_font.getlength(label) for _, label in rows)
    layer_width = text_font.getlength(f"L{n_layers - 1}")
    vertical = max(len(label) for _, label in columns) > 2
    key_height = max(text_font.getlength(label) for _, label in columns) if vertical else size
    bar_gap, bar_width = COLORBAR[0] * s * 2, COLORBAR[1] * s
    top = 8 * s + line * (title.count("\n") + 1) + line  # the title, then "H0" .. above the columns
    left = round(layer_width + query_width) + 16 * s + line  # "L0", the query tokens, the axis name
    bar_text = round(text_font.getlength("each head's max" if per_head_max else "0.75")) + 8 * s
    height = top + tiles.shape[0] + 6 * s + round(key_height) + 8 * s + line
    width = left + tiles.shape[1] + bar_gap + bar_width + bar_text
    image = np.full((height, width, 3), WHITE, dtype=np.uint8)
    image[top : top + tiles.shape[0], left : left + tiles.shape[1]] = tiles
    bar_left = left + tiles.shape[1] + bar_gap
    _paint_colorbar(image, top, bar_left, tiles.shape[0], bar_width)

    canvas = Image.fromarray(image)
    draw = ImageDraw.Draw(canvas)
    middle = left + tiles.shape[1] / 2
    draw.multiline_text((middle, 4 * s), title, fill=INK, font=text_font, anchor="ma", align="center", spacing=2 * s)
    for head in range(n_heads):
        x = left + layout.origin(0, head)[1] + n_k * c / 2
        draw.text((x, top - 4 * s), f"H{head}", fill=INK, font=text_font, anchor="md")
    for layer in range(n_layers):
        y0 = top + layout.origin(layer, 0)[0]
        draw.text((line, y0 + n_q * c / 2), f"L{layer}", fill=INK, font=text_font, anchor="lm")
        for i, label in rows:  # the query tokens beside the first tile of each layer
            draw.text((left - 4 * s, y0 + i * c + c / 2), label, fill=INK, font=text_font, anchor="rm")
    bottom = top + tiles.shape[0] + 6 * s
    for head in range(n_heads):  # the key tokens under each tile of the last layer
        x0 = left + layout.origin(0, head)[1]
        for j, label in columns:
            x = x0 + j * c + c / 2
            if vertical:
                turned = _rotated(label, size)
                canvas.paste(turned, (round(x - turned.width / 2), bottom), turned)
            else:
                draw.text((x, bottom), label, fill=INK, font=text_font, anchor="ma")
    draw.text((middle, height - 4 * s), "key (position) in each tile", fill=INK, font=text_font, anchor="md")
    axis = _rotated("query (position)", size)
    canvas.paste(axis, (2 * s, round(top + tiles.shape[0] / 2 - axis.height / 2)), axis)
    marks = ((0.0, "0"), (1.0, "each head's max")) if per_head_max else \
        tuple((f, f"{f:.2g}") for f in (0.0, 0.25, 0.5, 0.75, 1.0))
    for fraction, label in marks:
        y = top + tiles.shape[0] - 1 - fraction * (tiles.shape[0] - 1)
        draw.text((bar_left + bar_width + 4 * s, y), label, fill=INK, font=text_font, anchor="lm")
    return np.asarray(canvas).copy()
