"""The page complete: from the app's HTML arriving to the explorer's first drawn view, in Chromium.

`python -m benchmarks page [--opens 10] [--floor] [--against REF] [--warm] [--cold N] [--out DIR]`, or
`python -m benchmarks --only page`.

Each opening in a fresh context of Debian's headless Chromium, read in the page's own clock: the HTML's responseEnd
and the end of the explorer's first "explorer-frame" measure (the first frame painted with its grid); the server's
CPU from navigation to first view (/proc). One unmeasured opening first. `--floor` also opens Gradio's floor
(serve_floor: the explorer alone on a page); `--against REF` serves this tree's app and REF's at once and alternates
their openings, reporting the median of the paired differences (one app's medians drift by ±100 ms between runs).
`--cold N`: N cold starts first, each the app launched and its page opened the moment it answers (a sleeping Space
woken by its first visitor), beside the floor of any such app: `import torch, gradio` in a fresh interpreter.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from .common import LOGS, SETTLE_S, chromium, command, cpu_s, load, percentile, save, table

# In the page, once the first payload frame is in: the navigation's times and that frame's end (ms).
READ = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const first = performance.getEntriesByName('explorer-frame')
    .filter(m => m.detail && m.detail.root === 'explorer' && m.detail.reason === 'payload')[0];
  return {responseEnd: nav.responseEnd, domContentLoaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
          firstView: first ? first.startTime + first.duration : null};
}"""
FIRST_VIEW = """() => performance.getEntriesByName('explorer-frame')
  .some(m => m.detail && m.detail.root === 'explorer' && m.detail.reason === 'payload')"""


def open_once(browser, url: str, pid: int | None = None, warm: bool = False) -> dict:
    """One opening in a fresh context: the page's times, and the server's CPU (ms) from navigation to first view.
    warm: the page is opened once unmeasured first, in the same context (a returning visitor's cache)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        if warm:
            page.goto(url)
            page.wait_for_function(FIRST_VIEW, timeout=60_000, polling=50)
            time.sleep(0.5)
        before = cpu_s(pid)
        page.goto(url)
        page.wait_for_function(FIRST_VIEW, timeout=60_000, polling=50)
        got = page.evaluate(READ)
        got["server_cpu"] = 1000 * (cpu_s(pid) - before)
    finally:
        context.close()
    got["complete"] = got["firstView"] - got["responseEnd"]
    return got


def serve_floor() -> None:
    """Gradio's floor for the page complete, served as app.py is: a page with the explorer only, on the app's opening
    run, the views' scripts loaded as the app loads them."""
    import gradio as gr

    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views
    from attention_viz.webui import scripts
    from attention_viz.webui.explorer_view import explorer_view
    from attention_viz.webui.handlers import opening_settings

    views = Views(Runs())
    first = views.visualize(opening_settings(views))
    with gr.Blocks() as demo:
        explorer_view(first.run, elem_id="explorer_view", summary=False)
    demo.launch(head=scripts.head())


PAGES = {"app": ("app.py", [sys.executable, "app.py"]),
         "floor": ("a Gradio page with the explorer only (benchmarks.page.serve_floor)",
                   [sys.executable, "-c", "from benchmarks.page import serve_floor; serve_floor()"])}


def cold_start(log_name: str) -> dict:
    """`python app.py` launched, its page opened in Chromium (already running) the moment it answers: seconds from
    launch to the first HTTP 200 and to the page's first drawn view; and `import torch, gradio` alone, afterwards."""
    import httpx

    from devtools.launcher import ROOT, Server

    with chromium() as browser, httpx.Client(timeout=5) as client, \
            Server([sys.executable, "app.py"], LOGS / log_name) as server:
        first_http_s = server.wait_http(client, 180)
        open_once(browser, server.base + "/")
        first_view_s = time.perf_counter() - server.started
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, gradio"], cwd=ROOT, check=True)
    return {"first_http_s": first_http_s, "first_view_s": first_view_s, "imports_s": time.perf_counter() - t0}


def open_page(argv: list[str], log_name: str, opens: int, warm: bool = False) -> dict:
    """Start one page's server, then open it once unmeasured and `opens` times measured."""
    import httpx

    from devtools.launcher import Server

    result: dict = {"samples": []}
    with Server(argv, LOGS / log_name) as server:
        with httpx.Client(timeout=5) as client:
            server.wait_http(client, 180)
        time.sleep(SETTLE_S)  # the app's warm-up thread (exports, steps, lab) is done: its steady state
        with chromium() as browser:
            result["browser"] = browser.version
            result["warm_up"] = open_once(browser, server.base + "/", server.pid)
            for _ in range(opens):
                time.sleep(1.0)  # the last page's own work on the server out of the way
                result["samples"].append(open_once(browser, server.base + "/", server.pid, warm))
    return result


def paired(against: str, opens: int, warm: bool = False) -> dict:
    """This tree's app and `against`'s, served at once; per round one opening of each, in alternating order."""
    import httpx

    from devtools.launcher import Server

    from .common import export_ref, head, temp_folder

    result: dict = {"this": [], "ref": []}
    with temp_folder("attention_viz-ref-") as folder:
        result["commit"] = export_ref(against, folder / "tree")
        result["head"] = head()
        with Server([sys.executable, "app.py"], LOGS / "page_this.log") as this, \
                Server([sys.executable, "app.py"], LOGS / "page_ref.log", cwd=folder / "tree") as ref, \
                httpx.Client(timeout=5) as client:
            this.wait_http(client, 180)
            ref.wait_http(client, 180)
            time.sleep(SETTLE_S)
            with chromium() as browser:
                result["browser"] = browser.version
                servers = {"this": this, "ref": ref}
                for name, server in servers.items():
                    open_once(browser, server.base + "/")  # each server's first page, unmeasured
                for i in range(opens):
                    for name in ("this", "ref") if i % 2 == 0 else ("ref", "this"):
                        time.sleep(0.7)
                        result[name].append(open_once(browser, servers[name].base + "/", servers[name].pid, warm))
    return result


def paired_report(result: dict, against: str) -> str:
    this = [s["complete"] for s in result["this"]]
    ref = [s["complete"] for s in result["ref"]]
    differences = [a - b for a, b in zip(this, ref)]
    cpu = {name: statistics.median(s.get("server_cpu", 0.0) for s in result[name]) for name in ("this", "ref")}
    rows = [[f"this tree ({result['head']})", len(this), f"{statistics.median(this):.0f}", f"{percentile(this, 95):.0f}",
             f"{cpu['this']:.0f}"],
            [f"{against} ({result['commit'][:7]})", len(ref), f"{statistics.median(ref):.0f}", f"{percentile(ref, 95):.0f}",
             f"{cpu['ref']:.0f}"]]
    return (f"Page complete (first drawn view - responseEnd), both apps served at once, {len(this)} rounds of one "
            f"opening each (Chromium {result['browser']}, fresh contexts):\n\n"
            + table(["app", "n", "median ms", "p95 ms", "server CPU per opening, median ms"], rows)
            + f"\n\npaired difference, this tree - {against}: median {statistics.median(differences):+.0f} ms "
              f"(negative: this tree is sooner)")


def run(opens: int = 10, floor: bool = False, warm: bool = False, cold: int = 0) -> dict:
    result: dict = {"opens": opens, "warm": warm, "load_before": load(),
                    "cold": [cold_start(f"page_cold_{i}.log") for i in range(cold)]}
    for name in ("app", "floor") if floor else ("app",):
        result[name] = open_page(PAGES[name][1], f"page_{name}.log", opens, warm)
    # the app's own figures where earlier results kept them (report reads both shapes)
    result.update({k: result["app"][k] for k in ("samples", "warm_up", "browser")})
    result["load_after"] = load()
    return result


def _rows(samples: list[dict], prefix: str = "") -> list[list]:
    rows = []
    for label, key in (("HTML responseEnd (from navigation start)", "responseEnd"),
                       ("DOMContentLoaded end (from navigation start)", "domContentLoaded"),
                       ("first drawn view (from navigation start)", "firstView"),
                       ("**page complete: first drawn view - responseEnd**", "complete"),
                       ("the server's CPU from navigation to first view", "server_cpu")):
        values = [s.get(key, 0.0) for s in samples]
        rows.append([prefix + label, len(values), f"{statistics.median(values):.0f}", f"{percentile(values, 95):.0f}",
                     f"{max(values):.0f}"])
    return rows


def report(result: dict) -> str:
    rows = _rows(result["samples"])
    if "floor" in result:
        rows += _rows(result["floor"]["samples"], "floor: ")
    head = (f"The app's page opened {'again' if result.get('warm') else 'fresh'} {result['opens']} times (Chromium "
            f"{result['browser']}, headless, software rendering; a new browser context each time"
            + (", opened once unmeasured in it first (a returning visitor)" if result.get("warm") else "")
            + f", after one unmeasured opening: "
            f"page complete {result['warm_up']['complete']:.0f} ms)"
            + (f"; then, as the floor, {PAGES['floor'][0]}" if "floor" in result else "")
            + f". load average {result['load_before']} -> {result['load_after']}")
    text = head + "\n\n" + table(["measure", "n", "median ms", "p95 ms", "max ms"], rows)
    if result.get("cold"):
        text += "\n\nCold starts, `python app.py` launched and its page opened the moment it answers:\n\n" + table(
            ["cold start", "first HTTP 200 s", "first drawn view s", "`import torch, gradio` alone s"],
            [[i + 1, f"{c['first_http_s']:.2f}", f"{c['first_view_s']:.2f}", f"{c['imports_s']:.2f}"]
             for i, c in enumerate(result["cold"])])
    return text


def main(argv: list[str] | None = None) -> int:
    parser = command("page", __doc__)
    parser.add_argument("--opens", type=int, default=10, help="fresh openings measured")
    parser.add_argument("--floor", action="store_true",
                        help="also open a Gradio page with the explorer only (serve_floor): the floor")
    parser.add_argument("--against", default=None, help="a git ref: open both apps in alternation, paired")
    parser.add_argument("--warm", action="store_true",
                        help="measure a second opening in the same context (a returning visitor's cache)")
    parser.add_argument("--cold", type=int, default=0, metavar="N",
                        help="first, N cold starts: the app launched, its page opened the moment it answers")
    args = parser.parse_args(argv)
    if not 1 <= args.opens <= 200:
        parser.error("opens: 1..200")
    if args.against:
        result = paired(args.against, args.opens, args.warm)
        print(paired_report(result, args.against), flush=True)
    else:
        result = run(args.opens, args.floor, args.warm, args.cold)
        save("page", result, args.out, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
