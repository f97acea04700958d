"""Honest inputs in the browser: a trained model's d_k stops at its trained sizes only; the untrained one is free."""

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import TIMEOUT_MS, open_app, set_number, settle

pytestmark = pytest.mark.browser


def test_a_trained_models_d_k_stops_at_its_trained_sizes(page: Page, app_url):
    open_app(page, app_url)  # reverse, trained at d_k 4, 16, 64, 128
    radio = page.locator("#dk_trained")
    values = radio.locator("input[type=radio]").evaluate_all("es => es.map(e => e.value)")
    assert values == ["4", "16", "64", "128"]
    expect(page.locator("#dk_log")).to_be_hidden()  # no slider positions between the trained sizes
    radio.get_by_label("64", exact=True).check()
    expect(page.locator("#dk input")).to_have_value("64")
    expect(page.locator("#info")).to_contain_text("d_k 64", timeout=TIMEOUT_MS)
    set_number(page, "dk", "100")  # typed: the run snaps to the nearest trained size, and the radio follows
    expect(radio.locator("input[value='128']")).to_be_checked(timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("showing the nearest, d_k = 128", timeout=TIMEOUT_MS)
    # the untrained model: any d_k, on the log₂ slider
    page.locator("#model input").click()
    page.get_by_role("option", name="untrained (random weights)").click()
    expect(page.locator("#dk_log")).to_be_visible(timeout=TIMEOUT_MS)
    expect(radio).to_be_hidden()


def test_an_example_fills_the_text_and_runs_and_another_text_clears_the_choice(page: Page, app_url):
    open_app(page, app_url)
    examples = page.locator("#examples")
    examples.locator("label", has_text="softmax").click()
    expect(page.locator("#text textarea, #text input").first).to_have_value("softmax")
    expect(page.locator("#explorer .av-output code")).to_have_text("xamtfos", timeout=TIMEOUT_MS)  # reversed
    expect(examples.locator("input:checked")).to_have_count(1)
    box = page.locator("#text textarea, #text input").first
    box.click()
    box.press("End")
    box.press_sequentially("x", delay=30)  # a person types: the example no longer describes the text
    expect(examples.locator("input:checked")).to_have_count(0)
    examples.locator("label", has_text="hello").click()
    expect(examples.locator("input:checked")).to_have_count(1)
    expect(page.locator("#explorer .av-output code")).to_have_text("olleh", timeout=TIMEOUT_MS)
    box.fill("queries")  # the text set another way (as a lesson's step sets it): the choice goes too
    box.press("Tab")
    expect(examples.locator("input:checked")).to_have_count(0)


def lab_table(page: Page, app_url: str):
    """The lab's tab opened, its table of numbers drawn."""
    open_app(page, app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    table = page.locator("#lab_numbers table")
    expect(table).to_be_visible(timeout=TIMEOUT_MS)
    return table


def test_the_labs_numbers_are_a_readable_table_that_follows_d_k(page: Page, app_url):
    table = lab_table(page, app_url)
    assert table.locator("thead th").all_inner_texts()[0] == "quantity"
    expect(table.locator("tbody tr")).to_have_count(4)
    set_number(page, "lab_dk", "256")
    expect(table.locator("tbody tr").first).to_contain_text("256 and 1", timeout=TIMEOUT_MS)
    size = table.locator("tbody td").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 11


JOINS = """() => performance.getEntriesByType('resource').filter(e => e.name.includes('/queue/join')).length"""


def joins(page: Page) -> int:
    """How many events the page has sent to the queue so far."""
    return page.evaluate(JOINS)


def test_a_click_into_a_sliders_box_or_its_range_unmoved_sends_nothing(page: Page, app_url):
    """Gradio fires a slider's release on every pointerup and blur of its number box: a click into the box, or on
    the slider where it stands, leaving the box, is no new value and asks nothing of the server."""
    open_app(page, app_url, untrained=True)  # the untrained model's d_model and heads sliders are live
    settle(page)
    before = joins(page)
    for elem_id in ("pads", "d_model", "n_heads"):
        page.locator(f"#{elem_id} input[type=number]").click()
        page.locator(f"#{elem_id} input[type=number]").press("Tab")
    page.wait_for_timeout(1500)
    assert joins(page) == before
    set_number(page, "pads", "3")  # a new value still runs, once
    expect(page.locator("#info")).to_contain_text("3 pad tokens", timeout=TIMEOUT_MS)
    settle(page)
    assert joins(page) == before + 1


@pytest.mark.parametrize("elem_id, typed", [("pads", "4"), ("dk", "64"), ("factor", "0.25")])
def test_a_number_box_applies_on_enter_and_never_a_part_typed(page: Page, app_url, elem_id, typed):
    """A person types a number and presses Enter: it applies then, once (not when the box loses the focus later, not
    "0" of "0.25", which would be refused, nor "6" of "64", which would run); leaving the box adds nothing."""
    open_app(page, app_url)
    if elem_id == "factor":
        page.locator("#scale").get_by_text("custom factor").click()
        expect(page.locator("#info")).to_contain_text("(custom)", timeout=TIMEOUT_MS)
    settle(page)
    box = page.locator(f"#{elem_id} input[type=number]")
    box.click()
    box.press("Control+a")
    before = joins(page)
    box.press_sequentially(typed, delay=120)
    page.wait_for_timeout(1500)
    assert joins(page) == before  # nothing sent while typing
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)
    box.press("Enter")
    said = {"pads": f"{typed} pad tokens", "dk": "d_k 64", "factor": "×0.25 (custom)"}[elem_id]
    expect(page.locator("#info")).to_contain_text(said, timeout=TIMEOUT_MS)
    settle(page)
    sent = joins(page)
    assert sent == before + 1, (before, sent)
    box.press("Tab")  # leaving the box: already applied
    page.wait_for_timeout(1500)
    assert joins(page) == sent
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)


def test_the_labs_d_k_box_applies_on_enter(page: Page, app_url):
    table = lab_table(page, app_url)
    box = page.locator("#lab_dk input[type=number]")
    box.click()
    box.press("Control+a")
    box.press_sequentially("0", delay=100)  # on its own, "0" would be refused: it is only the start of what is typed
    page.wait_for_timeout(1000)
    expect(page.locator("#lab_view [role=status]:visible")).to_have_count(0)  # nothing marked stale meanwhile
    box.press_sequentially("12", delay=100)  # "012": 12
    page.wait_for_timeout(1000)
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)
    box.press("Enter")
    expect(table.locator("tbody tr").first).to_contain_text("12 and 1", timeout=TIMEOUT_MS)
