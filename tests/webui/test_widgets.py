"""webui.widgets' texts: Markdown rendered to HTML on the server (prose), a line of plain text (plain_text).

The renderer's output is checked as a string; then both widgets in a real Gradio 6 page in Chromium: what a person
sees (bold, code in its framed box, a table), raw HTML in a text shown as text and never made an element, and a
new value from a Python event rendered the same way.
"""

from __future__ import annotations

import socket

import pytest
from playwright.sync_api import Page, expect

from attention_viz.webui.widgets import plain_text, prose, prose_html

gr = pytest.importorskip("gradio")
TIMEOUT_MS = 30_000
HOSTILE = 'a <img src=x onerror="window.owned=1"> & <script>window.owned=2</script> [x](javascript:alert(1))'


def test_prose_html_renders_the_markdown_the_app_writes():
    assert prose_html("**reverse**, checkpoint `reverse`.") == (
        "<p><strong>reverse</strong>, checkpoint <code>reverse</code>.</p>\n")
    assert prose_html("*a*\n\nb") == "<p><em>a</em></p>\n<p>b</p>\n"
    table = prose_html("| d_k | std |\n|---:|---:|\n| 1 | 1.0 |")
    assert "<table>" in table and '<td style="text-align:right">1.0</td>' in table
    assert prose_html(None) == prose_html("") == ""


def test_prose_html_writes_raw_html_out_as_text_and_refuses_script_links():
    out = prose_html(HOSTILE)
    assert "<img" not in out and "<script" not in out and "&lt;img" in out and "&lt;script&gt;" in out
    assert "<a " not in out and "href" not in out  # a javascript: link stays text


@pytest.fixture(scope="module")
def app_url():
    with gr.Blocks() as demo:
        text = prose("**bold**, `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |", elem_id="prose")
        line = plain_text("waiting", elem_id="line")
        plain_text("", elem_id="empty")
        button = gr.Button("next", elem_id="next")
        button.click(lambda: (prose_html(HOSTILE), HOSTILE), None, [text, line])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


@pytest.mark.browser
def test_texts_in_the_browser(page: Page, app_url: str):
    page.goto(app_url)
    prose_box, line = page.locator("#prose"), page.locator("#line")
    expect(prose_box.locator("strong")).to_have_text("bold", timeout=TIMEOUT_MS)
    expect(prose_box.locator("td")).to_have_text(["1", "2"])
    code = prose_box.locator("code")
    expect(code).to_have_text("code")
    # gr.Markdown's look without its script: the code framed, in the theme's monospace font
    style = code.evaluate("e => { const s = getComputedStyle(e); return [s.borderTopStyle, s.fontFamily]; }")
    assert style[0] == "solid" and "mono" in style[1].lower(), style
    # flush with its block, as gr.Markdown is (gr.HTML's container pads its content)
    boxes = prose_box.evaluate("e => [e.getBoundingClientRect().left, e.querySelector('p').getBoundingClientRect().left]")
    assert abs(boxes[0] - boxes[1]) <= 1, boxes
    expect(line).to_have_text("waiting")
    assert page.locator("#empty p").count() == 0  # no text, no empty paragraph taking room

    page.locator("#next").click()
    expect(line).to_have_text(HOSTILE, timeout=TIMEOUT_MS)  # the string exactly, as text
    expect(prose_box).to_contain_text('a <img src=x onerror="window.owned=1"> & <script>')
    assert prose_box.locator("img, script, a").count() == 0 and line.locator("img, script, a").count() == 0
    assert page.evaluate("() => window.owned") is None
