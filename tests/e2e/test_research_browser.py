"""The research views in the launched app, in Debian's headless Chromium: a stack's rollout and attention flow in the
Heatmaps' Show, the duplicate-token column, and the Compare tab's "another text" and "another model" (a bad second
text refused with a message, the rest as it was); screenshots at 1280 and 390 px in tests/screenshots/research_*.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import COMPARE_ROOT, SCREENSHOTS, TIMEOUT_MS, open_app, settle, shot

pytestmark = pytest.mark.browser
# every header and value cell of a view shows its whole text (no label cut; a wide table scrolls in its own box)
CUT = """(root) => [...document.querySelectorAll(root + ' th, ' + root + ' td')].filter(
    c => c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1).map(c => c.textContent)"""



def view_shot(page: Page, selector: str, name: str) -> None:
    """The whole page, and the one view alone (readable at full size)."""
    shot(page, name)
    page.locator(selector).first.screenshot(path=str(SCREENSHOTS / f"{name}_view.png"))


@pytest.mark.parametrize("width", [1280, 390])
def test_the_stack_views_in_the_heatmaps(page: Page, app_url, width):
    open_app(page, app_url, width=width)
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    show = page.locator("#explorer .av-show")
    # "attention" (10 tokens): flow is past the app's budget, so it stays listed, disabled, and the line under the
    # controls says why
    expect(show.locator("option")).to_have_text(["attention weights α", "what flows (α·‖v W_O‖)",
                                                 "rollout of the stack", "attention flow of the stack (off)"])
    expect(show.locator("option[value=flow]")).to_be_disabled()
    why = page.locator("#explorer .av-show-why")
    expect(why).to_contain_text("Attention flow is computed in the app for short inputs only")
    expect(why).to_contain_text("2 layers × 10 tokens")
    show.select_option("rollout")
    caption = page.locator("#head_view .av-caption")
    expect(caption).to_contain_text("rollout of the whole stack")
    expect(caption).to_contain_text("residual 0.5")
    expect(page.locator("#explorer .av-grid")).to_be_hidden()
    expect(page.locator("#head_view tbody tr")).to_have_count(len("attention") + 1)
    assert page.evaluate(CUT, "#head_view") == []
    view_shot(page, ".av-explorer", f"research_rollout_{width}")
    page.locator("#text input, #text textarea").first.fill("hello")  # 6 tokens: within it
    expect(page.locator("#head_view tbody tr")).to_have_count(len("hello") + 1, timeout=TIMEOUT_MS)
    expect(show.locator("option[value=flow]")).to_be_enabled()
    expect(why).to_be_hidden()
    show.select_option("flow")
    expect(caption).to_contain_text("attention flow of the whole stack")
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    expect(caption).to_contain_text("masked self-attention only")
    view_shot(page, ".av-explorer", f"research_flow_decoder_{width}")
    # back to a text past the budget while flow is shown: the weights come back, flow stays listed, and says why
    page.locator("#text input, #text textarea").first.fill("attention")
    expect(page.locator("#explorer .av-grid")).to_be_visible(timeout=TIMEOUT_MS)
    expect(show).to_have_value("weights")
    expect(show.locator("option[value=flow]")).to_be_disabled()
    expect(why).to_contain_text("Attention flow is computed in the app for short inputs only")
    page.locator("#text input, #text textarea").first.fill("hello")
    expect(show.locator("option[value=flow]")).to_be_enabled(timeout=TIMEOUT_MS)
    page.select_option("#explorer .av-kind", "encoder.self_attn")  # "hello": two l's
    expect(page.locator("#alignment thead")).to_contain_text("duplicate token")


@pytest.mark.parametrize("width", [1280, 390])
def test_compare_another_text_and_another_model(page: Page, app_url, width):
    open_app(page, app_url, width=width)
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    page.get_by_role("tab", name="Compare").click()
    compare = page.locator(COMPARE_ROOT)
    expect(compare).to_have_attribute("data-comparison", "scaling", timeout=TIMEOUT_MS)
    page.get_by_label("another text").check()
    second = page.locator("#compare_text_b input, #compare_text_b textarea").first
    expect(second).to_have_value("attentive")
    expect(compare).to_have_attribute("data-comparison", "text", timeout=TIMEOUT_MS)
    note = page.locator(f"{COMPARE_ROOT} .av-note")
    expect(note).to_contain_text("not aligned: in a “o”, “n”; in b “v”, “e”")
    expect(page.locator(f"{COMPARE_ROOT} td.av-unaligned").first).to_be_visible()
    assert page.evaluate(CUT, COMPARE_ROOT) == []
    view_shot(page, COMPARE_ROOT, f"research_compare_text_{width}")
    page.locator(f"{COMPARE_ROOT} .av-pick[data-pick=b]").click()
    expect(page.locator(f"{COMPARE_ROOT} tbody tr").nth(7).locator("th")).to_have_text("v")  # b's own tokens
    # a bad second text: a message, and the comparison on screen marked stale, not replaced
    second.fill("")
    second.press("Enter")
    expect(page.locator("[data-testid=toast-body]").first).to_contain_text("Write the second text (b)",
                                                                            timeout=TIMEOUT_MS)
    expect(page.locator(f"{COMPARE_ROOT} tbody tr").nth(7).locator("th")).to_have_text("v")
    expect(page.locator("#head_view tbody tr")).to_have_count(len("attention") + 1)  # the run itself unchanged
    page.get_by_label("another model").check()
    model = page.locator("#compare_model_b input").first
    model.click()
    page.get_by_role("option", name="copy").first.click()
    expect(compare).to_have_attribute("data-comparison", "model", timeout=TIMEOUT_MS)
    expect(page.locator("#compare_text")).to_contain_text("copy", timeout=TIMEOUT_MS)
    # a and b named as the picker names them, never by its values ("reverse/sqrt_dk"), and each name whole
    expect(page.locator(f"{COMPARE_ROOT} .av-pick[data-pick=a]")).to_have_text(
        "a: reverse (trained with 1/√d_k), d_k = 16")
    expect(page.locator(f"{COMPARE_ROOT} .av-pick[data-pick=b]")).to_contain_text("b: copy (trained with")
    shown = page.locator(COMPARE_ROOT).inner_text() + page.locator("#compare_text").inner_text()
    assert "/sqrt_dk" not in shown and "/none" not in shown
    assert page.evaluate("""(root) => [...document.querySelectorAll(root + ' .av-pick')].filter(
        b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent)""", COMPARE_ROOT) == []
    settle(page)
    view_shot(page, COMPARE_ROOT, f"research_compare_model_{width}")


def test_score_induction_heads_in_which_heads_matter(page: Page, app_url):
    open_app(page, app_url, width=1280)
    page.get_by_role("tab", name="Which heads matter").click()
    page.locator("#score_induction").click()
    induction = page.locator("#induction")
    expect(induction).to_contain_text("Strongest:", timeout=TIMEOUT_MS)
    expect(induction).to_contain_text("Induction heads of reverse (trained with 1/√d_k), d_k = 16")  # not its value
    expect(induction.locator("table")).to_have_count(2)  # encoder and decoder self-attention
    assert page.evaluate(CUT, "#induction") == []
    settle(page)
    induction.screenshot(path=str(SCREENSHOTS / "research_induction_1280_view.png"))
