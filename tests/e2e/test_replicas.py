"""Two app processes behind Debian's nginx: a small class (benchmarks/replicas.py) with sticky sessions has no
error and each browser stays on one process; the same class with round robin fails in the ways docs/deploy.md
describes; and in Chromium, what a visitor sees of each. Needs nginx: installed with apt-get where it is missing (`bash .ci/run` installs it beforehand);
skipped, with the reason, only where it cannot be installed. Nothing here is timed."""

from __future__ import annotations

import os

from contextlib import ExitStack

import pytest

from benchmarks import replicas
from devtools.proxy import Proxy, ensure_nginx

STUDENTS = 10
TIMEOUT_MS = 15_000


def need_nginx() -> None:
    try:
        ensure_nginx()
    except RuntimeError as error:
        if os.environ.get("ATTENTION_VIZ_REQUIRE_BROWSER"):  # set by .ci/run, which installs nginx: CI never skips
            pytest.fail(f"nginx is missing, and these tests must run here: {error}")
        pytest.skip(f"nginx is needed and cannot be installed here: {error}")


@pytest.fixture(scope="module")
def two_apps(tmp_path_factory):
    """Two app processes for the module (the class's phases and the browser's): heartbeats every second instead of
    15 s, so a student notices a stream that will never answer within a second of its patience and the round robin's
    hung actions end soon. Nothing else about the protocol changes."""
    need_nginx()
    with ExitStack() as stack:
        yield [app.base for app in replicas.start_apps(2, tmp_path_factory.mktemp("apps"), stack, settle_s=0,
                                                       env={"GRADIO_HEARTBEAT_INTERVAL": "1"})]


@pytest.fixture(scope="module")
def result(two_apps):
    return replicas.run(students=STUDENTS, duration_s=10, phases=("sticky", "round_robin"), with_files=False,
                        patience_s=5, settle_s=0, bases=two_apps)


def test_sticky_sessions_serve_the_class_without_an_error(result):
    sticky = result["phases"]["sticky"]
    assert sticky["errors"] == 0 and not sticky["hung"], sticky["error_examples"]
    assert sum(a["n"] for name, a in sticky["actions"].items() if name != "open") >= STUDENTS  # they did act
    assert sticky["routes"]["browsers"] == STUDENTS and sticky["routes"]["browsers_on_several"] == 0
    assert sticky["apps_alive"]


def test_round_robin_breaks_gradio_sessions(result):
    spread = result["phases"]["round_robin"]
    assert spread["routes"]["browsers_on_several"] > 0 and len(spread["routes"]["requests_per_replica"]) == 2
    assert spread["errors"] > 0 and not spread["hung"]
    kinds = set(spread["error_kinds"])
    assert kinds <= {kind for _, kind in replicas.ERROR_KINDS[:3]}, spread["error_examples"]  # nothing else failed
    assert spread["apps_alive"]  # the processes themselves are fine: only the sessions are split


@pytest.mark.browser
def test_in_chromium_sticky_answers_every_edit_and_round_robin_reloads_the_page(page, two_apps, tmp_path):
    """What a visitor sees: through the sticky proxy each text typed is reversed by the model; through round robin
    Gradio's page loses its session, reloads itself and the text typed is gone (no message is shown)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    loads = []
    page.on("framenavigated", lambda frame: loads.append(frame.url) if frame == page.main_frame else None)
    for sticky in (True, False):
        with Proxy(two_apps, tmp_path / f"nginx-{sticky}", sticky=sticky) as proxy:
            page.goto(proxy.base + "/")
            page.wait_for_selector("#explorer .av-tile", timeout=60_000)
            text, output = page.locator("#text input, #text textarea").first, page.locator("#output input, "
                                                                                            "#output textarea").first
            opened, reloaded, opening = len(loads), False, text.input_value()
            for word in ("hello", "softmax", "queries"):
                text.fill(word)
                text.press("Enter")
                if sticky:
                    expect(output).to_have_value(word[::-1], timeout=TIMEOUT_MS)
                    continue
                try:  # round robin: the edit's event is lost and the page reloads; rarely both requests land right
                    page.wait_for_event("framenavigated", timeout=TIMEOUT_MS)
                except PlaywrightTimeout:  # no reload for this edit: it must then have been answered
                    expect(output).to_have_value(word[::-1], timeout=1)
                    continue
                page.wait_for_selector("#explorer .av-tile", timeout=60_000)
                expect(text).to_have_value(opening)  # the page as it opens: the edit is gone
                reloaded = True
            assert reloaded == (not sticky), (sticky, loads)
            assert (len(loads) == opened) == sticky
