"""Honest inputs in the browser: a trained model's d_k stops at its trained sizes only; the untrained one is free."""

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import TIMEOUT_MS, open_app, set_number

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


def test_the_labs_numbers_are_a_readable_table_that_follows_d_k(page: Page, app_url):
    open_app(page, app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    table = page.locator("#lab_numbers table")
    expect(table).to_be_visible(timeout=TIMEOUT_MS)
    assert table.locator("thead th").all_inner_texts()[0] == "quantity"
    expect(table.locator("tbody tr")).to_have_count(4)
    set_number(page, "lab_dk", "256")
    expect(table.locator("tbody tr").first).to_contain_text("256 and 1", timeout=TIMEOUT_MS)
    size = table.locator("tbody td").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 11
