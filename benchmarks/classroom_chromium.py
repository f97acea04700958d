"""The classroom benchmark in Chromium (benchmarks.classroom): the files one fresh opening of the page fetches (what
each simulated student then fetches), and the page opened in Chromium while the class works (the first drawn view),
with the CPU Chromium took once reaped."""

from __future__ import annotations

import resource
import time
from concurrent.futures import ThreadPoolExecutor

from .students import ARRIVAL_S


def page_files(base: str) -> tuple[str, ...]:
    """The same-origin files (Gradio's scripts, styles, fonts, theme) one fresh Chromium opening of the page fetches,
    in order; () where Chromium cannot run here. (In a thread of its own: Playwright's sync API refuses a thread
    that runs an event loop.)"""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_record_page_files, base).result()


def _record_page_files(base: str) -> tuple[str, ...]:
    try:
        from playwright.sync_api import sync_playwright

        from devtools.browser import CHROMIUM, CHROMIUM_ARGS

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                page, seen = browser.new_page(), []
                page.on("request", lambda request: seen.append(request.url))
                page.goto(base + "/")
                page.wait_for_selector("#explorer .av-tile", timeout=60_000)
                page.wait_for_timeout(1000)
            finally:
                browser.close()
    except Exception as error:  # noqa: BLE001 - the class runs without the files, and says so
        print(f"page files not recorded ({type(error).__name__}: {error}); students fetch the HTML only", flush=True)
        return ()
    paths = [url[len(base):] for url in seen if url.startswith(base + "/")]
    return tuple(dict.fromkeys(p for p in paths if p.startswith(("/assets/", "/static/", "/theme.css"))))


def reaped_cpu_s() -> float:
    """User + system CPU seconds of this process's children that have ended (and theirs): Chromium's, once closed."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def open_in_chromium(base: str, opens: int, start: float, duration_s: float, samples: list[dict]) -> None:
    """`opens` openings of the page in Chromium during the class: the first in the arrivals, the rest spread over the
    class; each the page's own times (benchmarks.page.open_once: firstView = ms from navigation start)."""
    from playwright.sync_api import sync_playwright

    from .explorer import ARGS, CHROMIUM
    from .page import open_once

    at = [start + 1.0 + i * (ARRIVAL_S + duration_s * 0.8) / max(1, opens) for i in range(opens)]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for when in at:
                time.sleep(max(0.0, when - time.monotonic()))
                try:
                    samples.append(open_once(browser, base + "/") | {"at_s": when - start})
                except Exception as error:  # noqa: BLE001 - a page that never drew is reported, not raised
                    samples.append({"at_s": when - start, "error": f"{type(error).__name__}: {error}"[:300]})
        finally:
            browser.close()
