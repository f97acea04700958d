"""Pictures and sound in the page, as a person uses them: Debian's Chromium through Playwright against the app set up
with a tiny DeiT, a tiny Whisper and a tiny Marian (tests/e2e/conftest.py's media_app). Screenshots go to
tests/screenshots/ (git-ignored)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")

import soundfile  # noqa: E402

from tests.e2e.test_inputs_browser import joins  # noqa: E402

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
TIMEOUT_MS = 60_000


def settle(page: Page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS)


def open_tab(page: Page, url: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(url)
    page.get_by_role("tab", name="Pictures and sound").click()
    expect(page.locator("#media_picture img")).to_be_visible(timeout=TIMEOUT_MS)  # the sample, already there


def test_the_sample_picture_read_then_a_clicked_patch_looks_from_there(page: Page, media_app, tmp_path):
    SCREENSHOTS.mkdir(exist_ok=True)
    open_tab(page, media_app[0] + "/")
    page.locator("#media_read").click()
    expect(page.locator("#media_notes")).to_contain_text("from [CLS]", timeout=TIMEOUT_MS)
    expect(page.locator("#media_specials table")).to_contain_text("[DIST]")
    for view in ("#media_overlay img", "#media_heads img", "#media_rollout img"):
        expect(page.locator(view)).to_be_visible()
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "media_picture.png"), full_page=True)
    drawn = page.locator("#media_overlay img")
    box = drawn.bounding_box()
    # the bottom right patch of the 4 x 4 grid: its centre, in the image as drawn (7/8 of its sides)
    drawn.click(position={"x": box["width"] * 7 / 8, "y": box["height"] * 7 / 8})
    expect(page.locator("#media_notes")).to_contain_text("from patch 3,3", timeout=TIMEOUT_MS)
    expect(page.locator("#media_query input")).to_have_value("17")  # the specials' 2, then the 16th patch
    settle(page)
    page.locator("#media_overlay").screenshot(path=str(SCREENSHOTS / "media_clicked.png"))
    asked = joins(page)  # a click into the layer's or head's box, leaving it as it was, reads nothing again
    for slider in ("#media_layer", "#media_head"):
        page.locator(f"{slider} input[type=number]").click()
        page.locator(f"{slider} input[type=number]").press("Tab")
    page.wait_for_timeout(1500)
    assert joins(page) == asked
    page.locator("#media_explore").click()  # every map, in the explorer's offline page
    expect(page.locator("#media_explorer_file a").first).to_have_attribute("href", re.compile(r"_explorer\.html$"),
                                                                       timeout=TIMEOUT_MS)
    # a damaged picture (a PNG cut short) passes the page's own check of its type: the server refuses it, saying so,
    # and the views stay the last picture's
    damaged = tmp_path / "damaged.png"
    damaged.write_bytes((Path(__file__).resolve().parents[2] / "attention_viz" / "data" / "sample_picture.png")
                        .read_bytes()[:200])
    before = page.locator("#media_notes").inner_text()
    page.locator("#media_picture button[aria-label='Remove Image']").click()
    page.locator("#media_picture input[type=file]").set_input_files(str(damaged))
    expect(page.locator("[data-testid=toast-body]")).to_contain_text("the picture is damaged", timeout=TIMEOUT_MS)
    assert page.locator("#media_notes").inner_text() == before


def test_a_recording_on_whisper_shows_its_transcript_aligned_and_a_picture_given_to_it_is_refused(page: Page,
                                                                                                  media_app,
                                                                                                  tmp_path):
    rate = 16000
    t = np.arange(rate // 2) / rate
    soundfile.write(tmp_path / "tone.wav", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate)
    open_tab(page, media_app[0] + "/")
    page.locator("#media_model input").click()
    page.get_by_role("option", name="tiny-whisper (recordings)").click()
    expect(page.locator("#media_recording")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#media_picture")).to_be_hidden()
    page.locator("#media_recording input[type=file]").set_input_files(str(tmp_path / "tone.wav"))
    expect(page.locator("#media_notes")).to_contain_text("Transcript", timeout=TIMEOUT_MS)
    expect(page.locator("#media_alignment img")).to_be_visible()
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "media_recording.png"), full_page=True)
    from tests.e2e.test_accessibility import report, violations

    found = violations(page)  # WCAG 2.1 A/AA, the recording's views on show
    assert not found, report(found)
    before = page.locator("#media_notes").inner_text()
    page.locator("#media_recording button[aria-label='Clear']").first.click()
    page.locator("#media_recording input[type=file]").set_input_files(
        str(Path(__file__).resolve().parents[2] / "attention_viz" / "data" / "sample_picture.png"))
    # the page's own check refuses it before it is sent (the server's sentence for the API: test_media_client.py)
    expect(page.locator("[data-testid=toast-body]")).to_contain_text("Invalid file type: sample_picture.png",
                                                                     timeout=TIMEOUT_MS)
    settle(page)
    assert page.locator("#media_notes").inner_text() == before  # nothing else on the page changed
    expect(page.locator("#media_alignment img")).to_be_visible()


def test_a_region_of_the_encoders_map_opens_with_its_exact_weights_and_the_times_on_its_sides(page: Page, media_app,
                                                                                             tmp_path):
    """The encoder's self-attention as the Long text tab's view: a rectangle dragged on the chosen head's overview
    (600 positions in blocks of 2 x 2) opens that region's exact weights, its title and tips in seconds; by keyboard
    too; the head slider brings that head's overview."""
    rate = 16000
    t = np.arange(3 * rate) / rate
    soundfile.write(tmp_path / "tone.wav", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), rate)
    open_tab(page, media_app[0] + "/")
    page.locator("#media_model input").click()
    page.get_by_role("option", name="tiny-whisper (recordings)").click()
    page.locator("#media_recording input[type=file]").set_input_files(str(tmp_path / "tone.wav"))
    view = page.locator("#media_encoder .av-long")
    expect(view.locator(".av-long-title")).to_contain_text("600 positions of 20 ms (12 s), 2 layers x 4 heads",
                                                           timeout=TIMEOUT_MS)
    expect(view.locator(".av-long-chosen")).to_contain_text("encoder.1.self_attn, head 0")
    expect(view.locator(".av-long-chosen")).to_contain_text(re.compile(r"mean distance \d+\.\d positions, previous position"))
    expect(view.locator(".av-long-grid[data-stat=mean_distance] figcaption")).to_have_text("mean distance (positions)")
    expect(view.locator(".av-long-labels")).to_be_hidden()  # its labels are its times: no words or pieces to pick
    expect(view.locator(".av-long-legend").nth(3)).to_contain_text("queries down, keys across, each 0.00-12.00 s")
    settle(page)
    canvas = view.locator(".av-long-overview")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    expect(view.locator(".av-long-overtip")).to_contain_text(re.compile(
        r"queries \d+\.\d\d-\d+\.\d\d s → keys \d+\.\d\d-\d+\.\d\d s: block max"))
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.6, steps=4)
    page.mouse.up()
    title = view.locator(".av-long-regiontitle")
    expect(title).to_contain_text(re.compile(r"Queries \d+\.\d\d-\d+\.\d\d s \(down\) x keys \d+\.\d\d-\d+\.\d\d s "
                                             r"\(across\) \(positions \d+-\d+ x \d+-\d+\) of encoder.1.self_attn, head 0"),
                                  timeout=TIMEOUT_MS)
    expect(view.locator(".av-long-regionnote")).to_have_text("Exact weights, recomputed for this region.")
    region = view.locator(".av-long-regioncanvas")
    region.scroll_into_view_if_needed()
    rbox = region.bounding_box()
    page.mouse.move(rbox["x"] + rbox["width"] * 0.7, rbox["y"] + rbox["height"] * 0.8)
    expect(view.locator(".av-long-regiontip")).to_contain_text(re.compile(
        r"query \d+ “\d+\.\d\d s” → key \d+ “\d+\.\d\d s”: weight \d"))
    canvas.focus()  # by keyboard: a square of 48 positions moved by the arrow keys (600 / 32: 19 a step), Enter
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(title).to_contain_text("Queries 0.38-1.34 s (down) x keys 0.00-0.96 s (across) (positions 19-66 x 0-47)",
                                  timeout=TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "media_encoder_region.png"), full_page=True)
    page.locator("#media_head input[type=number]").fill("2")
    page.locator("#media_head input[type=number]").press("Tab")
    expect(view.locator(".av-long-chosen")).to_contain_text("encoder.1.self_attn, head 2", timeout=TIMEOUT_MS)


CLEAR_OF_BUTTONS = """(id) => { const root = document.getElementById(id), img = root.querySelector("img");
  const buttons = root.querySelector(".icon-button-wrapper").getBoundingClientRect(), drawn = img.getBoundingClientRect();
  const label = root.querySelector("[data-testid=block-label]:not(.sr-only)");
  const named = label ? label.getBoundingClientRect() : null;
  return {below: drawn.top >= buttons.bottom - 1 && (!named || drawn.top >= named.bottom - 1),
          labelFits: !named || (named.right <= buttons.left + 1 && label.scrollWidth <= label.clientWidth + 1),
          natural: img.naturalWidth, width: Math.round(drawn.width)}; }"""


def test_on_a_phone_every_figure_sits_below_its_buttons_and_the_wide_ones_keep_their_size(page: Page, media_app,
                                                                                          tmp_path):
    """390 x 844: Gradio's buttons (full screen, download, share) and an image's label float over its top; each of
    the tab's figures starts below them (the rollout's title sat under them), the labels end before them, and the
    wide figures (every head, the alignment) keep their drawn size, scrolling sideways inside their frame, so that
    their labels stay readable; the page itself never scrolls sideways."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(media_app[0] + "/")
    page.get_by_role("tab", name="Pictures and sound").click()
    page.locator("#media_read").click()
    expect(page.locator("#media_specials table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    for view in ("media_overlay", "media_rollout", "media_heads"):
        found = page.evaluate(CLEAR_OF_BUTTONS, view)
        assert found["below"] and found["labelFits"], (view, found)
    heads = page.evaluate(CLEAR_OF_BUTTONS, "media_heads")
    assert heads["width"] == heads["natural"] > 390, heads  # its drawn size: scrolled, not shrunk
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    rate = 16000
    soundfile.write(tmp_path / "tone.wav", (0.3 * np.sin(np.arange(rate) / 3)).astype(np.float32), rate)
    page.locator("#media_model input").click()
    page.get_by_role("option", name="tiny-whisper (recordings)").click()
    page.locator("#media_recording input[type=file]").set_input_files(str(tmp_path / "tone.wav"))
    expect(page.locator("#media_notes")).to_contain_text("Transcript", timeout=TIMEOUT_MS)
    settle(page)
    found = page.evaluate(CLEAR_OF_BUTTONS, "media_alignment")
    assert found["below"] and found["width"] == found["natural"] > 390, found
    colour = page.locator("#media_encoder .av-long-colour").bounding_box()  # the long view's widest control
    assert colour["x"] + colour["width"] <= 390 - 8, colour
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")
    page.screenshot(path=str(SCREENSHOTS / "media_phone_recording.png"), full_page=True)


def test_the_lessons_picture_steps_open_the_tab_on_the_class_token_then_without_the_scaling(page: Page, media_app):
    """The lesson on a server with an image model ends with two steps in the Pictures and sound tab (after our nine
    and the text model's four): they set the model, layer, head, token and scaling and bring the views they quote."""
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(media_app[0] + "/")
    page.locator("#lesson").get_by_text("A guided lesson").click()
    total = 15
    for step in range(1, total):
        page.locator("#lesson_next").click()
        expect(page.locator("#lesson_text")).to_contain_text(f"Step {step} of {total}", timeout=TIMEOUT_MS)
    expect(page.locator("#lesson_text")).to_contain_text("Where a picture's class token looks")
    expect(page.get_by_role("tab", name="Pictures and sound")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#media_notes")).to_contain_text("from [CLS]", timeout=TIMEOUT_MS)
    expect(page.locator("#media_scale input[value=sqrt_dk]")).to_be_checked()
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "media_lesson.png"))
    page.locator("#lesson_next").click()
    expect(page.locator("#lesson_text")).to_contain_text(f"Step {total} of {total}", timeout=TIMEOUT_MS)
    expect(page.locator("#media_scale input[value=none]")).to_be_checked()
    expect(page.locator("#media_notes")).to_contain_text("off (plain q·k)", timeout=TIMEOUT_MS)


def test_axe_finds_no_wcag_violation_in_the_tab_with_a_picture_read(page: Page, media_app):
    """axe-core's WCAG 2.1 A/AA rules (tests/e2e/test_accessibility.py's) on the tab with a picture's views on show."""
    from tests.e2e.test_accessibility import report, violations

    open_tab(page, media_app[0] + "/")
    page.locator("#media_read").click()
    expect(page.locator("#media_specials table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    found = violations(page)
    assert not found, report(found)


def test_a_recording_from_the_microphone_is_transcribed(browser_type, browser_type_launch_args, media_app):
    """The microphone, as a person records: Chromium's fake capture device (a beep) granted, Record, Stop; the page
    sends the recording (WAV) up and Whisper's views come back."""
    args = [*browser_type_launch_args.get("args", []), "--use-fake-device-for-media-stream",
            "--use-fake-ui-for-media-stream"]
    browser = browser_type.launch(**{**browser_type_launch_args, "args": args})
    try:
        page = browser.new_context(permissions=["microphone"], viewport={"width": 1280, "height": 1000}).new_page()
        page.goto(media_app[0] + "/")
        page.get_by_role("tab", name="Pictures and sound").click()
        page.locator("#media_model input").click()
        page.get_by_role("option", name="tiny-whisper (recordings)").click()
        page.locator("#media_recording").get_by_label("Record audio").click()
        page.locator("#media_recording button", has_text="Record").first.click()
        page.wait_for_timeout(1500)  # a second and a half of the fake device's beeps
        page.locator("#media_recording button", has_text="Stop").first.click()
        expect(page.locator("#media_notes")).to_contain_text("Transcript", timeout=TIMEOUT_MS)
        expect(page.locator("#media_alignment img")).to_be_visible()
    finally:
        browser.close()
