"""Attention over a picture (draw.overlay): the query's row of each map laid on the patch grid row by row, the special
tokens' weights named beneath, bad shapes refused with what was expected."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from attention_viz.draw.overlay import overlay_figure, query_rows, save_overlay

PATCHES = SimpleNamespace(grid=(2, 3), specials=("[CLS]", "[REG0]"))  # T = 2 + 6


def test_each_patch_weight_lands_on_its_row_and_column_and_the_specials_are_named():
    T = 8
    maps = np.zeros((2, T, T))
    maps[0, 0, 2 + 1 * 3 + 2] = 0.5  # head 0: [CLS] looks at patch (1, 2)
    maps[0, 0, 1] = 0.5              # and at its register
    maps[1, 0, 2 + 0 * 3 + 0] = 1.0  # head 1: at patch (0, 0)
    picture = np.full((20, 30, 3), 128, np.uint8)
    fig = overlay_figure(picture, query_rows(maps, 0), PATCHES.grid, PATCHES.specials, ["H0", "H1"], "t")
    panels = [ax for ax in fig.axes if ax.images and len(ax.images) == 2]
    first = np.asarray(panels[0].images[1].get_array())
    assert first.shape == (2, 3) and first[1, 2] == 1.0 and first.sum() == 1.0  # scaled to the panel's top
    assert np.asarray(panels[1].images[1].get_array())[0, 0] == 1.0
    assert panels[0].get_xlabel() == "[CLS] 0.00 · [REG0] 0.50"
    assert panels[0].get_title() == "H0 · top 0.50"


def test_a_saved_overlay_names_its_query_and_bad_shapes_are_refused(tmp_path):
    maps = np.full((8, 8), 1 / 8)
    path = save_overlay(np.zeros((16, 24, 3), np.uint8), maps, PATCHES, tmp_path / "o.png", query=2 + 4)
    from PIL import Image

    assert Image.open(path).text["query"] == "patch 1,1"
    with pytest.raises(ValueError, match="10 tokens, but the picture's 2 x 3 patches and 2 special tokens make 8"):
        save_overlay(np.zeros((16, 24, 3), np.uint8), np.ones((10, 10)), PATCHES, tmp_path / "x.png")
    with pytest.raises(ValueError, match="query 9 is not one of"):
        save_overlay(np.zeros((16, 24, 3), np.uint8), maps, PATCHES, tmp_path / "x.png", query=9)
    with pytest.raises(ValueError, match="uint8"):
        save_overlay(np.zeros((16, 24, 3)), maps, PATCHES, tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"\.svg, \.pdf or \.png"):
        save_overlay(np.zeros((16, 24, 3), np.uint8), maps, PATCHES, tmp_path / "x.jpg")
