"""A trained real model in the page, as a person uses it: Debian's Chromium (1280x800) through Playwright against
the app set up with all-MiniLM-L6-v2 (a trained BERT, 6 layers x 12 heads, d_k 32; devtools.trained_models) as its
only real model. Screenshots go to tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")

from devtools.launcher import running_app  # noqa: E402
from tests.e2e.test_real_models_browser import (  # noqa: E402
    COLUMNS, NO_SIDEWAYS, SCREENSHOTS, TILES, TIMEOUT_MS, pick, settle)

pytestmark = pytest.mark.browser
LABEL = "all-MiniLM-L6-v2 (real model)"
CONTROLS = """() => [document.querySelector('#text textarea, #text input').value,
    document.querySelector('#dk input').value, ([...document.querySelectorAll('#scale input')].find(i => i.checked)
    || {}).value, document.querySelector('#model input').value]"""


@pytest.fixture(scope="module")
def minilm_url(tmp_path_factory, minilm_folder):
    root = tmp_path_factory.mktemp("trained-browser")
    with running_app(root / "app.log", [minilm_folder]) as server:
        yield server.base + "/"
    assert "Traceback" not in (root / "app.log").read_text()


def open_page(page: Page, url: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(url)
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)


def test_the_trained_bert_in_every_view(page: Page, minilm_url):
    open_page(page, minilm_url)
    pick(page, LABEL, "real BERT model")
    expect(page.locator(TILES)).to_have_count(6 * 12)  # every layer x head of its only kind
    options = page.locator("#explorer .av-kind option")
    expect(options).to_have_count(1)
    assert options.first.get_attribute("value") == "encoder.self_attn"
    expect(page.locator("#dk input[type=number]")).to_have_value("32")  # its own d_k
    expect(page.locator("#dk_note")).to_contain_text("its weights fix it")
    page.locator("#text input, #text textarea").first.fill("The students learn attention quickly.")
    page.wait_for_function(f"() => ({COLUMNS})().includes('students')", timeout=TIMEOUT_MS)
    settle(page)
    columns = page.evaluate(COLUMNS)
    assert columns[1:3] == ["[CLS]", "the"] and columns[-1] == "[SEP]", columns  # its own WordPiece pieces
    expect(page.locator("#output textarea, #output input").first).to_have_value(
        re.compile("encoder: it writes no text"))
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "trained-minilm.png"), full_page=True)
    assert page.evaluate(NO_SIDEWAYS)
    page.locator("#scale").get_by_text("off (plain q·k)").click()
    expect(page.locator("#info")).to_contain_text("not as it was trained", timeout=TIMEOUT_MS)
    settle(page)
    page.locator(f'{TILES}[data-layer="5"][data-head="7"]').click()
    expect(page.locator("#head_view")).to_have_attribute("data-head", "7", timeout=TIMEOUT_MS)
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator("#steps_view .av-hv")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#steps_text")).to_contain_text("d_k = 32", timeout=TIMEOUT_MS)
    settle(page)
    page.get_by_role("tab", name="Compare").click()
    expect(page.locator("#compare_text")).not_to_be_empty(timeout=TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "trained-minilm-compare.png"), full_page=True)
    # scoring its heads cannot be asked: both buttons are off, the reason (an encoder writes no output to score) and
    # what to pick under them, before any click; the notes say no causal mask, only what holds for an encoder
    expect(page.locator("#info")).to_contain_text("no causal mask (an encoder")
    expect(page.locator("#info")).not_to_contain_text("causal mask on")
    page.get_by_role("tab", name="Which heads matter").click()
    expect(page.locator("#score_heads")).to_be_disabled()
    expect(page.locator("#score_export")).to_be_disabled()
    expect(page.locator("#score_note")).to_contain_text("all-MiniLM-L6-v2 is an encoder alone: it writes no text")
    expect(page.locator("#score_note")).to_contain_text("Pick a model that writes text")
    page.screenshot(path=str(SCREENSHOTS / "trained-minilm-scoring-off.png"), full_page=True)
    page.get_by_role("tab", name="Heatmaps").click()
    expect(page.locator(TILES)).to_have_count(6 * 12)


def test_the_lessons_real_steps_on_the_trained_bert(page: Page, minilm_url):
    open_page(page, minilm_url)
    page.locator("#lesson").get_by_text("A guided lesson").click()
    for step in range(1, 11):
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of 13", timeout=TIMEOUT_MS)
    text = page.locator("#lesson_text").inner_text()
    assert "`all-MiniLM-L6-v2` is a real BERT model" in text or "all-MiniLM-L6-v2 is a real BERT model" in text
    assert "In encoder self-attention" in text and "writes no text" in text
    page.wait_for_function(f"() => ({CONTROLS})()[3] === {LABEL!r}", timeout=TIMEOUT_MS)
    _, d_k, scale, _ = page.evaluate(CONTROLS)
    assert (d_k, scale) == ("32", "none")
    layer, head = re.search(r"head L(\d+)·H(\d+) changes most", text).groups()
    view = page.locator("#head_view")
    for name, value in (("kind", "encoder.self_attn"), ("layer", layer), ("head", head)):
        expect(view).to_have_attribute(f"data-{name}", value, timeout=TIMEOUT_MS)
    page.locator("#lesson_next").click()  # footnote 4 in its own q and k
    expect(page.locator("#lesson_text")).to_contain_text("Step 11 of 13", timeout=TIMEOUT_MS)
    quoted = page.locator("#lesson_text").inner_text().split("Var q = ")[1].split(",")[0]
    expect(page.locator("#own_qk")).to_contain_text(quoted, timeout=TIMEOUT_MS)
    page.locator("#lesson_next").click()  # the last step says why this model's heads are not scored
    expect(page.locator("#lesson_text")).to_contain_text("Step 12 of 13", timeout=TIMEOUT_MS)
    expect(page.locator("#lesson_text")).to_contain_text("writes text", timeout=TIMEOUT_MS)
    expect(page.locator("#lesson_next")).to_have_text("Last step ▶")
    page.locator("#lesson_next").click()  # a page read at length: the sink and a head on the previous token
    expect(page.locator("#lesson_text")).to_contain_text("Step 13 of 13", timeout=TIMEOUT_MS)
    expect(page.locator("#lesson_next")).to_have_text("End of the lesson")
    expect(page.locator("#lesson_next")).to_be_disabled()
    head = re.search(r"(encoder\.\d+\.self_attn)`? head (\d+), open below", page.locator("#lesson_text").inner_text())
    expect(page.locator("#long_view .av-long-chosen")).to_contain_text(f"{head[1]}, head {head[2]}: sink ",
                                                                       timeout=TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "trained-minilm-lesson.png"), full_page=True)
