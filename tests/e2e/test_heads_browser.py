"""Heads taken apart, as a person does it in Chromium: the explorer's "switch heads off" mode turns a click on a
tile, a layer's label or the kind's button into a rerun with those heads off; the tiles are marked off from the
run that came back, the output and notes follow, a typed list works too, and a refused one changes nothing."""

import json
import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import SCREENSHOTS, TILES, TIMEOUT_MS, open_app, settle

pytestmark = pytest.mark.browser
OFF = f"{TILES}.av-off"


def asked_json(off: dict) -> str:
    """The heads a click asks, as the page puts them in the heads-off box (JSON.stringify)."""
    return json.dumps(off, separators=(",", ":"))


def cut_mode(page: Page) -> None:
    page.locator("#explorer .av-cut").click()
    expect(page.locator("#explorer .av-cut")).to_have_attribute("aria-pressed", "true")


def test_a_click_switches_a_head_off_and_the_model_reruns(page: Page, app_url):
    open_app(page, app_url)
    expect(page.locator("#output textarea")).to_have_value("noitnetta", timeout=TIMEOUT_MS)  # reverse, every head on
    selected = page.locator(f"{TILES}.av-selected")
    kind, layer = selected.get_attribute("data-kind"), selected.get_attribute("data-layer")
    assert kind == "decoder.cross_attn"
    cut_mode(page)
    joins = []  # what the page sends: one request, the heads off as JSON in the box's place
    page.on("request", lambda r: joins.append(json.loads(r.post_data)) if "/queue/join" in r.url else None)
    # the last layer's whole row of cross-attention heads off: the reverse model loses its alignment
    page.locator(f"#explorer .av-row-cut[data-row='{layer}']").click()
    expect(page.locator(OFF)).to_have_count(4, timeout=TIMEOUT_MS)
    asked = asked_json({f"decoder.{layer}.cross_attn": "all"})
    assert [asked in j["data"] for j in joins] == [True], joins
    expect(page.locator("#heads_off textarea, #heads_off input").first).to_have_value(asked)
    expect(page.locator("#info")).to_contain_text("4 of 24 heads switched off", timeout=TIMEOUT_MS)
    settle(page)
    output = page.locator("#output textarea").input_value()
    assert output != "noitnetta"
    expect(page.locator("#info")).to_contain_text("with every head on it writes noitnetta")
    expect(page.locator("#explorer .av-off-note")).to_contain_text("4 heads switched off")
    page.screenshot(path=str(SCREENSHOTS / "heads_off_layer.png"), full_page=True)
    # one tile back on: three off; the head view of an off head says so
    joins.clear()
    page.locator(f"{OFF}[data-head='1']").click()
    expect(page.locator(OFF)).to_have_count(3, timeout=TIMEOUT_MS)
    asked = asked_json({f"decoder.{layer}.cross_attn": [0, 2, 3]})
    assert [asked in j["data"] for j in joins] == [True], joins
    expect(page.locator("#heads_off textarea, #heads_off input").first).to_have_value(asked)
    settle(page)
    page.locator("#explorer .av-cut").click()  # leave the mode: a click opens a head again
    page.locator(f"{OFF}[data-head='2']").click()
    expect(page.locator("#head_view .av-off-caption")).to_have_text("switched off")
    # "every head on" brings the model back to its output
    page.locator("#heads_clear").click()
    expect(page.locator(OFF)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(page.locator("#output textarea")).to_have_value("noitnetta", timeout=TIMEOUT_MS)


def test_a_whole_kind_off_by_its_button_and_mean_ablation(page: Page, app_url):
    open_app(page, app_url)
    cut_mode(page)
    page.locator("#explorer .av-cut-kind").click()  # every layer of encoder-decoder attention off
    expect(page.locator(OFF)).to_have_count(8, timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("8 of 24 heads switched off (zero ablation", timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#ablation label", has_text="mean output").click()
    expect(page.locator("#info")).to_contain_text("(mean ablation", timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-off-note")).to_contain_text("its mean output")
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "heads_off_kind_mean.png"), full_page=True)
    page.locator("#explorer .av-cut-kind").click()  # the same button now switches the kind back on
    expect(page.locator(OFF)).to_have_count(0, timeout=TIMEOUT_MS)


def test_a_click_that_would_switch_every_head_off_is_refused_and_changes_nothing(page: Page, app_url):
    open_app(page, app_url)
    cut_mode(page)
    box = page.locator("#heads_off textarea, #heads_off input").first
    for kind, off in (("decoder.cross_attn", 8), ("encoder.self_attn", 16)):
        page.locator("#explorer .av-kind").select_option(kind)
        page.locator("#explorer .av-cut-kind").click()
        expect(page.locator("#info")).to_contain_text(f"{off} of 24 heads switched off", timeout=TIMEOUT_MS)
        settle(page)
    every = {"encoder.0.self_attn": "all", "encoder.1.self_attn": "all", "decoder.0.cross_attn": "all",
             "decoder.1.cross_attn": "all"}  # in the model's order
    assert box.input_value() == asked_json(every)  # the heads of the run on screen, as the clicks asked them
    output, tiles = page.locator("#output textarea").input_value(), page.locator(OFF).count()
    page.locator("#explorer .av-kind").select_option("decoder.self_attn")
    page.locator("#explorer .av-cut-kind").click()  # the last 8 heads too: refused
    expect(page.locator(".toast-body").first).to_contain_text("every head of the model is switched off",
                                                              timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stale-note")).to_be_visible()  # the views say they are not for this input
    assert len(json.loads(box.input_value())) == 6  # the box keeps what was asked, as any refused control does
    assert page.locator("#output textarea").input_value() in ("", output)
    page.locator("#explorer .av-kind").select_option("encoder.self_attn")
    assert page.locator(OFF).count() == tiles == 8  # the tiles still mark the heads of the run on screen


@pytest.mark.parametrize("first", ["heads", "scaling"])
def test_a_click_and_a_change_made_at_once_both_hold_in_the_run_that_stays(page: Page, app_url, first):
    """A heads-off click and a change of another control made before either answers: the run left on screen has
    both (each click is in the box before its run leaves, and every run goes through the one run event)."""
    open_app(page, app_url)
    cut_mode(page)
    layer = page.locator(f"{TILES}.av-selected").get_attribute("data-layer")
    clicks = {"heads": f"#explorer .av-row-cut[data-row='{layer}']", "scaling": "#scale input[value='none']"}
    order = [clicks[first], *(c for name, c in clicks.items() if name != first)]
    page.evaluate("(selectors) => selectors.forEach((s) => document.querySelector(s).click())", order)  # at once
    expect(page.locator("#info")).to_contain_text("4 of 24 heads switched off", timeout=TIMEOUT_MS)
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ unscaled", timeout=TIMEOUT_MS)
    settle(page)
    expect(page.locator(OFF)).to_have_count(4)
    expect(page.locator("#info")).to_contain_text("4 of 24 heads switched off")
    expect(page.locator("#info")).to_contain_text("Scores QKᵀ unscaled")


def test_typed_heads_off_run_on_enter_and_a_refusal_changes_nothing(page: Page, app_url):
    open_app(page, app_url)
    box = page.locator("#heads_off textarea, #heads_off input").first
    box.fill("encoder.0.self_attn: 1 3")
    box.press("Enter")
    expect(page.locator("#info")).to_contain_text("2 of 24 heads switched off", timeout=TIMEOUT_MS)
    settle(page)
    page.locator("#explorer .av-kind").select_option("encoder.self_attn")
    expect(page.locator(OFF)).to_have_count(2)
    before = page.locator("#output textarea").input_value()
    box.fill("encoder.0.self_attn: 7")
    box.press("Enter")
    expect(page.locator(".toast-body").first).to_contain_text(re.compile("head 7 does not exist"),
                                                              timeout=TIMEOUT_MS)
    expect(page.locator("#explorer .av-stale-note")).to_be_visible()  # the views say they are not for this input
    assert page.locator("#output textarea").input_value() in ("", before)


def test_scoring_every_head_draws_the_prune_curve_and_puts_badges_on_the_tiles(page: Page, app_url):
    open_app(page, app_url)
    page.get_by_role("tab", name="Which heads matter").click()
    expect(page.locator("#heads_view")).to_contain_text("Press “Score every head”")
    page.locator("#score_heads").click()
    panel = page.locator("#heads_view .av-heads")
    expect(panel).to_contain_text("Each of the 24 heads switched off alone (zero ablation)", timeout=TIMEOUT_MS)
    expect(panel.locator("svg circle")).to_have_count(24)  # 0 .. 23 heads off: never every head
    expect(panel.locator(".av-imp-table")).to_have_count(3)  # one per kind, layers x heads
    expect(panel.locator(".av-imp-table td")).to_have_count(24)
    panel.locator("svg circle").nth(3).hover()
    expect(panel.locator(".av-prune-tip")).to_contain_text("3 off, 21 left: exact match")
    settle(page)
    page.screenshot(path=str(SCREENSHOTS / "heads_importance.png"), full_page=True)
    # the tiles of the heatmaps carry each head's cost as a badge, with the exact number in its title
    page.get_by_role("tab", name="Heatmaps").click()
    badges = page.locator(f"{TILES} .av-imp")
    expect(badges).to_have_count(8)
    assert "exact match lost (points) with this head alone off" in badges.first.get_attribute("title")
    # the scores as CSV
    page.get_by_role("tab", name="Which heads matter").click()
    page.locator("#score_export").click()
    csv_name = re.compile(r"reverse-trained-with-1-sqrtd_k-d_k-16__head_importance_zero\.csv$")  # the picker's name
    expect(page.locator("#score_file a")).to_have_attribute("href", csv_name,
                                                        timeout=TIMEOUT_MS)


def test_the_untrained_model_cannot_be_scored_and_says_why(page: Page, app_url):
    """Its scoring buttons are off from the pick, the reason and what to pick under them (no click, no toast); a
    trained model turns them on again and the reason goes."""
    open_app(page, app_url, untrained=True)
    page.get_by_role("tab", name="Which heads matter").click()
    for button in ("#score_heads", "#score_export"):
        expect(page.locator(button)).to_be_disabled(timeout=TIMEOUT_MS)
    expect(page.locator("#score_note")).to_contain_text("no task to score its heads on")
    expect(page.locator("#score_note")).to_contain_text("pick a trained model")
    empty = page.locator("#heads_view .av-empty")  # the panel follows the button: the reason, no "Press"
    expect(empty).to_contain_text("no task to score its heads on")
    expect(empty).not_to_contain_text("Press")
    page.locator("#model input").click()
    page.get_by_role("option", name="reverse (trained with 1/√d_k)").click()
    expect(page.locator("#score_heads")).to_be_enabled(timeout=TIMEOUT_MS)
    expect(page.locator("#score_note")).to_be_hidden()
    expect(empty).to_contain_text("Press “Score every head”")
    expect(empty).not_to_contain_text("no task")


def test_what_flows_beside_the_weights_in_the_app_and_after_a_rerun(page: Page, app_url):
    """The explorer's Show control: the grid and head redraw as each row's share of α·‖v W_O‖ without a request;
    the choice stays across a rerun (a head switched off), and an off head's map is marked as before."""
    open_app(page, app_url)
    expect(page.locator("#output textarea")).to_have_value("noitnetta", timeout=TIMEOUT_MS)
    TITLES = "() => [...document.querySelectorAll('#head_view td:not(.av-masked)')].map(td => td.title)"
    weights = page.evaluate(TITLES)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.select_option("#explorer .av-show", "flows")
    expect(page.locator("#head_view .av-caption")).to_contain_text("what flows")
    shares = page.evaluate(TITLES)
    assert shares != weights and all(0 <= float(x) <= 1 for x in shares)
    sums = page.evaluate("""() => [...document.querySelectorAll('#head_view tbody tr')].map(tr =>
        [...tr.querySelectorAll('td:not(.av-masked)')].reduce((s, td) => s + Number(td.title), 0))""")
    assert all(abs(s - 1) < 5e-3 for s in sums)  # each row's shares: a whole row's flow (4 decimals each)
    assert requests == []
    cut_mode(page)
    page.locator(f"{TILES}[data-head='0']").first.click()
    expect(page.locator(OFF)).to_have_count(1, timeout=TIMEOUT_MS)
    settle(page)
    expect(page.locator("#explorer .av-show")).to_have_value("flows")
    expect(page.locator("#head_view .av-caption")).to_contain_text("what flows")
    page.screenshot(path=str(SCREENSHOTS / "flows_app.png"), full_page=True)
