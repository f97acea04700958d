"""The notebook's long view (show(model, long_text)) as a saved page, offline in Chromium: long.js and its parts
(long-run, long-grids, long-overview, long-region) drawing from the embedded overviews, no server."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from playwright.sync_api import Page, expect  # noqa: E402

from devtools.hub_models import save_tiny  # noqa: E402


def test_a_notebooks_long_view_draws_and_opens_a_region_from_its_overview(page: Page, tmp_path):
    """Every head's grids, the overview, another head chosen, and a region opened with the keyboard, drawn from the
    embedded overview and said to be; no script error."""
    from attention_viz.explorer.notebook import show
    from attention_viz.hub import load_pretrained

    model = load_pretrained(save_tiny("gpt2", tmp_path / "tiny-gpt2"), device="cpu")
    path = show(model, "the cat sat on the mat and the model reads every word of the sentence. " * 12).save(
        tmp_path / "long.html")
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    view = page.locator(".av-long")
    expect(view.locator(".av-long-cell")).to_have_count(3 * 2 * 4)  # three grids of 2 layers x 4 heads
    expect(view.locator(".av-long-chosen")).to_contain_text("head 0: sink")
    view.locator(".av-long-cell").nth(5).click()  # another head: its overview from the payload, no server
    expect(view.locator(".av-long-chosen")).to_contain_text("head 1: sink")
    view.locator(".av-long-overview").press("ArrowRight")
    view.locator(".av-long-overview").press("Enter")
    expect(view.locator(".av-long-regionnote")).to_contain_text("Offline: each cell one weight")
    assert view.locator(".av-long-regioncanvas").evaluate("c => c.width") > 0 and not errors
