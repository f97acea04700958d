"""A real model reading a page in the launched app (the Long text tab): through gradio_client (/long_read, then the
view's server function for a region, as the page asks it) and in Debian's Chromium (paste, see the summary and the
overview, drag a rectangle, hover a cell's exact weight; screenshots at 1280 x 800 and 390 px wide in
tests/screenshots/long_*.png). One server, small real-format models (GPT-2, BERT: 256 positions, random weights)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from playwright.sync_api import Page, expect

pytest.importorskip("transformers")

from gradio_client import Client  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

from devtools.hub_models import save_tiny  # noqa: E402
from devtools.launcher import running_app  # noqa: E402

SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
TIMEOUT_MS = 60_000
PAGE = "The cat sat on the mat. Attention is all you need, and every student reads the paper before the lecture. " * 8


@pytest.fixture(scope="module")
def long_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("long")
    folders = [save_tiny("gpt2", root / "tiny-gpt2"), save_tiny("bert", root / "tiny-bert")]
    with running_app(root / "app.log", folders) as server:
        yield server.base + "/"


def view_call(base: str, asked: dict) -> dict:
    """The long view's server function, as the page calls it (POST /component_server)."""
    config = httpx.get(base + "config").json()
    component = next(c["id"] for c in config["components"] if c.get("props", {}).get("elem_id") == "long_view")
    answer = httpx.post(base + "gradio_api/component_server/", json={
        "data": asked, "component_id": component, "fn_name": "long_view", "session_hash": "long-test"}, timeout=30)
    assert answer.status_code == 200
    return answer.json()


def test_a_page_read_through_the_api_and_a_region_through_the_views_call(long_url):
    """/long_read reads what the model's positions hold and says so; the region asked after is the exact weights
    (each row of a causal map's first block sums to 1); a bad text and a translation model are refused with a
    sentence; a view of a run the server does not have says to read again."""
    client = Client(long_url, verbose=False)
    payload = client.predict("hub:tiny-gpt2", PAGE, api_name="/long_read")
    assert payload["kind"] == "long" and payload["read"] == 256 < payload["of"]
    assert "positions end at 256" in payload["note"]
    assert payload["overview"]["side"] == 256 and len(payload["stats"]["first_token"]) == 2
    asked = {"run": payload["run"], "what": "region", "key": payload["keys"][1], "head": 3, "rows": [0, 32],
             "cols": [0, 32]}
    region = view_call(long_url, asked)
    weights = np.frombuffer(base64.b64decode(region["data"]), "<f4").reshape(32, 32)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.triu(weights, 1) == 0)  # the causal mask: no weight on a later key
    sinkless = view_call(long_url, {**asked, "sink": False})
    assert sinkless["sink"] is False
    assert "read the text again" in view_call(long_url, {**asked, "run": "gone"})["error"]
    with pytest.raises(AppError, match="Paste a text"):
        client.predict("hub:tiny-gpt2", "  ", api_name="/long_read")


@pytest.mark.browser
def test_paste_a_page_drag_a_region_and_hover_an_exact_weight(page: Page, long_url):
    SCREENSHOTS.mkdir(exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(long_url)
        page.get_by_role("tab", name="Long text").click()
        page.locator("#long_text textarea").fill(PAGE)
        page.locator("#long_read").click()
        view = page.locator("#long_view .av-long")
        expect(view.locator(".av-long-note")).to_contain_text("Read the first 256 of the text's", timeout=TIMEOUT_MS)
        expect(view.locator(".av-long-grid")).to_have_count(3)
        expect(view.locator(".av-long-cell")).to_have_count(3 * 2 * 4)  # three grids of 2 layers x 4 heads
        canvas = view.locator(".av-long-overview")
        canvas.scroll_into_view_if_needed()
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1")  # no sideways
        box = canvas.bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * 0.48, box["y"] + box["height"] * 0.6, steps=4)
        page.mouse.up()
        title = view.locator(".av-long-regiontitle")
        expect(title).to_contain_text(re.compile(r"Queries \d+-\d+ \(down\) x keys \d+-\d+"), timeout=TIMEOUT_MS)
        expect(view.locator(".av-long-regionnote")).to_have_text("Exact weights, recomputed for this region.")
        region = view.locator(".av-long-regioncanvas")
        region.scroll_into_view_if_needed()
        rbox = region.bounding_box()
        page.mouse.move(rbox["x"] + rbox["width"] * 0.7, rbox["y"] + rbox["height"] * 0.8)
        expect(view.locator(".av-long-regiontip")).to_contain_text(re.compile(r"query \d+ “.+” → key \d+ “.+”: weight \d"))
        view.locator(".av-long-sink").check()  # the sink left out: said over the map and the region's title
        expect(view.locator(".av-long-legend").nth(3)).to_contain_text("first token left out", timeout=TIMEOUT_MS)
        expect(title).to_contain_text("first token left out of every row", timeout=TIMEOUT_MS)
        view.locator(".av-long-colour").select_option("p99")  # brighter: drawn again in the page, said in the legend
        expect(view.locator(".av-long-legend").nth(3)).to_contain_text("99th percentile")
        page.screenshot(path=str(SCREENSHOTS / f"long_{width}.png"), full_page=True)
