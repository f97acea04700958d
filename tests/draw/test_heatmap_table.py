"""One head as an HTML table: every weight in its cell and tooltip, its colour, masked cells, escaped tokens."""

import re

import numpy as np
import pytest

from attention_viz.draw import heatmap_table, raster

CELL = re.compile(r'<td (?:class="(?P<cls>[\w-]+)" )?(?:style="background:(?P<bg>#[0-9a-f]{6});color:(?P<ink>#[0f]{3})" )?'
                  r'title="query (?P<i>\d+) → key (?P<j>\d+): (?P<value>[0-9.]+|masked)">(?P<text>[^<]*)</td>')


def _softmax_rows(shape, seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * 2
    return np.exp(x) / np.exp(x).sum(-1, keepdims=True)


def cells(table: str) -> list[dict]:
    return [m.groupdict() for m in CELL.finditer(table)]


def test_every_weight_is_in_its_cell_with_its_colour_and_masked_cells_are_empty():
    causal = np.tril(np.ones((5, 5), dtype=bool))  # True = may attend
    w = np.where(causal, _softmax_rows((5, 5)), 0.0)
    table = heatmap_table.head_table(w, list("abcde"), list("vwxyz"), "decoder\nlayer 0", mask=causal)
    found = cells(table)
    assert [(int(c["i"]), int(c["j"])) for c in found] == [(i, j) for i in range(5) for j in range(5)]  # row-major
    lut = raster.colormap_lut()
    for c in found:
        i, j = int(c["i"]), int(c["j"])
        if not causal[i, j]:
            assert c["cls"] == "av-m" and c["value"] == "masked" and c["text"] == "" and c["bg"] is None
            continue
        assert float(c["value"]) == pytest.approx(w[i, j], abs=5e-5) and c["text"] == f"{w[i, j]:.2f}"
        rgb = lut[int(np.clip(w[i, j] * 255 + 0.5, 0, 255))]
        assert c["bg"] == "#%02x%02x%02x" % tuple(rgb)
        assert c["ink"] == ("#000" if rgb @ np.array([0.299, 0.587, 0.114]) > 127.5 else "#fff")
    assert "decoder\nlayer 0" in table and table.count("<tr>") == 1 + 5


def test_large_maps_drop_the_values_and_huge_ones_are_refused():
    n = 30
    found = cells(heatmap_table.head_table(_softmax_rows((n, n)), ["t"] * n, ["t"] * n, "t"))
    assert len(found) == n * n and all(c["text"] == "" for c in found)
    assert all(c["text"] for c in cells(heatmap_table.head_table(_softmax_rows((n, n)), ["t"] * n, ["t"] * n, "t",
                                                                  annotate=True)))
    big = heatmap_table.MAX_TABLE_TOKENS + 1
    with pytest.raises(ValueError, match="at most"):
        heatmap_table.head_table(np.zeros((big, 2)), ["t"] * big, ["t"] * 2, "t")
    with pytest.raises(ValueError, match="tokens"):
        heatmap_table.head_table(np.zeros((3, 3)), list("ab"), list("abc"), "t")


def test_per_head_max_stretches_the_colours():
    w = np.full((2, 2), 0.25)
    stretched = cells(heatmap_table.head_table(w, list("ab"), list("ab"), "t", per_head_max=True))
    fixed = cells(heatmap_table.head_table(w, list("ab"), list("ab"), "t"))
    assert {c["bg"] for c in stretched} == {"#%02x%02x%02x" % tuple(raster.colormap_lut()[255])}
    assert {c["bg"] for c in fixed} == {"#%02x%02x%02x" % tuple(raster.colormap_lut()[64])}


def test_tokens_and_title_are_escaped():
    tokens = ["<script>", "&", '"', "{", "}", "$", " "]
    n = len(tokens)
    table = heatmap_table.head_table(np.full((n, n), 1 / n), tokens, tokens, "<b>title</b>")
    assert "<script>" not in table and "<b>" not in table
    for escaped in ("&lt;script&gt;", "&amp;", "&quot;", "&#123;", "&#125;", "&#36;", "␣"):
        assert f">{escaped}</th>" in table
    assert not re.search(r"[{}$]", table.split("<table", 1)[1])  # nothing a template engine could read
