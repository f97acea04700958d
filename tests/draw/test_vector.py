"""Figures for papers (draw.vector, attention_viz.save_figure): SVG whose labels are <text> holding the tokens, PDF
with its fonts embedded as TrueType (text, not outlines), PNG with the settings in its text chunks; the heads a key and
head name; the tick labels thinned to what a panel holds; every figure's layout inside its page."""

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from attention_viz import TextMaps, save_comparison, save_figure
from attention_viz.core.alignment import Comparison, align, aligned_difference
from attention_viz.core.maps import head_grid
from attention_viz.draw import vector

SVG = "{http://www.w3.org/2000/svg}"


def maps(n_layers=2, n_heads=2, n=5, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for layer in range(n_layers):
        a = rng.random((n_heads, n, n))
        out[f"encoder.{layer}.self_attn"] = a / a.sum(-1, keepdims=True)
    return out


TOKENS = ["The", "cat", "<sat>", "$x$", "on"]  # "<" must be escaped, "$x$" must stay text, not mathtext


def svg_texts(path) -> list[str]:
    return ["".join(node.itertext()) for node in ET.parse(path).getroot().iter(f"{SVG}text")]


def test_an_svg_holds_its_tokens_layers_heads_and_colour_bar_as_text(tmp_path):
    path = save_figure(maps(), "encoder.self_attn", None, tmp_path / "grid.svg", tokens=TOKENS,
                       settings={"model": "tiny", "text": "The cat"})
    texts = svg_texts(path)
    for token in TOKENS:
        assert token in texts
    for label in ("layer 0", "layer 1", "head 0", "head 1", "attention weight", "1.0", "query", "key"):
        assert label in texts, label
    root = ET.parse(path).getroot()
    assert not [p for p in root.iter(f"{SVG}path") if (p.get("id") or "").startswith("DejaVu")]  # no glyph outlines
    description = path.read_text()
    assert "model: tiny" in description and "text: The cat" in description  # the settings, in the metadata


def test_a_pdf_embeds_truetype_fonts_and_reads_back_its_tokens(tmp_path):
    path = save_figure(TextMaps(maps(), TOKENS, settings={"model": "tiny", "text": "The cat"}), "encoder.1.self_attn",
                       0, tmp_path / "head.pdf")
    data = path.read_bytes()
    assert data.startswith(b"%PDF") and b"/FontFile2" in data and b"/Type3" not in data  # pdf.fonttype 42
    assert b"model: tiny" in data  # the settings, as the document's subject
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True, check=True).stdout
        for token in ["The", "cat", "<sat>", "$x$", "encoder self-attention, layer 1, head 0"]:
            assert token in text, token


def test_a_png_carries_the_settings_in_its_text_chunks(tmp_path):
    from PIL import Image

    path = save_figure(maps(), "encoder.0.self_attn", None, tmp_path / "layer.png", tokens=TOKENS,
                       settings={"scale": "none"})
    with Image.open(path) as image:
        assert image.text["scale"] == "none" and image.text["Software"] == "attention_viz"
        assert image.text["attention"] == "encoder self-attention" and image.text["heads"] == "0 1"
        assert image.size[0] > 600  # 300 dpi


def test_key_and_head_name_the_heads_as_the_exports_do():
    m = maps(n_layers=3, n_heads=4)
    assert head_grid(m, "encoder.self_attn").weights.shape == (3, 4, 5, 5)  # every layer × head: the grid
    one = head_grid(m, "encoder.2.self_attn", 1)
    assert one.weights.shape == (1, 1, 5, 5) and one.layers == (2,) and one.heads == (1,)
    np.testing.assert_array_equal(one.weights[0, 0], m["encoder.2.self_attn"][1].astype(np.float32))
    assert head_grid(m, "encoder.1.self_attn").weights.shape == (1, 4, 5, 5)
    assert head_grid(m, "encoder.self_attn", 3).weights.shape == (3, 1, 5, 5)
    batched = {k: np.stack([v, v * 0]) for k, v in m.items()}  # (B, H, Q, K)
    assert head_grid(batched, "encoder.0.self_attn", 0, index=1).weights.max() == 0
    for key, head, message in (("encoder.7.self_attn", None, "have no"), ("decoder.self_attn", None, "have no"),
                               ("encoder", None, "neither a map key"), ("encoder.self_attn", 4, r"\[0, 3\]")):
        with pytest.raises(ValueError, match=message):
            head_grid(m, key, head)


def test_many_tokens_are_thinned_to_labels_a_font_size_apart(tmp_path):
    n = 120
    tokens = [f"t{i}" for i in range(n)]
    a = np.full((1, n, n), 1 / n)
    path = save_figure({"encoder.0.self_attn": a}, "encoder.0.self_attn", 0, tmp_path / "long.svg", tokens=tokens)
    shown = [t for t in svg_texts(path) if re.fullmatch(r"t\d+", t)]
    per_axis = len(shown) // 2
    assert 10 <= per_axis < n  # thinned, still labelled
    step = int(shown[1][1:]) - int(shown[0][1:])
    assert step * vector.HEAD_WIDTH * 72 / n >= 1.25 * vector.TICK_PT  # a step of labels is at least 1.25 fonts


def test_a_long_token_is_cut_with_an_ellipsis():
    labels = [label for _, label in vector.thinned(["a" * 40, " ", "short"], 300)]
    assert labels == ["a" * (vector.LABEL_CHARS - 1) + "…", "␣", "short"]


def test_figures_keep_their_labels_inside_the_page():
    """Every text of the drawn figure lies inside the figure (nothing cut off), for a grid, one head and a comparison."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    m = maps(n_layers=2, n_heads=3, n=12)
    long = [f"token{i}" for i in range(12)]
    q, k = align(long, long[:6] + ["x"] + long[7:]), align(long, long[:6] + ["x"] + long[7:])
    a = np.stack([m["encoder.0.self_attn"][:1]])
    comparison = Comparison("encoder.self_attn", (0,), (0,), ("one", "two"), a, a, aligned_difference(a, a, q, k),
                            (long, long), (long, long), q, k)
    grid = head_grid(m, "encoder.self_attn")
    for fig in (vector.grid_figure(grid.weights, long, long, "a title\nline two", grid.layers, grid.heads),
                vector.grid_figure(grid.weights[:1, :1], long, long, "one head", (0,), (0,)),
                vector.comparison_figure(comparison)):
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        width, height = canvas.get_width_height()
        renderer = canvas.get_renderer()
        for text in fig.findobj(match=lambda artist: hasattr(artist, "get_text") and artist.get_visible()):
            if not text.get_text():
                continue
            box = text.get_window_extent(renderer)
            assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, text.get_text()


def test_a_comparison_saves_and_bad_names_are_refused(tmp_path):
    m = maps()
    q = k = align(TOKENS, TOKENS)
    a = np.stack([m["encoder.0.self_attn"][:1]])
    comparison = Comparison("encoder.self_attn", (0,), (0,), ("a text", "b text"), a, a * 0.5,
                            aligned_difference(a, a * 0.5, q, k), (TOKENS, TOKENS), (TOKENS, TOKENS), q, k)
    texts = svg_texts(save_comparison(comparison, tmp_path / "cmp.svg"))
    assert {"a", "b", "a − b (aligned)", "$x$"} <= set(texts)
    with pytest.raises(ValueError, match="must end in .svg, .pdf or .png"):
        save_figure(m, "encoder.self_attn", None, tmp_path / "grid.jpg")
    with pytest.raises(ValueError, match="5 query positions but 2 query tokens"):
        save_figure(m, "encoder.self_attn", None, tmp_path / "grid.svg", tokens=["a", "b"])
    cross = {"decoder.0.cross_attn": np.full((1, 2, 3), 1 / 3)}  # queries: the decoder's input; keys: the source
    texts = svg_texts(save_figure(cross, "decoder.0.cross_attn", 0, tmp_path / "cross.svg",
                                  tokens={"source": ["s0", "s1", "s2"], "target": ["t0", "t1"]}))
    assert {"s0", "s2", "t0", "t1"} <= set(texts)
    with pytest.raises(ValueError, match="not one string"):
        save_figure(m, "encoder.self_attn", None, tmp_path / "grid.svg", tokens="abcde")
