"""The explorer in headless Chromium, from the HTML explorer_html and show() write: no server, no network.

Screenshots go to tests/screenshots/explorer_*.png (git-ignored).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from pathlib import Path

import torch

from attention_viz.core.config import TransformerConfig
from attention_viz.core.model import Transformer
from attention_viz.data.tokenizer import VOCAB_SIZE
from attention_viz.explorer import explorer_html, show, unpack

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored

pytestmark = pytest.mark.browser
STEP = 0.5 / 65535


def open_html(page: Page, tmp_path, html: str, name: str = "page.html") -> None:
    path = tmp_path / name
    path.write_text(html, encoding="utf-8")
    page.goto(path.as_uri())
    expect(page.locator(".av-explorer .av-tile").first).to_be_visible()


def count_requests(page: Page) -> list[str]:
    """Every request the page makes from now on (a view change must make none)."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url))
    return seen


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"explorer_{name}.png"), full_page=True)


def redraws(page: Page, root: str = "explorer") -> list[str]:
    """The reasons of the redraws the page measured for one root (performance measures)."""
    return page.evaluate("root => performance.getEntriesByName('explorer-redraw')"
                         ".filter(m => m.detail.root === root).map(m => m.detail.reason)", root)


def test_a_tile_click_selects_its_head_with_no_request(page: Page, tmp_path, shipped_payload):
    open_html(page, tmp_path, explorer_html(shipped_payload, document=True))
    requests = count_requests(page)
    opening = shipped_payload["opening"]  # the run opens on its last layer of encoder-decoder attention
    assert opening == {"kind": "decoder.cross_attn", "layer": 1, "head": 0}
    view = page.locator("#head_view")
    for name, value in opening.items():
        expect(view).to_have_attribute(f"data-{name}", str(value))
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    tile = page.locator('#explorer [data-kind="encoder.self_attn"][data-layer="1"][data-head="2"]')
    tile.click()
    view = page.locator("#head_view")
    expect(view).to_have_attribute("data-layer", "1")
    expect(view).to_have_attribute("data-head", "2")
    expect(view).to_have_attribute("data-kind", "encoder.self_attn")
    expect(tile).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#explorer .av-tile[aria-pressed=true]")).to_have_count(1)
    # the numbers written are the packed head's, to 2 decimals, row by row
    weights, masks = unpack(shipped_payload)
    head, allowed = weights["encoder.1.self_attn"][2], masks["encoder.self_attn"]
    texts = view.locator("tbody tr").first.locator("td").all_inner_texts()
    assert texts == [f"{w:.2f}" if ok else "" for w, ok in zip(head[0], allowed[0], strict=True)]
    assert requests == []
    assert redraws(page)[-1] == "tile"
    shot(page, "tile_click")


def test_hover_shows_the_exact_weight(page: Page, tmp_path, shipped_payload, shipped_model):
    open_html(page, tmp_path, explorer_html(shipped_payload, document=True))
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="0"][data-head="3"]').click()
    cell = page.locator('#head_view td[data-q="2"][data-k="1"]')
    cell.hover()
    tip = page.locator(".av-explorer .av-tip")  # beside #head_view, in the same container
    expect(tip).to_be_visible()
    packed = unpack(shipped_payload)[0]["decoder.0.cross_attn"][3, 2, 1]
    expect(tip).to_contain_text(f"weight {packed:.4f}")
    expect(tip).to_contain_text("query 2")
    assert cell.get_attribute("title") == f"{packed:.4f}"
    # masked cells say so: the causal mask hides key 3 from query 1 in decoder self-attention
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    masked = page.locator('#head_view td[data-q="1"][data-k="3"]')
    expect(masked).to_have_class("av-masked")
    masked.hover()
    expect(tip).to_contain_text("masked")
    expect(page.locator("#explorer .av-legend")).to_contain_text("masked")
    shot(page, "hover")


def test_kind_and_colour_scale_repaint_in_the_browser(page: Page, tmp_path, shipped_payload):
    open_html(page, tmp_path, explorer_html(shipped_payload, document=True))
    requests = count_requests(page)
    pixels = "() => [...document.querySelectorAll('#explorer .av-tile canvas')].map(c => c.toDataURL())"
    colours = "() => [...document.querySelectorAll('#head_view td:not(.av-masked)')].map(td => td.style.background)"
    before, cells_before = page.evaluate(pixels), page.evaluate(colours)
    page.select_option("#explorer .av-scale", "log")
    expect(page.locator("#explorer .av-legend")).to_contain_text("log")
    assert page.evaluate(pixels) != before and page.evaluate(colours) != cells_before
    page.select_option("#explorer .av-scale", "row")
    # per row: every live row's largest weight takes the top colour
    tops = page.evaluate("""() => [...document.querySelectorAll('#head_view tbody tr')].map(tr =>
        Math.max(...[...tr.querySelectorAll('td:not(.av-masked)')].map(td => +td.title)))""")
    top_colour = page.evaluate("() => AttentionExplorer.colour(1)")
    first_row = page.locator("#head_view tbody tr").first.locator("td:not(.av-masked)")
    index = int(np.argmax([float(t) for t in first_row.evaluate_all("tds => tds.map(td => td.title)")]))
    assert first_row.nth(index).evaluate("td => td.style.background") == "rgb({}, {}, {})".format(*top_colour)
    assert min(tops) > 0
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    expect(page.locator("#explorer .av-tile").first).to_have_attribute("data-kind", "decoder.self_attn")
    expect(page.locator("#head_view")).to_have_attribute("data-kind", "decoder.self_attn")
    assert requests == []
    assert redraws(page)[-3:] == ["scale", "scale", "kind"]
    frames = page.evaluate("() => performance.getEntriesByName('explorer-redraw').map(m => m.duration)")
    assert all(ms >= 0 for ms in frames)


def test_two_explorers_on_one_page_are_independent(page: Page, tmp_path, shipped_payload, widest_payload):
    html = (explorer_html(shipped_payload, root_id="explorer") + "<hr>" +
            explorer_html(widest_payload, root_id="second"))
    open_html(page, tmp_path, f"<!doctype html><meta charset=utf-8><body>{html}</body>")
    first, second = page.locator("#explorer"), page.locator("#second")
    expect(second.locator(".av-tile")).to_have_count(2 * 16)
    expect(first.locator(".av-tile")).to_have_count(2 * 4)
    second.locator('[data-layer="1"][data-head="9"]').click()
    expect(page.locator("#second-head")).to_have_attribute("data-head", "9")
    expect(page.locator("#head_view")).to_have_attribute("data-head", "0")  # the first did not move
    first.locator(".av-scale").select_option("log")
    expect(second.locator(".av-scale")).to_have_value("linear")
    first.locator('[data-layer="0"][data-head="3"]').click()
    expect(page.locator("#second-head")).to_have_attribute("data-head", "9")
    ids = page.evaluate("() => [...document.querySelectorAll('[id]')].map(e => e.id)")
    assert len(ids) == len(set(ids)) and {"explorer", "head_view", "second", "second-head"} <= set(ids)


def test_phone_width(page: Page, tmp_path, widest_payload):
    """390 px: the page never scrolls sideways, the head view does, the controls stack, nothing covers a tile."""
    page.set_viewport_size({"width": 390, "height": 844})
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1]
    view = page.evaluate("() => { const v = document.querySelector('#head_view');"
                         " return [v.scrollWidth, v.clientWidth, getComputedStyle(v).overflowX]; }")
    assert view[0] > view[1] and view[2] == "auto"
    lefts = page.locator("#explorer .av-controls label").evaluate_all("ls => ls.map(l => l.getBoundingClientRect().left)")
    assert len(set(lefts)) == 1  # one column
    boxes = page.evaluate("""() => {
        const rect = e => e.getBoundingClientRect();
        const tiles = [...document.querySelectorAll('#explorer .av-tile')].map(rect);
        const controls = [...document.querySelectorAll('button, select, input, a')].map(rect);
        const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        return {tiles: tiles.length, overlaps: controls.filter(c => tiles.some(t => hit(c, t))).length,
                outside: tiles.filter(t => t.right > window.innerWidth || t.left < 0).length};
    }""")
    assert boxes == {"tiles": 32, "overlaps": 0, "outside": 0}
    page.locator('#explorer [data-layer="1"][data-head="15"]').click()  # the last tile is reachable
    expect(page.locator("#head_view")).to_have_attribute("data-head", "15")
    # scrolled to its last key, the head view keeps its query labels in sight (they are sticky)
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    view = page.locator("#head_view")
    view.evaluate("v => { v.scrollLeft = v.scrollWidth; }")
    assert view.evaluate("v => v.scrollLeft") > 1000
    left = view.bounding_box()["x"]
    labels = page.locator("#head_view .av-hm-query, #head_view th.av-query").evaluate_all(
        "ls => ls.map(l => l.getBoundingClientRect().left)")
    assert labels and all(abs(x - left) < 2 for x in labels), (left, labels[:3])
    shot(page, "phone")


@pytest.mark.parametrize("width", [232, 300, 374])
def test_the_controls_fit_a_small_phone(page: Page, tmp_path, widest_payload, width):
    """The stacked controls stay inside the explorer, the longest option's select shrinking to fit (232 px: the
    app's explorer on a 320 px phone, 300: 390 px)."""
    page.set_viewport_size({"width": 390, "height": 800})
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    page.add_style_tag(content=f".av-explorer {{ width: {width}px; }}")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")  # the longest label
    right = page.locator(".av-explorer").evaluate("e => e.getBoundingClientRect().right - parseFloat(getComputedStyle(e).paddingRight)")
    rights = page.locator("#explorer .av-controls label, #explorer .av-controls select, #explorer .av-decode > *, "
                          "#explorer .av-output code").evaluate_all(
        "es => es.map(e => e.getBoundingClientRect().right)")
    assert max(rights) <= right + 0.5, (right, rights)


def test_the_notebook_view_twice_in_one_page(page: Page, tmp_path, shipped_model):
    """Two show() outputs in one document (as a notebook holds them): each iframe works on its own."""
    first, second = show(shipped_model, "abc"), show(shipped_model, "hello")
    requests = count_requests(page)
    page.set_content(f"<!doctype html><body>{first._repr_html_()}<p>between</p>{second._repr_html_()}</body>")
    frames = [page.frame_locator("iframe").nth(i) for i in range(2)]
    for frame, view in zip(frames, (first, second), strict=True):
        expect(frame.locator(f"#{view.root_id} .av-tile").first).to_be_visible()
    frames[0].locator('.av-tile[data-layer="1"][data-head="1"]').click()
    expect(frames[0].locator(f"#{first.root_id}-head")).to_have_attribute("data-head", "1")
    expect(frames[1].locator(f"#{second.root_id}-head")).to_have_attribute("data-head", "0")
    expect(frames[1].locator(".av-output")).to_contain_text("olleh")
    heights = page.locator("iframe").evaluate_all("fs => fs.map(f => f.getBoundingClientRect().height)")
    content = [frame.locator(".av-explorer").evaluate("e => e.getBoundingClientRect().bottom") for frame in frames]
    for height, bottom in zip(heights, content, strict=True):  # sized to its content by the script inside
        assert bottom <= height <= bottom + 40, (heights, content)
    assert [url for url in requests if not url.startswith(("about:", "data:"))] == []
    shot(page, "notebook")


def test_the_notebook_view_steps_through_the_decode(page: Page, shipped_model):
    """show(model, text) carries the decode: its step bar marks the row, and without the causal mask each step's
    own maps reach the head view (the decoder self-attention of step 1 has rows 0 and 1, both changed later)."""
    view = show(shipped_model, "abc", causal_mask=False)
    decode = view.payload["decode"]
    assert decode["per_step"] and len(decode["steps"]) == len(view.payload["tokens"]["target"])
    page.set_content(f"<!doctype html><body>{view._repr_html_()}</body>")
    frame = page.frame_locator("iframe")
    root = f"#{view.root_id}"
    expect(frame.locator(f"{root}-decode-step")).to_be_visible()
    frame.locator(f"{root} .av-kind").select_option("decoder.self_attn")
    frame.locator(f"{root}-decode-step input[type=range]").fill("1")
    expect(frame.locator(f"{root}-decode-step")).to_have_attribute("data-step", "1")
    expect(frame.locator(f"{root}-head tr.av-now th")).to_have_text(decode["written"][0])  # row 1 reads output 0
    expect(frame.locator(f"{root}-decode-step .av-step-text")).to_contain_text("Causal mask off")
    first = frame.locator(f"{root}-head td[data-q='0']").first.get_attribute("title")
    frame.locator(f"{root}-decode-step input[type=range]").fill("3")
    expect(frame.locator(f"{root}-decode-step")).to_have_attribute("data-step", "3")
    assert frame.locator(f"{root}-head td[data-q='0']").first.get_attribute("title") != first  # row 0 moved


def test_the_benchmarks_view_changes_are_measured_one_each(page: Page, tmp_path, widest_payload):
    """benchmarks/explorer.py's in-page loop: every change it makes yields one redraw and one frame measure of its
    own sort (no timing is asserted here)."""
    import sys

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:  # benchmarks/ is a folder of the repository, not an installed package
        sys.path.insert(0, root)
    from benchmarks.explorer import CHANGES, RUN_CHANGES

    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    requests = count_requests(page)
    for what in CHANGES:
        measured = page.evaluate(RUN_CHANGES, [what, 3])
        assert len(measured["redraw"]) == len(measured["frame"]) == 3, (what, measured)
        assert all(ms >= 0 for ms in measured["redraw"] + measured["frame"])
    assert requests == []


# a large head (more than 600 cells) is drawn by headmap.js: one canvas pixel per cell, the numbers as text over it
CELLS = """(root) => {
  const view = document.querySelector(root), canvas = view.querySelector('.av-hm-body canvas');
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  const rows = [...view.querySelectorAll('.av-hm-row')].map(r => r.textContent);
  return {K: canvas.width, Q: canvas.height, pixels: Array.from(pixels), rows: rows,
          styles: [...view.querySelectorAll('.av-hm-row')].map(r => r.getAttribute('style'))};
}"""
INK = r"(rgb\([^)]*\)|#[0-9a-f]{3,6})\s+([\d.]+)ch"  # a colour stop (the browser writes "c a, c b" for "c a b")


def cell_texts(row: str, width: int) -> list[str]:
    """A text row cut into its cells (5 characters each), stripped."""
    return [row[5 * j:5 * j + 5].strip() for j in range(width)]


def test_a_large_head_is_a_canvas_with_its_numbers_as_text(page: Page, tmp_path, widest_payload):
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    requests = count_requests(page)
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    page.select_option("#explorer .av-scale", "row")  # every row has its top colour (light) and dark cells
    page.locator('#explorer [data-kind="decoder.self_attn"][data-layer="1"][data-head="9"]').click()
    view = page.locator("#head_view")
    for name, value in {"kind": "decoder.self_attn", "layer": "1", "head": "9"}.items():
        expect(view).to_have_attribute(f"data-{name}", value)
    expect(view.locator("table")).to_have_count(0)
    drawn = page.evaluate(CELLS, "#head_view")
    weights, masks = unpack(widest_payload)
    head, allowed = weights["decoder.1.self_attn"][9], masks["decoder.self_attn"]
    Q, K = head.shape
    assert (drawn["Q"], drawn["K"]) == (Q, K) and Q * K > 600
    colour = page.evaluate("t => AttentionExplorer.colour(t)", 1.0)
    for q in range(Q):
        texts = cell_texts(drawn["rows"][q], K)
        assert texts == [f"{w:.2f}" if ok else "" for w, ok in zip(head[q], allowed[q], strict=True)], q
        top = int(np.argmax(np.where(allowed[q], head[q], -1)))
        for j in range(K):
            rgba = drawn["pixels"][4 * (q * K + j):4 * (q * K + j) + 4]
            if not allowed[q][j]:
                assert rgba[3] == 0  # masked: transparent over the hatch
            elif j == top:
                assert rgba[:3] == colour and rgba[3] == 255  # per row: the row's largest weight is the top colour
        assert ink_of(drawn["styles"][q], top) == "black"  # the top colour is light
    # linear: the small weights are dark cells with white numbers, a weight near 1 a light cell with black ones
    page.select_option("#explorer .av-scale", "linear")
    drawn = page.evaluate(CELLS, "#head_view")
    seen = set()
    for q in range(Q):
        for j in np.flatnonzero(allowed[q]):
            if head[q, j] < 0.2 or head[q, j] > 0.8:
                ink = ink_of(drawn["styles"][q], j)
                assert ink == ("white" if head[q, j] < 0.2 else "black"), (q, j, head[q, j], drawn["styles"][q])
                seen.add(ink)
    assert seen == {"black", "white"}
    assert requests == []
    shot(page, "large_head")


def ink_of(style: str | None, j: int) -> str:
    """The colour a text row's style gives cell j's text: one colour, or a gradient clipped to the text."""
    style = style or ""
    found = re.findall(INK, style)
    stops = [(ink, float(a) / 5, float(b) / 5) for (ink, a), (_, b) in zip(found[::2], found[1::2], strict=True)]
    if stops:
        ink = next(ink for ink, a, b in stops if a <= j < b)
    else:
        ink = re.search(r"color:\s*(rgb\([^)]*\)|#[0-9a-f]{3,6})", style).group(1)
    return {"#000": "black", "rgb(0, 0, 0)": "black", "#fff": "white", "rgb(255, 255, 255)": "white"}[ink]


def test_a_large_heads_numbers_sit_in_their_cells_and_hover_gives_the_exact_weight(page: Page, tmp_path,
                                                                                 widest_payload):
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    page.locator('#explorer [data-kind="encoder.self_attn"][data-layer="0"][data-head="4"]').click()
    expect(page.locator("#head_view")).to_have_attribute("data-head", "4")
    K = len(widest_payload["tokens"]["source"])
    # each value's characters lie inside its cell (the canvas's cells and the text share one grid)
    inside = page.evaluate("""(K) => {
        const body = document.querySelector('#head_view .av-hm-body').getBoundingClientRect();
        const out = [];
        for (const q of [0, 7, 20]) {
          const node = document.querySelectorAll('#head_view .av-hm-row')[q].firstChild;
          for (const j of [0, 1, Math.floor(K / 2), K - 17]) {  // K - 17: <eos>, the last key not masked
            const range = document.createRange();
            range.setStart(node, 5 * j); range.setEnd(node, 5 * j + 4);
            const r = range.getBoundingClientRect(), w = body.width / K, h = body.height / %d;
            out.push(r.left >= body.left + j * w && r.right <= body.left + (j + 1) * w &&
                     r.top >= body.top + q * h - 1 && r.bottom <= body.top + (q + 1) * h + 1);
          }
        }
        return out;
    }""" % K, K)
    assert inside and all(inside), inside
    size = page.locator("#head_view .av-hm-row").first.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")
    assert size >= 11
    body = page.locator("#head_view .av-hm-body")
    body.evaluate("e => e.scrollIntoView({block: 'start'})")  # its first rows on screen, however tall it is
    box = body.bounding_box()
    q, j = 7, 20
    page.mouse.move(box["x"] + (j + 0.5) * box["width"] / K, box["y"] + (q + 0.5) * box["height"] / K)
    tip = page.locator(".av-explorer .av-tip")
    expect(tip).to_be_visible()
    exact = unpack(widest_payload)[0]["encoder.0.self_attn"][4, q, j]
    expect(tip).to_contain_text(f"query {q}")
    expect(tip).to_contain_text(f"key {j}")
    expect(tip).to_contain_text(f"weight {exact:.4f}")
    expect(page.locator("#head_view .av-hm-cell")).to_be_visible()
    # a masked key (a pad) says so; the query labels stay in sight while the view scrolls to the last key
    page.locator("#head_view").evaluate("v => { v.scrollLeft = v.scrollWidth; }")
    box = body.bounding_box()
    label = page.locator("#head_view .av-hm-query").first.bounding_box()
    assert label["x"] >= page.locator("#head_view").bounding_box()["x"] - 1
    page.mouse.move(box["x"] + (K - 0.5) * box["width"] / K, box["y"] + 0.5 * box["height"] / K)
    expect(tip).to_contain_text("masked")
    page.mouse.move(1, 1)
    expect(tip).to_be_hidden()
    expect(page.locator("#head_view .av-hm-cell")).to_be_hidden()


def test_a_large_head_steps_through_the_decode_and_keeps_kinds_apart(page: Page, tmp_path, widest_payload):
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator("#decode_step input[type=range]").fill("3")
    expect(page.locator("#decode_step")).to_have_attribute("data-step", "3")
    rows = page.locator("#head_view .av-hm-row")
    expect(rows.nth(3)).to_have_class(re.compile("av-now"))
    expect(page.locator("#head_view .av-hm-row.av-now")).to_have_count(1)
    texts = rows.all_text_contents()
    assert all(t.strip() for t in texts[:4]) and not any(t.strip() for t in texts[4:])  # later rows: not yet
    expect(page.locator("#explorer .av-tile .av-step-mark:not([hidden])")).to_have_count(32)
    pixels = "() => [...document.querySelectorAll('#explorer .av-tile canvas')].map(c => c.toDataURL())"
    cross = page.evaluate(pixels)
    # another kind, a new colour scale there, and back: the kept tiles come back repainted for the new scale
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    expect(page.locator("#explorer .av-tile[data-kind='encoder.self_attn']")).to_have_count(32)
    page.select_option("#explorer .av-scale", "log")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    expect(page.locator("#explorer .av-tile")).to_have_count(32)
    expect(page.locator("#explorer .av-tile[data-kind='decoder.cross_attn']")).to_have_count(32)
    expect(page.locator("#head_view .av-hm")).to_have_count(1)
    expect(page.locator("#head_view")).to_have_attribute("data-kind", "decoder.cross_attn")
    assert page.evaluate(pixels) != cross
    page.select_option("#explorer .av-scale", "linear")
    assert page.evaluate(pixels) == cross  # the same step and scale: the same pixels
    page.locator("#decode_step input[type=range]").fill(str(len(widest_payload["decode"]["written"])))
    expect(page.locator("#head_view .av-hm-row.av-now")).to_have_count(0)
    expect(page.locator("#explorer .av-tile .av-step-mark:not([hidden])")).to_have_count(0)


def test_a_kept_kind_comes_back_for_the_head_and_step_chosen_meanwhile(page: Page, tmp_path, widest_payload):
    """A kind shown before comes back as it was left when nothing changed (its pixels as they were), and redrawn
    when the head or the decode step changed while another kind was shown."""
    open_html(page, tmp_path, explorer_html(widest_payload, document=True))
    weights, masks = unpack(widest_payload)
    allowed = masks["decoder.cross_attn"]
    pixels = "() => [...document.querySelectorAll('#explorer .av-tile canvas')].map(c => c.toDataURL())"

    def shows(layer: int, head: int, step: int | None = None) -> None:
        view = page.locator("#head_view")
        expect(view).to_have_attribute("data-kind", "decoder.cross_attn")
        expect(view).to_have_attribute("data-layer", str(layer))
        expect(view).to_have_attribute("data-head", str(head))
        drawn, weight = page.evaluate(CELLS, "#head_view"), weights[f"decoder.{layer}.cross_attn"][head]
        for q in range(weight.shape[0]):
            later = step is not None and q > step  # rows the decode has not written yet
            assert cell_texts(drawn["rows"][q], weight.shape[1]) == [
                "" if later or not ok else f"{w:.2f}" for w, ok in zip(weight[q], allowed[q], strict=True)], q

    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="0"][data-head="5"]').click()
    shows(0, 5)
    cross = page.evaluate(pixels)
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    shows(0, 5)
    assert page.evaluate(pixels) == cross  # as it was left
    # the other kind's head view waits beside it, hidden: no id, no data attributes, out of reach
    pages = page.locator(".av-explorer .av-head-view")
    expect(pages).to_have_count(2)
    assert sorted(pages.evaluate_all("ps => ps.map(p => [p.id, p.dataset.kind || '', p.inert, "
                                     "getComputedStyle(p).visibility, getComputedStyle(p).contentVisibility])")) == [
        ["", "", True, "hidden", "hidden"], ["head_view", "decoder.cross_attn", False, "visible", "visible"]]
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    page.locator('#explorer [data-kind="encoder.self_attn"][data-layer="0"][data-head="12"]').click()
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    shows(0, 12)  # the head chosen meanwhile (in the same layer)
    expect(page.locator("#explorer .av-tile.av-selected")).to_have_attribute("data-head", "12")
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    page.locator("#decode_step input[type=range]").fill("2")
    expect(page.locator("#decode_step")).to_have_attribute("data-step", "2")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    shows(0, 12, step=2)  # the decode step chosen meanwhile
    expect(page.locator("#explorer .av-tile .av-step-mark:not([hidden])")).to_have_count(32)
    assert page.evaluate(pixels) != cross


def test_a_kept_kinds_scores_wait_hidden_and_come_back_as_they_were(page: Page, tmp_path, views):
    """Each kind's scores are its own panel: the panel of a kind left stays in place, hidden (no id, out of reach,
    no selected row), the shown kind's panel is #alignment, and a kind shown again brings its panel back (the same
    element) with the head chosen meanwhile selected."""
    payload = views.visualize(views.runs.settings("attention", "reverse/sqrt_dk", 16, "sqrt_dk")).run
    scores = {k["kind"]: k["scores"] for k in payload["kinds"]}
    assert all(scores.values())
    open_html(page, tmp_path, explorer_html(payload, document=True))
    table = page.locator("#alignment")

    def shows(kind: str, layer: int, head: int) -> None:
        expect(table.locator(".av-look-for")).to_have_text(re.compile(re.escape(scores[kind]["look_for"][:30])))
        expect(table.locator("thead tr").first.locator("th")).to_have_count(1 + len(scores[kind]["labels"]))
        expect(table.locator("thead tr").first.locator("th").nth(1)).to_have_text(list(scores[kind]["labels"].values())[0])
        selected = table.locator("tbody tr.av-selected")
        expect(selected).to_have_count(1)
        expect(selected).to_have_attribute("data-layer", str(layer))
        expect(selected).to_have_attribute("data-head", str(head))
        expect(page.locator(".av-explorer tr.av-selected")).to_have_count(1)  # none in the hidden panels

    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator('#explorer [data-layer="1"][data-head="1"]').click()
    shows("decoder.cross_attn", 1, 1)
    page.evaluate("() => { document.querySelector('#alignment').dataset.probe = 'cross'; }")
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    shows("encoder.self_attn", 1, 1)
    panels = page.locator(".av-explorer .av-scores")
    expect(panels).to_have_count(2)
    assert sorted(panels.evaluate_all("ps => ps.map(p => [p.id, p.inert, getComputedStyle(p).visibility, "
                                      "getComputedStyle(p).contentVisibility])")) == [
        ["", True, "hidden", "hidden"], ["alignment", False, "visible", "visible"]]
    table.locator('tbody tr[data-layer="0"][data-head="0"]').click()  # the shown panel's rows still pick heads
    expect(page.locator("#head_view")).to_have_attribute("data-head", "0")
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    expect(table).to_have_attribute("data-probe", "cross")  # the kept panel itself, not a new one
    shows("decoder.cross_attn", 0, 0)
    expect(table.locator(".av-this-head")).to_contain_text("L0·H0")
    page.select_option("#explorer .av-kind", "decoder.self_attn")  # a third kind: two panels wait
    expect(panels).to_have_count(3)
    expect(page.locator("#alignment")).to_have_count(1)
    shows("decoder.self_attn", 0, 0)


def test_the_selected_heads_score_row_scrolls_into_its_box(page: Page, tmp_path, views):
    """32 heads' scores fill more than their box: choosing a head scrolls the box (not the page) to its row."""
    from attention_viz.service.limits import UNTRAINED

    payload = views.visualize(views.runs.settings("abcdefgh", UNTRAINED, 16, n_heads=16, d_model=64)).run
    open_html(page, tmp_path, explorer_html(payload, document=True))
    box = page.locator("#alignment .av-score-box")
    assert box.evaluate("b => b.scrollHeight > b.clientHeight + 100")  # it does scroll
    in_view = """b => { const row = b.querySelector('tbody tr.av-selected'), r = row.getBoundingClientRect(),
        o = b.getBoundingClientRect(), head = b.querySelector('thead').getBoundingClientRect().height;
        return [row.dataset.layer + '.' + row.dataset.head, r.top >= o.top + head - 1 && r.bottom <= o.bottom + 1]; }"""
    for layer, head in ((1, 15), (0, 0), (1, 9)):
        page.locator(f'#explorer [data-layer="{layer}"][data-head="{head}"]').click()
        page.wait_for_function(f"() => ({in_view})(document.querySelector('#alignment .av-score-box'))[1] && "
                               f"document.querySelector('#alignment tr.av-selected').dataset.head === '{head}'",
                               timeout=5_000)
    assert box.evaluate(in_view) == ["1.9", True]


def test_a_head_of_more_than_64_keys_has_small_cells_and_values_on_hover(page: Page, tmp_path, widest_model):
    from attention_viz.explorer.notebook import run_model

    text = "abcdefghijklmnopqrstuvwxyz" * 3  # 78 characters + <eos>
    payload = run_model(widest_model, text, max_len=3)
    open_html(page, tmp_path, explorer_html(payload, document=True))
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    expect(page.locator("#head_view .av-hm.av-small")).to_have_count(1)
    K = len(payload["tokens"]["source"])
    body = page.locator("#head_view .av-hm-body")
    body.evaluate("e => e.scrollIntoView({block: 'start'})")  # its first rows on screen, however tall it is
    box = body.bounding_box()
    assert box["width"] == pytest.approx(14 * K, abs=1)
    assert not "".join(page.locator("#head_view .av-hm-row").all_text_contents()).strip()
    page.mouse.move(box["x"] + 66.5 * 14, box["y"] + 3.5 * 14)
    view = page.locator("#head_view")
    layer, head = view.get_attribute("data-layer"), view.get_attribute("data-head")
    exact = unpack(payload)[0][f"encoder.{layer}.self_attn"][int(head), 3, 66]
    expect(page.locator(".av-explorer .av-tip")).to_contain_text(f"weight {exact:.4f}")


def test_the_notes_show_backticks_and_markup_of_a_text_as_text(page: Page, tmp_path, views):
    """The run's notes (Markdown) in the explorer's summary: the answer, written with backticks, stars, underscores
    and a tag, sits whole in its code box; nothing of it becomes an element."""
    text = "a`b*c_<i>**"
    payload = views.visualize(views.runs.settings(text, "reverse/sqrt_dk", 16, "sqrt_dk")).run
    open_html(page, tmp_path, explorer_html(payload, document=True))
    notes = page.locator("#explorer .av-notes")
    expect(notes.locator("li").first).to_be_visible()
    codes = notes.locator("code").all_text_contents()
    assert text[::-1] in codes and "reverse_dk16_sqrt_dk" in codes, codes
    assert notes.locator("i").count() == 0
    expect(notes.locator("b").first).to_have_text("reverse")  # the notes' own bold still reads as bold


def test_a_large_heads_labels_are_text_whatever_the_characters(page: Page, tmp_path, widest_model):
    """Every printable ASCII character a text may hold (markup, quotes, a space) is a label, never markup."""
    from attention_viz.explorer.notebook import run_model

    text = '<b>&"\' x</b><img src=x onerror=alert(1)>{}$`'  # 44 characters: 45 x 45 encoder maps
    payload = run_model(widest_model, text, max_len=2)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    open_html(page, tmp_path, explorer_html(payload, document=True))
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    view = page.locator("#head_view")
    expect(view.locator(".av-hm")).to_have_count(1)
    expect(view.locator("b, img")).to_have_count(0)
    keys = view.locator(".av-hm-key").all_text_contents()
    queries = view.locator(".av-hm-query").all_text_contents()
    expected = ["␣" if t == " " else t for t in payload["tokens"]["source"]]
    assert keys == queries == expected
    titles = view.locator(".av-hm-key").evaluate_all("ks => ks.map(k => k.title)")
    assert titles == [f"key {j}: {t}" for j, t in enumerate(payload["tokens"]["source"])]
    view.locator(".av-hm-body").hover()
    assert dialogs == []


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_runs_draw_every_head_as_a_table_or_a_canvas_with_the_right_numbers(page: Page, tmp_path, seed):
    """Random untrained shapes, texts and pads: every kind's chosen head shows the packed weights to 2 decimals,
    as a table up to 600 cells and on a canvas above."""
    import random

    from attention_viz.explorer.notebook import run_model

    rng = random.Random(seed)
    heads = (1, 3, 5)[seed % 3]
    config = TransformerConfig(vocab_size=VOCAB_SIZE, n_encoder_layers=rng.randint(1, 2),
                               n_decoder_layers=rng.randint(1, 2), d_model=4 * heads, n_heads=heads, d_k=rng.randint(1, 5),
                               d_v=2, d_ff=16, dropout=0.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(config).eval()
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(rng.randint(12, 32))).strip() or "a"
    payload = run_model(model, text, pad_tokens=rng.randint(0, 16), max_len=rng.randint(2, 40))
    open_html(page, tmp_path, explorer_html(payload, document=True))
    weights, masks = unpack(payload)
    for entry in payload["kinds"]:
        kind = entry["kind"]
        layer, head = rng.randrange(entry["layers"]), rng.randrange(heads)
        page.select_option("#explorer .av-kind", kind)
        page.locator(f'#explorer [data-kind="{kind}"][data-layer="{layer}"][data-head="{head}"]').click()
        expect(page.locator("#head_view")).to_have_attribute("data-head", str(head))
        expect(page.locator("#head_view")).to_have_attribute("data-layer", str(layer))
        name = f"{'encoder' if kind.startswith('encoder') else 'decoder'}.{layer}.{kind.split('.')[1]}"
        w, allowed = weights[name][head], masks[kind]
        Q, K = w.shape
        expected = [[f"{v:.2f}" if ok else "" for v, ok in zip(w[q], allowed[q], strict=True)] for q in range(Q)]
        if Q * K > 600:
            rows = page.locator("#head_view .av-hm-row").all_text_contents()
            assert [cell_texts(row, K) for row in rows] == expected, (kind, Q, K)
        else:
            rows = page.locator("#head_view tbody tr").evaluate_all(
                "trs => trs.map(tr => [...tr.querySelectorAll('td')].map(td => td.textContent))")
            assert rows == expected, (kind, Q, K)


def test_what_flows_is_each_rows_share_of_weight_times_value_norm(page: Page, tmp_path, shipped_payload):
    """The Show control redraws the grid and the head as α_qj·‖v_j W_O‖ over its row's sum, from the payload's
    norms, in the page (no request); the hover gives the share, the weight and the norm; back to the weights."""
    open_html(page, tmp_path, explorer_html(shipped_payload, document=True))
    seen = count_requests(page)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="1"][data-head="2"]').click()
    weights = unpack(shipped_payload)[0]["decoder.1.cross_attn"][2]  # (Q, K)
    entry = next(e for e in shipped_payload["kinds"] if e["kind"] == "decoder.cross_attn")
    norms = np.array(entry["norms"][1][2])  # (K,)
    flows = weights * norms
    share = flows / flows.sum(-1, keepdims=True)
    assert not np.allclose(share, weights, atol=1e-3)  # the values' norms differ: the two views differ
    expect(page.locator("#explorer .av-show-box")).to_be_visible()
    page.select_option("#explorer .av-show", "flows")
    expect(page.locator("#head_view .av-caption")).to_contain_text("what flows")
    expect(page.locator("#explorer .av-legend")).to_contain_text("what flows, share of the row")
    expect(page.locator("#explorer .av-stats")).to_contain_text("of the weights α")
    for q, j in ((0, 0), (2, 1), (3, 4)):
        cell = page.locator(f'#head_view td[data-q="{q}"][data-k="{j}"]')
        assert abs(float(cell.get_attribute("title")) - share[q, j]) < 2e-4
    cell = page.locator('#head_view td[data-q="2"][data-k="1"]')
    cell.hover()
    tip = page.locator(".av-explorer .av-tip")
    expect(tip).to_contain_text(f"of the row's flow (weight {weights[2, 1]:.4f} × ‖v W_O‖ ")
    shot(page, "flows")
    assert "show" in redraws(page)
    page.select_option("#explorer .av-show", "weights")
    expect(page.locator("#head_view .av-caption")).not_to_contain_text("what flows")
    assert page.locator('#head_view td[data-q="2"][data-k="1"]').get_attribute("title") == f"{weights[2, 1]:.4f}"
    assert seen == []


def test_what_flows_is_not_offered_without_the_norms_or_with_decoder_maps_that_change_every_step(
        page: Page, tmp_path, shipped_payload, shipped_model):
    bare = dict(shipped_payload, kinds=[{k: v for k, v in e.items() if k != "norms"} for e in shipped_payload["kinds"]])
    flows = page.locator("#explorer .av-show option[value='flows']")
    why = page.locator("#explorer .av-show-why")
    open_html(page, tmp_path, explorer_html(bare, document=True), "bare.html")
    expect(flows).to_have_count(0)  # a payload without the value norms has nothing to draw it from
    open_html(page, tmp_path, explorer_html(show(shipped_model, "hello", causal_mask=False).payload, document=True),
              "no-causal.html")
    # with the causal mask off it stays listed, off, and the line under the controls says why
    expect(flows).to_be_disabled()
    expect(flows).to_contain_text("(off)")
    expect(why).to_contain_text("causal mask off")
    page.locator("#explorer .av-show").focus()  # shown while the person is at Show
    expect(why).to_be_visible()
