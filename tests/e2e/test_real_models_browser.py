"""A real model in the page, as a person uses it: Debian's Chromium through Playwright against the app set up
with small real-format models (Marian translation models and a GPT-2, random weights, real tokenizers).
Screenshots go to tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")


pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
TIMEOUT_MS = 60_000
TILES = "#explorer .av-tile"
COLUMNS = "() => [...document.querySelectorAll('#head_view thead th')].map(th => th.textContent.trim()).filter(t => t)"
NO_SIDEWAYS = "() => document.documentElement.scrollWidth <= window.innerWidth + 1"


@pytest.fixture(scope="module")
def real_url(real_models_app):
    """The app with the real models (tests/e2e/conftest.py: tiny Marian and GPT-2, a wide Marian of 144 heads)."""
    return real_models_app[0] + "/"


def settle(page: Page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS)


def pick(page: Page, label: str, expect_info: str) -> None:
    page.locator("#model input").click()
    page.get_by_role("option", name=label).click()
    expect(page.locator("#info")).to_contain_text(expect_info, timeout=TIMEOUT_MS)
    settle(page)


def open_page(page: Page, url: str, width: int = 1280) -> None:
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(url)
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)


def test_the_page_asks_for_a_real_models_runs_and_scores_through_the_apis_own_events(page: Page, real_url):
    """The page's runs and scores, of our models and of a real one, join the events the API names /visualize and
    /importance: the queue puts whatever names a real model on a line of its own as it joins (server/admission.py;
    tests/server/test_admission.py), so the page and the API take the same way. Both answered, the CSV too."""
    config = httpx.get(real_url + "config", timeout=30).json()
    named = {d["id"]: d.get("api_name") for d in config["dependencies"] if d.get("backend_fn")}
    sent = []  # the endpoint of every event the page asks for (None: a private one)
    page.on("request", lambda r: sent.append(named.get(json.loads(r.post_data or "{}").get("fn_index"), "?"))
            if r.method == "POST" and r.url.split("?")[0].endswith("/queue/join") else None)
    open_page(page, real_url)
    text = page.locator("#text input, #text textarea").first
    text.fill("abc")
    expect(page.locator("#output textarea, #output input").first).to_have_value("cba", timeout=TIMEOUT_MS)
    pick(page, "tiny-marian (real model)", "real Marian model")
    before = page.locator("#info").inner_text()
    text.fill("Guten Tag, wie geht es Ihnen heute?")
    expect(page.locator("#info")).not_to_have_text(before, timeout=TIMEOUT_MS)  # its source's pieces counted anew
    settle(page)
    assert sent.count("visualize") >= 3, sent  # our model's text, the model picked, its text
    page.get_by_role("tab", name="Which heads matter").click()
    page.locator("#score_heads").click()
    expect(page.locator("#heads_view .av-heads")).to_contain_text("switched off alone", timeout=TIMEOUT_MS)
    page.locator("#score_export").click()
    expect(page.locator("#score_file a")).to_have_attribute("href", re.compile(r"\.csv$"), timeout=TIMEOUT_MS)
    assert sent.count("importance") == 1, sent


def test_a_real_translation_model_in_the_page(page: Page, real_url):
    open_page(page, real_url)
    pick(page, "tiny-marian (real model)", "real Marian model")
    expect(page.locator(TILES)).to_have_count(2 * 4)  # 2 layers x 4 heads of the kind it opens on
    expect(page.locator("#dk input[type=number]")).to_have_value("8")  # the model's own d_k
    expect(page.locator("#dk_note")).to_contain_text("its weights fix it")
    expect(page.locator("#dk_trained")).to_contain_text("d_k: this model's own")
    expect(page.locator("#text")).to_contain_text("up to 64 tokens of this model")
    columns = page.evaluate(COLUMNS)
    assert "</s>" in columns and any(c.startswith("▁") for c in columns), columns  # its own pieces
    before = columns
    page.locator("#text input, #text textarea").first.fill("Grüße aus Köln")  # a head of <= 600 cells: a table
    page.wait_for_function(f"(before) => JSON.stringify(({COLUMNS})()) !== JSON.stringify(before)", arg=before,
                           timeout=TIMEOUT_MS)
    settle(page)
    assert any("ö" in c or "ü" in c for c in page.evaluate(COLUMNS))
    page.locator("#scale").get_by_text("off (plain q·k)").click()
    expect(page.locator("#info")).to_contain_text("not as it was trained", timeout=TIMEOUT_MS)
    settle(page)
    page.locator(f'{TILES}[data-layer="1"][data-head="2"]').click()
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator("#steps_view .av-hv")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#steps_text")).to_contain_text("d_k = 8", timeout=TIMEOUT_MS)
    settle(page)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.get_by_role("tab", name="Heatmaps").click()
    page.screenshot(path=str(SCREENSHOTS / "real-marian.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS)


def test_a_decoder_only_model_offers_only_its_own_kind_and_fits_a_phone(page: Page, real_url):
    open_page(page, real_url, width=390)
    pick(page, "tiny-gpt2 (real model)", "real GPT-2 model")
    options = page.locator("#explorer .av-kind option")
    expect(options).to_have_count(1)
    assert options.first.get_attribute("value") == "decoder.self_attn"
    assert page.evaluate(NO_SIDEWAYS)
    page.screenshot(path=str(SCREENSHOTS / "real-gpt2-390.png"), full_page=True)


# Each redraw of the heads view, as the page shows it: pending cells, the progress line, cells, the curve's points.
RECORD_JS = """() => {
  window.seenHeads = [];
  const view = document.querySelector('#heads_view');
  new MutationObserver(() => {
    const root = view.querySelector('.av-heads');
    if (!root || !root.querySelector('.av-imp-table')) return;
    const progress = root.querySelector('.av-progress');
    window.seenHeads.push({pending: root.querySelectorAll('td.av-pending').length,
                           cells: root.querySelectorAll('.av-imp-table td').length,
                           progress: progress ? progress.textContent.trim() : null,
                           bar: progress ? Number(root.querySelector('.av-progress progress').value) : null,
                           points: root.querySelectorAll('svg circle').length});
  }).observe(view, {childList: true, subtree: true});
}"""


def test_a_real_models_head_scores_fill_the_grid_as_they_come(page: Page, real_url):
    """144 heads scored 63 a pass (and the baseline): the grid is drawn at the first pass with the heads to come
    as pending cells and a progress line, fills in, then the payload's full tables, summary and prune curve."""
    open_page(page, real_url)
    pick(page, "wide-marian (real model)", "real Marian model")
    text = page.locator("#text input, #text textarea").first
    before = page.locator("#info").inner_text()
    text.fill("Heads in every layer look at different words of the sentence, and the decoder writes one token")
    expect(page.locator("#info")).not_to_have_text(before, timeout=TIMEOUT_MS)
    settle(page)
    page.get_by_role("tab", name="Which heads matter").click()
    page.evaluate(RECORD_JS)
    page.locator("#score_heads").click()
    panel = page.locator("#heads_view .av-heads")
    expect(panel.locator("svg circle")).to_have_count(144, timeout=TIMEOUT_MS)  # the payload: 0 .. 143 heads off
    seen = page.evaluate("window.seenHeads")
    filling = [s for s in seen if s["pending"]]
    assert filling, seen  # drawn between passes (the first: the baseline and 63 heads; tests/service: in order)
    for s in filling:  # the whole grid, the heads to come pending, no curve yet
        assert s["cells"] == 144 and s["pending"] == 144 - s["bar"] and s["points"] == 0, s
        assert s["progress"].startswith(f"Scored {s['bar']} of 144 heads"), s
    assert [s["pending"] for s in seen] == sorted((s["pending"] for s in seen), reverse=True), seen  # fills in
    assert any(s["progress"] and "prune curve" in s["progress"] and not s["pending"] for s in seen), seen
    assert seen[-1] == {"pending": 0, "cells": 144, "progress": None, "bar": None, "points": 144}
    expect(panel).to_contain_text("Each of the 144 heads switched off alone (zero ablation)")
    page.screenshot(path=str(SCREENSHOTS / "real-heads-scored.png"), full_page=True)


def test_a_real_models_head_scores_fit_a_phone(page: Page, real_url):
    """At 390 px the 144-head grid and the prune curve stay inside the page: each table and the curve scroll
    sideways in a box of their own (never the page) and say so; the tables' captions wrap inside the screen."""
    open_page(page, real_url, width=390)
    pick(page, "wide-marian (real model)", "real Marian model")
    page.get_by_role("tab", name="Which heads matter").click()
    page.evaluate(RECORD_JS)
    page.locator("#score_heads").click()
    panel = page.locator("#heads_view .av-heads")
    expect(panel.locator("svg circle")).to_have_count(144, timeout=TIMEOUT_MS)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "real-heads-390.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS)
    for selector in ("#heads_view .av-heads", ".av-prune-box", ".av-imp-box", ".av-imp-caption"):
        for box in (b.bounding_box() for b in page.locator(selector).all()):
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 1, (selector, box)
    expect(panel.locator(".av-prune-more")).to_be_visible()
    expect(panel.locator(".av-imp-more")).to_have_count(3)
    for hint in panel.locator(".av-imp-more").all():  # 12 heads do not fit 390 px: each table says it scrolls
        expect(hint).to_be_visible()


# -- the Long text tab (a real model reading a page)

LONG_PAGE = "The cat sat on the mat. Attention is all you need, and every student reads the paper before the lecture. " * 8


def test_the_long_text_tab_paste_a_page_drag_a_region_and_hover_an_exact_weight(page: Page, real_url):
    """The Long text tab (only tiny GPT-2 offered: the translation models cannot read a page): paste, see the summary
    grids and the overview, drag a rectangle, hover a cell's exact weight, leave the sink out, brighter colours;
    screenshots long_1280.png (1280 x 800) and long_390.png."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(real_url)
        page.get_by_role("tab", name="Long text").click()
        expect(page.locator("#long_model input")).to_have_value("tiny-gpt2 (real model)")
        page.locator("#long_text textarea").fill(LONG_PAGE)
        page.locator("#long_read").click()
        view = page.locator("#long_view .av-long")
        expect(view.locator(".av-long-note")).to_contain_text("Read the first 256 of the text's", timeout=TIMEOUT_MS)
        expect(view.locator(".av-long-grid")).to_have_count(3)
        expect(view.locator(".av-long-cell")).to_have_count(3 * 2 * 4)  # three grids of 2 layers x 4 heads
        # each grid's colour bar tops out in its statistic's own digits (not a weight's five: "1102.79955 tokens")
        ends = {stat: view.locator(f".av-long-grid[data-stat={stat}] .av-long-ends").inner_text()
                for stat in ("first_token", "entropy", "mean_distance")}
        assert re.fullmatch(r"0 → (0\.\d{5}|\d\.\d{3}e-\d)", ends["first_token"]), ends
        assert re.fullmatch(r"0 → \d+\.\d{2}", ends["entropy"]) and re.fullmatch(r"0 → \d+\.\d", ends["mean_distance"]), ends
        canvas = view.locator(".av-long-overview")
        canvas.scroll_into_view_if_needed()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")  # no sideways
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.48, box["y"] + box["height"] * 0.6, steps=4)
        page.mouse.up()
        title = view.locator(".av-long-regiontitle")
        expect(title).to_contain_text(re.compile(r"Queries \d+-\d+ \(down\) x keys \d+-\d+"), timeout=TIMEOUT_MS)
        expect(view.locator(".av-long-regionnote")).to_have_text("Exact weights, recomputed for this region.")
        region = view.locator(".av-long-regioncanvas")
        region.scroll_into_view_if_needed()
        rbox = region.bounding_box()
        page.mouse.move(rbox["x"] + rbox["width"] * 0.7, rbox["y"] + rbox["height"] * 0.8)
        expect(view.locator(".av-long-regiontip")).to_contain_text(re.compile(r"query \d+ “.+” → key \d+ “.+”: weight \d"))
        canvas.focus()  # by keyboard: a square moved by the arrow keys (T / 32 = 8 positions a step), Enter opens it
        page.keyboard.press("ArrowDown")
        page.keyboard.press("Enter")
        expect(title).to_contain_text("Queries 8-55 (down) x keys 0-47 (across)", timeout=TIMEOUT_MS)
        view.locator(".av-long-sink").check()  # the sink left out: said over the map and the region's title
        expect(view.locator(".av-long-legend").nth(3)).to_contain_text("first token left out", timeout=TIMEOUT_MS)
        expect(title).to_contain_text("first token left out of every row", timeout=TIMEOUT_MS)
        # the colour by default: a log scale, 3 decades under the map's top, said in the legend with its ends;
        # no weight shown above 1
        legend = view.locator(".av-long-legend").nth(3)
        expect(legend).to_contain_text("colour: log scale, 3 decades under this map's top")
        low, high = re.fullmatch(r"≤ (\S+) → (\S+) \(log: ×10 a third\)",
                                 legend.locator(".av-long-ends").inner_text()).groups()
        assert 0 < float(high) <= 1 and float(low) == pytest.approx(float(high) / 1000, rel=1e-3)
        page.screenshot(path=str(SCREENSHOTS / f"long_{width}.png"), full_page=True)
        view.locator(".av-long-colour").select_option("top")  # drawn again in the page, said in the legend
        expect(legend).to_contain_text("colour: linear, 0 → this map's top")
        assert float(legend.locator(".av-long-ends").inner_text().split("→ ")[1]) <= 1
        view.locator(".av-long-colour").select_option("p99")
        expect(legend).to_contain_text("99th percentile")


def test_compare_another_model_without_the_head_says_so_once_and_what_to_pick(page: Page, real_url):
    """A cross-attention head compared with GPT-2 (no encoder-decoder attention): one message, not two, naming
    GPT-2's kinds and models that have the head; the comparison on screen is marked stale, not replaced."""
    open_page(page, real_url)
    pick(page, "tiny-marian (real model)", "real Marian model")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.get_by_role("tab", name="Compare").click()
    page.get_by_label("another model").check()
    expect(page.locator("#compare_view .av-hv")).to_have_attribute("data-comparison", "model", timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#compare_model_b input").click()
    page.get_by_role("option", name="tiny-gpt2 (real model)").click()
    toast = page.locator("[data-testid=toast-body]")
    expect(toast.first).to_contain_text("Model b, tiny-gpt2 (real model), has no encoder-decoder attention",
                                        timeout=TIMEOUT_MS)
    page.wait_for_timeout(3000)  # a second answer, if any, would be here by now (a refusal leaves its output's
    # status in error: not "settled")
    told = " ".join(toast.all_inner_texts())
    assert told.count("has no encoder-decoder attention") == 1, told
    assert "Pick as model b one with encoder-decoder attention (wide-marian (real model)" in told, told
    expect(page.locator("#compare_view .av-stale-note")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "compare_model_refused.png"), full_page=True)
