"""A teacher's walk, in Chromium at 1280x800: the app set up with two real models (one that cannot be had, one
local folder with random weights made offline), every lesson step in turn, then the unreachable model picked, then
the dates example. Each step's view is in sight, no error toast shows, no output is empty, and every decimal the
step's text quotes is on the screen it opens."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")

from devtools.hub_models import save_tiny  # noqa: E402
from devtools.launcher import running_app  # noqa: E402
from tests.e2e.test_browser import TIMEOUT_MS, shot  # noqa: E402

pytestmark = pytest.mark.browser
UNREACHABLE = "Helsinki-NLP/opus-mt-xx-yy"
OPEN_VIEW = """() => { const tabs = [...document.querySelectorAll('[role=tabpanel]')].filter(t => t.offsetParent);
  return tabs.map(t => t.innerText).join(' '); }"""
IN_SIGHT = """(selectors) => selectors.some((s) => { const e = document.querySelector(s); if (!e) return false;
  const r = e.getBoundingClientRect(); return r.height > 0 && r.top < innerHeight && r.bottom > 0; })"""
VIEWS = {"transformer": ["#explorer", "#heads_view"], "lab": ["#lab_view", "#own_qk"], "training": ["#train_step"],
         "long": ["#long_view .av-long"]}


@pytest.fixture(scope="module")
def teacher_app(tmp_path_factory):
    root = tmp_path_factory.mktemp("teacher")
    marian = save_tiny("marian", root / "tiny-marian")
    with running_app(root / "app.log", [UNREACHABLE, marian], HF_HOME=str(root / "hf-home")) as server:
        yield server.base + "/"


def test_a_teacher_walks_the_lesson_picks_a_model_that_cannot_be_had_and_the_dates_example(page: Page, teacher_app):
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(teacher_app)
    expect(page.locator("#explorer").first).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#lesson").get_by_text("A guided lesson").click()
    step, steps = 0, None
    while True:
        step += 1
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of", timeout=TIMEOUT_MS)
        page.wait_for_timeout(2500)  # what the step's answer draws, and any event after it
        text = page.locator("#lesson_text").inner_text()
        steps = int(re.search(r"Step \d+ of (\d+)", text).group(1))
        tab = page.evaluate("() => [...document.querySelectorAll('button[role=tab]')].find(b => "
                            "b.getAttribute('aria-selected') === 'true' && b.offsetParent).innerText")
        assert page.locator("[data-testid=toast-body]").count() == 0, (step, "an error toast")
        kind = ("lab" if "lab" in tab else "training" if "Training" in tab else "long" if "Long" in tab
                else "transformer")
        if kind == "transformer":
            assert page.locator("#output textarea, #output input").first.input_value().strip(), (step, "no output")
        assert page.evaluate(IN_SIGHT, VIEWS[kind]), (step, "its view is not in sight")
        on_screen = page.evaluate(OPEN_VIEW) + page.locator("#output textarea, #output input").first.input_value()
        quoted = re.findall(r"(?<![\w.§])\d+\.\d+", text.split(".**", 1)[-1].replace("1/√", ""))
        missing = [number for number in quoted if number not in on_screen]
        assert not missing, (step, text, missing)
        shot(page, f"teacher_step{step}", wait=False)
        if step == steps:
            break
    assert steps >= 11 and "tiny-marian" in page.locator("#lesson_text").inner_text() + " ".join(
        page.locator("#lesson_text").all_inner_texts())
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
