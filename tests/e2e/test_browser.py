"""The app as a person uses it: Debian's headless Chromium through Playwright, against the launched app.

Screenshots go to tests/screenshots/ (git-ignored). These tests skip only where /usr/bin/chromium is
missing, and `bash .ci/run` installs it, so in CI they always run.
"""

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from attention_viz.draw import raster
from attention_viz.data.tokenizer import DEFAULT_MAX_LEN
from attention_viz.service.views import grid_cell

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000


def settle(page: Page) -> None:
    """Wait until no output is updating (every status tracker hidden)."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS,
    )


def shot(page: Page, name: str, wait: bool = True) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    if wait:
        settle(page)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def changed(page: Page, elem_id: str, before: str) -> str:
    """Wait until the image of `elem_id` has a new src, and return it."""
    expect(page.locator(f"#{elem_id} img")).not_to_have_attribute("src", before, timeout=TIMEOUT_MS)
    return page.locator(f"#{elem_id} img").get_attribute("src")


def head_html(page: Page) -> str:
    """The detailed head's table, as HTML."""
    return page.locator("#head_table table").evaluate("t => t.outerHTML")


def head_changed(page: Page, before: str) -> str:
    """Wait until the detailed head's table differs from `before`, and return it."""
    page.wait_for_function(
        "(before) => { const t = document.querySelector('#head_table table'); return t && t.outerHTML !== before; }",
        arg=before, timeout=TIMEOUT_MS,
    )
    return head_html(page)


def set_number(page: Page, elem_id: str, value: str) -> None:
    """Type into a slider's or a number's box and leave it, as a person does (fires change and release)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Tab")


def open_app(page: Page, app_url: str, untrained: bool = False) -> None:
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(app_url)
    expect(page.locator("#grid img")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#head_table table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    if untrained:
        before = page.locator("#info").inner_text()
        page.locator("#model input").click()
        page.get_by_role("option", name="untrained (random weights)").click()
        expect(page.locator("#info")).to_contain_text("Untrained model", timeout=TIMEOUT_MS)
        assert before != page.locator("#info").inner_text() or "Untrained model" in before
        settle(page)


def test_page_loads_with_every_view(page: Page, app_url):
    open_app(page, app_url)
    assert page.locator("#grid img").get_attribute("src")
    n = len("attention") + 1  # the default text and <eos>: encoder self-attention is n × n
    cells = page.locator("#head_table td[title]")
    expect(cells).to_have_count(n * n)
    first = cells.first
    weight = float(first.get_attribute("title").rsplit(": ", 1)[1])  # "query 0 → key 0: 0.1234"
    assert first.inner_text() == f"{weight:.2f}"  # the value is written in the cell
    index = int(np.clip(weight * 255 + 0.5, 0, 255))
    expected = "rgb({}, {}, {})".format(*raster.colormap_lut()[index])
    assert first.evaluate("td => getComputedStyle(td).backgroundColor") == expected  # its colour survived the page
    expect(page.locator("#output input, #output textarea").first).not_to_have_value("", timeout=TIMEOUT_MS)
    expect(page.locator("#stats")).to_contain_text("entropy")
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ")
    shot(page, "transformer")


def test_typing_text_changes_the_maps_and_the_output(page: Page, app_url):
    open_app(page, app_url)
    output = page.locator("#output input, #output textarea").first
    head, said = head_html(page), output.input_value()
    page.locator("#text input, #text textarea").first.fill("transformer")
    head_changed(page, head)
    expect(output).not_to_have_value(said, timeout=TIMEOUT_MS)
    expect(page.locator("#head_table table")).to_be_visible()


def test_d_k_scaling_and_masks_change_the_maps(page: Page, app_url):
    open_app(page, app_url, untrained=True)
    head = head_html(page)

    set_number(page, "dk_log", "6")  # the log₂ slider moves d_k to 2⁶ in the browser, then the model reruns
    expect(page.locator("#dk input")).to_have_value("64", timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("d_k 64", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    set_number(page, "dk", "300")  # d_k is free for the untrained model
    expect(page.locator("#info")).to_contain_text("d_k 300", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    page.get_by_label("off (plain q·k)").check()
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ unscaled", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    page.get_by_label("masked decoder self-attention").check()
    head = head_changed(page, head)
    page.locator("#causal input[type=checkbox]").uncheck()
    expect(page.locator("#info")).to_contain_text("causal mask off", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    page.get_by_label("encoder self-attention", exact=True).check()
    head = head_changed(page, head)
    set_number(page, "pads", "3")
    expect(page.locator("#info")).to_contain_text("3 pad tokens with the padding mask on", timeout=TIMEOUT_MS)
    head = head_changed(page, head)
    page.locator("#padding input[type=checkbox]").uncheck()
    expect(page.locator("#info")).to_contain_text("padding mask off", timeout=TIMEOUT_MS)
    head_changed(page, head)
    shot(page, "switches")


def test_clicking_the_grid_opens_that_head(page: Page, app_url):
    open_app(page, app_url, untrained=True)
    n = len("attention") + 1  # the default text and <eos>: encoder self-attention is n × n
    layout = raster.grid_layout((2, 4, n, n), cell=grid_cell((2, 4, n, n)), labels=True)
    y, x = layout.origin(1, 2)
    grid = page.locator("#grid img")
    natural = grid.evaluate("e => [e.naturalWidth, e.clientWidth]")
    ratio = natural[1] / natural[0]
    grid.click(position={"x": (x + 3) * ratio, "y": (y + 3) * ratio})
    expect(page.locator("#layer input[type=number]")).to_have_value("1", timeout=TIMEOUT_MS)
    expect(page.locator("#head input[type=number]")).to_have_value("2", timeout=TIMEOUT_MS)


def test_step_view_and_compare_follow_the_controls(page: Page, app_url):
    open_app(page, app_url, untrained=True)
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator("#steps_image img")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#steps_text")).to_contain_text("softmax")
    steps = page.locator("#steps_image img").get_attribute("src")
    set_number(page, "head", "3")
    changed(page, "steps_image", steps)
    shot(page, "steps")

    page.get_by_role("tab", name="Compare").click()
    expect(page.locator("#compare_image img")).to_be_visible(timeout=TIMEOUT_MS)
    before = page.locator("#compare_image img").get_attribute("src")
    page.get_by_label("causal mask on − causal mask off").check()
    expect(page.locator("#compare_text")).to_contain_text("causal mask", timeout=TIMEOUT_MS)
    changed(page, "compare_image", before)
    shot(page, "compare")


def test_the_lab_renders_and_follows_d_k_and_scaling(page: Page, app_url):
    open_app(page, app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    for elem_id in ("lab_histogram", "lab_softmax", "lab_sweep", "family"):
        expect(page.locator(f"#{elem_id} img")).to_be_visible(timeout=TIMEOUT_MS)
    histogram = page.locator("#lab_histogram img").get_attribute("src")
    set_number(page, "lab_dk_log", "10")
    expect(page.locator("#lab_dk input")).to_have_value("1024", timeout=TIMEOUT_MS)
    expect(page.locator("#lab_numbers")).to_contain_text("1024 and 1", timeout=TIMEOUT_MS)
    histogram = changed(page, "lab_histogram", histogram)
    softmax = page.locator("#lab_softmax img").get_attribute("src")
    page.locator("#lab_scaled input[type=checkbox]").uncheck()
    histogram = changed(page, "lab_histogram", histogram)
    changed(page, "lab_softmax", softmax)
    shot(page, "lab")


def test_over_long_text_shows_an_error_and_the_app_recovers(page: Page, app_url):
    open_app(page, app_url)
    text = page.locator("#text input, #text textarea").first
    text.fill("x" * 31)
    toast = page.locator("[data-testid=toast-body]")
    expect(toast.first).to_contain_text(f"Text is 31 characters; the maximum is {DEFAULT_MAX_LEN}.", timeout=TIMEOUT_MS)
    shot(page, "error", wait=False)  # the failed output keeps its error status, so don't wait for it
    head = head_html(page)
    text.fill("recovered")
    head_changed(page, head)
