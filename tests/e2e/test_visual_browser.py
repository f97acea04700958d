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


# The first screen, as a class sees it on a projector: where the first tile and the open head's map sit on opening
FIRST_SCREEN_JS = """() => {
    const box = (sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
    return {tile: box('#explorer .av-tile'), head: box('#head_view .av-map, #head_view .av-hm'),
            width: innerWidth, height: innerHeight, scrolled: scrollY};
}"""
# Characters drawn as the font's missing-glyph box ("tofu"): each character of an element's text, drawn on a canvas in
# the element's font, against a code point no font has
TOFU_JS = """(e) => {
    const canvas = document.createElement('canvas'); canvas.width = canvas.height = 48;
    const ctx = canvas.getContext('2d'), st = getComputedStyle(e);
    const pixels = (ch) => { ctx.clearRect(0, 0, 48, 48); ctx.font = `32px ${st.fontFamily}`; ctx.fillText(ch, 4, 38);
        return ctx.getImageData(0, 0, 48, 48).data.join(','); };
    const missing = pixels('\\u{10FFFD}');
    return [...e.innerText].filter((ch) => ch.trim() && pixels(ch) === missing);
}"""
WIDE_HEAD = "twenty second of november 2026"  # the dates model's example: 31 source characters as keys


def inside(box: dict, seen: dict) -> bool:
    return box["top"] >= 0 and box["left"] >= 0 and box["bottom"] <= seen["height"] and box["right"] <= seen["width"]


@pytest.mark.parametrize("width, height", [(1280, 800), (1366, 768)])
def test_the_first_screen_shows_the_grid_and_the_open_head(page: Page, app_url, width, height):
    """On a projector's screen the page opens on attention: the grid's first tile and the whole open head are on it,
    without scrolling (the first tile sat at y 831, under the title, the introduction and the controls)."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(app_url)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    seen = page.evaluate(FIRST_SCREEN_JS)
    page.screenshot(path=str(SCREENSHOTS / f"visual_first_screen_{width}x{height}.png"))
    assert seen["scrolled"] == 0 and inside(seen["tile"], seen) and inside(seen["head"], seen), seen


def test_a_phone_stacks_the_head_under_the_grid_within_its_width(page: Page, app_url):
    open_app(page, app_url, width=PHONE)
    grid = page.locator("#explorer .av-grid").bounding_box()
    head = page.locator("#head_view").bounding_box()
    assert head["y"] >= grid["y"] + grid["height"], (grid, head)
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_the_play_buttons_marks_are_glyphs_the_fonts_have(page: Page, app_url):
    """Pause was "⏸ pause", drawn as a box: Debian's fonts have no ⏸. Its mark is drawn by CSS now."""
    open_app(page, app_url)
    play = page.locator("#explorer .av-play")
    assert play.evaluate(TOFU_JS) == []
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    assert play.evaluate(TOFU_JS) == [], play.inner_text()
    mark = play.locator(".av-pause-mark").bounding_box()
    assert mark["width"] >= 6 and mark["height"] >= 6, mark
    play.click()  # stops
    expect(play).to_have_attribute("aria-pressed", "false")
    for marked in ("#explorer .av-prev", "#explorer .av-next", "#explorer .av-cut"):
        assert page.locator(marked).evaluate(TOFU_JS) == [], marked


def test_a_wide_head_fits_or_says_it_scrolls(page: Page, app_url):
    """The dates model's head (31 keys: the year read from the end of the text) was cut at 1280 px with no hint that
    it scrolled: it goes under the grid in narrower cells and fits; narrower still, it says it scrolls sideways."""
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(app_url)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    note = page.locator("#explorer_view .av-head-more")
    expect(note).to_be_hidden()
    page.locator("#model input").click()
    page.get_by_role("option", name="dates (trained with 1/√d_k)").click()
    expect(page.locator("#info")).to_contain_text("dates", timeout=TIMEOUT_MS)
    page.locator("#examples").get_by_text(WIDE_HEAD).click()
    expect(page.locator("#output textarea, #output input").first).to_have_value("2026-11-22", timeout=TIMEOUT_MS)
    settle(page)
    view = page.locator("#head_view")
    wider = "e => e.scrollWidth > e.clientWidth + 1"
    page.wait_for_function(f"() => !({wider})(document.querySelector('#head_view'))", timeout=TIMEOUT_MS)
    expect(note).to_be_hidden()
    view.screenshot(path=str(SCREENSHOTS / "visual_wide_head_1280.png"))
    page.set_viewport_size({"width": 1000, "height": 800})
    expect(note).to_be_visible(timeout=TIMEOUT_MS)
    assert view.evaluate(wider)
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(note).to_be_hidden(timeout=TIMEOUT_MS)


def test_the_decoders_rows_are_captioned_as_its_inputs(page: Page, app_url):
    """Rows of a decoder map are labelled <bos>, n, o, ...: the decoder's inputs, each writing the next output token;
    the caption called them "target tokens" and the lesson "output characters"."""
    open_app(page, app_url)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    caption = page.locator("#head_view .av-caption")
    expect(caption).to_contain_text("rows: queries, the decoder's inputs, each row writing the next output token")
    assert page.locator("#head_view th.av-query").first.inner_text() == "<bos>"
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    expect(caption).to_contain_text("rows: queries, source tokens; columns: keys, source tokens")


def test_a_checked_radio_under_the_pointer_keeps_its_colour(page: Page, app_url):
    """Clicking "custom factor" and typing its factor left the pointer on the choice: Gradio's hover colour (white)
    painted over the checked one, and its white dot vanished."""
    open_app(page, app_url)
    choice = page.locator("#scale").get_by_text("custom factor")
    choice.click()
    radio = page.locator("#scale input[value=custom]")
    expect(radio).to_be_checked()
    unchecked = page.locator("#scale input[value=none]").evaluate("e => getComputedStyle(e).backgroundColor")
    page.locator("#factor input").fill("0.5")
    choice.hover()
    colour = radio.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour != unchecked and colour not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)"), colour


def test_a_long_model_name_ends_before_the_pickers_caret(page: Page, app_url):
    open_app(page, app_url, width=1280)
    page.locator("#model input").click()
    page.get_by_role("option", name="reverse, 1 head (study): plain dot product (trained without 1/√d_k)").click()
    expect(page.locator("#info")).to_contain_text("study", timeout=TIMEOUT_MS)
    seen = page.locator("#model").evaluate("""e => { const i = e.querySelector('input'), r = i.getBoundingClientRect();
        return {text_end: r.right - parseFloat(getComputedStyle(i).paddingRight),
                caret: e.querySelector('.icon-wrap').getBoundingClientRect().left,
                overflow: getComputedStyle(i).textOverflow}; }""")
    assert seen["text_end"] <= seen["caret"] and seen["overflow"] == "ellipsis", seen


@pytest.mark.parametrize("width, height", [(1280, 800), (1366, 768)])
def test_a_lesson_step_brings_its_view_into_sight(page: Page, app_url, width, height):
    """The step's text opens above the tabs and pushed the view it talks about under the screen's edge."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(app_url)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#lesson").get_by_text("A guided lesson").click()
    page.locator("#lesson_next").click()
    expect(page.locator("#lesson_text")).to_contain_text("Step 1 of 9", timeout=TIMEOUT_MS)
    expect(page.locator("#head_view")).to_have_attribute("data-kind", "decoder.cross_attn", timeout=TIMEOUT_MS)
    settle(page)
    page.wait_for_timeout(300)
    seen = page.evaluate(FIRST_SCREEN_JS)
    assert inside(seen["tile"], seen) and inside(seen["head"], seen), seen
    page.screenshot(path=str(SCREENSHOTS / f"visual_lesson_step1_{width}x{height}.png"))
    for step in range(2, 6):  # 5: the lab
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of 9", timeout=TIMEOUT_MS)
    expect(page.locator("#lab_numbers")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    page.wait_for_timeout(300)
    # the step quotes the lab's table of medians: it is brought under the lesson's bar, inside the screen
    box = page.locator("#lab_numbers").evaluate("e => { const r = e.getBoundingClientRect(); "
                                                 "return {top: r.top, bottom: r.bottom}; }")
    bar = page.locator("#lesson").evaluate("e => e.getBoundingClientRect().bottom")
    assert bar <= box["top"] + 1 and box["top"] < height, (bar, box)
