"""The explorer's stack views in headless Chromium (the HTML explorer_html writes: no server): rollout and attention
flow of each self-attention stack drawn by the head view with the numbers the package computes, the grid hidden, a
kind with no stack saying so, and the duplicate-token column in the scores; screenshots at 1280 and 390 px.

Screenshots go to tests/screenshots/explorer_stack_*.png (git-ignored).
"""

from __future__ import annotations

import numpy as np
import pytest
from playwright.sync_api import Page, expect

import attention_viz as av
from attention_viz.explorer import explorer_html, unpack
from attention_viz.explorer.pack import QUANT, pack
from attention_viz.service.scores import score_kind
from attention_viz.service.stacks import stack_views
from tests.explorer.test_explorer_browser import open_html, shot

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def stacked_payload(shipped_payload):
    """The shipped run ("hello" on reverse, 2 pads) repacked with its stacks and scores, as the service packs it."""
    maps, masks = unpack(shipped_payload)
    tokens = shipped_payload["tokens"]
    scores = {}
    for kind in ("encoder.self_attn", "decoder.self_attn"):
        stack = kind.split(".")[0]
        weights = np.stack([maps[f"{stack}.{i}.self_attn"] for i in range(2)])
        axis = tokens["source" if stack == "encoder" else "target"]
        scores[kind] = score_kind(kind, weights, masks[kind], axis, axis)
    return pack(maps, tokens["source"], tokens["target"], masks=masks, output=shipped_payload["output"],
                title=shipped_payload["title"], scores=scores, stacks=stack_views(maps, encoder_decoder=True)), maps


@pytest.mark.parametrize("width", [1280, 390])
def test_rollout_and_flow_are_drawn_with_the_packages_numbers(page: Page, tmp_path, stacked_payload, width):
    payload, maps = stacked_payload
    page.set_viewport_size({"width": width, "height": 900})
    open_html(page, tmp_path, explorer_html(payload, document=True))
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    show = page.locator("#explorer .av-show")
    expect(show.locator("option")).to_have_text(["attention weights α", "rollout of the stack",
                                                 "attention flow of the stack"])
    source = payload["tokens"]["source"]
    for name, expected in (("rollout", av.rollout(maps, "encoder")[0]),
                           ("flow", av.attention_flow(maps, "encoder", normalise=True)[0])):
        show.select_option(name)
        view = page.locator("#head_view")
        expect(view.locator(".av-caption")).to_contain_text("of the whole stack")
        expect(view.locator(".av-caption")).to_contain_text("residual 0.5")
        expect(page.locator("#explorer .av-grid")).to_be_hidden()  # one map for the stack: no grid of heads
        expect(page.locator("#explorer .av-legend")).to_contain_text("share of the input token")
        rows = view.locator("tbody tr")
        expect(rows).to_have_count(len(source))
        allowed = unpack(payload)[1]["encoder.self_attn"]
        for q in (0, len(source) - 1):
            texts = rows.nth(q).locator("td").all_inner_texts()
            assert texts == [f"{v:.2f}" if ok else "" for v, ok in zip(expected[q], allowed[q], strict=True)]
        cell = rows.nth(1).locator("td").nth(2)
        assert abs(float(cell.get_attribute("title")) - expected[1, 2]) <= 0.5 / QUANT + 5e-5
        # no label cut: every key's header is as wide as its text needs
        assert page.evaluate("() => [...document.querySelectorAll('#head_view th')].every("
                             "th => th.scrollWidth <= th.clientWidth + 1)")
        shot(page, f"stack_{name}_{width}")
    # encoder-decoder attention is no stack: the view says so and shows the weights
    page.select_option("#explorer .av-kind", "decoder.cross_attn")
    expect(page.locator("#head_view .av-caption")).to_contain_text("reads a stack of self-attention")
    expect(page.locator("#explorer .av-grid")).to_be_visible()
    # the decoder's self-attention: rollout of its masked self-attention only, lower triangular
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    expect(page.locator("#head_view .av-caption")).to_contain_text("masked self-attention only")
    shot(page, f"stack_decoder_{width}")
    show.select_option("weights")
    expect(page.locator("#explorer .av-grid")).to_be_visible()


def test_the_scores_table_has_the_duplicate_token_column(page: Page, tmp_path, stacked_payload):
    payload, _ = stacked_payload
    page.set_viewport_size({"width": 1280, "height": 900})
    open_html(page, tmp_path, explorer_html(payload, document=True))
    page.select_option("#explorer .av-kind", "encoder.self_attn")  # "hello": the second l repeats the first
    scores = page.locator("#alignment")
    expect(scores.locator("thead th")).to_contain_text(["head", "previous token", "first token", "duplicate token"])
    entry = next(e for e in payload["kinds"] if e["kind"] == "encoder.self_attn")
    first = entry["scores"]["values"]["duplicate"][0][0]
    expect(scores.locator("tbody tr").first.locator("td").nth(2)).to_have_text(f"{first:.2f}")
    shot(page, "stack_scores_duplicate")
