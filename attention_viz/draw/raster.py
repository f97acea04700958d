"""Attention as pixels: the grid of every head and one head in detail, drawn with numpy and PIL.

These are the images the app redraws on every interaction, so no matplotlib figure is built:
colours come from a 256-entry table of the colormap, text from PIL with DejaVu Sans (shipped
with matplotlib), and the values written in cells are pasted from glyph tiles rendered once.
Timings against matplotlib: see docs/benchmarks.md.

Weights use viridis, fixed 0 → 1 (or 0 → a head's maximum); masked positions are grey.
Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

WEIGHT_CMAP = "viridis"  # attention weights, 0 → 1
MASKED_RGB = (200, 200, 200)  # masked positions and non-finite values (#c8c8c8)
WHITE = 255  # gaps and margins: one grey level, so an image starts as one np.full
GRID_LEVELS = 252  # colormap steps in the grid's palette; then white, masked grey and ink
WHITE_INDEX, MASKED_INDEX, INK_INDEX = GRID_LEVELS, GRID_LEVELS + 1, GRID_LEVELS + 2
INK = (0, 0, 0)
LABEL_MARGIN = (14, 24)  # (top, left) pixels taken by grid labels "H0" / "L0"
MAX_GRID_WIDTH = 1024  # automatic cell size keeps the grid about this wide
MAX_GRID_PIXELS = 25_000_000  # ~75 MB of RGB: beyond this, show fewer heads or a smaller cell
MAX_CELL = 8
ANNOTATE_MAX = 24  # head_image writes values in cells up to 24 × 24
VALUE_CELL = 32  # pixels per cell when values are written: "0.00" at VALUE_FONT is 22 px wide
VALUE_FONT = 10
HEAD_SIDE = 768  # without values, cells shrink so the longer side of the map is about this many pixels
TEXT_FONT = 12
MAX_TICK_LABELS = 40
COLORBAR = (12, 14)  # (gap before, width of) the colour bar, pixels


# ---------------------------------------------------------------------------- colours and text


@lru_cache(maxsize=16)
def colormap_lut(cmap: str = WEIGHT_CMAP) -> np.ndarray:
    """Read-only [256, 3] uint8 table: row i is the colour of value i/255."""
    lut = colormap_steps(cmap, 256)
    lut.setflags(write=False)
    return lut


def colormap_steps(cmap: str, levels: int) -> np.ndarray:
    """[levels, 3] uint8: the colormap at `levels` evenly spaced values from 0 to 1."""
    if cmap not in matplotlib.colormaps:
        raise ValueError(f"unknown colormap {cmap!r}")
    rgba = matplotlib.colormaps[cmap](np.linspace(0.0, 1.0, levels))  # (levels, 4) floats in [0, 1]
    return np.rint(rgba[:, :3] * 255).astype(np.uint8)


def colour_index(values: np.ndarray, vmax: float = 1.0, levels: int = 256) -> np.ndarray:
    """uint8 step 0 .. levels - 1 of the colormap for each value in [0, vmax] (clipped); NaN gives 0 (callers grey it)."""
    scaled = values * ((levels - 1) / vmax) + 0.5
    return np.clip(scaled, 0.0, levels - 1, out=np.zeros_like(values), where=~np.isnan(values)).astype(np.uint8)


def is_light(rgb: np.ndarray) -> np.ndarray:
    """Whether uint8 colours [..., 3] are light (luma over half): dark ink goes on them, light ink on the others."""
    return rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32) > 127.5


@lru_cache(maxsize=8)
def font(size: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans at `size` pixels: matplotlib's own font, so every glyph the app writes (√, ᵀ, −, ␣) exists."""
    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"), size)


def display_token(token: str) -> str:
    """A token as a visible label: a space as ␣, the empty string as ∅, newline and tab as arrows."""
    token = str(token)
    return {" ": "␣", "": "∅", "\n": "↵", "\t": "⇥"}.get(token, token)


def cell_labels(values: np.ndarray, fmt: str) -> np.ndarray:
    """The text written in each cell: values formatted with fmt (minus as −), "−∞" for −∞, "" for NaN."""
    def label(v: float) -> str:
        return "−∞" if v == -np.inf else format(v, fmt).replace("-", "−") if np.isfinite(v) else ""

    return np.array([label(v) for v in np.ravel(values)], dtype=object).reshape(np.shape(values))


@lru_cache(maxsize=1024)
def _glyph_tile(text: str, cell: int, size: int) -> np.ndarray:
    """Coverage [cell, cell] uint8 (255 = ink) of `text` centred in a cell: drawn once, pasted many times."""
    tile = Image.new("L", (cell, cell), 0)
    ImageDraw.Draw(tile).text((cell / 2, cell / 2), text, fill=255, font=font(size), anchor="mm")
    coverage = np.asarray(tile)  # (cell, cell) uint8, 255 = fully covered
    coverage.setflags(write=False)
    return coverage


@lru_cache(maxsize=512)
def _rotated(text: str, size: int) -> Image.Image:
    """`text` turned 90° anticlockwise, black on transparent, to paste along a vertical axis (never modified)."""
    left, top, right, bottom = font(size).getbbox(text)
    label = Image.new("RGBA", (right - left + 2, bottom - top + 2), (0, 0, 0, 0))
    ImageDraw.Draw(label).text((1 - left, 1 - top), text, fill=INK, font=font(size))
    return label.transpose(Image.Transpose.ROTATE_90)


# ---------------------------------------------------------------------------- grid


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

def to_numpy(values) -> np.ndarray:
    """A numpy array from an array-like or a torch tensor (detached, on the CPU), without importing torch."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values)


def as_matrix(values: np.ndarray, name: str) -> np.ndarray:
    """values as float64 [rows, cols], dropping leading axes of size 1."""
    m = to_numpy(values).astype(np.float64)
    while m.ndim > 2 and m.shape[0] == 1:
        m = m[0]
    if m.ndim != 2:
        raise ValueError(f"{name} must be a [Q, K] matrix (select one batch item and head), got {m.shape}")
    return m


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


@lru_cache(maxsize=16)
def grid_palette(cmap: str = WEIGHT_CMAP) -> np.ndarray:
    """The grid's 256 colours, read-only uint8 [256, 3]: GRID_LEVELS steps of the colormap over 0 → 1, then white
    (gaps and margins), the masked grey and the ink of the labels. One byte per pixel: a PNG of indices encodes
    faster than RGB (see docs/benchmarks.md), and 252 steps of viridis are indistinguishable from 256."""
    palette = np.zeros((256, 3), dtype=np.uint8)
    palette[:GRID_LEVELS] = colormap_steps(cmap, GRID_LEVELS)
    palette[WHITE_INDEX], palette[MASKED_INDEX], palette[INK_INDEX] = (WHITE,) * 3, MASKED_RGB, INK
    palette.setflags(write=False)
    return palette


def grid_indices(
    weights: np.ndarray,
    cell: int | None = None,
    gap: int = 2,
    per_head_max: bool = False,
    labels: bool = False,
) -> np.ndarray:
    """Every head of one attention kind as one image of grid_palette indices: layer rows × head columns.

    Args:
        weights: [layers, heads, Q, K] in [0, 1] (values outside are clipped; NaN is grey).
            [heads, Q, K] and [Q, K] are read as one layer / one head.
        cell: pixels per weight; None fits the grid to about 1024 px wide (1 to 8).
        gap: white pixels between tiles.
        per_head_max: stretch each head's colours to 0 → its own max weight.
        labels: write "L0".. left of the rows and "H0".. above the columns (adds LABEL_MARGIN).

    Shape: returns uint8 [height, width] with height, width = grid_layout(...).shape[:2].
    """
    layout = grid_layout(np.shape(weights), cell, gap, labels)  # checks the size before any copy
    w = to_numpy(weights).astype(np.float32)
    w = w.reshape((1,) * (4 - w.ndim) + w.shape)  # (L, H, Q, K)
    if per_head_max:
        peak = np.where(np.isnan(w), 0.0, w).max(axis=(2, 3), keepdims=True)  # (L, H, 1, 1)
        w = w / np.where(peak > 0, peak, 1.0)
    index = colour_index(w, levels=GRID_LEVELS)  # (L, H, Q, K): 0 .. GRID_LEVELS - 1
    index[np.isnan(w)] = MASKED_INDEX
    image = np.full(layout.shape[:2], WHITE_INDEX, dtype=np.uint8)
    c, n_q, n_k = layout.cell, layout.n_q, layout.n_k
    for layer in range(layout.n_layers):
        for head in range(layout.n_heads):
            rows = index[layer, head].repeat(c, axis=1).reshape(n_q, 1, n_k * c)  # (Q, 1, K·c): one pixel row each
            y, x = layout.origin(layer, head)
            tile = image[y : y + n_q * c, x : x + n_k * c]  # (Q·c, K·c), a view
            tile.shape = (n_q, c, n_k * c)  # still a view (setting .shape never copies)
            tile[...] = rows  # each query's row of pixels, c times
    if labels:
        top, left = _grid_labels(layout)
        image[: layout.top] = top
        image[:, : layout.left] = left
    return image


def grid_image(
    weights: np.ndarray,
    cell: int | None = None,
    gap: int = 2,
    cmap: str = WEIGHT_CMAP,
    per_head_max: bool = False,
    labels: bool = False,
) -> np.ndarray:
    """grid_indices as RGB, uint8 [height, width, 3], in `cmap` (a matplotlib colormap name)."""
    return grid_palette(cmap)[grid_indices(weights, cell, gap, per_head_max, labels)]


@lru_cache(maxsize=32)
def _grid_labels(layout: GridLayout) -> tuple[np.ndarray, np.ndarray]:
    """The label margins of a labelled grid as palette indices, drawn once per layout: "H<j>" above the columns,
    "L<i>" beside the rows, in ink without anti-aliasing (the palette has one ink)."""
    height, width, _ = layout.shape
    top = Image.new("L", (width, layout.top), 255)
    left = Image.new("L", (layout.left, height), 255)
    small = ImageFont.load_default(size=11)
    for canvas, places in ((top, [((layout.origin(0, h)[1], 0), f"H{h}") for h in range(layout.n_heads)]),
                           (left, [((1, layout.origin(l, 0)[0]), f"L{l}") for l in range(layout.n_layers)])):
        draw = ImageDraw.Draw(canvas)
        draw.fontmode = "1"  # no anti-aliasing: every pixel is ink or paper
        for xy, text in places:
            draw.text(xy, text, fill=0, font=small)
    strips = tuple(np.where(np.asarray(canvas) < 128, INK_INDEX, WHITE_INDEX).astype(np.uint8) for canvas in (top, left))
    for strip in strips:
        strip.setflags(write=False)
    return strips


# ---------------------------------------------------------------------------- one head


@dataclass(frozen=True)
class HeadLayout:
    """Pixel geometry of head_image: the map's top-left corner and its cell size."""

    top: int
    left: int
    cell: int
    n_q: int
    n_k: int

    def cell_at(self, x: int, y: int) -> tuple[int, int] | None:
        """(query, key) under pixel (x, y); None outside the map."""
        i, j = (y - self.top) // self.cell, (x - self.left) // self.cell
        return (i, j) if 0 <= i < self.n_q and 0 <= j < self.n_k and y >= self.top and x >= self.left else None


def head_cell(n_q: int, n_k: int, annotate: bool) -> int:
    """Pixels per weight: VALUE_CELL when values are written, else about HEAD_SIDE over the longer side."""
    return VALUE_CELL if annotate else max(1, min(VALUE_CELL, HEAD_SIDE // max(n_q, n_k)))


def tick_labels(tokens: list[str], n: int, axis: str) -> list[tuple[int, str]]:
    """(position, label) of the tokens an axis shows: all of them, or every k-th past MAX_TICK_LABELS."""
    if len(tokens) != n:
        raise ValueError(f"{n} positions on the {axis} axis but {len(tokens)} tokens")
    step = math.ceil(n / MAX_TICK_LABELS)
    return [(i, display_token(tokens[i])) for i in range(0, n, step)]


def head_image(
    weights: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    annotate: bool | None = None,
    mask: np.ndarray | None = None,
    per_head_max: bool = False,
    scale: int = 1,
) -> np.ndarray:
    """One head's weights [Q, K] as an RGB image: tokens on both axes, a colour bar and, when small, values in cells.

    Args:
        weights: [Q, K] attention weights in [0, 1] (leading axes of size 1 are dropped).
        title: one or more lines written above the map.
        annotate: write each weight in its cell; None does so up to ANNOTATE_MAX × ANNOTATE_MAX.
        mask: optional bool [Q, K] in the package's convention, True = may attend; the
            blocked positions (False) are drawn grey, without a value.
        per_head_max: colours run 0 → this head's max instead of 0 → 1.
        scale: every length and font times this (2 for a file read on its own: the page's size is small there).

    Shape: returns uint8 [height, width, 3]; head_layout(...) gives where the map lies in it.
    """
    w = as_matrix(weights, "weights")  # (Q, K)
    if mask is not None:
        w = np.where(np.broadcast_to(to_numpy(mask).astype(bool), w.shape), w, np.nan)
    n_q, n_k = w.shape
    x_ticks, y_ticks = tick_labels(key_tokens, n_k, "x"), tick_labels(query_tokens, n_q, "y")
    annotate = max(n_q, n_k) <= ANNOTATE_MAX if annotate is None else annotate
    peak = float(np.nanmax(w)) if np.isfinite(w).any() else 0.0
    vmax = peak if per_head_max and peak > 0 else 1.0
    layout = head_layout(w.shape, query_tokens, key_tokens, title, annotate, scale)
    cell, s = layout.cell, scale
    bar_gap, bar_width = COLORBAR[0] * s, COLORBAR[1] * s

    # The map: one colour per weight, repeated to cell × cell pixels.
    index = colour_index(w.astype(np.float32), vmax)  # (Q, K)
    pixels = colormap_lut(WEIGHT_CMAP)[index]  # (Q, K, 3)
    pixels[np.isnan(w)] = MASKED_RGB
    body = pixels.repeat(cell, axis=0).repeat(cell, axis=1)  # (Q·cell, K·cell, 3)

    width = layout.left + n_k * cell + bar_gap + bar_width + _colorbar_text_width(s)
    height = layout.top + n_q * cell + _bottom_margin(x_ticks, s)
    image = np.full((height, width, 3), WHITE, dtype=np.uint8)
    image[layout.top : layout.top + n_q * cell, layout.left : layout.left + n_k * cell] = body
    bar_left = layout.left + n_k * cell + bar_gap
    _paint_colorbar(image, layout.top, bar_left, n_q * cell, bar_width)

    canvas = Image.fromarray(image)
    if annotate:
        _write_values(canvas, w, pixels, layout, VALUE_FONT * s)
    draw = ImageDraw.Draw(canvas)
    text_font = font(TEXT_FONT * s)
    draw.multiline_text((layout.left + n_k * cell / 2, 4 * s), title, fill=INK, font=text_font, anchor="ma",
                        align="center", spacing=2 * s)
    for i, label in y_ticks:  # query tokens, right-aligned left of their row
        draw.text((layout.left - 4 * s, layout.top + i * cell + cell / 2), label, fill=INK, font=text_font, anchor="rm")
    map_bottom = layout.top + n_q * cell
    vertical = _vertical_keys(x_ticks)
    for j, label in x_ticks:  # key tokens, under their column (turned when long)
        x = layout.left + j * cell + cell / 2
        if vertical:
            turned = _rotated(label, TEXT_FONT * s)
            canvas.paste(turned, (round(x - turned.width / 2), map_bottom + 4 * s), turned)
        else:
            draw.text((x, map_bottom + 4 * s), label, fill=INK, font=text_font, anchor="ma")
    draw.text((layout.left + n_k * cell / 2, height - 4 * s), "key (position)", fill=INK, font=text_font, anchor="md")
    axis = _rotated("query (position)", TEXT_FONT * s)
    canvas.paste(axis, (2 * s, round(layout.top + n_q * cell / 2 - axis.height / 2)), axis)
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = layout.top + n_q * cell - 1 - fraction * (n_q * cell - 1)
        draw.text((bar_left + bar_width + 4 * s, y), f"{fraction * vmax:.2g}", fill=INK, font=text_font, anchor="lm")
    return np.asarray(canvas).copy()


def head_layout(shape: tuple[int, int], query_tokens: list[str], key_tokens: list[str], title: str,
                annotate: bool, scale: int = 1) -> HeadLayout:
    """Where head_image puts the map: below the title, right of the query labels and the axis name."""
    n_q, n_k = shape
    text_font = font(TEXT_FONT * scale)
    y_labels = [label for _, label in tick_labels(query_tokens, n_q, "y")]
    label_width = max(text_font.getlength(label) for label in y_labels)
    line = (TEXT_FONT + 4) * scale
    top = 8 * scale + line * (title.count("\n") + 1)
    return HeadLayout(top=top, left=round(label_width) + line + 10 * scale,
                      cell=head_cell(n_q, n_k, annotate) * scale, n_q=n_q, n_k=n_k)


def _vertical_keys(ticks: list[tuple[int, str]]) -> bool:
    return max(len(label) for _, label in ticks) > 2


def _bottom_margin(ticks: list[tuple[int, str]], scale: int = 1) -> int:
    """Pixels under the map: the key labels (turned when long) and the axis name."""
    size = TEXT_FONT * scale
    labels = [label for _, label in ticks]
    tall = max(font(size).getlength(label) for label in labels) if _vertical_keys(ticks) else size + 2 * scale
    return round(tall) + 8 * scale + size + 10 * scale


def _colorbar_text_width(scale: int = 1) -> int:
    return round(font(TEXT_FONT * scale).getlength("0.75")) + 12 * scale


def _paint_colorbar(image: np.ndarray, top: int, left: int, height: int, width: int = COLORBAR[1]) -> None:
    """A vertical colour bar, 0 at the bottom and the top colour at the top, framed in black."""
    rows = np.linspace(255, 0, height).round().astype(np.uint8)  # (height,) top row is the highest value
    image[top : top + height, left : left + width] = colormap_lut(WEIGHT_CMAP)[rows][:, None, :]
    image[top : top + height, [left - 1, left + width]] = INK
    image[[top - 1, top + height], left - 1 : left + width + 1] = INK


def _write_values(canvas: Image.Image, w: np.ndarray, colours: np.ndarray, layout: HeadLayout,
                  size: int = VALUE_FONT) -> None:
    """Write each weight ("0.42") in its cell, dark on light colours and light on dark; NaN cells stay bare.

    The glyphs of each distinct value are drawn once; the cells' coverage is assembled with numpy into one
    mask per ink colour, and PIL blends each ink through its mask in one pass.
    """
    n_q, n_k, cell = *w.shape, layout.cell
    labels = cell_labels(w, ".2f").ravel()  # (Q·K,)
    distinct = sorted(set(labels) - {""})
    if not distinct:
        return
    tiles = np.stack([np.zeros((cell, cell), np.uint8)] + [_glyph_tile(t, cell, size) for t in distinct])
    which = np.where(labels == "", 0, np.searchsorted(distinct, labels) + 1).reshape(n_q, n_k)  # (Q, K); 0 = none
    light = is_light(colours)  # (Q, K)
    for ink, cells in ((INK, light), ((255, 255, 255), ~light)):
        coverage = tiles[np.where(cells, which, 0)]  # (Q, K, cell, cell)
        mask = Image.fromarray(np.ascontiguousarray(coverage.transpose(0, 2, 1, 3).reshape(n_q * cell, n_k * cell)))
        canvas.paste(ink, (layout.left, layout.top), mask)
