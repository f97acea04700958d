"""The lab's "this model's own q·k" in Debian's Chromium: the head's histogram drawn by the lab's chart code inside
its axes, and the table's numbers equal to the service's, for the opening head and after picking another model, head
and mode. A screenshot at 1280x800 goes to tests/screenshots/ (git-ignored)."""

import re

import pytest
from playwright.sync_api import Page, expect

from attention_viz.service.catalog import Catalog
from attention_viz.service.qk_view import OwnQK
from tests.e2e.test_lab_browser import PROBLEMS_JS, SCREENSHOTS, TIMEOUT_MS

pytestmark = pytest.mark.browser
VIEW = "#own_qk .av-own"
# a chart's x axis labels, left to right: the tick labels on the bottom row (the y axis's sit at the left, one a row)
X_TICKS = """(svg) => { const labels = [...svg.querySelectorAll('.avl-axis text:not(.avl-title)')];
    const bottom = Math.max(...labels.map(t => +t.getAttribute('y')));
    return labels.filter(t => +t.getAttribute('y') === bottom).sort((a, b) => a.getAttribute('x') - b.getAttribute('x'))
        .map(t => t.textContent); }"""


def pick(page: Page, elem_id: str, option: str) -> None:
    """Choose a dropdown's option as a person does: open it, click the option."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def drawn(page: Page, data: dict) -> None:
    """Wait until the view draws this head, then check its table cell by cell against the service's numbers."""
    mode = "scaled by 1/√d_k" if data["scaled"] else "unscaled"
    expect(page.locator(f"{VIEW} .avl-heading")).to_have_text(
        f"{data['label']} · {data['key']}, head {data['head']} · {mode}", timeout=TIMEOUT_MS)
    expect(page.locator(VIEW)).to_have_attribute("data-state", "ready", timeout=TIMEOUT_MS)
    rows = page.locator(f"{VIEW} table[data-role=own-numbers] tbody tr")
    expect(rows).to_have_count(len(data["numbers"]["data"]))
    shown = rows.evaluate_all("rows => rows.map(r => [...r.children].map(c => c.textContent))")
    for row, expected in zip(shown, data["numbers"]["data"]):
        assert row[0] == expected[0] and row[2] == str(expected[2])
        assert float(row[1]) == expected[1], (row, expected)  # the service's number, as the page writes it
    bars = page.locator(f"{VIEW} svg[data-chart=histogram] [data-role=bar]")
    expect(bars).to_have_count(len(data["histogram"]["counts"]))
    assert page.locator(VIEW).evaluate(PROBLEMS_JS) == []


def opened(page: Page, app_url: str, own: OwnQK, width: int, height: int) -> None:
    """The lab's tab at this size, its own view drawn for the opening head (checked against the service)."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    page.locator("#own_qk").scroll_into_view_if_needed()
    expect(page.locator(f"{VIEW} svg[data-chart=histogram]")).to_be_visible(timeout=TIMEOUT_MS)
    drawn(page, own.view("reverse", "decoder.cross_attn", 0, 0, True))


def test_the_own_view_draws_the_services_numbers_for_each_head_picked(page: Page, app_url):
    own = OwnQK(Catalog())
    opened(page, app_url, own, 1280, 800)

    pick(page, "own_model", "reverse (trained without scaling), d_k = 64")
    drawn(page, own.view("reverse_dk64_unscaled", "decoder.cross_attn", 0, 0, True))
    pick(page, "own_layer", "1")
    drawn(page, own.view("reverse_dk64_unscaled", "decoder.cross_attn", 1, 0, True))
    pick(page, "own_head", "2")
    page.locator("#own_scaled input[type=checkbox]").uncheck()
    data = own.view("reverse_dk64_unscaled", "decoder.cross_attn", 1, 2, False)
    drawn(page, data)
    for status in page.locator("[data-testid=status-tracker]").all():
        expect(status).to_have_class(re.compile(r"\bhide\b"), timeout=TIMEOUT_MS)
    page.locator("#own_model").scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "own_qk_1280x800.png"))


def test_the_own_view_fits_a_phone(page: Page, app_url):
    """At 390 px the histogram and its table stay inside the page (no sideways scroll), the text at least 11 px."""
    own = OwnQK(Catalog())
    opened(page, app_url, own, 390, 844)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    for selector in (VIEW, f"{VIEW} svg[data-chart=histogram]", f"{VIEW} table[data-role=own-numbers]"):
        box = page.locator(selector).first.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 1, (selector, box)
    page.locator(f"{VIEW} svg[data-chart=histogram]").scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "own_qk_390.png"))


def test_the_histogram_of_a_head_far_past_the_law_has_ticks_to_read_its_spread(page: Page, app_url):
    """reverse's layer 1 head 0 (the lesson's step 6): its scaled logits spread to about ±47, far past footnote 4's
    law (±5); the x axis carries round ticks across that range, at least 5 labelled, not one "0"."""
    own = OwnQK(Catalog())
    opened(page, app_url, own, 1280, 800)
    pick(page, "own_layer", "1")
    data = own.view("reverse", "decoder.cross_attn", 1, 0, True)
    drawn(page, data)
    span = data["histogram"]["edges"][-1]
    assert span > 30  # the head the claim is about: its range is many times the law's
    x_ticks = page.locator(f"{VIEW} svg[data-chart=histogram]").evaluate(X_TICKS)
    values = [float(t.replace("−", "-")) for t in x_ticks]
    assert len(values) >= 5 and values[0] <= -span / 2 and values[-1] >= span / 2, x_ticks
    page.locator(f"{VIEW} svg[data-chart=histogram]").screenshot(path=str(SCREENSHOTS / "own_qk_far_histogram.png"))
