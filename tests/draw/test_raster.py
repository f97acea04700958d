"""Attention as pixels: exact grid geometry and colours, the detailed head's cells, values, labels and PNG."""

import io

import matplotlib
import numpy as np
import pytest
from PIL import Image

from attention_viz.draw import raster
from attention_viz.draw.png import array_to_png, png_with_text

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _rgb(cmap: str, value: float) -> np.ndarray:
    """The expected uint8 colour of a value, straight from matplotlib."""
    return np.rint(np.array(matplotlib.colormaps[cmap](value)[:3]) * 255).astype(np.uint8)


def _softmax_rows(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 2
    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)


# ---------------------------------------------------------------------------- grid


def test_grid_shape_and_dtype_exact():
    w = _softmax_rows((6, 8, 32, 32))
    image = raster.grid_image(w, cell=4, gap=2)
    assert image.dtype == np.uint8 and image.flags.c_contiguous
    assert image.shape == (6 * 32 * 4 + 5 * 2, 8 * 32 * 4 + 7 * 2, 3) == (778, 1038, 3)
    assert raster.grid_image(w).shape == (778, 1038, 3)  # automatic cell: 1024 // (8 · 32) = 4
    assert raster.grid_image(w, cell=1, gap=0).shape == (6 * 32, 8 * 32, 3)
    top, left = raster.LABEL_MARGIN
    assert raster.grid_image(w, cell=4, gap=2, labels=True).shape == (778 + top, 1038 + left, 3)
    assert raster.grid_image(w[0, 0, :5, :7], cell=3, gap=2).shape == (15, 21, 3)  # one head


def test_grid_lut_endpoints_and_tile_placement():
    w = np.zeros((2, 3, 4, 5))
    w[1, 2, 3, 4] = 1.0  # one weight of 1 in the last query row, last key, layer 1, head 2
    cell, gap = 3, 2
    image = raster.grid_image(w, cell=cell, gap=gap)
    layout = raster.grid_layout(w.shape, cell, gap)
    assert layout.origin(1, 2) == (1 * (4 * 3 + 2), 2 * (5 * 3 + 2)) == (14, 34)
    y, x = 14 + 3 * cell, 34 + 4 * cell
    one, zero = _rgb("viridis", 1.0), _rgb("viridis", 0.0)
    np.testing.assert_array_equal(image[y : y + cell, x : x + cell], np.broadcast_to(one, (cell, cell, 3)))
    np.testing.assert_array_equal(image[0, 0], zero)
    np.testing.assert_array_equal(image[y - 1, x], zero)  # the cell above is weight 0
    np.testing.assert_array_equal(image[:, 5 * cell : 5 * cell + gap], 255)  # the gap between heads is white
    assert (np.all(image == one, axis=-1)).sum() == cell * cell  # nowhere else
    np.testing.assert_array_equal(raster.colormap_lut("viridis")[[0, 255]], [zero, one])
    np.testing.assert_array_equal(raster.colormap_lut("magma")[128], _rgb("magma", 128 / 255))


def test_grid_quantises_clips_and_greys_nan():
    w = np.array([[0.5, -3.0, 7.0, np.nan]])
    image = raster.grid_image(w, cell=1, gap=0)
    np.testing.assert_array_equal(image[0, 0], raster.grid_palette()[126])  # 0.5 · 251 = 125.5 → 126
    np.testing.assert_array_equal(image[0, 0], _rgb("viridis", 126 / 251))
    np.testing.assert_array_equal(image[0, 1], _rgb("viridis", 0.0))
    np.testing.assert_array_equal(image[0, 2], _rgb("viridis", 1.0))
    np.testing.assert_array_equal(image[0, 3], raster.MASKED_RGB)


def test_grid_palette_holds_the_colormap_then_white_grey_and_ink():
    palette = raster.grid_palette()
    assert palette.shape == (256, 3) and palette.dtype == np.uint8
    np.testing.assert_array_equal(palette[[0, raster.GRID_LEVELS - 1]], [_rgb("viridis", 0.0), _rgb("viridis", 1.0)])
    np.testing.assert_array_equal(palette[raster.WHITE_INDEX], [255, 255, 255])
    np.testing.assert_array_equal(palette[raster.MASKED_INDEX], raster.MASKED_RGB)
    np.testing.assert_array_equal(palette[raster.INK_INDEX], [0, 0, 0])
    w = np.array([[0.0, 1.0, np.nan]])
    assert raster.grid_indices(w, cell=1, gap=0).tolist() == [[0, raster.GRID_LEVELS - 1, raster.MASKED_INDEX]]


def test_grid_per_head_max_stretches_each_head():
    w = np.zeros((1, 2, 2, 2))
    w[0, 0, 0, 0], w[0, 1, 1, 1] = 0.5, 0.25
    image = raster.grid_image(w, cell=1, gap=1, per_head_max=True)
    np.testing.assert_array_equal(image[0, 0], _rgb("viridis", 1.0))
    np.testing.assert_array_equal(image[1, 4], _rgb("viridis", 1.0))
    fixed = raster.grid_image(w, cell=1, gap=1)
    np.testing.assert_array_equal(fixed[0, 0], raster.grid_palette()[126])


def test_grid_labels_are_drawn():
    w = np.zeros((2, 2, 8, 8))
    top, left = raster.LABEL_MARGIN
    image = raster.grid_image(w, cell=4, labels=True)
    assert (image[:top, left:] < 128).any()  # "H0", "H1" above the columns
    assert (image[top:, :left] < 128).any()  # "L0", "L1" beside the rows


@pytest.mark.parametrize(
    "kwargs", [dict(weights=np.zeros((1, 1, 1, 1, 1))), dict(cell=0), dict(cell=2.5), dict(gap=-1)]
)
def test_grid_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        raster.grid_image(**{"weights": np.zeros((2, 2, 4, 4)), **kwargs})


def test_grid_refuses_giant_images():
    with pytest.raises(ValueError, match="too large"):
        raster.grid_image(np.broadcast_to(np.float32(0), (6, 8, 1024, 1024)), cell=1)  # checked before any copy


def test_grid_accepts_torch_tensors():
    torch = pytest.importorskip("torch")
    w = torch.rand(2, 3, 4, 4, requires_grad=True)
    np.testing.assert_array_equal(raster.grid_image(w), raster.grid_image(w.detach().numpy()))


# ---------------------------------------------------------------------------- one head


def _cells(image: np.ndarray, layout: raster.HeadLayout) -> np.ndarray:
    """The map part of a head image as [Q, K, cell, cell, 3]."""
    c = layout.cell
    body = image[layout.top : layout.top + layout.n_q * c, layout.left : layout.left + layout.n_k * c]
    return body.reshape(layout.n_q, c, layout.n_k, c, 3).transpose(0, 2, 1, 3, 4)


def _layout(w, tokens, title="t", annotate=True):
    return raster.head_layout(w.shape, tokens, tokens, title, annotate)


def test_head_cells_have_the_weights_colours_and_masked_cells_are_bare_grey():
    causal = np.tril(np.ones((5, 5), dtype=bool))  # True = may attend
    w = np.where(causal, _softmax_rows((5, 5)), 0.0)
    tokens = ["<bos>", "a", " ", "b", "<eos>"]
    image = raster.head_image(w, tokens, tokens, "decoder self-attention\nlayer 0, head 1", mask=causal)
    layout = _layout(w, tokens, "decoder self-attention\nlayer 0, head 1")
    assert image.dtype == np.uint8 and layout.cell == raster.VALUE_CELL
    cells = _cells(image, layout)
    lut = raster.colormap_lut()
    for i, j in zip(*np.nonzero(causal)):
        expected = lut[int(np.clip(w[i, j] * 255 + 0.5, 0, 255))]
        np.testing.assert_array_equal(cells[i, j, 0, 0], expected)  # a corner: the value is written in the middle
    np.testing.assert_array_equal(cells[~causal], np.broadcast_to(raster.MASKED_RGB, cells[~causal].shape))
    assert layout.cell_at(layout.left, layout.top) == (0, 0)
    assert layout.cell_at(layout.left + 4 * layout.cell + 3, layout.top + 2 * layout.cell) == (2, 4)
    assert layout.cell_at(layout.left - 1, layout.top) is None


def test_head_values_are_written_in_contrasting_ink_and_match_their_label():
    w = np.array([[0.05, 0.95], [0.42, 0.42]])
    image = raster.head_image(w, list("ab"), list("xy"), "t")
    cells = _cells(image, _layout(w, list("ab")))
    background = cells[..., 0, 0, :]  # (Q, K, 3)
    inked = np.any(cells != background[:, :, None, None, :], axis=-1)  # (Q, K, cell, cell)
    for i, j, label in [(0, 0, "0.05"), (0, 1, "0.95"), (1, 0, "0.42")]:
        glyphs = raster._glyph_tile(label, raster.VALUE_CELL, raster.VALUE_FONT) > 0
        np.testing.assert_array_equal(inked[i, j], glyphs, err_msg=label)  # exactly this label's glyphs
    np.testing.assert_array_equal(cells[1, 0], cells[1, 1])  # same value, same cell
    solid = raster._glyph_tile("0.05", raster.VALUE_CELL, raster.VALUE_FONT) == 255  # fully covered pixels
    assert solid.any() and (cells[0, 0][solid] == 255).all()  # white ink on dark viridis
    solid = raster._glyph_tile("0.95", raster.VALUE_CELL, raster.VALUE_FONT) == 255
    assert solid.any() and (cells[0, 1][solid] == 0).all()  # black ink on yellow


def test_head_annotates_small_maps_not_large_ones():
    small, large = _softmax_rows((24, 24)), _softmax_rows((30, 30))
    def inked(w, **kwargs):
        tokens = list("x" * len(w))
        image = raster.head_image(w, tokens, tokens, "t", **kwargs)
        annotate = kwargs.get("annotate", len(w) <= raster.ANNOTATE_MAX)
        cells = _cells(image, _layout(w, tokens, annotate=annotate))
        return np.any(cells != cells[..., :1, :1, :], axis=(-1, -2, -3)).sum()  # cells holding more than one colour
    assert inked(small) == 24 * 24
    assert inked(small, annotate=False) == 0
    assert inked(large) == 0
    assert inked(large, annotate=True) == 30 * 30


def test_head_colour_bar_axes_and_per_head_max():
    w = np.full((4, 4), 0.25)
    tokens = list("abcd")
    fixed, stretched = (raster.head_image(w, tokens, tokens, "t", per_head_max=p) for p in (False, True))
    layout = _layout(w, tokens)
    assert (_cells(stretched, layout)[..., 0, 0, :] == raster.colormap_lut()[255]).all()  # 0.25 is this head's max
    assert (_cells(fixed, layout)[..., 0, 0, :] == raster.colormap_lut()[64]).all()
    bar_x = layout.left + 4 * layout.cell + raster.COLORBAR[0] + raster.COLORBAR[1] // 2
    top, bottom = layout.top, layout.top + 4 * layout.cell - 1
    np.testing.assert_array_equal(fixed[top, bar_x], raster.colormap_lut()[255])
    np.testing.assert_array_equal(fixed[bottom, bar_x], raster.colormap_lut()[0])
    assert (fixed[:top - 1] < 128).any()  # the title above the map
    assert (fixed[top:bottom, : layout.left - 2] < 128).any()  # query tokens and the axis name left of it
    assert (fixed[bottom + 2 :, layout.left : layout.left + 4 * layout.cell] < 128).any()  # keys below


def test_head_tick_labels_thin_out_and_tokens_must_match():
    n = 100
    tokens = [str(i) for i in range(n)]
    ticks = raster.tick_labels(tokens, n, "x")
    assert 20 <= len(ticks) <= raster.MAX_TICK_LABELS and ticks[:2] == [(0, "0"), (3, "3")]
    assert raster.tick_labels([" ", "", "a"], 3, "y") == [(0, "␣"), (1, "∅"), (2, "a")]
    image = raster.head_image(_softmax_rows((n, n)), tokens, tokens, "t")
    assert raster.head_cell(n, n, annotate=False) == raster.HEAD_SIDE // n
    assert image.shape[1] > n * (raster.HEAD_SIDE // n)
    with pytest.raises(ValueError, match="tokens"):
        raster.head_image(_softmax_rows((3, 3)), list("ab"), list("abc"), "t")
    with pytest.raises(ValueError, match="matrix"):
        raster.head_image(_softmax_rows((2, 3, 3)), list("abc"), list("abc"), "t")


def test_head_accepts_torch_tensors_and_1024_tokens():
    torch = pytest.importorskip("torch")
    w = torch.softmax(torch.randn(1, 1, 6, 6), -1)
    tokens = list("abcdef")
    np.testing.assert_array_equal(raster.head_image(w, tokens, tokens, "t"),
                                  raster.head_image(w.numpy()[0, 0], tokens, tokens, "t"))
    n = 1024
    image = raster.head_image(np.full((n, n), 1 / n, np.float32), [f"t{i}" for i in range(n)], [f"t{i}" for i in range(n)], "t")
    assert image.shape[0] > n and image.shape[1] > n  # one pixel per weight, plus the labels


def test_cell_labels_format():
    labels = raster.cell_labels(np.array([[0.123, -0.5], [-np.inf, np.nan]]), ".2f")
    assert labels.tolist() == [["0.12", "−0.50"], ["−∞", ""]]


# ----------------------------------------------------------------------- output


def test_png_of_palette_indices_is_lossless():
    indices = raster.grid_indices(_softmax_rows((2, 2, 4, 4)), cell=2, labels=True)
    png = array_to_png(indices, palette=raster.grid_palette())
    with Image.open(io.BytesIO(png)) as picture:
        assert picture.mode == "P"
        np.testing.assert_array_equal(np.asarray(picture.convert("RGB")), raster.grid_palette()[indices])


def test_png_is_lossless():
    for image in (raster.grid_image(_softmax_rows((2, 2, 4, 4)), cell=2),
                  raster.head_image(_softmax_rows((3, 3)), list("abc"), list("abc"), "t")):
        png = array_to_png(image)
        assert png.startswith(PNG_SIGNATURE)
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(png))), image)


def test_png_with_text_keeps_the_pixels_and_adds_readable_metadata():
    import io

    from PIL import Image

    image = np.random.default_rng(0).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    png = array_to_png(image)
    described = png_with_text(png, {"model": "reverse_dk16_sqrt_dk", "scaling": "×1/√16 = 0.25"})
    opened = Image.open(io.BytesIO(described))
    np.testing.assert_array_equal(np.asarray(opened.convert("RGB")), image)
    assert opened.text == {"model": "reverse_dk16_sqrt_dk", "scaling": "×1/√16 = 0.25"}
    with pytest.raises(ValueError, match="not a PNG"):
        png_with_text(b"GIF89a" + bytes(30), {"a": "b"})
