"""The numbers written on heatmap cells are readable on every colour of every palette (WCAG 2.1 AA, 4.5:1).

Each view that writes numbers on coloured cells picks black or white text per cell (explorer.js's table,
headmap.js's canvas head, steps.js's steps and comparisons, training.js's maps). Their own functions run in
Chromium on every colour their palettes can give: explorer's 256 levels, and 1,001 points along the ramps the
others interpolate (viridis, and RdBu for signed values); each chosen text colour is checked here with WCAG 2.1's
contrast formula. No server, no network.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from attention_viz.explorer.html import explorer_script, script
from attention_viz.labview import training_script

pytestmark = pytest.mark.browser
AA = 4.5  # WCAG 2.1 SC 1.4.3, normal text (the cells' numbers are 11-12 px)
POINTS = 1001

# [[view, palette, [r, g, b], text colour], ...] for every colour each view can paint a numbered cell with
CELLS_JS = """(points) => {
    const ts = Array.from({length: points}, (_, i) => i / (points - 1));
    const levels = Array.from({length: 256}, (_, i) => i / 255);
    const cells = [];
    const add = (view, palette, rgbs, ink) => rgbs.forEach((rgb) => cells.push([view, palette, rgb, ink(rgb)]));
    const explorer = levels.map(AttentionExplorer.colour);
    add("explorer", "viridis", explorer, AttentionExplorer.ink);
    add("headmap", "viridis", explorer, AttentionHeadMap.ink);
    add("steps", "viridis", ts.map(AttentionSteps.viridis), AttentionSteps.ink);
    add("steps", "RdBu", ts.map((t) => AttentionSteps.diverging(2 * t - 1)), AttentionSteps.ink);
    add("training", "viridis", ts.map(AttentionTraining.colour), AttentionTraining.ink);
    return cells;
}"""


def luminance(rgb) -> float:
    """WCAG 2.1's relative luminance of an sRGB colour (0-255 channels)."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.03928 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a, b) -> float:
    """WCAG 2.1's contrast ratio (L1 + 0.05) / (L2 + 0.05), the lighter over the darker."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def rgb_of(css: str) -> tuple[int, int, int]:
    hex_ = css.lstrip("#")
    hex_ = "".join(c * 2 for c in hex_) if len(hex_) == 3 else hex_
    return tuple(int(hex_[i:i + 2], 16) for i in (0, 2, 4))


def test_the_formula_matches_wcag_examples():
    assert contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert contrast((255, 255, 255), (255, 255, 255)) == pytest.approx(1.0)
    assert contrast((0xbb, 0xbb, 0xc2), (255, 255, 255)) == pytest.approx(1.9, abs=0.01)  # axe's finding: Gradio's
    assert contrast((0x77, 0x77, 0x77), (255, 255, 255)) == pytest.approx(4.48, abs=0.01)  # the classic just-fail grey


def test_every_palette_colour_gets_text_of_at_least_4_5_to_1(page: Page):
    page.set_content("<!doctype html><html lang=en><body></body></html>")
    for text in (explorer_script(), script("steps.js"), training_script()):  # each view's scripts, as pages load them
        page.add_script_tag(content=text)
    cells = page.evaluate(CELLS_JS, POINTS)
    assert len(cells) == 2 * 256 + 3 * POINTS
    worst = {}
    for view, palette, rgb, ink in cells:
        ratio = contrast(rgb, rgb_of(ink))
        if ratio < worst.get((view, palette), (99,))[0]:
            worst[(view, palette)] = (ratio, rgb, ink)
    failing = {key: value for key, value in worst.items() if value[0] < AA}
    assert not failing, f"text below {AA}:1 (view, palette: worst ratio, cell colour, text colour): {failing}"
    # the rule is the better of black and white, so no colour does worse than their crossover, 4.58:1
    assert min(ratio for ratio, _, _ in worst.values()) > 4.58 - 0.01, worst


def test_the_old_rule_failed_on_mid_viridis():
    """What axe found on the page: white on viridis's light green (#39b877, 2.5:1) under the old perceived-
    brightness rule (0.299 R + 0.587 G + 0.114 B > 140 for black); the contrast rule writes black there."""
    cell = rgb_of("#39b877")
    assert 0.299 * cell[0] + 0.587 * cell[1] + 0.114 * cell[2] <= 140  # the old rule: white
    assert contrast(cell, (255, 255, 255)) < AA <= contrast(cell, (0, 0, 0))
