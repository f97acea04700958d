"""Training, step by step (#train_step), in the browser: the study's three compatibility functions at one d_k.

Opening the tab asks the server once; a step, a probe or a kind then changes in the page only, with the numbers
/training sent. A new d_k is one more request; the radio offers only the trained sizes.
"""

import base64

import numpy as np
import pytest
from gradio_client import Client
from playwright.sync_api import Page, expect

from tests.e2e.test_visual_browser import TOFU_JS

from devtools.browser import READABLE_JS
from tests.e2e.test_browser import TIMEOUT_MS, app_requests, open_app, shot

pytestmark = pytest.mark.browser
ROOT = "#train_step"
SLIDER = f"{ROOT} input[type=range]"


def open_training(page: Page, app_url: str, width: int = 1280) -> dict:
    open_app(page, app_url, width=width)
    page.get_by_role("tab", name="Training").click()
    expect(page.locator(f"{ROOT} [data-arm]")).to_have_count(3, timeout=TIMEOUT_MS)
    return Client(app_url, verbose=False).predict(d_k="512", api_name="/training")


def test_steps_probes_and_kinds_change_in_the_page(page: Page, app_url):
    data = open_training(page, app_url)
    assert data["d_k"] == 512 and [a["arm"] for a in data["arms"]] == ["scaled_dot", "dot", "additive"]
    last = len(data["steps"]) - 1
    expect(page.locator(ROOT)).to_have_attribute("data-step", str(last))  # opens on the trained models
    expect(page.locator(ROOT)).to_have_attribute("data-d-k", "512")
    requests = app_requests(page, app_url)
    for index in (0, 17):
        page.locator(SLIDER).fill(str(index))
        expect(page.locator(ROOT)).to_have_attribute("data-step", str(index))
        expect(page.locator(f"{ROOT} .av-train-status")).to_contain_text(f"step {data['steps'][index]} of 1000")
        for arm in data["arms"]:
            section = page.locator(f'{ROOT} [data-arm="{arm["arm"]}"]')
            expect(section.locator(".av-arm-numbers")).to_contain_text(f"alignment {arm['alignment'][index]:.2f}")
            shape = arm["shape"]["decoder.0.cross_attn"]
            maps = np.frombuffer(base64.b64decode(arm["maps"]["decoder.0.cross_attn"]), np.uint8).reshape(shape)
            row = maps[index, 0, 0, 1, : len(data["tokens"]["source"][0])] / 255  # probe 0, head 0, query 1
            texts = section.locator("tbody tr").nth(1).locator("td").all_inner_texts()
            assert texts == ["1" if w >= 0.995 else f"{w:.2f}".removeprefix("0") for w in row]  # ".96": no "0"
    page.select_option(f"{ROOT} .av-probe", "3")
    source = data["tokens"]["source"][3]
    expect(page.locator(f'{ROOT} [data-arm="dot"] thead th')).to_have_count(1 + len(source))
    page.select_option(f"{ROOT} .av-kind", "decoder.0.self_attn")
    expect(page.locator(f'{ROOT} [data-arm="dot"] td.av-masked').first).to_be_visible()  # the causal mask
    page.locator(f"{ROOT} .av-play").click()
    assert page.locator(f"{ROOT} .av-play").evaluate(TOFU_JS) == []  # its pause mark is drawn, not a missing glyph
    assert page.locator(f"{ROOT} .av-play .av-pause-mark").bounding_box()["width"] >= 6
    expect(page.locator(ROOT)).to_have_attribute("data-step", "18", timeout=5_000)
    page.locator(f"{ROOT} .av-play").click()
    assert requests == [], requests
    measured = page.locator(ROOT).evaluate(READABLE_JS)
    assert measured["smallest"] >= 11 and measured["outside"] == 0, measured
    assert min(value_gaps(page)) >= 6  # the weights of a row read apart, not as "0.000.000.00"
    for arm in ("scaled_dot", "dot", "additive"):  # and each map fits its panel at 1280 px: no column hidden
        assert page.locator(f'{ROOT} [data-arm="{arm}"] .av-arm-map').evaluate("m => m.scrollWidth <= m.clientWidth")
    shot(page, "training", wait=False)


def value_gaps(page: Page) -> list[float]:
    """The space (px) between the texts of neighbouring value cells in every map row."""
    return page.locator(f"{ROOT} .av-map tbody tr").evaluate_all("""rows => rows.flatMap(row => {
        const boxes = [...row.querySelectorAll('td')].filter(c => c.textContent.trim()).map(c => {
            const range = document.createRange(); range.selectNodeContents(c); return range.getBoundingClientRect(); });
        return boxes.slice(1).map((box, i) => box.left - boxes[i].right);
    })""")


def test_a_new_d_k_is_one_request_and_only_trained_sizes_exist(page: Page, app_url):
    data = open_training(page, app_url)
    radios = page.locator("#train_dk input[type=radio]")
    assert [radios.nth(i).get_attribute("value") for i in range(radios.count())] == [str(s) for s in data["d_ks"]]
    page.locator(SLIDER).fill("5")
    page.locator("#train_dk").get_by_label("32").check()
    expect(page.locator(ROOT)).to_have_attribute("data-d-k", "32", timeout=TIMEOUT_MS)
    expect(page.locator(ROOT)).to_have_attribute("data-step", "5")  # the step is kept
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match="d_k must be one of the trained sizes 8, 32, 128, 512, 1024"):
        Client(app_url, verbose=False).predict(d_k="64", api_name="/training")


@pytest.mark.parametrize("phone", [320, 390])
def test_phone_width(page: Page, app_url, phone):
    open_training(page, app_url, width=phone)
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], width
    boxes = page.locator(f"{ROOT} [data-arm]").evaluate_all("s => s.map(e => Math.round(e.getBoundingClientRect().left))")
    assert len(set(boxes)) == 1, boxes  # the three arms stack
    rights = page.locator(f"{ROOT} select, {ROOT} button, {ROOT} input").evaluate_all(
        "es => es.map(e => e.getBoundingClientRect().right)")
    assert max(rights) <= phone, rights  # no control runs off the screen
    arms = page.locator(f"{ROOT} [data-arm]").evaluate_all("s => s.map(e => e.getBoundingClientRect().right)")
    assert max(arms) <= phone, arms  # nor a panel
    # the charts are scaled to their panel: their text, as drawn on the screen, is still 11 px
    drawn = page.locator(f"{ROOT} svg.av-curve").evaluate_all("""ss => ss.flatMap(s => {
        const scale = s.getBoundingClientRect().width / s.viewBox.baseVal.width;
        return [...s.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale); })""")
    assert drawn and min(drawn) >= 10.95, min(drawn)
    shot(page, f"training_phone_{phone}", wait=False)


def test_train_it_yourself_streams_and_cancels_while_others_are_answered(page: Page, browser, app_url):
    open_training(page, app_url)
    page.locator("#live_dk").get_by_label("1024", exact=True).check()  # the slowest dot product: time to look
    page.locator("#live_arm").get_by_label("plain dot product (no 1/√d_k)").check()
    expect(page.locator("#live_cancel")).to_be_disabled()  # nothing of this page's is training: nothing to cancel
    page.locator("#live_start").click()
    expect(page.locator("#live_cancel")).to_be_enabled(timeout=TIMEOUT_MS)
    live = page.locator("#live_train")
    page.wait_for_function("() => +(document.querySelector('#live_train') || {dataset: {}}).dataset.step >= 5",
                           timeout=TIMEOUT_MS)  # a few snapshots in: it streams
    expect(page.locator("#live_status")).to_contain_text("Training: step")
    expect(live.locator("[data-arm]")).to_have_count(1)
    # another user, meanwhile: the Transformer tab answers a new text
    other = browser.new_page()
    try:
        open_app(other, app_url)
        other.locator("#text input, #text textarea").first.fill("abcd")
        other.locator("#text input, #text textarea").first.press("Enter")
        expect(other.locator("#output textarea, #output input").first).to_have_value("dcba", timeout=TIMEOUT_MS)
    finally:
        other.close()
    expect(page.locator("#live_status")).to_contain_text("Training: step")  # still training when it answered
    page.locator("#live_cancel").click()
    expect(page.locator("#live_cancel_status")).to_contain_text("Cancel asked", timeout=TIMEOUT_MS)
    # the run's own last line, whichever of the two answers came first (the cancel's never writes over it)
    expect(page.locator("#live_status")).to_contain_text("Cancelled after step", timeout=TIMEOUT_MS)
    expect(page.locator("#live_cancel")).to_be_disabled(timeout=TIMEOUT_MS)  # the run ended: off again
    shot(page, "training_live", wait=False)
