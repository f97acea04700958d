"""webui.explorer_view in a real Gradio 6 page (launched in-process on a free loopback port) and Chromium.

A tile click changes the head with no request; a new value from a Python event redraws the run in the
same DOM; a refused input marks the views stale at once, and the next good run clears that, even when it
is the run already shown; an event's js hands the explorer's choice of head to Python.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from attention_viz.explorer.notebook import run_model

gr = pytest.importorskip("gradio")
pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(shipped_model, shipped_payload):
    from attention_viz.webui import scripts
    from attention_viz.webui.explorer_view import explorer_view, fresh_js, selection_js, stale_js

    def rerun(text: str) -> dict:
        if not text.isalpha():
            raise gr.Error("letters only")
        return run_model(shipped_model, text)

    with gr.Blocks() as demo:
        text = gr.Textbox(value="hello", elem_id="text")
        button = gr.Button("run", elem_id="run")
        view = explorer_view(shipped_payload)
        empty = explorer_view(None, root_id="empty")
        chosen = gr.Textbox(elem_id="chosen")
        kind, layer, head = gr.Textbox(visible=False), gr.Number(0, visible=False), gr.Number(0, visible=False)
        ask = gr.Button("which head?", elem_id="ask")
        event = button.click(rerun, inputs=text, outputs=view)
        event.failure(None, None, None, js=stale_js("explorer_view"))
        event.success(None, None, None, js=fresh_js("explorer_view"))
        ask.click(lambda k, l, h: f"{k} {int(l)} {int(h)}", [kind, layer, head], chosen,
                  js=selection_js("explorer_view", at=0))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, head=scripts.head())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
    assert empty is not None


def test_the_gradio_view(page: Page, app_url):
    page.goto(app_url)
    tiles = page.locator("#explorer .av-tile")
    expect(tiles).to_have_count(8, timeout=TIMEOUT_MS)
    expect(page.locator("#empty")).to_contain_text("No run to show yet.")
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.locator('#explorer [data-layer="1"][data-head="3"]').click()
    expect(page.locator("#head_view")).to_have_attribute("data-head", "3")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    expect(page.locator("#head_view")).to_have_attribute("data-kind", "decoder.cross_attn")
    # view changes never reach the server (the page may still fetch a theme font it meets late)
    assert [url for url in requests if "/static/fonts/" not in url] == []

    page.fill("#text textarea", "abc1")  # refused: the views are marked stale at once
    page.click("#run")
    expect(page.locator("[data-testid=toast-body]").first).to_contain_text("letters only", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer_view .av-explorer")).to_have_class("av-mount av-explorer av-stale")
    expect(page.locator("#explorer .av-stale-note")).to_be_visible()

    page.fill("#text textarea", "abcdef")  # a new run: the same DOM redraws it, keeping kind, layer and head
    page.click("#run")
    expect(page.locator("#explorer .av-output")).to_contain_text("fedcba", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stale-note")).to_be_hidden()
    view = page.locator("#head_view")
    expect(view).to_have_attribute("data-kind", "decoder.cross_attn")
    expect(view).to_have_attribute("data-head", "3")
    expect(view.locator("tbody tr")).to_have_count(7)  # <bos> + "fedcba"
    page.click("#ask")  # the explorer's choice reaches Python through the event's js
    expect(page.locator("#chosen textarea")).to_have_value("decoder.cross_attn 1 3", timeout=TIMEOUT_MS)

    page.fill("#text textarea", "abc1")  # refused again, then the very run on show: the same value clears it
    page.click("#run")
    expect(page.locator("#explorer_view .av-explorer")).to_have_class("av-mount av-explorer av-stale")
    expect(page.locator("#explorer .av-summary")).to_be_hidden()  # no output or notes of another input
    page.fill("#text textarea", "abcdef")
    page.click("#run")
    expect(page.locator("#explorer_view .av-explorer")).to_have_class("av-mount av-explorer", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-output")).to_contain_text("fedcba")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "explorer_gradio.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator("#explorer .av-controls label").first).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.screenshot(path=str(SCREENSHOTS / "explorer_gradio_phone.png"), full_page=True)
