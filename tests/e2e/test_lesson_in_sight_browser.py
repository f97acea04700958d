"""The guided lesson stays in sight, in Chromium at a laptop's 1366x768, 1280x800 and a phone's 390x844: after every
step, its text, Back and Next are on the screen together with what the step's numbers come from (the head it quotes,
the lab's table, the own q·k's table, the head scores, the curve, the Train button, the long view's line), that
element below the lesson's bar, none of them covered, without the person scrolling; Next goes on to the last step
("Last step ▶") and ends there. Two servers, each shared by the three sizes: one set up with a real model that cannot
be had and the trained MiniLM (the real steps on the MiniLM), one with only the model that cannot be had (the real
steps say so). The walk at 1280x800 presses Next from the keyboard; on the phone, axe-core checks the bar whose text
scrolls in its own box. While a step's text can scroll further down its box, a fade at the box's foot says so; at its
end, or where the text fits, none. Screenshots of the screen as a person sees it go
to tests/screenshots/lesson-bar-*.png (git-ignored)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytest.importorskip("transformers")

from devtools.launcher import running_app  # noqa: E402
from attention_viz.service import lesson, lesson_media  # noqa: E402
from tests.e2e.conftest import SCREENSHOTS, UNREACHABLE  # noqa: E402
from tests.e2e.test_browser import TIMEOUT_MS, settle  # noqa: E402

pytestmark = pytest.mark.browser
SIZES = [(1366, 768), (1280, 800), (390, 844)]
KEYBOARD = (1280, 800)  # the walk that presses Next with Enter
HEAD = "#head_view"
# What each step's numbers come from, by its title (a step with no number in its text, e.g. a real step on a model
# that cannot be had, has none: its text, Back and Next only).
TARGETS = {
    "See the anti-diagonal of reverse": HEAD, "Watch it decode, one character at a time": HEAD,
    lesson.HEADS_TITLE: "#heads_view .av-imp-box", lesson.UNSCALED_TITLE: HEAD, lesson.WHY_TITLE: "#lab_numbers",
    lesson.OWN_QK_TITLE: "#own_qk table[data-role=own-numbers]",
    "Scaled and unscaled, side by side in training": "#train_step .av-curve", "Meet additive attention": HEAD,
    "Train one yourself": "#live_start", lesson.REAL_TITLE: HEAD,
    lesson.REAL_QK_TITLE: "#own_qk table[data-role=own-numbers]",
    lesson.REAL_HEADS_TITLE: "#heads_view .av-imp-box", lesson.LONG_TITLE: "#long_view .av-long-chosen",
    lesson.NO_REAL_TITLE: None,
    lesson_media.IMAGE_TITLE: "#media_overlay img", lesson_media.IMAGE_UNSCALED_TITLE: "#media_overlay img",
}
SHOTS = {1, 3, 5, 7, 9, 10, 13}
BAR = "#lesson"
# Each element's box, whether it lies wholly on the screen, whether the point at its centre is its own (nothing over
# it), and (the step's element) whether it starts below the bar.
PLACES = """([selectors, target, bar]) => {
  const barEnd = document.querySelector(bar).getBoundingClientRect().bottom;
  return Object.fromEntries([...selectors, target].filter(Boolean).map((s) => {
    const e = document.querySelector(s);
    if (!e) return [s, {missing: true}];
    const r = e.getBoundingClientRect();
    const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
    const onScreen = r.width > 0 && r.height > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight + 0.5
      && r.right <= innerWidth + 0.5;
    return [s, {box: [r.top, r.bottom, r.left, r.right].map(Math.round), onScreen, uncovered: !!hit && e.contains(hit),
                belowBar: s !== target || r.top >= barEnd - 0.5}];
  }));
}"""
IN_SIGHT = f"(args) => Object.values(({PLACES})(args)).every((p) => p.onScreen && p.uncovered && p.belowBar)"
MOVES = ["#lesson_text", "#lesson_prev", "#lesson_next"]
# The step's text box: whether it can scroll further down, and whether the fade at its foot shows (lesson_panel.CSS).
TEXT_BOX = "document.querySelector('#lesson_text .html-container')"
CUE = f"""() => {{ const t = {TEXT_BOX};
  return {{more: t.scrollTop + t.clientHeight < t.scrollHeight - 1, overflows: t.scrollHeight > t.clientHeight + 1,
           fade: getComputedStyle(t, '::after').visibility === 'visible'}}; }}"""


def _app(tmp_path_factory, name: str, models: list):
    root = tmp_path_factory.mktemp(name)
    with running_app(root / "app.log", models) as server:
        yield server.base + "/"
    assert "Traceback" not in (root / "app.log").read_text()


@pytest.fixture(scope="module")
def minilm_app(tmp_path_factory, minilm_folder):
    """The app with a real model that cannot be had, then the trained MiniLM: the lesson's real steps on the MiniLM."""
    yield from _app(tmp_path_factory, "lesson-minilm", [UNREACHABLE, minilm_folder])


@pytest.fixture(scope="module")
def unreachable_app(tmp_path_factory):
    """The app with only a real model that cannot be had: each real step says so."""
    yield from _app(tmp_path_factory, "lesson-unreachable", [UNREACHABLE])


def in_sight(page: Page, target: str | None, where: str) -> None:
    """The step's text, Back, Next and `target` wholly on the screen and uncovered, the target below the bar (waited
    for: a step's views are drawn after its answer), else the failure names each box."""
    args = [MOVES, target, BAR]
    try:
        page.wait_for_function(IN_SIGHT, arg=args, timeout=10_000)
    except PlaywrightTimeout:
        pass
    places = page.evaluate(PLACES, args)
    off = {s: p for s, p in places.items() if not (p.get("onScreen") and p.get("uncovered") and p.get("belowBar"))}
    assert not off, (where, page.evaluate("[innerWidth, innerHeight, scrollY]"), off)


def cue_follows(page: Page, where: str) -> bool:
    """The fade at the foot of the step's text shows while the text can scroll further down, and not once it is at
    its end or where it fits (waited for: the fade follows the box's scroll position as it is told). Returns whether
    the text overflows its box; scrolled to its end and back to its start when it does."""
    fade_is = "(shown) => (%s)().fade === shown" % CUE
    overflows = page.evaluate(CUE)["overflows"]
    try:
        page.wait_for_function(fade_is, arg=overflows, timeout=5_000)
    except PlaywrightTimeout:
        pass
    cue = page.evaluate(CUE)
    assert cue["more"] == cue["fade"] == overflows, (where, cue)
    if overflows:  # at the end of the text: no fade
        page.evaluate(f"() => {{ const t = {TEXT_BOX}; t.scrollTop = t.scrollHeight; }}")
        try:
            page.wait_for_function(fade_is, arg=False, timeout=5_000)
        except PlaywrightTimeout:
            pass
        cue = page.evaluate(CUE)
        assert not cue["more"] and not cue["fade"], (where, "scrolled to its end", cue)
        page.evaluate(f"() => {{ {TEXT_BOX}.scrollTop = 0; }}")
    return overflows


def target_of(text: str) -> str | None:
    """The step's title (checked: one TARGETS knows) and what its numbers come from (None: it quotes none)."""
    title = re.search(r"Step \d+ of \d+: (.+?)\.\s", text).group(1)
    assert title in TARGETS, title
    return TARGETS[title] if re.search(r"\d\.\d", text) else None


def walk(page: Page, url: str, size: tuple[int, int], name: str, shots: set[int], axe: bool = False) -> list[str]:
    """Every step in turn, Next pressed as a person would (from the keyboard at KEYBOARD's size); each in sight;
    with axe, on a phone, axe-core on the last step's bar (its text scrolling in its own box); then Back once.
    Returns the steps' texts."""
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    page.goto(url)
    expect(page.locator("#explorer .av-tile").first).to_be_visible(timeout=TIMEOUT_MS)
    page.locator(BAR).get_by_text("A guided lesson").click()
    expect(page.locator("#lesson_prev")).to_be_disabled()
    keyboard, step, steps, texts, overflows = size == KEYBOARD, 0, None, [], set()
    while steps is None or step < steps:
        step += 1
        if keyboard:
            page.locator("#lesson_next").focus()
            page.keyboard.press("Enter")
        else:
            page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of", timeout=TIMEOUT_MS)
        settle(page)
        text = page.locator("#lesson_text").inner_text()
        texts.append(text)
        steps = int(re.search(r"Step \d+ of (\d+)", text).group(1))
        target, where = target_of(text), f"{name} {width}x{height} step {step}"
        in_sight(page, target, where)
        if step in shots and page.evaluate(CUE)["overflows"]:  # the fade at the text's foot, as a person sees it
            SCREENSHOTS.mkdir(exist_ok=True)
            page.locator(BAR).screenshot(
                path=str(SCREENSHOTS / f"lesson-bar-{name}-{width}x{height}-step{step}-more.png"))
        overflows.add(cue_follows(page, where))
        quoted = re.search(r"head L(\d+)·H(\d+)", text)
        if target == HEAD and quoted:  # the map in sight is the head the text quotes
            expect(page.locator(HEAD)).to_have_attribute("data-layer", quoted[1])
            expect(page.locator(HEAD)).to_have_attribute("data-head", quoted[2])
        # a compact bar: at most 40 % of the screen's height, Back and Next side by side
        assert page.locator(BAR).bounding_box()["height"] <= 0.4 * height, where
        assert page.locator("#lesson_prev").bounding_box()["y"] == page.locator("#lesson_next").bounding_box()["y"]
        if step > 1:
            expect(page.locator("#lesson_prev")).to_be_enabled()
        expect(page.locator("#lesson_next")).to_have_text(
            "End of the lesson" if step == steps else "Last step ▶" if step == steps - 1 else "Next ▶")
        if step in shots:
            SCREENSHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"lesson-bar-{name}-{width}x{height}-step{step}.png"))
    expect(page.locator("#lesson_next")).to_be_disabled()  # the last step: nothing past it
    # the fade checked both ways: on the phone some step's text overflows its box; on a laptop some step's fits
    assert (width < 640) in overflows, (name, size, overflows)
    if axe and width < 640:  # the phone's bar, its text scrolling in its own box: axe-core's WCAG 2.1 A/AA rules
        from tests.e2e.test_accessibility import report, violations

        assert page.evaluate("() => { const t = document.querySelector('#lesson_text .html-container'); "
                             "return t.scrollHeight > t.clientHeight; }"), "the last step's text fits: nothing checked"
        found = violations(page)
        assert not found, report(found)
    page.locator("#lesson_prev").click()  # Back brings its step into sight too
    expect(page.locator("#lesson_text")).to_contain_text(f"Step {steps - 1} of", timeout=TIMEOUT_MS)
    settle(page)
    in_sight(page, target_of(page.locator("#lesson_text").inner_text()), f"{name} {width}x{height} back")
    return texts


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_step_in_sight_with_the_trained_minilm(page: Page, minilm_app, size):
    texts = walk(page, minilm_app, size, "minilm", SHOTS, axe=True)
    assert len(texts) == 13 and all("all-MiniLM-L6-v2" in text for text in texts[9:11] + texts[12:])


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_step_in_sight_with_a_model_that_cannot_be_had(page: Page, unreachable_app, size):
    texts = walk(page, unreachable_app, size, "unreachable", {10, 13})
    assert len(texts) == 13 and all(lesson.NO_REAL_TITLE in text for text in texts[9:])


PICTURE_SIZES = [(1366, 768), (390, 844)]


@pytest.mark.parametrize("size", PICTURE_SIZES, ids=[f"{w}x{h}" for w, h in PICTURE_SIZES])
def test_the_pictures_steps_in_sight_with_an_image_model(page: Page, media_app, size):
    """A server with an image model (tests/e2e/conftest.py's media_app: a tiny DeiT, a tiny Whisper, a tiny Marian):
    the lesson ends with its two steps on the sample picture, in the Pictures and sound tab; at a laptop's and a
    phone's size each is in sight (its text from its start, Back and Next, the picture its numbers are drawn over,
    below the bar, uncovered), the bar compact, the fade at the text's foot following it; Back brings the first of
    them into sight again."""
    width, height = size
    page.set_viewport_size({"width": width, "height": height})
    page.goto(media_app[0] + "/")
    page.locator(BAR).get_by_text("A guided lesson").click()
    for step in range(1, 16):
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of 15", timeout=TIMEOUT_MS)
        if step < 14:
            continue
        settle(page)
        text, where = page.locator("#lesson_text").inner_text(), f"pictures {width}x{height} step {step}"
        assert page.evaluate(f"() => {TEXT_BOX}.scrollTop") == 0, where  # the step's text from its start
        in_sight(page, target_of(text), where)
        cue_follows(page, where)
        assert page.locator(BAR).bounding_box()["height"] <= 0.4 * height, where
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"lesson-bar-pictures-{width}x{height}-step{step}.png"))
    expect(page.locator("#media_scale input[value=none]")).to_be_checked()
    page.locator("#lesson_prev").click()
    expect(page.locator("#lesson_text")).to_contain_text("Step 14 of 15", timeout=TIMEOUT_MS)
    settle(page)
    in_sight(page, target_of(page.locator("#lesson_text").inner_text()), f"pictures {width}x{height} back")
