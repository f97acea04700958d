"""The classroom benchmark in Chromium (benchmarks.classroom): the files one fresh opening of the page fetches (what
each simulated student then fetches), and the guided lesson walked after the class."""

from __future__ import annotations

import re
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from .common import chromium


def page_files(base: str) -> tuple[str, ...]:
    """The same-origin files (Gradio's scripts, styles, fonts, theme) one fresh Chromium opening of the page fetches,
    in order; () where Chromium cannot run here. (In a thread of its own: Playwright's sync API refuses a thread
    that runs an event loop.)"""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_record_page_files, base).result()


def _record_page_files(base: str) -> tuple[str, ...]:
    try:
        with chromium() as browser:
            page, seen = browser.new_page(), []
            page.on("request", lambda request: seen.append(request.url))
            page.goto(base + "/")
            page.wait_for_selector("#explorer .av-tile", timeout=60_000)
            page.wait_for_timeout(1000)
    except Exception as error:  # noqa: BLE001 - the class runs without the files, and says so
        print(f"page files not recorded ({type(error).__name__}: {error}); students fetch the HTML only", flush=True)
        return ()
    paths = [url[len(base):] for url in seen if url.startswith(base + "/")]
    return tuple(dict.fromkeys(p for p in paths if p.startswith(("/assets/", "/static/", "/theme.css"))))


QUIET_MS = 1500    # no request in flight nor started this long: the step is done
STEP_TIMEOUT_S = 60.0


def walk_lesson(base: str, steps: int = 20) -> list[dict]:
    """The guided lesson walked in a fresh Chromium context, Next pressed through every step as a student does (after
    the class, on the quiet server: the simulated students cannot see the events the page's own listeners send).
    Each step's {"step", "of", "requests" (POST .../queue/join: its own and every event following from it),
    "shown_ms" (its "Step N of M" text on show), "answered_ms" (its last request ended: the page then quiet, nothing
    in flight nor started, for QUIET_MS)} from the click, at most `steps` of them; or one {"error"}."""
    from .page import FIRST_VIEW

    with chromium() as browser:
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            joins: list[int | None] = []  # the events sent: their fn_index, in order
            flight: dict = {}
            last = [time.perf_counter()]

            def started(request) -> None:
                last[0] = time.perf_counter()
                if "/gradio_api/" in request.url:
                    flight[request] = True
                    if request.method == "POST" and "/queue/join" in request.url:
                        joins.append((request.post_data_json or {}).get("fn_index"))

            def ended(request) -> None:
                last[0] = time.perf_counter()
                flight.pop(request, None)

            page.on("request", started)
            page.on("requestfinished", ended)
            page.on("requestfailed", ended)
            page.goto(base + "/")
            page.wait_for_function(FIRST_VIEW, timeout=60_000, polling=50)
            page.locator("#lesson").get_by_text("A guided lesson").click()
            quiet(page, flight, last)
            out: list[dict] = []
            for _ in range(steps):
                before = len(joins)
                t0 = time.perf_counter()
                page.locator("#lesson_next").click()
                expected = out[-1]["step"] + 1 if out else 1
                page.locator("#lesson_text").get_by_text(re.compile(f"Step {expected} of ")).wait_for(
                    timeout=STEP_TIMEOUT_S * 1000)
                shown = time.perf_counter() - t0
                done = quiet(page, flight, last)
                found = re.search(r"Step (\d+) of (\d+)", page.locator("#lesson_text").inner_text())
                out.append({"step": int(found[1]), "of": int(found[2]), "requests": len(joins) - before,
                            "events": joins[before:],
                            "shown_ms": 1000 * shown, "answered_ms": 1000 * (done - t0)})
                if out[-1]["step"] >= out[-1]["of"]:
                    break
            return out
        except Exception as error:  # noqa: BLE001 - a walk that failed is reported, not raised
            return [{"error": f"{type(error).__name__}: {error}"[:300]}]


def quiet(page, flight: dict, last: list[float]) -> float:
    """Wait until no request is in flight and none started or ended for QUIET_MS; when the last one ended."""
    deadline = time.perf_counter() + STEP_TIMEOUT_S
    while time.perf_counter() < deadline:
        page.wait_for_timeout(100)
        if not flight and time.perf_counter() - last[0] > QUIET_MS / 1000:
            return last[0]
    raise TimeoutError(f"the page never went quiet: {len(flight)} requests in flight")


def lesson_summary(steps: list[dict]) -> str:
    """One line: requests per step and the times, over the steps walked."""
    if not steps or "error" in steps[0]:
        return f"the lesson walked in Chromium: failed ({steps[0]['error'] if steps else 'no step'})"
    requests = [s["requests"] for s in steps]
    per_step = ", ".join(f"{s['step']}: {s['requests']}" for s in steps)
    return (f"the lesson walked in Chromium on the idle server ({len(steps)} steps): events sent per step "
            f"{min(requests)}-{max(requests)} (mean {statistics.mean(requests):.1f}; by step {per_step}); "
            f"its text on show p50 {statistics.median(s['shown_ms'] for s in steps):.0f} ms, max "
            f"{max(s['shown_ms'] for s in steps):.0f} ms; its last request ended p50 "
            f"{statistics.median(s['answered_ms'] for s in steps):.0f} ms, max "
            f"{max(s['answered_ms'] for s in steps):.0f} ms")
