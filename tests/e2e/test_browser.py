"""The app as a person uses it: Debian's headless Chromium through Playwright, against the launched app.

The Transformer tab's views are drawn in the browser from the one run /visualize sends (the explorer):
inside #explorer every grid tile carries data-layer, data-head and data-kind and opens its head on a click;
#head_view shows that head with the same attributes and its numbers as text. Screenshots go to
tests/screenshots/ (git-ignored). These tests skip only where /usr/bin/chromium is missing, and
`bash .ci/run` installs it, so in CI they always run.
"""

import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from devtools.browser import READABLE_JS

from attention_viz.draw import raster
from attention_viz.explorer import steps_arrays, unpack
from attention_viz.service.catalog import Catalog

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
MAX_TEXT = Catalog().tokenizer.max_len  # the app's limit on a text: the longest max_len of the shipped cards
UNTRAINED = "untrained (random weights)"
TILES = "#explorer .av-tile"
STEPS_ROOT, COMPARE_ROOT = "#steps_view .av-hv", "#compare_view .av-hv"  # the views of one head's steps, comparison
# Every cell's exact weight (its title) in reading order: what the head view shows, to see it change.
HEAD = "() => [...document.querySelectorAll('#head_view td')].map(td => td.title).join(',')"
# Rectangles of every visible control and of every tile: no control may sit over a tile.
OVERLAPS = """() => {
    const rect = e => e.getBoundingClientRect();
    const seen = r => r.width > 0 && r.height > 0;
    const tiles = [...document.querySelectorAll('#explorer .av-tile')].map(rect);
    const controls = [...document.querySelectorAll('button, select, input, textarea, a, [role=button]:not(.av-tile)')]
        .map(rect).filter(seen);
    const hit = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    return {tiles: tiles.length, overlaps: controls.filter(c => tiles.some(t => hit(c, t))).length,
            outside: tiles.filter(t => t.right > window.innerWidth + 0.5 || t.left < 0).length};
}"""





def settle(page: Page) -> None:
    """Wait until no output is updating (every status tracker hidden)."""
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=status-tracker]')].every(e => e.classList.contains('hide'))",
        timeout=TIMEOUT_MS,
    )


def shot(page: Page, name: str, wait: bool = True) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    if wait:
        settle(page)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def changed(page: Page, elem_id: str, before: str) -> str:
    """Wait until the image of `elem_id` has a new src, and return it."""
    expect(page.locator(f"#{elem_id} img")).not_to_have_attribute("src", before, timeout=TIMEOUT_MS)
    return page.locator(f"#{elem_id} img").get_attribute("src")


def head_changed(page: Page, before: str) -> str:
    """Wait until the head view's weights differ from `before`, and return them."""
    page.wait_for_function(f"(before) => ({HEAD})() !== before", arg=before, timeout=TIMEOUT_MS)
    return page.evaluate(HEAD)


def set_number(page: Page, elem_id: str, value: str) -> None:
    """Type into a slider's or a number's box and leave it, as a person does (fires change and release)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Tab")


def app_requests(page: Page, app_url: str) -> list[str]:
    """Every request the page makes to the app from now on."""
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if request.url.startswith(app_url) else None)
    return seen


def open_app(page: Page, app_url: str, untrained: bool = False, heads: int | None = None, width: int = 1400) -> None:
    page.set_viewport_size({"width": width, "height": 1000})
    page.goto(app_url)
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#head_view table")).to_be_visible(timeout=TIMEOUT_MS)
    settle(page)
    if untrained:
        page.locator("#model input").click()
        page.get_by_role("option", name=UNTRAINED).click()
        expect(page.locator("#info")).to_contain_text("Untrained model", timeout=TIMEOUT_MS)
        settle(page)
    if heads is not None:
        set_number(page, "n_heads", str(heads))
        expect(page.locator(TILES)).to_have_count(2 * heads, timeout=TIMEOUT_MS)
        settle(page)


def test_the_page_opens_with_its_run_drawn_in_the_browser(page: Page, app_url):
    import httpx

    config = httpx.get(app_url + "config", timeout=30).json()
    view_id = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "explorer_view")
    runs = {d["id"] for d in config["dependencies"] if view_id in d["outputs"]}  # the events that send a run
    joined: list[int] = []
    page.on("request", lambda r: joined.append(r.post_data_json["fn_index"]) if "/queue/join" in r.url else None)
    open_app(page, app_url)
    assert runs and not runs & set(joined), joined  # the first run came with the page (the lab asks for its own)
    expect(page.locator(TILES)).to_have_count(2 * 4)  # the shipped reverse model: 2 layers x 4 heads
    # it opens on the telling view: the last layer of encoder-decoder attention (reverse's anti-diagonal)
    chosen = page.locator(f"{TILES}.av-selected")
    expect(chosen).to_have_count(1)
    opening = ("decoder.cross_attn", "1", "0")
    assert tuple(chosen.get_attribute(f"data-{a}") for a in ("kind", "layer", "head")) == opening
    assert tuple(page.locator("#head_view").get_attribute(f"data-{a}") for a in ("kind", "layer", "head")) == opening
    n_out = len(page.locator("#head_view tbody tr").all())
    weights = [[float(td.get_attribute("title") or 0) for td in row.locator("td").all()]
               for row in page.locator("#head_view tbody tr").all()]
    n_src = len("attention") + 1
    anti = sum(int(np.argmax(row) == n_src - 2 - q) for q, row in enumerate(weights[: n_src - 1]))
    assert n_out == n_src and anti >= n_src - 2, weights  # output t looks at source n-1-t: the reversal
    page.select_option("#explorer .av-kind", "encoder.self_attn")  # in the browser: still no request
    page.locator(f'{TILES}[data-layer="0"][data-head="0"]').click()
    tile = page.locator(TILES).first
    assert (tile.get_attribute("data-kind"), tile.get_attribute("data-layer"), tile.get_attribute("data-head")) == (
        "encoder.self_attn", "0", "0")
    n = len("attention") + 1  # the default text and <eos>: encoder self-attention is n × n
    cells = page.locator("#head_view td")
    expect(cells).to_have_count(n * n)
    first = cells.first
    weight = float(first.get_attribute("title"))
    assert first.inner_text() == f"{weight:.2f}"  # the value is written in the cell
    # its colour is the exports' viridis (the browser interpolates 17 stops of it)
    rgb = first.evaluate("td => getComputedStyle(td).backgroundColor")
    drawn = np.array([int(c) for c in rgb[4:-1].split(",")])
    assert np.abs(drawn - raster.colormap_lut()[int(round(weight * 255))].astype(int)).max() <= 4, rgb
    expect(page.locator("#output input, #output textarea").first).not_to_have_value("", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stats")).to_contain_text("entropy")
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ")
    for gone in ("#grid", "#head_table", "#stats"):  # the server-drawn views are no more
        expect(page.locator(gone)).to_have_count(0)
    shot(page, "transformer")


def test_typing_text_changes_the_maps_and_the_output(page: Page, app_url):
    open_app(page, app_url)
    output = page.locator("#output input, #output textarea").first
    head, said = page.evaluate(HEAD), output.input_value()
    page.locator("#text input, #text textarea").first.fill("transformer")
    head_changed(page, head)
    expect(output).not_to_have_value(said, timeout=TIMEOUT_MS)
    expect(page.locator("#head_view tbody tr")).to_have_count(len("transformer") + 1)


def test_d_k_scaling_and_masks_change_the_maps(page: Page, app_url):
    open_app(page, app_url, untrained=True)
    head = page.evaluate(HEAD)

    set_number(page, "dk_log", "6")  # the log₂ slider moves d_k to 2⁶ in the browser, then the model reruns
    expect(page.locator("#dk input")).to_have_value("64", timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("d_k 64", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    set_number(page, "dk", "300")  # d_k is free for the untrained model
    expect(page.locator("#info")).to_contain_text("d_k 300", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    # the custom factor is typed in only while the scaling is custom, and says so; a change of it otherwise sends
    # nothing (page.js routeWhen: the route of its change)
    factor = page.locator("#factor input[type=number]")
    expect(factor).to_be_disabled()
    expect(page.locator("#factor")).to_contain_text('Applies only when the scaling is "custom factor"')
    route = "(s) => attentionViz.routeWhen(s, 'custom', 'routeOne', 4, 'number', 0.5, '', '7', null)"
    assert page.evaluate(route, "sqrt_dk") == ["7", ""] and page.evaluate(route, "custom") == ["8", ""]
    page.get_by_label("custom factor", exact=True).check()
    expect(factor).to_be_enabled(timeout=TIMEOUT_MS)
    expect(page.locator("#factor")).not_to_contain_text("Applies only when")
    set_number(page, "factor", "0.25")
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ ×0.25 (custom)", timeout=TIMEOUT_MS)
    head = head_changed(page, head)

    page.get_by_label("off (plain q·k)").check()
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ unscaled", timeout=TIMEOUT_MS)
    head = head_changed(page, head)
    expect(factor).to_be_disabled()  # off again, with its reason
    expect(page.locator("#factor")).to_contain_text('Applies only when the scaling is "custom factor"')

    page.select_option("#explorer .av-kind", "decoder.self_attn")  # in the browser
    head = head_changed(page, head)
    expect(page.locator('#head_view td.av-masked[data-q="0"][data-k="1"]')).to_have_count(1)  # the causal mask
    page.locator("#causal input[type=checkbox]").uncheck()
    expect(page.locator("#info")).to_contain_text("causal mask off", timeout=TIMEOUT_MS)
    head = head_changed(page, head)
    expect(page.locator("#head_view td.av-masked")).to_have_count(0)

    page.select_option("#explorer .av-kind", "encoder.self_attn")
    head = head_changed(page, head)
    set_number(page, "pads", "3")
    expect(page.locator("#info")).to_contain_text("3 pad tokens with the padding mask on", timeout=TIMEOUT_MS)
    head = head_changed(page, head)
    expect(page.locator("#head_view tbody tr").first.locator("td.av-masked")).to_have_count(3)  # pad keys
    page.locator("#padding input[type=checkbox]").uncheck()
    expect(page.locator("#info")).to_contain_text("padding mask off", timeout=TIMEOUT_MS)
    head_changed(page, head)
    expect(page.locator("#head_view td.av-masked")).to_have_count(0)
    shot(page, "switches")


def test_a_tile_click_and_hover_need_no_request(page: Page, app_url):
    """A tile opens its head, kind and colour repaint and hover tells the exact weight, all without the server:
    the numbers are those /visualize sent."""
    from gradio_client import Client

    open_app(page, app_url, untrained=True)
    run = Client(app_url, verbose=False).predict(text="attention", model="untrained", api_name="/visualize")[0]
    maps, masks = unpack(run)
    requests = app_requests(page, app_url)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    tile = page.locator('#explorer [data-kind="decoder.cross_attn"][data-layer="1"][data-head="2"]')
    tile.click()
    view = page.locator("#head_view")
    for name, value in (("kind", "decoder.cross_attn"), ("layer", "1"), ("head", "2")):
        expect(view).to_have_attribute(f"data-{name}", value)
    expect(tile).to_have_attribute("aria-pressed", "true")
    head = maps["decoder.1.cross_attn"][2]
    texts = view.locator("tbody tr").nth(1).locator("td").all_inner_texts()
    assert texts == [f"{w:.2f}" if ok else "" for w, ok in zip(head[1], masks["decoder.cross_attn"][1], strict=True)]
    cell = view.locator('td[data-q="1"][data-k="3"]')
    cell.hover()
    tip = page.locator("#explorer_view .av-tip")
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(f"weight {head[1, 3]:.4f}")
    expect(tip).to_contain_text("query 1")
    page.select_option("#explorer .av-scale", "log")
    expect(page.locator("#explorer .av-legend")).to_contain_text("log")
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    masked = view.locator('td[data-q="1"][data-k="3"]')
    expect(masked).to_have_class("av-masked")  # the causal mask: query 1 may not see key 3
    masked.hover()
    expect(tip).to_contain_text("masked")
    assert requests == [], requests
    shot(page, "tile_hover")


def test_steps_compare_and_export_follow_the_head_chosen_in_the_browser(page: Page, app_url):
    open_app(page, app_url, untrained=True)
    page.select_option("#explorer .av-kind", "encoder.self_attn")  # the page opens on encoder-decoder attention
    page.locator('#explorer [data-kind="encoder.self_attn"][data-layer="1"][data-head="3"]').click()
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    steps = page.locator(STEPS_ROOT)
    for name, value in (("kind", "encoder.self_attn"), ("layer", "1"), ("head", "3")):
        expect(steps).to_have_attribute(f"data-{name}", value, timeout=TIMEOUT_MS)
    expect(page.locator("#steps_text")).to_contain_text("encoder self-attention, layer 1, head 3", timeout=TIMEOUT_MS)
    expect(page.locator("#steps_text")).to_contain_text("softmax")
    page.get_by_role("tab", name="Heatmaps").click()
    page.locator('#explorer [data-layer="0"][data-head="1"]').click()
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(steps).to_have_attribute("data-layer", "0", timeout=TIMEOUT_MS)
    expect(steps).to_have_attribute("data-head", "1")
    expect(page.locator("#steps_text")).to_contain_text("layer 0, head 1", timeout=TIMEOUT_MS)
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(len("attention") + 1)
    page.locator("#text input, #text textarea").first.fill("hello")  # a new run: the open step view follows it
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(len("hello") + 1, timeout=TIMEOUT_MS)
    expect(steps).to_have_attribute("data-head", "1")
    expect(page.locator("#steps_text")).to_contain_text("layer 0, head 1")
    shot(page, "steps")

    page.get_by_role("tab", name="Compare").click()
    compare = page.locator(COMPARE_ROOT)
    expect(compare).to_have_attribute("data-head", "1", timeout=TIMEOUT_MS)
    expect(compare).to_have_attribute("data-comparison", "scaling")
    expect(page.locator("#compare_text")).to_contain_text("layer 0, head 1", timeout=TIMEOUT_MS)
    page.get_by_label("causal mask on − causal mask off").check()
    expect(compare).to_have_attribute("data-comparison", "causal_mask", timeout=TIMEOUT_MS)
    expect(page.locator("#compare_text")).to_contain_text("causal mask", timeout=TIMEOUT_MS)
    expect(page.locator(f"{COMPARE_ROOT} .av-note")).to_contain_text("same either way")  # the encoder has none
    shot(page, "compare")

    page.get_by_role("tab", name="Export").click()
    page.locator("#export_button").click()
    expect(page.locator("#files")).to_contain_text("encoder_self_attn__L0_H1", timeout=TIMEOUT_MS)  # the name, less its suffix
    # the files but the figures first (the figures take a second or more), each a link, the button saying the
    # figures are being drawn; then all nine, the same names, and the button as it was
    links = page.locator("#files a[download]")
    first = links.evaluate_all("links => links.map(a => a.getAttribute('download'))")
    assert sorted(name[name.rfind("."):] for name in first) == [".csv", ".html", ".npz", ".png", ".png"], first
    shot(page, "export_first_files", wait=False)
    expect(links).to_have_count(9, timeout=TIMEOUT_MS)
    expect(page.locator("#export_button")).to_have_text("Export the head chosen in Heatmaps", timeout=TIMEOUT_MS)
    every = links.evaluate_all("links => links.map(a => a.getAttribute('download'))")
    assert set(first) < set(every) and sum(name.endswith((".svg", ".pdf")) for name in every) == 4, every
    shot(page, "export_every_file")


def test_steps_are_readable_at_1280_one_panel_at_a_time(page: Page, app_url):
    """In the app's own page (its theme's CSS around the view): every text at least 11 px, no value outside its
    cell or over another, each panel through the stepper, and hover tells the exact value /steps sent."""
    from gradio_client import Client

    open_app(page, app_url, width=1280)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    page.locator('#explorer [data-kind="decoder.self_attn"][data-layer="1"][data-head="0"]').click()
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    steps = page.locator(STEPS_ROOT)
    expect(steps).to_have_attribute("data-kind", "decoder.self_attn", timeout=TIMEOUT_MS)
    settle(page)
    sent = Client(app_url, verbose=False).predict(text="attention", kind="decoder.self_attn", layer=1, head=0,
                                                 api_name="/steps")[0]
    arrays = steps_arrays(sent)
    page.locator(f"{STEPS_ROOT} .av-pick").first.click()
    for i, key in enumerate(["scores", "scaled", "masked", "weights", "output"]):
        if i:
            page.keyboard.press("ArrowRight")
        expect(steps).to_have_attribute("data-step", key)
        measured = steps.evaluate(READABLE_JS)
        assert measured["smallest"] >= 11 and measured["outside"] == 0 and measured["overlaps"] == 0, (key, measured)
        cell = page.locator(f'{STEPS_ROOT} td[data-q="3"][data-k="{1 if key == "output" else 2}"]')
        cell.hover()
        tip = page.locator(f"{STEPS_ROOT} .av-tip")
        expect(tip).to_be_visible()
        exact = tip.inner_text().split(" (masked")[0].rsplit(": ", 1)[1].replace("−", "-").replace("∞", "inf")
        assert np.float32(float(exact)) == arrays[key][3, 1 if key == "output" else 2], (key, tip.inner_text())
        page.mouse.move(0, 0)
    shot(page, "steps_1280")


def test_a_refused_input_marks_steps_and_compare_stale(page: Page, app_url):
    open_app(page, app_url)
    page.get_by_role("tab", name="Compare").click()  # a tab's views exist once it has been opened
    expect(page.locator(COMPARE_ROOT)).to_have_attribute("data-kind", "decoder.cross_attn", timeout=TIMEOUT_MS)
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    steps = page.locator(STEPS_ROOT)
    expect(steps).to_have_attribute("data-kind", "decoder.cross_attn", timeout=TIMEOUT_MS)
    text = page.locator("#text input, #text textarea").first
    text.fill("x" * (MAX_TEXT + 1))  # refused
    expect(page.locator("[data-testid=toast-body]").first).to_contain_text(f"Text is {MAX_TEXT + 1} characters",
                                                                            timeout=TIMEOUT_MS)
    for root in (STEPS_ROOT, COMPARE_ROOT):
        expect(page.locator(root)).to_have_class(re.compile(r"\bav-stale\b"), timeout=TIMEOUT_MS)
    expect(page.locator(f"{STEPS_ROOT} .av-stale-note")).to_contain_text("Not for the current input")
    assert steps.evaluate("r => getComputedStyle(r.querySelector('.av-panel')).opacity") != "1"  # greyed out
    shot(page, "steps_stale", wait=False)
    text.fill("hello")  # accepted: the open steps view is redrawn for it and is no longer stale
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(len("hello") + 1, timeout=TIMEOUT_MS)
    expect(steps).not_to_have_class(re.compile(r"\bav-stale\b"), timeout=TIMEOUT_MS)
    expect(page.locator(COMPARE_ROOT)).to_have_class(re.compile(r"\bav-stale\b"))  # not redrawn yet: still says so
    page.get_by_role("tab", name="Compare").click()
    expect(page.locator(COMPARE_ROOT)).not_to_have_class(re.compile(r"\bav-stale\b"), timeout=TIMEOUT_MS)


def test_a_run_asks_the_server_once_unless_steps_or_compare_is_open(page: Page, app_url):
    """Opening a view is decided in the page; after a run only an open Steps or Compare view asks for its own."""
    open_app(page, app_url)
    settle(page)
    sent = []  # every request to the server's API, as "METHOD path"
    page.on("request", lambda r: sent.append(f"{r.method} {r.url.split('/gradio_api', 1)[-1].split('?')[0]}")
            if "/gradio_api/" in r.url else None)
    joins = lambda: sum(entry == "POST /queue/join" for entry in sent)  # noqa: E731
    page.get_by_role("tab", name="Export").click()
    page.get_by_role("tab", name="Heatmaps").click()
    page.wait_for_timeout(500)
    assert not [entry for entry in sent if entry.startswith("POST")], sent  # a tab opened: nothing sent
    text = page.locator("#text input, #text textarea").first
    text.fill("heads")
    expect(page.locator(TILES).first).to_be_visible(timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.querySelector('#output textarea, #output input').value.length > 0",
                           timeout=TIMEOUT_MS)
    settle(page)
    page.wait_for_timeout(500)
    assert joins() == 1, sent  # the run, and nothing for the closed Steps and Compare views
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    steps = page.locator(STEPS_ROOT)
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(len("heads") + 1, timeout=TIMEOUT_MS)
    beside = lambda: sum(entry == "POST /component_server/" for entry in sent)  # noqa: E731
    assert (joins(), beside()) == (1, 1), sent  # the steps of the open view, beside the queue (the run is kept)
    text.fill("hello world")
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(len("hello world") + 1, timeout=TIMEOUT_MS)
    settle(page)
    assert (joins(), beside()) == (3, 1), sent  # the run, then the open Steps view follows it
    expect(steps).not_to_have_class(re.compile(r"\bav-stale\b"))


def test_the_lab_renders_and_follows_d_k_and_scaling(page: Page, app_url):
    """The lab's charts are drawn in the page (tests/e2e/test_lab_browser.py looks at them closely)."""
    open_app(page, app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    expect(page.locator("#lab_view svg[data-chart=histogram]")).to_be_visible(timeout=TIMEOUT_MS)
    study = page.locator("#study .av-study")  # the training study, drawn from numbers in the page's config
    expect(study.locator("svg[data-chart=study-accuracy]")).to_be_visible(timeout=TIMEOUT_MS)
    expect(study.locator("svg[data-chart=study-spread]")).to_be_visible()
    expect(study.locator("svg[data-chart=study-accuracy] [data-series]")).to_have_count(5)  # 3 arms unit q, k + 2 Xavier
    plain = study.locator("svg[data-chart=study-accuracy] [data-series='dot/unit_qk'] circle title")
    expect(plain).to_have_count(5)
    expect(plain.last).to_contain_text("plain dot (unit q, k), d_k 1024: 20.5")  # the summary's 20.47 %
    study.scroll_into_view_if_needed()
    shot(page, "lab_study")
    page.locator("#lab_view").scroll_into_view_if_needed()
    heading = page.locator("#lab_view .avl-heading")
    set_number(page, "lab_dk_log", "10")
    expect(page.locator("#lab_dk input")).to_have_value("1024", timeout=TIMEOUT_MS)
    expect(page.locator("#lab_numbers")).to_contain_text("1024 and 1", timeout=TIMEOUT_MS)
    expect(heading).to_contain_text("d_k = 1024", timeout=TIMEOUT_MS)
    page.locator("#lab_scaled input[type=checkbox]").uncheck()
    expect(heading).to_contain_text("unscaled", timeout=TIMEOUT_MS)
    expect(page.locator("#lab_view svg[data-chart=histogram] text.avl-title").first).to_have_text("q·k")
    shot(page, "lab")


def refused_then_recovered(page: Page, refuse, message: str, recover) -> None:
    """A refused input marks the explorer stale at once and leaves no output or verdict of the old input;
    a good one draws the new run and clears the mark."""
    root, info = page.locator("#explorer_view .av-explorer"), page.locator("#info")
    expect(info).to_contain_text("✓ matches", timeout=TIMEOUT_MS)  # the shipped model reverses "hello"
    refuse()
    expect(page.locator("[data-testid=toast-body]").first).to_contain_text(message, timeout=TIMEOUT_MS)
    expect(root).to_have_class("av-mount av-explorer av-stale", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stale-note")).to_be_visible()
    expect(page.locator("#explorer .av-stale-note")).to_contain_text("Not for the current input")
    expect(info).not_to_contain_text("matches")
    expect(info).to_contain_text("Refused")
    expect(page.locator("#output input, #output textarea").first).to_have_value("")
    assert root.evaluate("e => getComputedStyle(e.querySelector('.av-grid')).opacity") != "1"  # greyed out
    expect(page.locator("#alignment")).to_be_hidden()  # what to look for, and the scores: the old run's
    expect(page.locator("#decode_step .av-step-text")).to_be_hidden()
    recover()
    expect(root).to_have_class("av-mount av-explorer", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stale-note")).to_be_hidden()
    expect(page.locator("#alignment")).to_be_visible()
    expect(info).to_contain_text("Scores QKᵀ", timeout=TIMEOUT_MS)


def test_a_refused_text_or_d_k_marks_the_views_stale(page: Page, app_url):
    open_app(page, app_url)
    text = page.locator("#text input, #text textarea").first
    text.fill("hello")
    expect(page.locator("#head_view tbody tr")).to_have_count(6, timeout=TIMEOUT_MS)
    refused_then_recovered(page, lambda: text.fill("x" * (MAX_TEXT + 1)),
                           f"Text is {MAX_TEXT + 1} characters; the maximum is {MAX_TEXT}.", lambda: text.fill("hello"))
    shot(page, "recovered")
    refused_then_recovered(page, lambda: set_number(page, "dk", "5000"), "d_k must be between 1 and 1024",
                           lambda: set_number(page, "dk", "16"))


def test_a_refused_text_shows_stale_views(page: Page, app_url):
    """The stale state, as a screenshot (the toast and the greyed views)."""
    open_app(page, app_url)
    page.locator("#text input, #text textarea").first.fill("héllo")
    expect(page.locator("#explorer_view .av-explorer")).to_have_class("av-mount av-explorer av-stale",
                                                                    timeout=TIMEOUT_MS)
    shot(page, "stale", wait=False)  # the refused outputs keep their error status, so don't wait for it


def test_sixteen_heads(page: Page, app_url):
    open_app(page, app_url, untrained=True, heads=16)
    assert page.evaluate(OVERLAPS) == {"tiles": 32, "overlaps": 0, "outside": 0}
    requests = app_requests(page, app_url)
    page.locator('#explorer [data-layer="1"][data-head="15"]').click()
    expect(page.locator("#head_view")).to_have_attribute("data-head", "15")
    expect(page.locator("#explorer .av-headsel option")).to_have_count(16)
    assert requests == []
    shot(page, "sixteen_heads")


def test_phone_width(page: Page, app_url):
    """390 px, 16 heads, the longest source: the page never scrolls sideways, the head view does, the controls
    stack, and no button sits over a tile."""
    open_app(page, app_url, untrained=True, heads=16, width=390)
    set_number(page, "pads", "16")
    page.locator("#text input, #text textarea").first.fill(("abcdefghijklmnopqrstuvwxyz" * 2)[:MAX_TEXT])
    # a head this large is a canvas with its numbers as text (headmap.js): its key labels
    expect(page.locator("#head_view .av-hm-key")).to_have_count(MAX_TEXT + 1 + 16, timeout=TIMEOUT_MS)
    settle(page)
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], width
    view = page.evaluate("() => { const v = document.querySelector('#head_view');"
                         " return [v.scrollWidth, v.clientWidth, getComputedStyle(v).overflowX]; }")
    assert view[0] > view[1] and view[2] == "auto", view
    lefts = page.locator("#explorer .av-controls label").evaluate_all(
        "ls => ls.map(l => Math.round(l.getBoundingClientRect().left))")
    assert len(lefts) == 5 and len(set(lefts)) == 1, lefts  # one column: attention, layer, head, colour, show
    # the page's own columns stack too: the inputs above the views
    assert page.locator("#text").bounding_box()["y"] < page.locator("#explorer").bounding_box()["y"]
    assert page.evaluate(OVERLAPS) == {"tiles": 32, "overlaps": 0, "outside": 0}
    page.select_option("#explorer .av-kind", "encoder.self_attn")  # 49 x 49: the widest map
    page.locator('#explorer [data-layer="1"][data-head="15"]').click()  # the last tile is reachable
    expect(page.locator("#head_view")).to_have_attribute("data-head", "15")
    page.locator("#head_view").evaluate("v => { v.scrollLeft = v.scrollWidth; }")
    assert page.locator("#head_view").evaluate("v => v.scrollLeft") > 1000
    left = page.locator("#head_view").bounding_box()["x"]  # the query labels stay in sight (sticky)
    labels = page.locator("#head_view .av-hm-query").evaluate_all("ls => ls.map(l => l.getBoundingClientRect().left)")
    assert len(labels) == MAX_TEXT + 1 + 16 and all(abs(x - left) < 2 for x in labels), (left, labels[:3])
    shot(page, "phone")
    # the steps of that head: 49 x 49 scores scroll inside their panel, the page still not sideways
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator(STEPS_ROOT)).to_have_attribute("data-head", "15", timeout=TIMEOUT_MS)
    expect(page.locator(f"{STEPS_ROOT} tbody tr")).to_have_count(MAX_TEXT + 1 + 16)
    settle(page)
    width = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], width
    panel = page.locator(f"{STEPS_ROOT} .av-panel")
    scroll = panel.evaluate("p => [p.scrollWidth, p.clientWidth, getComputedStyle(p).overflowX]")
    assert scroll[0] > scroll[1] and scroll[2] == "auto", scroll
    measured = page.locator(STEPS_ROOT).evaluate(READABLE_JS)
    assert measured["smallest"] >= 11 and measured["outside"] == 0 and measured["overlaps"] == 0, measured
    panel.evaluate("p => { p.scrollLeft = p.scrollWidth; }")
    assert panel.evaluate("p => p.scrollLeft") > 0
    shot(page, "phone_steps")
