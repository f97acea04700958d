"""A position bias on QKᵀ in the page, as a person uses it: Debian's Chromium through Playwright against the app set
up with tiny T5, tiny Bloom and tiny GPT-2 (tests/e2e/conftest.py's bias_models_app). The position bias control
shows for the models that add one; the explorer draws B as maps of their own on a diverging scale with its legend;
switching B off reruns the model and says so. Screenshots go to tests/screenshots/ (git-ignored)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
TIMEOUT_MS = 60_000
TILES = "#explorer .av-tile"
# a head cell's background, as the page drew it: viridis' ends are dark purple and yellow, the diverging bar's middle
# is white-ish (|B| small) and its ends blue and red
CELL_COLOURS = """() => [...document.querySelectorAll('#head_view td:not(.av-masked)')].map(td =>
    getComputedStyle(td).backgroundColor)"""


@pytest.fixture(scope="module")
def bias_url(bias_models_app):
    return bias_models_app[0] + "/"


def settle(page: Page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS)


def pick(page: Page, label: str, expect_info: str) -> None:
    page.locator("#model input").click()
    page.get_by_role("option", name=label).click()
    expect(page.locator("#info")).to_contain_text(expect_info, timeout=TIMEOUT_MS)
    settle(page)


def rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(v) for v in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3])


def test_t5s_position_bias_drawn_as_maps_of_its_own_and_switched_off(page: Page, bias_url):
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(bias_url)
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    switch = page.locator("#position_bias")
    expect(switch).to_be_hidden()  # our own model adds no position bias
    pick(page, "tiny-t5 (real model)", "real T5 model")
    expect(switch).to_be_visible()
    expect(switch.locator("input[type=checkbox]")).to_be_checked()
    expect(page.locator("#scale")).to_contain_text("T5 multiplies QKᵀ by 1, not by 1/√d_k")  # the scaling's note
    show = page.locator("#explorer .av-show")
    expect(show.locator("option[value=bias]")).to_have_text("position bias B (added to QKᵀ)")
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    weights = page.evaluate(CELL_COLOURS)
    show.select_option("bias")  # drawn in the browser from the run it keeps
    legend = page.locator("#explorer .av-legend")
    expect(legend).to_contain_text("position bias B added to QKᵀ·s")
    expect(page.locator("#head_view .av-caption")).to_contain_text("position bias B")
    bias = page.evaluate(CELL_COLOURS)
    assert bias != weights and len(bias) == len(weights)
    # signed: some cells blue (B < 0: b > r), some red (B > 0: r > b), none of viridis' purple-to-yellow
    assert any(rgb(c)[2] > rgb(c)[0] + 40 for c in bias) and any(rgb(c)[0] > rgb(c)[2] + 40 for c in bias)
    ticks = legend.locator(".av-ticks span").all_inner_texts()
    assert ticks[0].startswith("−") and ticks[1] == "0" and ticks[2].startswith("+") and ticks[0][1:] == ticks[2][1:]
    page.locator("#head_view td:not(.av-masked)").first.hover()
    expect(page.locator("#explorer .av-tip, .av-tip").first).to_contain_text("position bias B")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "position_bias_t5.png"), full_page=True)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")  # adds none: says so, shows the weights
    expect(page.locator("#head_view .av-caption")).to_contain_text("adds no position bias")

    switch.locator("input[type=checkbox]").uncheck()  # the model runs again without B
    expect(page.locator("#info")).to_contain_text("Position bias taken out", timeout=TIMEOUT_MS)
    settle(page)
    expect(show.locator("option[value=bias]")).to_be_disabled()
    expect(page.locator("#explorer .av-show-why")).to_contain_text("position bias is switched off")
    expect(show).to_have_value("weights")
    page.screenshot(path=str(SCREENSHOTS / "position_bias_off_t5.png"), full_page=True)

    pick(page, "tiny-gpt2 (real model)", "real GPT-2 model")  # adds none: no control, the note gone
    expect(switch).to_be_hidden()
    expect(page.locator("#scale")).not_to_contain_text("T5 multiplies")
    expect(show.locator("option[value=bias]")).to_have_count(0)


def test_blooms_alibi_in_the_page_a_slope_per_head(page: Page, bias_url):
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(bias_url)
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    pick(page, "tiny-bloom (real model)", "real Bloom model")
    expect(page.locator("#position_bias")).to_be_visible()
    page.locator("#explorer .av-show").select_option("bias")
    expect(page.locator("#explorer .av-legend")).to_contain_text("position bias B")
    # a tile's canvas, a pixel per cell: each row's cells it may attend (j <= q) as the last row's, one colour per key
    colours = page.evaluate("""() => { const c = document.querySelector('#explorer .av-tile canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, rows = [];
        for (let q = 0; q < c.height; q++) rows.push(Array.from({length: q + 1}, (_, j) =>
            Array.from(d.slice(4 * (q * c.width + j), 4 * (q * c.width + j) + 3)).join(',')));
        return rows; }""")
    last = colours[-1]  # the last row sees every key: ALiBi grows with the key's position
    assert len(colours) > 3 and len(set(last)) > 1 and all(row == last[:len(row)] for row in colours)
    page.screenshot(path=str(SCREENSHOTS / "position_bias_bloom.png"), full_page=True)
