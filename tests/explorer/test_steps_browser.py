"""The steps and compare views in headless Chromium, from the HTML steps_html writes: no server, no network.

A steps payload of the shipped reverse model (decoder self-attention, so the causal mask hides cells) and a
comparison with the causal mask on and off. Readable at 1280 x 900: every text at least 11 px, no value
outside its cell or over another; one panel at a time through the stepper's buttons and the arrow keys;
hover tells the exact number. Screenshots go to tests/screenshots/steps_*.png (git-ignored).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Page, expect

from devtools.browser import READABLE_JS

from attention_viz.explorer import compare_arrays, steps_arrays, steps_html

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"  # git-ignored
pytestmark = pytest.mark.browser
ORDER = ["scores", "scaled", "masked", "weights", "output"]



@pytest.fixture(scope="module")
def shipped_views(one_thread):
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views

    return Views(Runs())


@pytest.fixture(scope="module")
def steps_payload(shipped_views):
    views = shipped_views
    return views.steps(views.runs.settings("transformer", "reverse/sqrt_dk", 16), "decoder.self_attn", 1, 0)[0]


@pytest.fixture(scope="module")
def compare_payload(shipped_views):
    views = shipped_views
    settings = views.runs.settings("transformer", "reverse/sqrt_dk", 16, pad_tokens=2)
    return views.compare(settings, "causal_mask", "decoder.self_attn", 1, 0)[0]


def open_view(page: Page, tmp_path, payload: dict, width: int = 1280) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    path = tmp_path / "view.html"
    path.write_text(steps_html(payload, document=True), encoding="utf-8")
    page.goto(path.as_uri())
    expect(page.locator(".av-hv td.av-v").first).to_be_visible()


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"steps_{name}.png"), full_page=True)


def number(tip: str) -> float:
    """The exact value a tooltip ends with ("−∞" is -inf)."""
    text = tip.split(" (masked")[0].rsplit(": ", 1)[1].replace("−", "-").replace("∞", "inf")
    return float(text)


def test_the_stepper_shows_each_panel_readably(page: Page, tmp_path, steps_payload):
    open_view(page, tmp_path, steps_payload)
    root = page.locator("#steps")
    arrays = steps_arrays(steps_payload)
    queries, keys = len(steps_payload["queries"]), len(steps_payload["keys"])
    page.locator("#steps .av-pick").first.click()
    for i, key in enumerate(ORDER):
        if i:
            page.keyboard.press("ArrowRight")  # the focus is on the stepper: the arrow keys step
        expect(root).to_have_attribute("data-step", key)
        expect(page.locator("#steps .av-pick.av-on")).to_have_attribute("data-pick", key)
        measured = root.evaluate(READABLE_JS)
        columns = steps_payload["d_v"] if key == "output" else keys
        assert measured["values"] == queries * columns, measured
        assert measured["smallest"] >= 11 and measured["outside"] == 0 and measured["overlaps"] == 0, (key, measured)
        # the page's width holds the table: 12 tokens need no scroll at 1280 px
        assert root.evaluate("r => r.querySelector('.av-panel').scrollWidth <= r.querySelector('.av-panel').clientWidth")
        shot(page, key)
    assert page.locator("#steps .av-next").is_disabled()
    page.keyboard.press("Home")
    expect(root).to_have_attribute("data-step", "scores")
    page.locator("#steps .av-next").click()
    expect(root).to_have_attribute("data-step", "scaled")
    page.keyboard.press("ArrowLeft")
    expect(root).to_have_attribute("data-step", "scores")
    page.keyboard.press("End")
    expect(root).to_have_attribute("data-step", "output")
    page.locator("#steps .av-prev").click()
    expect(root).to_have_attribute("data-step", "weights")
    # the softmax: each row's Σ is 1, masked cells hatched and exactly 0
    masked = ~arrays["mask"]
    cells = page.locator("#steps td.av-v.av-masked")
    expect(cells).to_have_count(int(masked.sum()))
    assert set(cells.all_inner_texts()) == {"0"}
    assert set(page.locator("#steps td.av-sum").all_inner_texts()) == {"1"}
    page.locator("#steps .av-pick[data-pick=masked]").click()
    assert set(cells.all_inner_texts()) == {"−∞"}
    expect(page.locator("#steps .av-legend")).to_contain_text("masked: −∞")


@pytest.mark.parametrize("key, q, k", [("scores", 2, 5), ("scaled", 3, 1), ("masked", 1, 4), ("weights", 5, 2),
                                       ("output", 4, 7)])
def test_hover_gives_the_exact_value(page: Page, tmp_path, steps_payload, key, q, k):
    open_view(page, tmp_path, steps_payload)
    page.locator(f"#steps .av-pick[data-pick={key}]").click()
    cell = page.locator(f'#steps td[data-q="{q}"][data-k="{k}"]')
    cell.hover()
    tip = page.locator("#steps .av-tip")
    expect(tip).to_be_visible()
    text = tip.inner_text()
    expected = steps_arrays(steps_payload)[key][q, k]
    assert np.float32(number(text)) == expected, (text, expected)
    assert f"query {q}" in text
    if key in ("masked", "weights") and not steps_arrays(steps_payload)["mask"][q, k]:
        assert "masked" in text and (text.endswith("−∞ (masked: may not attend)") or key == "weights")
    written = cell.inner_text()
    assert len(written) <= 7 and (written == "−∞" or abs(float(written.replace("−", "-")) - expected) <= 0.006 * max(1, abs(expected)))


def test_compare_is_a_diverging_table_with_the_largest_change_outlined(page: Page, tmp_path, compare_payload):
    open_view(page, tmp_path, compare_payload)
    root = page.locator("#steps")
    arrays = compare_arrays(compare_payload)
    largest = compare_payload["largest"]
    measured = root.evaluate(READABLE_JS)
    assert measured["smallest"] >= 11 and measured["outside"] == 0 and measured["overlaps"] == 0, measured
    top = page.locator("#steps td.av-largest")
    expect(top).to_have_count(1)
    assert (int(top.get_attribute("data-q")), int(top.get_attribute("data-k"))) == (largest["query"], largest["key"])
    # red where the switch on gives more weight, blue where it gives less
    diff = arrays["difference"]
    for (q, k) in [np.unravel_index(diff.argmax(), diff.shape), np.unravel_index(diff.argmin(), diff.shape)]:
        rgb = page.locator(f'#steps td[data-q="{q}"][data-k="{k}"]').evaluate("td => getComputedStyle(td).backgroundColor")
        r, g, b = (int(c) for c in rgb[4:-1].split(","))
        assert (r > b) == (diff[q, k] > 0), (q, k, diff[q, k], rgb)
    cell = page.locator(f'#steps td[data-q="{largest["query"]}"][data-k="{largest["key"]}"]')
    cell.hover()
    text = page.locator("#steps .av-tip").inner_text()
    q, k = largest["query"], largest["key"]
    on, rest = text.split("causal mask on ", 1)[1].split("; causal mask off ", 1)
    off, difference = rest.split("; difference ", 1)
    assert [np.float32(float(x.replace("−", "-"))) for x in (on, off, difference)] == [
        arrays["a"][q, k], arrays["b"][q, k], diff[q, k]], text
    assert "causal mask on" in text and "causal mask off" in text
    expect(page.locator("#steps .av-legend")).to_contain_text("largest change")
    expect(page.locator("#steps .av-outputs")).to_contain_text(compare_payload["outputs"][0])
    shot(page, "compare")
    page.locator("#steps .av-pick[data-pick=a]").click()  # the map with the switch on: the future hatched
    expect(root).to_have_attribute("data-show", "a")
    expect(page.locator("#steps td.av-masked")).to_have_count(int((~arrays["mask_a"]).sum()))
    page.locator("#steps .av-pick[data-pick=b]").click()
    expect(page.locator("#steps td.av-masked")).to_have_count(int((~arrays["mask_b"]).sum()))


def test_stale_and_empty(page: Page, tmp_path, steps_payload):
    open_view(page, tmp_path, steps_payload)
    root = page.locator("#steps")
    root.evaluate("r => r.avView.markStale('Not for the current input.')")
    expect(root).to_have_class("av-hv av-steps av-stale")
    expect(page.locator("#steps .av-stale-note")).to_contain_text("Not for the current input. Shown: masked decoder")
    assert root.evaluate("r => getComputedStyle(r.querySelector('.av-panel')).opacity") != "1"
    root.evaluate("r => r.avView.markStale(null)")
    expect(page.locator("#steps .av-stale-note")).to_be_hidden()
    root.evaluate("r => r.avView.setPayload(null)")
    expect(root).to_have_class("av-hv av-steps av-empty")
    expect(page.locator("#steps td")).to_have_count(0)


def test_a_phone_scrolls_the_panel_not_the_page(page: Page, tmp_path, shipped_views):
    views = shipped_views
    settings = views.runs.settings("abcdefghijklmnopqrst", "reverse/sqrt_dk", 16, pad_tokens=16)
    payload = views.steps(settings, "encoder.self_attn", 0, 0)[0]
    open_view(page, tmp_path, payload, width=390)
    page.locator("#steps .av-pick[data-pick=masked]").click()
    sizes = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert sizes[0] <= sizes[1], sizes
    panel = page.locator("#steps .av-panel")
    scroll = panel.evaluate("p => [p.scrollWidth, p.clientWidth, getComputedStyle(p).overflowX]")
    assert scroll[0] > scroll[1] and scroll[2] == "auto", scroll
    expect(page.locator("#steps .av-more")).to_be_visible()  # the legend says more columns are a scroll away
    measured = page.locator("#steps").evaluate(READABLE_JS)
    assert measured["smallest"] >= 11 and measured["outside"] == 0 and measured["overlaps"] == 0, measured
    panel.evaluate("p => { p.scrollLeft = p.scrollWidth; }")
    assert panel.evaluate("p => p.scrollLeft") > 0
    shot(page, "phone")


def test_long_outputs_break_inside_a_small_phone(page: Page, tmp_path, shipped_views):
    """Two outputs of 33 characters (the untrained model's longest) under the comparison wrap at 320 px."""
    from attention_viz.service.limits import UNTRAINED

    views = shipped_views
    settings = views.runs.settings("abcdefghijklmnopqrstuvwxyzabcdef", UNTRAINED, 16)
    payload = views.compare(settings, "scaling", "decoder.cross_attn", 1, 0)[0]
    assert min(len(output) for output in payload["outputs"]) >= 30
    open_view(page, tmp_path, payload, width=390)
    page.add_style_tag(content=".av-hv { width: 216px; }")  # the view's width in the app on a 320 px phone
    width = page.locator(".av-hv").evaluate("e => e.getBoundingClientRect().right")
    rights = page.locator(".av-hv .av-outputs code").evaluate_all("cs => cs.map(c => c.getBoundingClientRect().right)")
    assert len(rights) == 2 and max(rights) <= width + 0.5, (width, rights)
