"""Take the README's screenshots: `python scripts/screenshots.py` writes assets/screenshots/*.png.

Starts `python app.py` on a free loopback port (shipped models), drives Debian's headless Chromium
through Playwright as a person would, and stops the app (by its own pid) at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # devtools/ is a folder of the repository

from devtools.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from devtools.launcher import Server  # noqa: E402

TIMEOUT_MS = 60_000


def settle(page: Page) -> None:
    """Wait until no output is updating, then a little for images to paint."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_timeout(500)


def set_number(page: Page, elem_id: str, value: str) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Tab")


def take(page: Page, url: str, out: Path) -> None:
    page.goto(url)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#text input").fill("transformer")
    page.locator("#text input").press("Enter")
    settle(page)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")  # drawn in the browser, no request
    # the second layer's cross-attention: reverse's anti-diagonal
    page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="1"][data-head="0"]').click()
    page.wait_for_timeout(300)
    page.set_viewport_size({"width": 1280, "height": 800})  # a laptop's or a projector's first screen
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(300)
    page.screenshot(path=str(out / "transformer.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})

    page.get_by_label("off (plain q·k)").check()
    settle(page)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(out / "unscaled.png"))  # the top of the page: output, notes and grid
    page.get_by_label("1/√d_k (paper)").check()
    settle(page)

    # steps and compare at a laptop's 1280 x 900, where their numbers must be readable
    page.set_viewport_size({"width": 1280, "height": 900})
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    page.locator('#explorer [data-kind="decoder.self_attn"][data-layer="1"][data-head="0"]').click()
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator("#steps_view .av-hv")).to_have_attribute("data-kind", "decoder.self_attn", timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#steps_view .av-pick[data-pick=weights]").click()  # the softmax: masked cells exactly 0, rows sum to 1
    expect(page.locator("#steps_view .av-hv")).to_have_attribute("data-step", "weights")
    page.mouse.move(0, 0)  # no cell hovered: no tooltip over the numbers
    page.locator("#steps_view").screenshot(path=str(out / "steps.png"))

    page.get_by_role("tab", name="Heatmaps").click()
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="1"][data-head="0"]').click()
    page.get_by_role("tab", name="Compare").click()
    expect(page.locator("#compare_view .av-hv")).to_have_attribute("data-kind", "decoder.cross_attn",
                                                                   timeout=TIMEOUT_MS)
    settle(page)
    page.mouse.move(0, 0)
    page.locator("#compare_view").screenshot(path=str(out / "compare.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})

    page.get_by_role("tab", name="√d_k lab").click()
    expect(page.locator("#lab_view svg[data-chart=histogram]")).to_be_visible(timeout=TIMEOUT_MS)
    set_number(page, "lab_dk_log", "9")
    expect(page.locator("#lab_dk input")).to_have_value("512", timeout=TIMEOUT_MS)
    page.locator("#lab_scaled input[type=checkbox]").uncheck()
    expect(page.locator("#lab_view .avl-heading")).to_contain_text("d_k = 512", timeout=TIMEOUT_MS)
    expect(page.locator("#lab_view .avl-heading")).to_contain_text("unscaled", timeout=TIMEOUT_MS)
    settle(page)
    page.screenshot(path=str(out / "lab.png"), full_page=True)

    # the study's three functions at d_k 512, part-way through training: plain dot products still saturated
    page.set_viewport_size({"width": 1280, "height": 900})
    page.get_by_role("tab", name="Training").click()
    expect(page.locator("#train_step [data-arm]")).to_have_count(3, timeout=TIMEOUT_MS)
    page.locator("#train_step input[type=range]").fill("19")
    expect(page.locator("#train_step")).to_have_attribute("data-step", "19")
    page.mouse.move(0, 0)
    page.locator("#train_step").screenshot(path=str(out / "training.png"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshots")
    parser.add_argument("--chromium", default=str(CHROMIUM))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with Server([sys.executable, "app.py"], Path(tempfile.mkdtemp()) / "app.log") as app, \
            httpx.Client(timeout=5) as client:
        app.wait_http(client, 180)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
            take(page, app.base + "/", args.out)
            browser.close()
    for path in sorted(args.out.glob("*.png")):
        print(path)


if __name__ == "__main__":
    main()
