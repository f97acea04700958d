"""The matplotlib figures: contents of the lab's figures; no pyplot. (Figure 2's steps and the comparisons are
drawn in the browser: tests/service/test_step_views.py and tests/explorer/test_steps_browser.py.)"""

import ast
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attention_viz import lab
from attention_viz.draw import figures as render

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
RENDER_SOURCE = Path(render.__file__)


# ---------------------------------------------------------------------- the lab


@pytest.mark.parametrize("scaled", [False, True])
def test_dot_product_histogram_overlays_the_theoretical_density(scaled):
    d_k = 64
    samples = lab.dot_products(d_k, 5000, seed=0, scaled=scaled)
    fig = render.dot_product_histogram(samples, d_k, scaled)
    ax = fig.axes[0]
    x, density = ax.lines[0].get_data()
    sd = 1.0 if scaled else 8.0
    assert x.min() == pytest.approx(-4 * sd) and x.max() == pytest.approx(4 * sd)
    assert density.max() == pytest.approx(1 / np.sqrt(2 * np.pi * sd**2), rel=1e-3)
    assert np.sum(density) * (x[1] - x[0]) == pytest.approx(1.0, abs=1e-3)
    bars = np.array([p.get_height() for p in ax.patches if p.get_label() != "exact law, per bin"])
    assert bars.sum() * (2 * 4 * sd / 60) == pytest.approx(np.mean(np.abs(samples) <= 4 * sd), abs=1e-9)
    assert f"d_k = {d_k}" in ax.get_title() and ("theory 1)" if scaled else "theory 64)") in ax.get_title()
    assert ax.get_legend().get_texts()[1].get_text() == ("N(0, 1)" if scaled else "N(0, d_k = 64)")
    edges = np.linspace(-4 * sd, 4 * sd, 61)
    exact = next(p for p in ax.patches if p.get_label() == "exact law, per bin")  # a step over the same bins
    np.testing.assert_allclose(exact.get_data().values, lab.bin_probabilities(edges, d_k, scaled)[0] / (edges[1] - edges[0]))
    fixed = render.dot_product_histogram(samples, d_k, scaled, x_limit=100)
    assert fixed.axes[0].get_xlim() == (-100, 100)
    assert render.figure_to_png(fig).startswith(PNG_SIGNATURE)


def test_softmax_bars():
    logits, weights = lab.softmax_row(16, 20, scaled=True, seed=0)
    fig = render.softmax_bars(weights, logits)
    assert len(fig.axes) == 2 and fig.axes[1].get_ylabel() == "softmax weight"
    np.testing.assert_allclose(fig.axes[1].patches[0].get_path().vertices[:, 1].max(), weights.max())
    assert f"max weight {weights.max():.3f}" in fig.axes[0].get_title()
    assert len(render.softmax_bars(weights).axes) == 1
    with pytest.raises(ValueError, match="logits"):
        render.softmax_bars(weights, logits[:-1])
    assert render.figure_to_png(fig).startswith(PNG_SIGNATURE)


def test_sweep_figure_has_four_log_x_panels_with_both_modes():
    s = lab.sweep((1, 4, 16, 64), n_keys=16, n_queries=32, seed=0)
    fig = render.sweep_figure(s)
    assert len(fig.axes) == 4
    for ax in fig.axes:
        assert ax.get_xscale() == "log"
        np.testing.assert_array_equal(ax.lines[0].get_xdata(), s.d_k)
    assert [line.get_label() for line in fig.axes[0].lines[:3]] == ["q·k", "q·k / √d_k", "theory: d_k, and 1"]
    np.testing.assert_array_equal(fig.axes[0].lines[2].get_ydata(), s.d_k)  # the y = d_k line
    np.testing.assert_array_equal(fig.axes[3].lines[0].get_ydata(), s.unscaled.grad_norm)
    np.testing.assert_array_equal(fig.axes[3].lines[1].get_ydata(), s.scaled.grad_norm)
    assert render.figure_to_png(fig).startswith(PNG_SIGNATURE)


# ----------------------------------------------------------------------- output


def test_figure_to_array():
    fig = render.softmax_bars(np.full(4, 0.25))
    pixels = render.figure_to_array(fig)
    assert pixels.dtype == np.uint8 and pixels.shape == (280, 600, 3)  # 6 × 2.8 in at 100 dpi


def test_render_source_never_imports_pyplot():
    tree = ast.parse(RENDER_SOURCE.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {
        f"{node.module}.{alias.name}" if node.module else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any("pyplot" in name for name in imported)


def test_building_every_figure_leaves_pyplot_unimported():
    code = """
import sys, numpy as np
from attention_viz import lab
from attention_viz.draw import png, raster, figures as render
w = np.full((4, 4), 0.25)
figs = [render.dot_product_histogram(lab.dot_products(8, 100, 0), 8, False),
        render.softmax_bars(*lab.softmax_row(8, 8, True, 0)[::-1]),
        render.sweep_figure(lab.sweep((1, 8), 8, 8, 0))]
for fig in figs:
    render.figure_to_png(fig)
png.array_to_png(raster.grid_image(np.zeros((2, 2, 4, 4))))
png.array_to_png(raster.head_image(w, list("abcd"), list("abcd"), "t"))
assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=RENDER_SOURCE.parents[2])
    assert result.returncode == 0, result.stderr
