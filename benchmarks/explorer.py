"""View changes in the browser: how long the explorer takes to redraw a head, a kind or a colour scale, in Chromium.

`python -m benchmarks.explorer [--changes 40] [--app] [--out DIR]`

A view change (a tile, a kind, a colour scale, a decode step) never leaves the page: the explorer (explorer.js)
redraws from the run it holds and records "explorer-redraw" (its script's work) and "explorer-frame" (the change until
the next frame is painted). The changes are made one at a time in Debian's headless Chromium, each after the last
one's frame: the median and p95 of both, per kind of change. Pages: the standalone explorer for the shipped reverse
model on the app's opening text and for the widest run the app allows (16 heads, 49 keys); `--app`: the app's page.
"""

from __future__ import annotations

import statistics
import string
import sys
import tempfile
import time
from pathlib import Path

from .common import LOGS, chromium, command, load, percentile, save, table

CHANGES = ("tile", "kind", "scale", "step")
# In the page: `n` changes of one sort, each after the last one's frame; the measures' durations by reason.
RUN_CHANGES = """async ([what, n]) => {
  const root = document.querySelector('.av-explorer');
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  const settled = async (before) => {  // the change's own frame measure is in
    for (let i = 0; i < 200 && performance.getEntriesByName('explorer-frame').length <= before; i++) await frame();
  };
  performance.clearMeasures('explorer-redraw'); performance.clearMeasures('explorer-frame');
  for (let i = 0; i < n; i++) {
    const before = performance.getEntriesByName('explorer-frame').length;
    if (what === 'tile') {
      const tiles = root.querySelectorAll('.av-tile:not(.av-selected)');
      tiles[(i * 7) % tiles.length].click();
    } else if (what === 'step') {  // the decode's step bar: the next step, the finished run after the last
      const step = root.querySelector('.av-step');
      step.value = i % (Number(step.max) + 1);
      step.dispatchEvent(new Event('input'));
    } else {
      const select = root.querySelector(what === 'kind' ? '.av-kind' : '.av-scale');
      select.selectedIndex = (select.selectedIndex + 1) % select.options.length;
      select.dispatchEvent(new Event('change'));
    }
    await settled(before);
  }
  const of = name => performance.getEntriesByName(name).filter(m => m.detail.reason === what).map(m => m.duration);
  return {redraw: of('explorer-redraw'), frame: of('explorer-frame')};
}"""


def payloads() -> dict[str, dict]:
    """The runs measured: the app's opening view, and the widest run the app allows."""
    import torch

    from attention_viz.core.config import TransformerConfig
    from attention_viz.core.model import Transformer
    from attention_viz.data.checkpoints import load_model
    from attention_viz.data.tokenizer import VOCAB_SIZE
    from attention_viz.explorer.notebook import run_model
    from attention_viz.service.catalog import Catalog

    torch.set_num_threads(1)
    shipped = load_model("reverse", device="cpu")[0]
    config = TransformerConfig(vocab_size=VOCAB_SIZE, n_encoder_layers=2, n_decoder_layers=2, d_model=32,
                               n_heads=16, d_k=4, d_v=2, d_ff=64, dropout=0.0)
    torch.manual_seed(0)
    widest = Transformer(config).eval()
    longest = Catalog().tokenizer.max_len  # the app's limit on a text (the longest shipped card's max_len)
    text = (string.ascii_lowercase * 2)[:longest]
    return {
        "shipped reverse, “attention” (2 x 4 heads, 10 keys)": run_model(shipped, "attention"),
        f"untrained, 16 heads, {longest} characters + 16 pads (2 x 16 heads, {longest + 17} keys)":
            run_model(widest, text, pad_tokens=16, max_len=len(text) + 1),
    }


def measure(page, changes: int) -> dict[str, dict[str, list[float]]]:
    """Per sort of change: the redraw and frame durations (ms) of `changes` changes, after two unmeasured ones."""
    out = {}
    for what in CHANGES:
        page.evaluate(RUN_CHANGES, [what, 2])  # warm-up: the first of each path
        out[what] = page.evaluate(RUN_CHANGES, [what, changes])
    return out


def run(changes: int = 40, app: bool = False) -> dict:
    from attention_viz.explorer import explorer_html

    result: dict = {"changes": changes, "load_before": load(), "pages": {}}
    with chromium() as browser, tempfile.TemporaryDirectory() as folder:
        result["browser"] = browser.version
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for name, payload in payloads().items():
            path = Path(folder) / "explorer.html"
            path.write_text(explorer_html(payload, document=True), encoding="utf-8")
            page.goto(path.as_uri())
            page.wait_for_selector(".av-explorer .av-tile")
            result["pages"][name] = measure(page, changes)
        if app:
            result["pages"].update(_in_app(page, changes))
    result["load_after"] = load()
    return result


def _in_app(page, changes: int) -> dict:
    """The launched app's page: its opening run, then the widest run set up through its controls as a person would
    (the untrained model, 16 heads, the longest text, 16 pad tokens)."""
    import httpx

    from attention_viz.service.catalog import Catalog
    from devtools.launcher import Server

    longest = Catalog().tokenizer.max_len
    out = {}
    with Server([sys.executable, "app.py"], LOGS / "explorer_app.log") as server:
        with httpx.Client(timeout=5) as client:
            server.wait_http(client, 180)
        page.goto(server.base + "/")
        page.wait_for_selector("#explorer .av-tile", timeout=60_000)
        time.sleep(2)  # the page's own start-up (the lab's first figures) out of the way
        out["the app's page (Gradio), opening run"] = measure(page, changes)
        page.locator("#model input").click()
        page.get_by_role("option", name="untrained (random weights)").click()
        page.wait_for_function("() => document.querySelector('#info').textContent.includes('Untrained model')",
                               timeout=60_000)
        for elem_id, value in (("n_heads", "16"), ("pads", "16")):
            box = page.locator(f"#{elem_id} input[type=number]")
            box.fill(value)
            box.press("Tab")
            time.sleep(1.5)
        page.locator("#text input, #text textarea").first.fill((string.ascii_lowercase * 2)[:longest])
        page.wait_for_function(f"() => document.querySelectorAll('#head_view .av-hm-key').length === {longest + 17}"
                               " && document.querySelectorAll('#explorer .av-tile').length === 32", timeout=60_000)
        time.sleep(2)
        out[f"the app's page (Gradio), widest run ({longest + 17} keys, 2 x 16 heads)"] = measure(page, changes)
    return out


def report(result: dict) -> str:
    rows = []
    for name, sorts in result["pages"].items():
        for what in CHANGES:
            redraw, frame = sorts[what]["redraw"], sorts[what]["frame"]
            rows.append([name, what, len(redraw), f"{statistics.median(redraw):.2f}", f"{percentile(redraw, 95):.2f}",
                         f"{statistics.median(frame):.2f}", f"{percentile(frame, 95):.2f}"])
    head = (f"View changes in the browser (Chromium {result['browser']}, headless, software rendering), "
            f"{result['changes']} changes of each sort per page, one after another's frame; no request leaves "
            f"the page. load average {result['load_before']} -> {result['load_after']}")
    return head + "\n\n" + table(["page", "change", "n", "redraw median ms", "redraw p95 ms",
                                  "to next frame median ms", "to next frame p95 ms"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = command("explorer", __doc__)
    parser.add_argument("--changes", type=int, default=40, help="changes of each sort per page")
    parser.add_argument("--app", action="store_true", help="also measure inside the launched app's page")
    args = parser.parse_args(argv)
    if not 1 <= args.changes <= 1000:
        parser.error("changes: 1..1000")
    result = run(args.changes, args.app)
    save("explorer", result, args.out, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
