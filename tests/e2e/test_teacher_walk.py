"""A teacher's walk, in Chromium at 1280x800: the app set up with three real models (one that cannot be had, a
translation model and a GPT-2, local folders with random weights made offline), every lesson step in turn, then the
unreachable model picked, then the dates example. Each step's view is in sight, no error toast shows, no output is
empty, and every decimal the step's text quotes is on the screen it opens; the last step (GPT-2 reads a page) opens
the Long text tab as it says, a region opens by keyboard there, and axe-core finds nothing on it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytest.importorskip("transformers")

from tests.e2e.conftest import UNREACHABLE  # noqa: E402
from tests.e2e.test_browser import TIMEOUT_MS, settle, shot  # noqa: E402

pytestmark = pytest.mark.browser
OPEN_VIEW = """() => { const tabs = [...document.querySelectorAll('[role=tabpanel]')].filter(t => t.offsetParent);
  return tabs.map(t => t.innerText).join(' '); }"""
IN_SIGHT = """(selectors) => selectors.some((s) => { const e = document.querySelector(s); if (!e) return false;
  const r = e.getBoundingClientRect(); return r.height > 0 && r.top < innerHeight && r.bottom > 0; })"""
VIEWS = {"transformer": ["#explorer", "#heads_view"], "lab": ["#lab_view", "#own_qk"], "training": ["#train_step"],
         "long": ["#long_view .av-long"]}


# A step is drawn once no output is updating, its view is in sight, every decimal its text quotes is on the screen
# it opens and (on the Transformer tab) the output is written.
DRAWN = f"""([selectors, quoted, output]) => {{
    const busy = [...document.querySelectorAll('[data-testid=status-tracker]')]
        .some(e => !e.classList.contains('hide'));
    const written = document.querySelector('#output textarea, #output input')?.value || '';
    const onScreen = ({OPEN_VIEW})() + written;
    return !busy && ({IN_SIGHT})(selectors) && quoted.every(n => onScreen.includes(n)) && (!output || written.trim());
}}"""


def drawn(page: Page, selectors: list[str], quoted: list[str], output: bool) -> None:
    """Wait until a step is drawn (DRAWN), or TIMEOUT_MS: the checks after it say what is missing."""
    try:
        page.wait_for_function(DRAWN, arg=[selectors, quoted, output], timeout=TIMEOUT_MS)
    except PlaywrightTimeout:
        pass


@pytest.fixture(scope="module")
def teacher_app(real_models_app):
    """The app with three real models, the one that cannot be had first (tests/e2e/conftest.py)."""
    return real_models_app[0] + "/"


def long_step_reads_a_page(page: Page, text: str) -> None:
    """The lesson's last step: the first model of one stack (tiny GPT-2) has read the shipped page on the Long text
    tab, the head it names chosen, the sink's top on the first grid's colour bar and that head's line as quoted; a
    region opened by keyboard; axe-core's WCAG 2.1 A/AA rules (test_accessibility's check) find nothing there."""
    from tests.e2e.test_accessibility import report, violations

    assert "Where attention goes in a long text" in text and "tiny-gpt2" in text
    expect(page.get_by_role("tab", name="Long text")).to_have_attribute("aria-selected", "true", timeout=TIMEOUT_MS)
    expect(page.locator("#long_model input")).to_have_value("tiny-gpt2 (real model)")
    assert page.locator("#long_text textarea").input_value().startswith("It is a truth universally acknowledged")
    view = page.locator("#long_view .av-long")
    expect(view.locator(".av-long-note")).to_contain_text("Read the first 256 of the text's", timeout=TIMEOUT_MS)
    key, head = re.search(r"`?(decoder\.\d+\.self_attn)`? head (\d+), open below", text).groups()
    chosen = view.locator(".av-long-chosen")
    expect(chosen).to_contain_text(f"{key}, head {head}: sink ")
    sink = re.search(r"puts (\S+) of a row's weight there", text).group(1)
    expect(view.locator(".av-long-grid[data-stat=first_token] .av-long-ends")).to_have_text(f"0 → {sink}")
    quoted = re.findall(r"(?<![\w.§])\d+\.\d+", text.split(".**", 1)[-1])
    assert f"sink {quoted[-2]}," in chosen.inner_text() and chosen.inner_text().endswith(f"previous token {quoted[-1]}")
    canvas = view.locator(".av-long-overview")
    canvas.focus()
    page.keyboard.press("Enter")
    expect(view.locator(".av-long-regiontitle")).to_contain_text(f"of {key}, head {head}", timeout=TIMEOUT_MS)
    found = violations(page)
    assert not found, report(found)


def test_a_teacher_walks_the_lesson_picks_a_model_that_cannot_be_had_and_the_dates_example(page: Page, teacher_app):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(teacher_app)
    expect(page.locator("#explorer").first).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#lesson").get_by_text("A guided lesson").click()
    step, steps, texts = 0, None, []
    while True:
        step += 1
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of", timeout=TIMEOUT_MS)
        settle(page)  # the step's text read without a tracker's "processing" over it
        text = page.locator("#lesson_text").inner_text()
        texts.append(text)
        steps = int(re.search(r"Step \d+ of (\d+)", text).group(1))
        tab = page.evaluate("() => [...document.querySelectorAll('button[role=tab]')].find(b => "
                            "b.getAttribute('aria-selected') === 'true' && b.offsetParent).innerText")
        kind = ("lab" if "lab" in tab else "training" if "Training" in tab else "long" if "Long" in tab
                else "transformer")
        quoted = re.findall(r"(?<![\w.§])\d+\.\d+", text.split(".**", 1)[-1].replace("1/√", ""))
        drawn(page, VIEWS[kind], quoted, kind == "transformer")  # what the step's answer draws, and any event after it
        assert page.locator("[data-testid=toast-body]").count() == 0, (step, "an error toast")
        if kind == "transformer":
            assert page.locator("#output textarea, #output input").first.input_value().strip(), (step, "no output")
        assert page.evaluate(IN_SIGHT, VIEWS[kind]), (step, "its view is not in sight")
        on_screen = page.evaluate(OPEN_VIEW) + page.locator("#output textarea, #output input").first.input_value()
        missing = [number for number in quoted if number not in on_screen]
        assert not missing, (step, text, missing)
        shot(page, f"teacher_step{step}", wait=False)
        if step == steps:
            break
    assert steps == 13 and all("tiny-marian" in text for text in texts[9:12])  # the first real model that can be had
    long_step_reads_a_page(page, texts[-1])
    # the model that cannot be had: the picker goes back, says why, and no other control is in error
    page.get_by_role("tab", name="Transformer").click()
    before = page.locator("#model input").input_value()
    page.locator("#model input").click()
    page.get_by_role("option", name=f"{UNREACHABLE} (real model)").click()
    expect(page.locator("#model")).to_contain_text("not in this machine", timeout=TIMEOUT_MS)
    expect(page.locator("#model input")).to_have_value(before, timeout=TIMEOUT_MS)
    page.wait_for_timeout(1000)
    errors = page.evaluate("() => [...document.querySelectorAll('.error, [class*=error]')].filter(e => "
                           "e.offsetParent && /error/i.test(e.innerText || '')).map(e => e.closest('[id]')?.id)")
    assert not errors, errors
    shot(page, "teacher_refused_model", wait=False)
    # the dates example belongs to the dates model: picked there, it writes the date
    page.locator("#model input").click()
    page.get_by_role("option", name=re.compile(r"^dates")).click()
    example = page.locator("#examples").get_by_text("twenty second of november 2026")
    expect(example).to_be_visible(timeout=TIMEOUT_MS)
    example.click()
    expect(page.locator("#output textarea, #output input").first).to_have_value("2026-11-22", timeout=TIMEOUT_MS)
    shot(page, "teacher_dates", wait=False)
