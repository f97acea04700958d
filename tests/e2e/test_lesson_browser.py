"""The guided lesson (#lesson) in Chromium: each step sets the controls and the tab it says, and its text carries
the numbers of the view it opens."""

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import TIMEOUT_MS, open_app, shot
from tests.e2e.test_lab_browser import set_number, showing

pytestmark = pytest.mark.browser
CONTROLS = """() => [document.querySelector('#text textarea, #text input').value, document.querySelector('#dk input').value,
    ([...document.querySelectorAll('#scale input')].find(i => i.checked) || {}).value,
    document.querySelector('#model input').value]"""
SELECTED_TAB = "() => [...document.querySelectorAll('button[role=tab]')].find(b => b.getAttribute('aria-selected') === 'true').innerText"


STEPS = 9


def go(page: Page, step: int) -> None:
    page.locator("#lesson_next").click()
    expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of {STEPS}", timeout=TIMEOUT_MS)


def test_the_lesson_sets_what_it_says(page: Page, app_url):
    open_app(page, app_url)
    page.locator("#lesson").get_by_text("A guided lesson").click()
    expect(page.locator("#lesson_text")).to_contain_text("Nine steps")
    joins = []
    page.on("request", lambda r: joins.append(r.post_data) if "/queue/join" in r.url else None)
    # 1: reverse at d_k 16, the explorer on the head that follows the anti-diagonal best
    go(page, 1)
    text = page.locator("#lesson_text").inner_text()
    assert "anti-diagonal" in text
    head = text.split("head L")[1].split(" ")[0]  # "1·H3"
    layer, number = head.split("·H")
    view = page.locator("#head_view")
    for name, value in (("kind", "decoder.cross_attn"), ("layer", layer), ("head", number)):
        expect(view).to_have_attribute(f"data-{name}", value, timeout=TIMEOUT_MS)
    expect(page.locator("#alignment tbody tr.av-selected")).to_have_attribute("data-head", number)
    # 3: the head that matters most switched off (text, model and d_k unchanged: only the heads rerun)
    go(page, 2)
    go(page, 3)
    text = page.locator("#lesson_text").inner_text()
    key, head = text.split("Without ")[1].split(", that falls")[0].split(" head ")
    expect(page.locator("#heads_off textarea, #heads_off input").first).to_have_value(f"{key}: {head}")
    changed = text.split("comes out as ")[1].split(" instead")[0]
    expect(page.locator("#output textarea, #output input").first).to_have_value(changed, timeout=TIMEOUT_MS)
    stack, layer, name = key.split(".")
    for attribute, value in (("kind", f"{stack}.{name}"), ("layer", layer), ("head", head)):
        expect(view).to_have_attribute(f"data-{attribute}", value, timeout=TIMEOUT_MS)
    expect(page.locator(f"#explorer [data-layer='{layer}'][data-head='{head}'].av-off")).to_have_count(1)
    shot(page, "lesson_heads", wait=False)
    # 4: scaling off at the largest trained d_k, and the broken output the text names; every head on again: the
    # step sets five controls and brings its run in one request, and nothing reruns after it
    page.wait_for_timeout(500)
    joins.clear()
    go(page, 4)
    expect(page.locator("#heads_off textarea, #heads_off input").first).to_have_value("")
    page.wait_for_function(f"() => ({CONTROLS})()[1] === '128'", timeout=TIMEOUT_MS)
    assert page.evaluate(CONTROLS)[2] == "none" and page.evaluate(CONTROLS)[3].startswith("reverse (trained with")
    broken = page.locator("#lesson_text").inner_text().split("the output breaks: ")[1].split(" ")[0]
    expect(page.locator("#output textarea, #output input").first).to_have_value(broken, timeout=TIMEOUT_MS)
    page.wait_for_timeout(1000)
    assert len(joins) == 1, joins
    # 5: the lab at d_k 512, unscaled, 32 keys (a person had moved the keys): the step brings the lab's view with its
    # controls in one request, and the view is current, not waiting for the keys asked before
    page.get_by_role("tab", name="√d_k lab").click()
    set_number(page, "lab_keys", "64")
    showing(page, 16, 64, True)
    joins.clear()
    go(page, 5)
    assert page.evaluate(SELECTED_TAB) == "√d_k lab"
    expect(page.locator("#lab_dk input")).to_have_value("512")
    expect(page.locator("#lab_scaled input")).not_to_be_checked()
    showing(page, 512, 32, False)
    page.wait_for_timeout(1000)
    assert len(joins) == 1, joins
    # 6: footnote 4 on the model's own q and k: the lab's own view on the head the text quotes
    go(page, 6)
    assert page.evaluate(SELECTED_TAB) == "√d_k lab"
    quoted = page.locator("#lesson_text").inner_text().split("Var q = ")[1].split(",")[0]
    expect(page.locator("#own_qk")).to_contain_text(quoted, timeout=TIMEOUT_MS)
    # 7: the training view at d_k 512 (loaded though the radio kept its value), in one request: opening the tab asks
    # for nothing more
    joins.clear()
    go(page, 7)
    assert page.evaluate(SELECTED_TAB) == "Training"
    expect(page.locator("#train_step")).to_have_attribute("data-d-k", "512", timeout=TIMEOUT_MS)
    page.wait_for_timeout(1000)
    assert len(joins) == 1, joins
    # 8: the study's additive model on the Transformer tab (its own model: a new model keeps the lesson's d_k)
    go(page, 8)
    assert page.evaluate(SELECTED_TAB) == "Transformer"
    page.wait_for_function(f"() => ({CONTROLS})()[3].includes('additive')", timeout=TIMEOUT_MS)
    page.wait_for_function(f"() => ({CONTROLS})()[1] === '1024'", timeout=TIMEOUT_MS)
    written = page.locator("#lesson_text").inner_text().split("and writes ")[1].split(". Pick")[0]
    expect(page.locator("#output textarea, #output input").first).to_have_value(written, timeout=TIMEOUT_MS)
    # 9: train one yourself, its choices set; the training view at d_k 1024 comes in the step's one request (the radio's
    # change and the tab's opening ask for nothing)
    joins.clear()
    go(page, 9)
    assert page.evaluate(SELECTED_TAB) == "Training"
    expect(page.locator("#train_step")).to_have_attribute("data-d-k", "1024", timeout=TIMEOUT_MS)
    page.wait_for_timeout(1000)
    assert len(joins) == 1, joins
    expect(page.locator("#live_dk input[value='1024']")).to_be_checked()
    expect(page.locator("#live_arm input[value='dot']")).to_be_checked()
    expect(page.locator("#lesson_next")).to_have_text("End of the lesson")
    expect(page.locator("#lesson_next")).to_be_disabled()
    page.locator("#lesson_prev").click()
    expect(page.locator("#lesson_text")).to_contain_text(f"Step 8 of {STEPS}", timeout=TIMEOUT_MS)
    shot(page, "lesson", wait=False)


def test_a_transformer_step_opens_the_heatmaps_whichever_view_was_left_open(page: Page, app_url):
    """Step 1 talks about the explorer and its scores: from the Compare view, it opens Heatmaps."""
    open_app(page, app_url)
    page.get_by_role("tab", name="Compare").click()
    expect(page.locator("#compare_text")).not_to_be_empty(timeout=TIMEOUT_MS)
    expect(page.locator("#head_view")).to_be_hidden()
    page.locator("#lesson").get_by_text("A guided lesson").click()
    go(page, 1)
    expect(page.get_by_role("tab", name="Heatmaps")).to_have_attribute("aria-selected", "true", timeout=TIMEOUT_MS)
    expect(page.locator("#head_view")).to_be_visible()
    expect(page.locator("#alignment tbody tr.av-selected")).to_be_visible()
