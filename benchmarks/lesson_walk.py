"""The guided lesson walked in Chromium: per step, the requests the page sends and how long until it is quiet again.

`walk(base)` opens the page in a fresh context of Debian's headless Chromium, opens the lesson and presses Next
through every step, as a student does. Per step it counts the events the page sends (POST .../queue/join: the
step's own and every event that follows from it, chained or fired by a control the step set) and times, from the
click: the step's text on show ("Step N of M" in #lesson_text; Playwright's polling adds a little), and the step's
last request ended (its last answer in and its files fetched: the page then stays quiet, no request in flight and
none started, for QUIET_MS). benchmarks.classroom runs it on each app before
its class, on the idle server: the simulated students cannot see events that the page's own change listeners send,
the browser does. Timings only ever go to the tables and JSON.
"""

from __future__ import annotations

import re
import time

QUIET_MS = 1500    # no request in flight nor started this long: the step is done
STEP_TIMEOUT_S = 60.0


def walk(base: str, steps: int = 20) -> list[dict]:
    """Each step's {"step", "of", "requests", "shown_ms", "answered_ms"} (at most `steps` of them), or one {"error"}."""
    from playwright.sync_api import sync_playwright

    from .explorer import ARGS, CHROMIUM
    from .page import FIRST_VIEW

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
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
        finally:
            browser.close()


def quiet(page, flight: dict, last: list[float]) -> float:
    """Wait until no request is in flight and none started or ended for QUIET_MS; when the last one ended."""
    deadline = time.perf_counter() + STEP_TIMEOUT_S
    while time.perf_counter() < deadline:
        page.wait_for_timeout(100)
        if not flight and time.perf_counter() - last[0] > QUIET_MS / 1000:
            return last[0]
    raise TimeoutError(f"the page never went quiet: {len(flight)} requests in flight")


def summary(steps: list[dict]) -> str:
    """One line: requests per step and the times, over the steps walked."""
    if not steps or "error" in steps[0]:
        return f"the lesson walked in Chromium: failed ({steps[0]['error'] if steps else 'no step'})"
    import statistics

    requests = [s["requests"] for s in steps]
    per_step = ", ".join(f"{s['step']}: {s['requests']}" for s in steps)
    return (f"the lesson walked in Chromium on the idle server ({len(steps)} steps): events sent per step "
            f"{min(requests)}-{max(requests)} (mean {statistics.mean(requests):.1f}; by step {per_step}); "
            f"its text on show p50 {statistics.median(s['shown_ms'] for s in steps):.0f} ms, max "
            f"{max(s['shown_ms'] for s in steps):.0f} ms; its last request ended p50 "
            f"{statistics.median(s['answered_ms'] for s in steps):.0f} ms, max "
            f"{max(s['answered_ms'] for s in steps):.0f} ms")
