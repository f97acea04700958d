"""What a person sees, checked as properties in Chromium: a mark that can be read, a choice shown whole, a note not
covered, a legend that agrees with its figure, a table that fits a phone, tables whose rows line up, and a curve that
says it scrolls. Each test is a defect seen in a screenshot and fixed."""

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import SCREENSHOTS, TILES, TIMEOUT_MS, open_app, settle

pytestmark = pytest.mark.browser
PHONE = 390

# WCAG 2.1 contrast of an element's text colour on its own background, and the opacity it is drawn with (the
# product of its own and every ancestor's: opacity fades text and background together, so the ratio alone says
# nothing of a faded element)
CONTRAST_JS = """(e) => {
    const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
    const lin = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    const lum = (c) => { const [r, g, b] = rgb(c).map(lin); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const s = getComputedStyle(e);
    const [a, b] = [lum(s.color), lum(s.backgroundColor)].sort((x, y) => y - x);
    let opacity = 1;
    for (let n = e; n && n.nodeType === 1; n = n.parentElement) opacity *= Number(getComputedStyle(n).opacity);
    return {ratio: (a + 0.05) / (b + 0.05), opacity: opacity};
}"""
# Every select of the explorer: the widest of its choices (in the select's own font) against the room it has
# (its width less its padding and the arrow's ~24 px)
SELECTS_JS = """() => [...document.querySelectorAll('#explorer .av-controls select')].filter(s => s.offsetParent).map(s => {
    const ctx = document.createElement('canvas').getContext('2d'), st = getComputedStyle(s);
    ctx.font = `${st.fontWeight} ${st.fontSize} ${st.fontFamily}`;
    const widest = Math.max(...[...s.options].map(o => ctx.measureText(o.text).width));
    return {choice: [...s.options].map(o => o.text).join(' | '), widest: Math.ceil(widest),
            room: s.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight) - 24};
})"""
# Rectangles of every error badge Gradio shows on a status tracker, against those of the notes that say the input
# was refused: none may cover another
COVERED_JS = """() => {
    const seen = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
    const badges = [...document.querySelectorAll('[data-testid=status-tracker] .error')].filter(seen)
        .map(e => e.getBoundingClientRect());
    const notes = [...document.querySelectorAll('#info p, #explorer .av-stale-note')].filter(seen)
        .map(e => e.getBoundingClientRect());
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    return {badges: badges.length, notes: notes.length, covered: notes.filter(n => badges.some(b => hit(n, b))).length};
}"""


def test_an_off_heads_mark_is_read_at_full_contrast(page: Page, app_url):
    """The "off" on a switched-off tile: only the map under it fades (it sat in the faded box, 45 % opacity)."""
    open_app(page, app_url)
    page.locator("#explorer .av-cut").click()
    page.locator(f'{TILES}[data-layer="0"][data-head="1"]').click()
    mark = page.locator(f"{TILES}.av-off .av-off-mark")
    expect(mark).to_have_count(1, timeout=TIMEOUT_MS)
    # the rerun answered (a page still waiting for it draws its outputs faded, the mark with them)
    expect(page.locator("#info")).to_contain_text("switched off", timeout=TIMEOUT_MS)
    settle(page)
    page.wait_for_function(f"() => ({CONTRAST_JS})(document.querySelector('{TILES}.av-off .av-off-mark')).opacity === 1",
                           timeout=TIMEOUT_MS)
    seen = mark.evaluate(CONTRAST_JS)
    assert seen["opacity"] == 1 and seen["ratio"] >= 4.5, seen
    faded = page.locator(f"{TILES}.av-off canvas").evaluate(CONTRAST_JS)["opacity"]
    assert faded < 1  # the map itself still fades: the tile reads as off
    page.locator("#explorer").screenshot(path=str(SCREENSHOTS / "visual_off_tiles.png"))


def test_the_explorers_selects_show_every_choice_whole_on_a_phone(page: Page, app_url):
    """At 390 px each select sits under its label, as wide as the view: "encoder-decoder attention" was cut to
    "encoder-decoder attentior" beside its label."""
    open_app(page, app_url, width=PHONE)
    selects = page.evaluate(SELECTS_JS)
    assert len(selects) >= 4
    assert all(s["widest"] <= s["room"] for s in selects), selects
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


@pytest.mark.parametrize("width", [1400, PHONE])
def test_a_refusal_is_said_without_a_badge_over_it(page: Page, app_url, width):
    """A refused text: the notes' "Refused." and the explorer's note are not covered by Gradio's "Error" badge, and
    the explorer's legend fades with its maps (in colour beside grey tiles it disagreed with them)."""
    open_app(page, app_url, width=width)
    page.locator("#text input, #text textarea").first.fill("hello 😀")
    root = page.locator("#explorer_view .av-explorer")
    expect(root).to_have_class(re.compile(r"\bav-stale\b"), timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("Refused", timeout=TIMEOUT_MS)
    expect(page.locator("[data-testid=toast-body]").first).to_be_visible(timeout=TIMEOUT_MS)  # the message is said
    page.wait_for_timeout(500)  # the error statuses are drawn after the toast
    seen = page.evaluate(COVERED_JS)
    assert seen["notes"] >= 2 and seen["covered"] == 0, seen
    faded = [root.evaluate(f"e => getComputedStyle(e.querySelector('{part}')).opacity") for part in
             (".av-grid", ".av-legend")]
    assert faded[0] == faded[1] != "1", faded
    page.screenshot(path=str(SCREENSHOTS / f"visual_refused_{width}.png"), full_page=True)


def test_the_labs_table_fits_a_phone(page: Page, app_url):
    open_app(page, app_url, width=PHONE)
    page.get_by_role("tab", name="√d_k lab").click()
    box = page.locator("#lab_numbers .av-numbers")
    expect(box.locator("td").first).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth"), box.evaluate("e => [e.scrollWidth, e.clientWidth]")


def test_the_importance_tables_line_up_and_the_curve_says_it_scrolls(page: Page, app_url):
    """The three tables of which heads matter keep their own height (stretched to the tallest caption, their rows
    grew apart), and on a phone the prune curve, a scroll wide, says so (its axis title read "heads le")."""
    open_app(page, app_url, width=PHONE)
    page.get_by_role("tab", name="Which heads matter").click()
    page.locator("#score_heads").click()
    expect(page.locator("#heads_view .av-imp-table")).to_have_count(3, timeout=TIMEOUT_MS)
    settle(page)
    for width in (PHONE, 1400):
        page.set_viewport_size({"width": width, "height": 1000})
        heights = page.evaluate("() => [...document.querySelectorAll('#heads_view .av-imp-table tbody tr')]"
                                ".map(r => r.getBoundingClientRect().height)")
        assert max(heights) - min(heights) <= 1, (width, heights)
        scrolls = page.locator("#heads_view .av-prune-box").evaluate("e => e.scrollWidth > e.clientWidth + 1")
        hint = page.locator("#heads_view .av-prune-more")
        (expect(hint).to_be_visible if scrolls else expect(hint).to_be_hidden)()
        assert scrolls == (width == PHONE)
    page.set_viewport_size({"width": PHONE, "height": 1000})
    page.screenshot(path=str(SCREENSHOTS / "visual_heads_390.png"), full_page=True)
