"""The exported grid as a sheet read on its own: tokens on its axes, layers and heads named, a colour bar."""

import numpy as np
import pytest

from attention_viz.draw import raster
from attention_viz.draw.sheet import grid_sheet

LUT = raster.colormap_lut(raster.WEIGHT_CMAP)  # (256, 3)


def weights(n_layers=2, n_heads=3, n_q=4, n_k=5, seed=0) -> np.ndarray:
    w = np.random.default_rng(seed).random((n_layers, n_heads, n_q, n_k))
    return w / w.sum(-1, keepdims=True)  # (L, H, Q, K), rows sum to 1


def ink(image: np.ndarray) -> np.ndarray:
    return (image < 100).all(axis=-1)  # (height, width): dark text pixels


def test_the_sheet_holds_the_tiles_and_writes_tokens_names_and_a_colour_bar():
    w = weights()
    bare = raster.grid_image(w, cell=16, gap=10)  # (height, width, 3): the tiles alone
    sheet = grid_sheet(w, list("abcd"), list("vwxyz"), "a title", cell=16)
    assert sheet.dtype == np.uint8 and sheet.shape[0] > bare.shape[0] + 40 and sheet.shape[1] > bare.shape[1] + 80
    # the tiles appear whole somewhere in the sheet (searched along the first tile row's colours)
    rows, cols = np.nonzero((sheet == bare[0, 0]).all(-1))
    assert any((sheet[r:r + bare.shape[0], c:c + bare.shape[1]] == bare).all() for r, c in zip(rows[:50], cols[:50]))
    # a colour bar: a column holding viridis' top colour above its bottom one
    top, bottom = (np.nonzero((sheet == LUT[i]).all(-1)) for i in (255, 0))
    assert len(top[0]) and len(bottom[0]) and top[0].min() < bottom[0].max()
    # text left of the tiles (query tokens, L0 / L1) and under them (key tokens): more than the bare grid's labels
    left = ink(sheet[:, : sheet.shape[1] // 8]).sum()
    under = ink(sheet[-40:]).sum()
    assert left > 100 and under > 100, (left, under)


def test_the_sheet_thins_out_tokens_it_cannot_fit_and_refuses_tokens_that_disagree():
    w = weights(n_q=40, n_k=40)
    dense = grid_sheet(w, [str(i % 10) for i in range(40)], [str(i % 10) for i in range(40)], "t", cell=4)
    assert dense.shape[0] > 2 * 40 * 4
    with pytest.raises(ValueError, match="query and"):
        grid_sheet(weights(), list("abc"), list("vwxyz"), "t")
    with pytest.raises(ValueError, match="layers, heads"):
        grid_sheet(np.ones((3, 3)), list("abc"), list("abc"), "t")


def test_a_head_drawn_at_scale_two_is_twice_as_large():
    w = weights()[0, 0]  # (Q, K)
    one = raster.head_image(w, list("abcd"), list("vwxyz"), "title")
    two = raster.head_image(w, list("abcd"), list("vwxyz"), "title", scale=2)
    assert abs(two.shape[0] - 2 * one.shape[0]) <= 8 and abs(two.shape[1] - 2 * one.shape[1]) <= 8, (one.shape, two.shape)
    layout = raster.head_layout(w.shape, list("abcd"), list("vwxyz"), "title", True, 2)
    assert layout.cell == 2 * raster.VALUE_CELL
    # each cell is its weight's colour where no digit is written (the cell's corner)
    y, x = layout.top + 1, layout.left + 1
    assert (two[y, x] == LUT[raster.colour_index(np.float32(w[0, 0]))]).all()
