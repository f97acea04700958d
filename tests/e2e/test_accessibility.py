"""Every student can use it: axe-core's WCAG 2.1 A/AA rules on every tab and view, and the page by keyboard alone.

axe-core (bundled by the pinned axe-playwright-python) runs in Debian's Chromium against the launched app, on each
tab and each view in it; any violation fails with its rule, the elements it found and what to fix. Then the
keyboard: Tab from the top of the page reaches every control on show (buttons, text boxes, sliders, radios,
checkboxes, dropdowns, the explorer's selects, tiles, decode bar and score rows, the steps' buttons, the training
bar), each with a focus that can be seen (its computed outline, shadow, border or background, or an enclosing
box's, differs focused and not); and the actions a mouse does work with keys alone. docs/accessibility.md.
Screenshots go to tests/screenshots/a11y_*.png (git-ignored).
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.e2e.test_browser import TIMEOUT_MS, UNTRAINED, open_app, set_number, settle, shot

pytestmark = pytest.mark.browser
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]  # axe-core's tags for WCAG 2.0 and 2.1, levels A and AA
# A view drawn for an input that was refused since is faded on purpose (opacity 0.35, grey) until a good input
# redraws it, with a note above in full contrast: text that no longer holds, outside WCAG 1.4.3's contrast rule.
FADED = (".av-explorer.av-stale .av-grid, .av-explorer.av-stale .av-head-view, .av-explorer.av-stale .av-legend, "
         ".av-hv.av-stale .av-panel, "
         ".av-hv.av-stale .av-legend, .av-hv.av-stale .av-outputs, .av-lab[data-state=stale] .avl-grid, "
         "[data-av-stale=true]")
# Gradio 6.31's own error toast: a header of role=button holding its Close button (axe: nested-interactive), in
# Gradio's markup, not this app's. The one exception, by rule and place; everything else in the toast is checked.
GRADIO_TOAST = ("nested-interactive", "[data-testid=toast-body]")
MAX_TABS = 250  # Tab presses before a walk gives up (the longest tab has ~60 stops)

# What a visible focus changes: the element's or an enclosing box's (Gradio marks a radio's label, a slider's row)
FOCUS_STYLE = """(el) => {
    const props = ['outline-style', 'outline-width', 'outline-color', 'box-shadow', 'border-top-color',
                   'border-bottom-color', 'background-color'];
    const out = [];
    for (let e = el, i = 0; e && i < 4; e = e.parentElement, i++) {
        const s = getComputedStyle(e);
        out.push(props.map((p) => s.getPropertyValue(p)).join('|'));
    }
    return out.join(' / ');
}"""
NAME = """(el) => {
    const home = el.closest('[id]');
    const text = (el.getAttribute('aria-label') || el.getAttribute('title') || el.textContent || el.value || '')
        .trim().replace(/\\s+/g, ' ').slice(0, 40);
    return `${el.tagName.toLowerCase()}${el.type ? '[' + el.type + ']' : ''} in #${home ? home.id : '-'}: ${text}`;
}"""
# Every control a person can see and use: marked data-a11y-control so the walk can tick them off
CONTROLS = """() => {
    const all = [...document.querySelectorAll('button, input:not([type=hidden]), select, textarea, a[href], ' +
        '[role=button], [role=tab], [tabindex]:not([tabindex="-1"])')];
    const usable = all.filter((e) => !e.disabled && !e.closest('[inert]') && e.getClientRects().length &&
        e.checkVisibility({visibilityProperty: true}) && e.tabIndex >= 0);
    usable.forEach((e, i) => e.setAttribute('data-a11y-control', String(i)));
    return usable.length;
}"""

# One Tab's stop, read in one call: "body" past the last control, null back at a control met before; otherwise the
# control marked data-a11y-seen, its name, and whether its focus shows nothing (its look and its enclosing boxes'
# the same focused and blurred, each read once their CSS transitions have run to the end); it is focused again
# (visibly, as by Tab) for the next Tab to go on from there.
MEET = f"""() => {{
    const e = document.activeElement;
    if (e === document.body) return 'body';
    if (e.hasAttribute('data-a11y-seen')) return null;
    e.setAttribute('data-a11y-seen', '');
    const look = (el) => {{
        for (let x = el, i = 0; x && i < 4; x = x.parentElement, i++) {{
            x.getAnimations().filter((a) => a instanceof CSSTransition).forEach((a) => a.finish());
        }}
        return ({FOCUS_STYLE})(el);
    }};
    const focused = look(e);
    e.blur();
    const blurred = look(e);
    e.focus({{focusVisible: true}});
    return {{name: ({NAME})(e), unseen: focused === blurred}};
}}"""

# ---------------------------------------------------------------------------------------------- the views


def heatmaps(page: Page) -> None:
    """The explorer: grid of every head, the chosen head, the decode bar, the heads' scores."""


def decode_step(page: Page) -> None:
    """The decode at step 3: a row marked in every decoder tile and the head view, later rows blank."""
    page.locator("#decode_step .av-next").click()  # from the finished run to its last step
    for _ in range(4):
        page.locator("#decode_step .av-prev").click()
    expect(page.locator("#decode_step")).not_to_have_attribute("data-step", "all")


def large_head(page: Page) -> None:
    """An untrained model's wide head: drawn on a canvas with its numbers as lines of text (headmap.js)."""
    page.locator("#model input").click()
    page.get_by_role("option", name=UNTRAINED).click()
    expect(page.locator("#info")).to_contain_text("Untrained model", timeout=TIMEOUT_MS)
    set_number(page, "pads", "12")
    page.locator("#text input, #text textarea").first.fill("abcdefghijklmnopqrstuvwxyz")
    page.locator("#explorer .av-kind").select_option("encoder.self_attn")
    expect(page.locator("#head_view .av-hm-row").first).to_be_visible(timeout=TIMEOUT_MS)


def refused(page: Page) -> None:
    """A refused input: every view marked stale, the refusal's note."""
    page.locator("#text input, #text textarea").first.fill("x" * 200)
    expect(page.locator("#explorer .av-stale-note")).to_be_visible(timeout=TIMEOUT_MS)
    toast_settled(page)


def toast_settled(page: Page) -> None:
    """A refusal's toast shown: it and the stale fade come in animated, so axe scans their final colours, not a frame
    halfway (under load a frame halfway read as grey text); short animations only: a spinner runs for ever, and the
    toast's countdown bar until it closes."""
    page.locator("[data-testid=toast-body]").first.wait_for(timeout=TIMEOUT_MS)
    page.wait_for_function("() => document.getAnimations().filter((a) => a.effect && "
                           "a.effect.getComputedTiming().duration < 2000).every((a) => a.playState !== 'running')",
                           timeout=TIMEOUT_MS)
    expect(page.locator("[data-testid=toast-body]").first).to_be_visible()


def steps(page: Page) -> None:
    page.get_by_role("tab", name="Steps (Figure 2)").click()
    expect(page.locator("#steps_view td.av-v").first).to_be_visible(timeout=TIMEOUT_MS)


def steps_softmax(page: Page) -> None:
    """Steps on its softmax panel: viridis weights beside the diverging logits of the other panels."""
    steps(page)
    page.locator("#steps_view .av-pick[data-pick=weights]").click()
    expect(page.locator("#steps_view .av-hv")).to_have_attribute("data-step", "weights")


def compare(page: Page) -> None:
    page.get_by_role("tab", name="Compare").click()
    expect(page.locator("#compare_view td.av-v").first).to_be_visible(timeout=TIMEOUT_MS)


def compare_map(page: Page) -> None:
    """Compare showing one of the two maps (viridis) rather than the difference."""
    compare(page)
    page.locator("#compare_view .av-pick[data-pick=a]").click()
    expect(page.locator("#compare_view .av-hv")).to_have_attribute("data-show", "a")


def export(page: Page) -> None:
    """Export, after exporting: the button and the list of files."""
    page.get_by_role("tab", name="Export").click()
    page.locator("#export_button").click()
    expect(page.locator("#files")).to_contain_text("L", timeout=TIMEOUT_MS)


def lesson(page: Page) -> None:
    """The guided lesson open at its first step."""
    page.locator("#lesson").get_by_text("A guided lesson").click()
    page.locator("#lesson_next").click()
    expect(page.locator("#lesson_text")).to_contain_text("Step 1 of", timeout=TIMEOUT_MS)


def lab(page: Page) -> None:
    page.get_by_role("tab", name="√d_k lab").click()
    expect(page.locator("#lab_view svg[data-chart=histogram]")).to_be_visible(timeout=TIMEOUT_MS)


def lab_unscaled(page: Page) -> None:
    """The lab without the scaling, at a large d_k: saturated softmax, the other mode's bins."""
    lab(page)
    page.locator("#lab_scaled input[type=checkbox]").uncheck()
    set_number(page, "lab_dk", "1024")
    expect(page.locator("#lab_numbers")).to_contain_text("1024", timeout=TIMEOUT_MS)


def lab_stale(page: Page) -> None:
    """The lab after a refused d_k: charts and table marked stale."""
    lab(page)
    set_number(page, "lab_dk", "0")
    expect(page.locator("#lab_numbers")).to_have_attribute("data-av-stale", "true", timeout=TIMEOUT_MS)
    toast_settled(page)


def training(page: Page) -> None:
    page.get_by_role("tab", name="Training").click()
    expect(page.locator("#train_step [data-arm]")).to_have_count(3, timeout=TIMEOUT_MS)


def training_early(page: Page) -> None:
    """Training at its first snapshot, decoder self-attention: the maps before the heads formed."""
    training(page)
    page.locator("#train_step input[type=range]").fill("0")
    expect(page.locator("#train_step")).to_have_attribute("data-step", "0")
    page.locator("#train_step .av-kind").select_option(index=1)


def heads_off(page: Page) -> None:
    """The explorer in its "switch heads off" mode after a layer went off: off tiles, the note, the row buttons."""
    heatmaps(page)
    page.locator("#explorer .av-cut").click()
    page.locator("#explorer .av-row-cut[data-row='1']").click()
    expect(page.locator("#explorer .av-tile.av-off")).to_have_count(4, timeout=TIMEOUT_MS)


def heads_scored(page: Page) -> None:
    """Which heads matter, scored and exported: the text, the prune curve, the tables, the CSV."""
    page.get_by_role("tab", name="Which heads matter").click()
    page.locator("#score_heads").click()
    expect(page.locator("#heads_view svg circle").first).to_be_visible(timeout=TIMEOUT_MS)
    page.locator("#score_export").click()
    expect(page.locator("#score_file a")).to_be_visible(timeout=TIMEOUT_MS)


# Views checked one after another on one page, each from where the one before left it: a group opens the app once.
# The lab and the training view are checked in their less usual states only (large d_k unscaled, then stale; the
# first snapshot): the same markup and palettes as their opening states.
GROUPS = [(heatmaps, heads_off), (decode_step,), (large_head,), (refused,), (steps, steps_softmax),
          (compare, compare_map), (export,), (lesson,), (lab_unscaled, lab_stale), (training_early,), (heads_scored,)]


def violations(page: Page) -> list[dict]:
    """axe-core's WCAG 2.1 A/AA violations on the page as it is now, less the contrast of views faded as stale."""
    result = Axe().run(page, options={"runOnly": {"type": "tag", "values": WCAG}, "resultTypes": ["violations"]})
    found = []
    for v in result.response["violations"]:
        left_out = {"color-contrast": FADED, GRADIO_TOAST[0]: GRADIO_TOAST[1]}.get(v["id"])
        if left_out:
            # each node's element: inside the part left out, and still on the page (one call for all the nodes)
            targets = [n["target"][-1] for n in v["nodes"]]
            where = page.evaluate("([targets, out]) => targets.map((t) => { const e = document.querySelector(t); "
                                  "return [!!e?.closest(out), !!e]; })", [targets, left_out])
            v["nodes"] = [n for n, (inside, there) in zip(v["nodes"], where) if not inside
                          and not (v["id"] == GRADIO_TOAST[0] and gone_toast(n, there))]
        if v["nodes"]:
            found.append(v)
    return found


def gone_toast(node: dict, there: bool) -> bool:
    """A node of Gradio's toast that closed while axe ran (its countdown ends; under load axe takes seconds): gone
    from the page, its markup Gradio's toast header."""
    return 'class="toast-header' in node.get("html", "") and not there


def report(found: list[dict]) -> str:
    lines = []
    for v in found:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']} [{v['helpUrl']}]")
        for node in v["nodes"]:
            summary = " ".join((node.get("failureSummary") or "").split())
            lines.append(f"    {' '.join(map(str, node['target']))}: {summary}")
    return "\n".join(lines)


@pytest.mark.parametrize("group", GROUPS, ids=["+".join(v.__name__ for v in group) for group in GROUPS])
def test_axe_finds_no_wcag_violation(page: Page, app_url, group):
    open_app(page, app_url)
    failed = []
    for view in group:
        view(page)
        shot(page, f"a11y_{view.__name__}", wait=view not in (refused, lab_stale))  # a refusal's tracker stays
        found = violations(page)
        if found:
            failed.append(f"{len(found)} WCAG 2.1 A/AA rules fail on {view.__name__}:\n{report(found)}")
    assert not failed, "\n".join(failed)


def test_axe_finds_no_wcag_violation_on_a_phone(page: Page, app_url):
    open_app(page, app_url, width=390)
    found = violations(page)
    assert not found, f"{len(found)} WCAG 2.1 A/AA rules fail at 390 px:\n{report(found)}"


def test_axe_reports_what_it_finds(page: Page, app_url):
    """The check can fail: grey text on white, an unnamed button and a tab list holding a button are reported."""
    open_app(page, app_url)
    page.evaluate("""() => {
        const box = document.createElement('div');
        box.innerHTML = '<p style="color:#bbbbc2;background:#fff">faint</p><button></button>' +
            '<div role="tablist"><button>not a tab</button></div>';
        document.querySelector('#explorer').append(box);
    }""")
    assert {"color-contrast", "button-name", "aria-required-children"} <= {v["id"] for v in violations(page)}


# ---------------------------------------------------------------------------------------------- the keyboard


def walk(page: Page) -> tuple[list[str], list[str]]:
    """Tab round the whole page (past its end to the top again) until focus comes back to a control it met: the
    controls it reached (each marked data-a11y-seen), and those whose focus shows nothing (focused and blurred
    look alike)."""
    reached, unseen = [], []
    for _ in range(MAX_TABS):
        page.keyboard.press("Tab")
        met = page.evaluate(MEET)
        if met == "body":  # past the last control: the next Tab starts again
            continue
        if met is None:
            break
        reached.append(met["name"])
        if met["unseen"]:
            unseen.append(met["name"])
    return reached, unseen


@pytest.fixture(scope="module")
def walk_page(browser, browser_context_args, app_url):
    """One page for the module's Tab walks, the app opened once: each walk opens its view from where the last left
    the page (its marks cleared, the Transformer tab chosen), as a person goes from tab to tab."""
    context = browser.new_context(**browser_context_args)
    page = context.new_page()
    open_app(page, app_url)
    yield page
    context.close()


@pytest.mark.parametrize("view", [heatmaps, steps, compare, export, lesson, lab, training, heads_scored],
                         ids=["heatmaps", "steps", "compare", "export", "lesson", "lab", "training", "heads"])
def test_tab_reaches_every_control_with_a_visible_focus(walk_page: Page, view):
    page = walk_page
    page.evaluate("""() => {
        for (const mark of ['data-a11y-control', 'data-a11y-seen']) {
            document.querySelectorAll(`[${mark}]`).forEach((e) => e.removeAttribute(mark));
        }
        document.activeElement?.blur();
    }""")
    page.get_by_role("tab", name="Transformer").click()
    settle(page)
    view(page)
    settle(page)
    total = page.evaluate(CONTROLS)
    reached, unseen = walk(page)
    missed = page.locator("[data-a11y-control]:not([data-a11y-seen])")
    names = [missed.nth(i).evaluate(NAME) for i in range(missed.count())]
    assert total > 10 and not names, f"Tab never reaches {len(names)} of {total} controls: {names}"
    assert not unseen, f"no visible focus on {len(unseen)} of {len(reached)}: {unseen}"


def test_the_explorer_by_keyboard_alone(page: Page, app_url):
    """A tile or a score row opens its head with Enter or Space; the selects change with the arrow keys; the
    decode plays, pauses and steps from the keyboard."""
    open_app(page, app_url)
    view = page.locator("#head_view")
    page.locator('#explorer .av-tile[data-layer="0"][data-head="2"]').focus()
    page.keyboard.press("Enter")
    expect(view).to_have_attribute("data-head", "2")
    expect(view).to_have_attribute("data-layer", "0")
    page.locator('#explorer .av-tile[data-layer="1"][data-head="1"]').focus()
    page.keyboard.press("Space")
    expect(view).to_have_attribute("data-layer", "1")
    expect(view).to_have_attribute("data-head", "1")
    expect(page.locator('#explorer .av-tile[data-layer="1"][data-head="1"]')).to_have_attribute("aria-pressed", "true")
    page.locator('#alignment tbody tr[data-layer="0"][data-head="3"]').focus()
    page.keyboard.press("Enter")
    expect(view).to_have_attribute("data-head", "3")
    kind = view.get_attribute("data-kind")
    page.locator("#explorer .av-kind").focus()
    page.keyboard.press("ArrowUp" if kind == "decoder.cross_attn" else "ArrowDown")
    expect(view).not_to_have_attribute("data-kind", kind)
    page.locator("#explorer .av-headsel").focus()
    page.keyboard.press("Home")
    expect(view).to_have_attribute("data-head", "0")

    bar = page.locator("#decode_step")
    page.locator("#decode_step .av-play").focus()
    page.keyboard.press("Enter")  # play
    expect(page.locator("#decode_step .av-play")).to_have_attribute("aria-pressed", "true")
    page.keyboard.press("Space")  # pause
    expect(page.locator("#decode_step .av-play")).to_have_attribute("aria-pressed", "false")
    at = int(bar.get_attribute("data-step"))
    page.locator("#decode_step .av-step").focus()
    page.keyboard.press("ArrowRight")
    expect(bar).to_have_attribute("data-step", str(at + 1))


def test_steps_lesson_and_buttons_by_keyboard_alone(page: Page, app_url):
    """A tab opens with Enter, the steps move with the arrow keys, the lesson opens and steps with Enter, and the
    model dropdown picks with the arrow keys and Enter."""
    open_app(page, app_url)
    page.get_by_role("tab", name="Steps (Figure 2)").focus()
    page.keyboard.press("Enter")
    root = page.locator("#steps_view .av-hv")
    expect(root.locator("td.av-v").first).to_be_visible(timeout=TIMEOUT_MS)
    root.focus()
    page.keyboard.press("End")
    expect(root).to_have_attribute("data-step", "output")
    page.keyboard.press("ArrowLeft")
    expect(root).to_have_attribute("data-step", "weights")
    root.locator(".av-prev").focus()
    page.keyboard.press("Enter")
    expect(root).to_have_attribute("data-step", "masked")

    page.locator("#lesson button").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#lesson_next")).to_be_visible()
    page.locator("#lesson_next").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#lesson_text")).to_contain_text("Step 1 of", timeout=TIMEOUT_MS)
    settle(page)

    page.get_by_role("tab", name="Transformer").focus()
    page.keyboard.press("Enter")
    model = page.locator("#model input")
    before = model.input_value()
    model.focus()  # opens the list, the current model marked
    active = page.locator("[role=option].active")
    expect(active).to_have_count(1)
    names = [o.strip() for o in page.locator("[role=option]").all_text_contents()]
    at, to = names.index(active.text_content().strip()), next(i for i, n in enumerate(names) if UNTRAINED in n)
    for _ in range(to - at):
        page.keyboard.press("ArrowDown")
    expect(active).to_contain_text(UNTRAINED)
    page.keyboard.press("Enter")
    expect(model).to_have_value(UNTRAINED, timeout=TIMEOUT_MS)
    assert before != UNTRAINED
    expect(page.locator("#info")).to_contain_text("Untrained model", timeout=TIMEOUT_MS)


def test_training_by_keyboard_alone(page: Page, app_url):
    open_app(page, app_url)
    training(page)
    bar = page.locator("#train_step")
    last = bar.get_attribute("data-step")
    page.locator("#train_step .av-prev").focus()
    page.keyboard.press("Enter")
    expect(bar).not_to_have_attribute("data-step", last)
    page.locator("#train_step input[type=range]").focus()
    page.keyboard.press("Home")
    expect(bar).to_have_attribute("data-step", "0")
    page.locator("#train_step .av-play").focus()
    page.keyboard.press("Space")
    expect(bar).not_to_have_attribute("data-step", "0", timeout=TIMEOUT_MS)
    page.keyboard.press("Space")
