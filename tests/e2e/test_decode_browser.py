"""Attention forming, in the browser: the decode step by step (#decode_step) and the heads scored (#alignment).

A step changes the marked row in every tile and the head view, blanks the rows not computed yet and says what is
being written, all from the run /visualize sent: no request. Without the causal mask each step has its own maps,
and the page says and shows that earlier rows change.
"""

import base64

import numpy as np
import pytest
from gradio_client import Client
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import TIMEOUT_MS, app_requests, open_app, settle, shot

pytestmark = pytest.mark.browser
STEP = "#decode_step"
SLIDER = f"{STEP} input[type=range]"
ROW_TITLES = "(q) => [...document.querySelectorAll(`#head_view td[data-q='${q}']`)].map(td => td.title)"


def client_run(app_url, **controls):
    return Client(app_url, verbose=False).predict(api_name="/visualize", **controls)[0]


def test_decoding_step_by_step_marks_each_row_without_a_request(page: Page, app_url):
    open_app(page, app_url)  # the default: reverse on "attention", opened on the last encoder-decoder layer
    run = client_run(app_url, text="attention", model="reverse/sqrt_dk")
    written = run["decode"]["written"]
    assert run["decode"]["per_step"] is False and "".join(written[:-1]) == "noitnetta"
    expect(page.locator(STEP)).to_have_attribute("data-step", "all")
    expect(page.locator(f"{STEP} .av-step-text")).to_contain_text(f"all {len(written)} steps")
    requests = app_requests(page, app_url)

    page.locator(SLIDER).fill("3")
    expect(page.locator(STEP)).to_have_attribute("data-step", "3")
    text = page.locator(f"{STEP} .av-step-text")
    expect(text).to_contain_text("Step 4 of 10")
    expect(text).to_contain_text("output so far noi, writing t")
    view = page.locator("#head_view")
    expect(view.locator("tr.av-now th")).to_have_text("i")  # row 3 reads target token 3 (<bos> n o i)
    n_keys = len(run["tokens"]["source"])
    expect(view.locator("td.av-future")).to_have_count((len(written) - 4) * n_keys)  # rows 4.. not computed yet
    expect(page.locator("#explorer .av-tile .av-step-mark")).to_have_count(8)
    # the head's top key for the row being written, as the step text says it, from the run's own numbers
    cross = next(k for k in run["kinds"] if k["kind"] == "decoder.cross_attn")
    h, q, k = run["n_heads"], len(written), n_keys
    weights = np.frombuffer(base64.b64decode(cross["maps"][1]), "<u2").reshape(h, q, k) / run["quant"]
    top = int(weights[0, 3].argmax())
    expect(text).to_contain_text(f"looks most at source {top} {run['tokens']['source'][top]} ({weights[0, 3, top]:.2f})")
    assert run["tokens"]["source"][top] == "t"  # reverse: writing the 4th character reads the 4th from the end

    page.locator(f"{STEP} .av-next").click()
    expect(page.locator(STEP)).to_have_attribute("data-step", "4")
    expect(view.locator("tr.av-now th")).to_have_text("t")
    page.locator('#explorer [data-layer="0"][data-head="2"]').click()  # a head switch keeps the step
    expect(page.locator(STEP)).to_have_attribute("data-step", "4")
    expect(view).to_have_attribute("data-head", "2")
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    expect(text).to_contain_text("ran once, before the first step")
    expect(view.locator("td.av-future")).to_have_count(0)
    page.select_option("#explorer .av-kind", "decoder.cross_attn")

    page.locator(f"{STEP} .av-play").click()  # plays on from step 5, one step a beat
    expect(page.locator(STEP)).to_have_attribute("data-step", "5", timeout=5_000)
    expect(page.locator(f"{STEP} .av-play")).to_have_text("pause")  # its mark drawn by CSS
    page.locator(f"{STEP} .av-play").click()
    stopped = page.locator(STEP).get_attribute("data-step")
    page.wait_for_timeout(1_500)
    expect(page.locator(STEP)).to_have_attribute("data-step", stopped)
    page.locator(SLIDER).fill(str(len(written)))  # the slider's end: the finished run again
    expect(page.locator(STEP)).to_have_attribute("data-step", "all")
    expect(view.locator("td.av-future")).to_have_count(0)
    expect(view.locator("tr.av-now")).to_have_count(0)
    assert requests == [], requests
    shot(page, "decode_step", wait=False)


def test_without_the_causal_mask_each_step_has_its_own_maps(page: Page, app_url):
    """Earlier rows change between steps: the head view shows step t's own numbers and says how far they moved."""
    open_app(page, app_url, untrained=True)
    page.locator("#causal input[type=checkbox]").uncheck()
    expect(page.locator("#info")).to_contain_text("causal mask off", timeout=TIMEOUT_MS)
    settle(page)
    run = client_run(app_url, text="attention", model="untrained", causal_mask=False)
    assert run["decode"]["per_step"] is True
    page.select_option("#explorer .av-kind", "decoder.self_attn")
    page.locator('#explorer [data-layer="0"][data-head="1"]').click()
    requests = app_requests(page, app_url)
    rows = {}
    for t in (2, 5):
        page.locator(SLIDER).fill(str(t))
        expect(page.locator(STEP)).to_have_attribute("data-step", str(t))
        expect(page.locator(f"{STEP} .av-step-text")).to_contain_text("Causal mask off: the earlier rows are recomputed")
        h = run["n_heads"]
        step = np.frombuffer(base64.b64decode(run["decode"]["steps"][t]["decoder.self_attn"][0]), "<u2")
        step = step.reshape(h, t + 1, t + 1) / run["quant"]
        shown = page.evaluate(ROW_TITLES, 0)
        assert [float(v) for v in shown[: t + 1]] == pytest.approx(step[1, 0], abs=1e-4)
        assert shown[t + 1:] == [f"not computed yet at step {t + 1}"] * (len(shown) - t - 1)
        rows[t] = shown[: 3]
    assert rows[2] != rows[5]  # row 0 itself moved: later tokens are visible without the mask
    assert requests == [], requests


def test_heads_scored_on_the_grid_and_in_a_table(page: Page, app_url):
    open_app(page, app_url)
    run = client_run(app_url, text="attention", model="reverse/sqrt_dk")
    scores = next(k for k in run["kinds"] if k["kind"] == "decoder.cross_attn")["scores"]
    alignment = np.array(scores["values"]["alignment"], dtype=float)
    table = page.locator("#alignment")
    expect(table.locator(".av-look-for")).to_have_text(scores["look_for"])
    expect(table.locator(".av-look-for")).to_contain_text("anti-diagonal")
    expect(table.locator("tbody tr")).to_have_count(alignment.size)
    layer, head = np.unravel_index(alignment.argmax(), alignment.shape)
    best = table.locator(f'tbody tr[data-layer="{layer}"][data-head="{head}"]')
    expect(best.locator("td").first).to_have_text(f"{alignment[layer, head]:.2f}")
    expect(best.locator("td").first).to_have_class("av-best av-clear")
    clear = int((alignment > 0.5).sum())
    expect(page.locator("#explorer .av-badge", has_text="align")).to_have_count(clear)
    requests = app_requests(page, app_url)
    table.locator('tbody tr[data-layer="0"][data-head="3"]').click()
    expect(page.locator("#head_view")).to_have_attribute("data-head", "3")
    expect(page.locator('#explorer [data-layer="0"][data-head="3"]')).to_have_attribute("aria-pressed", "true")
    expect(table.locator(".av-this-head")).to_contain_text(f"L0·H3: task alignment {alignment[0, 3]:.2f}")
    page.select_option("#explorer .av-kind", "encoder.self_attn")
    expect(table.locator("thead th")).to_contain_text(["head", "previous token", "first token", "<eos> sink"])
    assert requests == [], requests
    table.scroll_into_view_if_needed()
    shot(page, "alignment", wait=False)
