"""The √d_k lab in Debian's Chromium: the page draws the server's numbers as SVG, legibly, at 1280 and 390 px.

What is checked is geometry the browser computed (bounding boxes, computed font sizes), never a time.
Screenshots go to tests/screenshots/ (git-ignored).
"""

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

pytestmark = pytest.mark.browser
TIMEOUT_MS = 30_000
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
VIEW = "#lab_view .av-lab"

# Every problem with the lab's drawing, as strings: text outside its SVG or under 11 px, marks outside the axes.
PROBLEMS_JS = """(view) => {
  const out = [], inside = (b, a, tol) => b.left >= a.left - tol && b.right <= a.right + tol &&
                                          b.top >= a.top - tol && b.bottom <= a.bottom + tol;
  for (const e of view.querySelectorAll('*')) {
    const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (own && parseFloat(getComputedStyle(e).fontSize) < 11) out.push('small text: ' + e.textContent.slice(0, 40));
  }
  for (const svg of view.querySelectorAll('svg.avl-chart')) {
    const box = svg.getBoundingClientRect(), name = svg.dataset.chart;
    const area = svg.querySelector('[data-role=plot-area]').getBoundingClientRect();
    for (const t of svg.querySelectorAll('text'))
      if (!inside(t.getBoundingClientRect(), box, 0.5)) out.push(name + ': text cut off: ' + t.textContent);
    for (const m of svg.querySelectorAll('.avl-plot > *'))
      if (!inside(m.getBoundingClientRect(), area, 1.5)) out.push(name + ': mark outside the axes: ' + m.getAttribute('data-role'));
    const texts = [...svg.querySelectorAll('.avl-axis text')].map(t => [t.textContent, t.getBoundingClientRect()]);
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const [a, p] = texts[i], [b, q] = texts[j];
      if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push(name + ': labels overlap: ' + a + ' / ' + b);
    }
  }
  return out;
}"""


def open_lab(page: Page, app_url: str, width: int = 1280, height: int = 900) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(app_url)
    page.get_by_role("tab", name="√d_k lab").click()
    expect(page.locator("#lab_view svg[data-chart=histogram]")).to_be_visible(timeout=TIMEOUT_MS)


def set_number(page: Page, elem_id: str, value: str) -> None:
    """Type into a number box and leave it, as a person does (fires change, and a slider's release)."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(value)
    box.press("Tab")


def showing(page: Page, d_k: int, n_keys: int, scaled: bool) -> None:
    """Wait until the view draws these settings, with no request in flight or refused."""
    mode = "scaled by 1/√d_k" if scaled else "unscaled"
    expect(page.locator(f"{VIEW} .avl-heading")).to_have_text(f"d_k = {d_k} · {n_keys} keys · {mode}",
                                                            timeout=TIMEOUT_MS)
    expect(page.locator(VIEW)).to_have_attribute("data-state", "ready", timeout=TIMEOUT_MS)


def problems(page: Page) -> list[str]:
    return page.locator(VIEW).evaluate(PROBLEMS_JS)


def box(page: Page, selector: str) -> dict:
    return page.locator(selector).first.evaluate("e => { const b = e.getBoundingClientRect(); "
                                                 "return {x: b.x, y: b.y, w: b.width, h: b.height}; }")


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_histogram_with_the_law_inside_its_axes_at_d_k_1_and_4096_both_modes(page: Page, app_url):
    open_lab(page, app_url)
    for d_k in (1, 4096):
        set_number(page, "lab_dk", str(d_k))
        for scaled in (True, False):
            page.locator("#lab_scaled input[type=checkbox]").set_checked(scaled)
            showing(page, d_k, 32, scaled)
            histogram = "#lab_view svg[data-chart=histogram]"
            bars = page.locator(f"{histogram} [data-role=bar]")
            expect(bars).to_have_count(50)
            theory = box(page, f"{histogram} [data-role=theory]")
            area = box(page, f"{histogram} [data-role=plot-area]")
            assert theory["h"] > 0.4 * area["h"] and theory["w"] > 0.9 * area["w"]  # the law spans the axes
            heights = bars.evaluate_all("rs => rs.map(r => r.getBoundingClientRect().height)")
            assert max(heights) > 0.4 * area["h"] and sum(h > 1 for h in heights) >= 10  # not one grey bar
            axis = page.locator(f"{histogram} text.avl-title").first.text_content()
            assert axis == ("q·k / √d_k" if scaled else "q·k")
            assert problems(page) == [], (d_k, scaled, problems(page))
            shot(page, f"lab-{d_k}-{'scaled' if scaled else 'unscaled'}")


def test_logits_keep_one_scale_and_a_thousand_keys_stay_visible(page: Page, app_url):
    open_lab(page, app_url)
    set_number(page, "lab_dk", "256")
    set_number(page, "lab_keys", "1024")
    showing(page, 256, 1024, True)
    logits = "#lab_view svg[data-chart=logits]"
    ticks = lambda: page.locator(f"{logits} .avl-axis text:not(.avl-title)").all_text_contents()  # noqa: E731
    scaled_ticks, scaled_box = ticks(), box(page, f"{logits} [data-role=logit]")
    # At 1,024 keys the softmax panel has marks one can see: bars, a labelled top weight, the cumulative curve.
    weights = page.locator("#lab_view svg[data-chart=softmax] [data-role=weight]")
    expect(weights).to_have_count(20)
    assert box(page, "#lab_view svg[data-chart=softmax] [data-role=weight]")["h"] >= 1.5
    expect(page.locator("#lab_view svg[data-chart=softmax] [data-role=weight-label]").first).to_be_visible()
    cumulative = box(page, "#lab_view svg[data-chart=cumulative] [data-role=cumulative]")
    assert cumulative["w"] > 100 and cumulative["h"] > 50
    assert problems(page) == []

    page.locator("#lab_scaled input[type=checkbox]").uncheck()
    showing(page, 256, 1024, False)
    assert ticks() == scaled_ticks  # the same axis, scaled or not ...
    unscaled_box = box(page, f"{logits} [data-role=logit]")
    assert unscaled_box["h"] > 8 * scaled_box["h"]  # ... so scaling visibly shrinks the logits (√256 = 16)
    assert box(page, "#lab_view svg[data-chart=softmax] [data-role=weight]")["h"] > 0.5 * box(
        page, "#lab_view svg[data-chart=softmax] [data-role=plot-area]")["h"]  # unscaled: one key takes it all
    assert problems(page) == []
    shot(page, "lab-1024-keys")


@pytest.mark.parametrize("phone", [320, 390])
def test_a_phone_stacks_the_charts_without_horizontal_overflow(page: Page, app_url, phone):
    open_lab(page, app_url, width=phone, height=844)
    showing(page, 16, 32, True)
    assert page.evaluate("document.documentElement.scrollWidth") <= phone
    view = box(page, VIEW)
    assert view["x"] >= 0 and view["x"] + view["w"] <= phone
    panels = [box(page, f'#lab_view [data-panel="{name}"]') for name in ("histogram", "logits", "softmax", "sweep")]
    for upper, lower in zip(panels, panels[1:]):
        assert lower["y"] >= upper["y"] + upper["h"] - 1 and abs(lower["x"] - upper["x"]) < 2  # one column
    sweep_charts = page.locator("#lab_view [data-panel=sweep] svg.avl-chart")
    expect(sweep_charts).to_have_count(4)
    assert problems(page) == []
    study = page.locator("#study")
    expect(study.locator("svg[data-chart=study-spread]")).to_be_visible()
    assert study.evaluate(PROBLEMS_JS) == []  # the study's charts too: no label over another at this width
    shot(page, f"lab-{phone}px")


def test_a_refused_d_k_marks_the_lab_stale_until_a_good_one_arrives(page: Page, app_url):
    open_lab(page, app_url)
    showing(page, 16, 32, True)
    set_number(page, "lab_dk", "5000")
    expect(page.locator("[data-testid=toast-body]").first).to_contain_text("d_k must be between 1 and 4096, got 5000",
                                                                           timeout=TIMEOUT_MS)
    expect(page.locator(VIEW)).to_have_attribute("data-state", "stale", timeout=TIMEOUT_MS)
    status = page.locator(f"{VIEW} .avl-status")
    expect(status).to_be_visible()
    expect(status).to_contain_text("still show d_k = 16 · 32 keys")
    expect(page.locator("#lab_numbers")).to_have_attribute("data-av-stale", "true")
    assert float(page.locator("#lab_numbers").evaluate("e => getComputedStyle(e).opacity")) < 0.5
    shot(page, "lab-refused")

    set_number(page, "lab_dk", "64")
    showing(page, 64, 32, True)
    expect(status).to_be_hidden()
    expect(page.locator("#lab_numbers")).not_to_have_attribute("data-av-stale", "true")
    expect(page.locator("#lab_numbers")).to_contain_text("64 and 1", timeout=TIMEOUT_MS)


def test_the_marks_follow_the_controls_whatever_order_the_answers_come_in(page: Page, tmp_path):
    """lab.js alone (labview.page, no server): a refusal and an answer in either order leave the right mark."""
    from attention_viz import labview
    from attention_viz.service.lab_view import LabData

    data = LabData()
    d16, d64 = data.view(16, 32, True).data, data.view(64, 32, True).data
    path = tmp_path / "lab.html"
    path.write_text(labview.page(d16))
    page.goto(path.as_uri())
    run = """([steps, d64]) => { const lab = document.querySelector('.av-lab').avLab, out = [];
      for (const [call, arg] of steps) { lab[call](call === 'setData' ? d64 : arg); out.push(lab.state); }
      return [out, document.querySelector('.av-lab .avl-status').textContent]; }"""
    ask = lambda d_k: {"d_k": d_k, "n_keys": 32, "scaled": True}  # noqa: E731

    def marks(*steps):  # each sequence starts from d_k 16 drawn and asked for
        page.evaluate("""([d, asked]) => { const lab = document.querySelector('.av-lab').avLab;
                         lab.markPending(asked); lab.setData(d); }""", [d16, ask(16)])
        return page.evaluate(run, [list(steps), d64])

    assert marks(("markPending", ask(5000)), ("markStale", ask(5000)))[0] == ["pending", "stale"]
    # Leaving the keys' box sends the refused d_k again, then the new one is typed: either answer first.
    states, _ = marks(("markStale", ask(5000)), ("markPending", ask(5000)), ("markPending", ask(64)),
                      ("markStale", ask(64)), ("setData", None))
    assert states == ["stale", "stale", "stale", "stale", "ready"]
    states, _ = marks(("markStale", ask(5000)), ("markPending", ask(5000)), ("markPending", ask(64)),
                      ("setData", None), ("markStale", ask(64)))
    assert states[-2:] == ["ready", "ready"]
    # A good d_k answered after a refused one was typed: the numbers drawn are not the ones asked for.
    states, message = marks(("markPending", ask(64)), ("markPending", ask(5000)), ("setData", None),
                            ("markStale", ask(5000)))
    assert states == ["pending", "pending", "pending", "stale"] and "still show d_k = 64 · 32 keys" in message
    # Back to the numbers shown after a refusal: they are current again at once (no new value will arrive).
    states, _ = marks(("markStale", ask(5000)), ("markPending", ask(16)), ("markCurrent", None))
    assert states == ["stale", "ready", "ready"]


# Holds each of the lab's calls beside the queue (POST /component_server) for a while before it leaves, longer for the
# earlier ones of a burst, as a slow network can: without the lab's one-at-a-time turns, later requests overtake
# earlier ones at the server.
SLOW_CALLS_JS = """(() => {
  const fetch0 = window.fetch, delays = [450, 0, 300, 60, 200, 0, 380, 20];
  let n = 0;
  window.fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (!url.includes('/component_server')) return fetch0(input, init);
    const wait = delays[n++ % delays.length];
    return new Promise((resolve) => setTimeout(resolve, wait)).then(() => fetch0(input, init));
  };
})();"""
# The lab's calls beside the queue fail as a lost connection does: the page asks the queued /dk_lab instead.
LOST_CALLS_JS = """(() => {
  const fetch0 = window.fetch;
  window.fetch = (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    return url.includes('/component_server') ? Promise.reject(new TypeError('Failed to fetch')) : fetch0(input, init);
  };
})();"""


def lab_requests(page: Page) -> tuple[list, list]:
    """The lab's calls beside the queue (their inputs, in the order the page sent them) and the page's queue joins
    (their data), as the page sends them from now on."""
    beside, joined = [], []

    def seen(request):
        body = json.loads(request.post_data) if request.post_data else {}
        if "/component_server" in request.url and body.get("fn_name") == "lab_answer":
            beside.append(body["data"])
        elif "/queue/join" in request.url:
            joined.append(body.get("data"))
    page.on("request", seen)
    return beside, joined


def test_a_burst_of_changes_ends_on_the_last_one_even_when_the_network_reorders_them(page: Page, app_url):
    """Requests that wait for those in flight leave together, each with the latest inputs: whatever order they
    arrive in, the answer drawn last is for the controls as they are. Every one is answered beside the queue."""
    page.add_init_script(SLOW_CALLS_JS)
    open_lab(page, app_url)
    beside, joined = lab_requests(page)
    checkbox = page.locator("#lab_scaled input[type=checkbox]")
    for d_k, scaled in ((256, False), (8, True), (1024, False), (2, True)):
        box = page.locator("#lab_dk input[type=number]")
        box.fill(str(d_k))
        box.press("Tab")
        for flip in (not scaled, scaled):  # two quick clicks, no wait for either answer
            checkbox.set_checked(flip)
        showing(page, d_k, 32, scaled)
        expect(page.locator("#lab_numbers")).to_contain_text(f"{d_k} and 1", timeout=TIMEOUT_MS)
        burst, beside[:] = beside[:], []
        assert burst and burst[-1] == {"d_k": d_k, "n_keys": 32, "scaled": scaled}, burst
    assert joined == []  # nothing went through the queue


def test_when_the_call_beside_the_queue_fails_the_queued_event_answers(page: Page, app_url):
    """A lost call (or a busy server's no) costs nothing but time: the page asks the queued /dk_lab with the controls'
    values, and the view and its table end current."""
    page.add_init_script(LOST_CALLS_JS)
    open_lab(page, app_url)
    _, joined = lab_requests(page)
    set_number(page, "lab_dk", "128")
    showing(page, 128, 32, True)
    expect(page.locator("#lab_numbers")).to_contain_text("128 and 1", timeout=TIMEOUT_MS)
    assert [128, 32, True] in joined
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)  # nothing to tell: it was answered
    page.locator("#lab_scaled input[type=checkbox]").set_checked(False)
    showing(page, 128, 32, False)


def test_a_d_k_typed_off_the_sliders_powers_of_two_is_answered_through_the_queue(page: Page, app_url):
    """A d_k whose numbers take tens of ms (off the shipped sweeps) is not computed beside the queue, where the event
    loop would answer no one else meanwhile: the server function says null and the queued /dk_lab draws it, current,
    with no toast (the slider's powers of two are answered beside the queue: the burst test below)."""
    open_lab(page, app_url)
    beside, joined = lab_requests(page)
    set_number(page, "lab_dk", "100")
    showing(page, 100, 32, True)
    expect(page.locator("#lab_numbers")).to_contain_text("100 and 1", timeout=TIMEOUT_MS)
    assert beside == [{"d_k": 100, "n_keys": 32, "scaled": True}] and joined == [[100, 32, True]], (beside, joined)
    expect(page.locator("[data-testid=toast-body]")).to_have_count(0)


def test_requests_that_wait_for_those_in_flight_leave_together_with_the_latest_inputs(page: Page, tmp_path):
    """lab.js alone: turn() lets the first request leave; the next ones wait for every answer in flight, then all
    leave at once sending the latest request's inputs; a refusal counts as an answer."""
    from attention_viz import labview
    from attention_viz.service.lab_view import LabData

    path = tmp_path / "lab.html"
    path.write_text(labview.page(LabData().view(16, 32, True).data))
    page.goto(path.as_uri())
    result = page.evaluate("""async () => {
      const lab = document.querySelector('.av-lab').avLab, log = [];
      const ask = (name, inputs) => lab.turn(inputs).then((sent) => log.push([name, sent]));
      const tick = () => new Promise((r) => setTimeout(r, 0));
      ask('a', [1, 32, true]); await tick();
      ask('b', [2, 32, true]); ask('c', [4, 32, false]); await tick();
      const first = log.slice();
      lab.markCurrent(); await tick();              // a answered: b and c leave, both with c's inputs
      const second = log.slice();
      ask('d', [8, 32, true]); await tick();
      lab.markStale({d_k: 4, n_keys: 32, scaled: false}); await tick();   // b refused: d still waits for c
      const third = log.slice();
      lab.markCurrent(); await tick();              // c answered: d leaves
      return [first, second, third, log];
    }""")
    first, second, third, log = result
    assert first == [["a", [1, 32, True]]]
    assert second[1:] == [["b", [4, 32, False]], ["c", [4, 32, False]]]
    assert third == second and log[-1] == ["d", [8, 32, True]]


LEGEND_DASHES_JS = """(view) => {
  const curves = {'avl-normal': '.avl-plot .avl-normal', 'avl-uniform': '.avl-plot .avl-uniform',
                  'avl-init-xavier': '.avl-plot .avl-init-xavier .avl-line'};
  const out = [];
  for (const [cls, selector] of Object.entries(curves)) {
    const curve = view.querySelector(selector), swatches = view.querySelectorAll('.avl-swatch.' + cls);
    if (!curve || !swatches.length) continue;
    const dash = getComputedStyle(curve).strokeDasharray.split(',').map(parseFloat);
    for (const swatch of swatches) {
      const stops = [...getComputedStyle(swatch).backgroundImage.matchAll(/([\\d.]+)px/g)].map(m => parseFloat(m[1]));
      out.push([cls, dash, [stops[1], stops[3] - stops[1]]]);  // the swatch's dash and gap
    }
  }
  return out;
}"""


def test_each_dashed_or_dotted_curve_has_a_swatch_with_its_own_dashes(page: Page, app_url):
    """A legend that draws a dashed curve as a solid line disagrees with its figure."""
    open_lab(page, app_url)
    expect(page.locator("#study svg[data-chart=study-spread]")).to_be_visible(timeout=TIMEOUT_MS)
    found = page.locator(VIEW).evaluate(LEGEND_DASHES_JS) + page.locator("#study").evaluate(LEGEND_DASHES_JS)
    assert {row[0] for row in found} == {"avl-normal", "avl-uniform", "avl-init-xavier"}, found
    for cls, dash, swatch in found:
        assert swatch == dash, (cls, dash, swatch)
