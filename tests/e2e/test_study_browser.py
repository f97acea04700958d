"""The compatibility study in the browser: pick a study model, switch its compatibility function, the explorer
redraws with the other family's member at the same d_k; other models hide the picker."""

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
TILES = "#explorer .av-tile"
HEAD = "() => [...document.querySelectorAll('#head_view td')].map(td => td.title).join(',')"


def settle(page: Page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS,
    )


def pick_model(page: Page, label: str) -> None:
    page.locator("#model input").click()
    page.get_by_role("option", name=label, exact=True).click()


def test_switching_the_compatibility_function_redraws_the_explorer(page: Page, app_url):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(app_url)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    picker, info = page.locator("#compatibility"), page.locator("#info")
    expect(picker).to_be_hidden()  # the default model is not the study's

    pick_model(page, "reverse, 1 head (study): scaled dot product")
    expect(info).to_contain_text("reverse_scaled_dot_dk8", timeout=TIMEOUT_MS)  # d_k 16 snaps to 8 (ties: smaller)
    expect(picker).to_be_visible()
    expect(page.locator(TILES)).to_have_count(1)  # 1 layer x 1 head
    settle(page)
    page.locator("#explorer .av-kind").select_option("decoder.cross_attn")
    before = page.evaluate(HEAD)

    picker.get_by_label("additive attention").check()
    expect(info).to_contain_text("reverse_additive_dk8", timeout=TIMEOUT_MS)
    expect(info).to_contain_text("Scaling does not apply")
    expect(page.locator("#model input")).to_have_value("reverse, 1 head (study): additive attention")
    page.wait_for_function(f"(before) => ({HEAD})() !== before", arg=before, timeout=TIMEOUT_MS)
    expect(page.locator("#scale input").first).to_be_disabled()
    settle(page)

    pick_model(page, "reverse (trained with 1/√d_k)")
    expect(info).to_contain_text("reverse_dk", timeout=TIMEOUT_MS)
    expect(picker).to_be_hidden()
    expect(page.locator("#scale input").first).to_be_enabled()
