"""Classroom benchmark: a class on the app at once, each student a browser-protocol client who thinks between actions.

`python -m benchmarks --only classroom [--students 30] [--duration-s 75] [--against main]`
(or `python -m benchmarks.classroom` with the same options)

Each student is one page (its own session, `benchmarks.app.Browser`): it arrives within the first few
seconds and opens the page, timed from its first byte asked for (GET /) to its opening run in hand: the HTML, the
files a browser then fetches with an empty cache, six at a time (the list one headless Chromium opening recorded at
the start, ~70 of Gradio's scripts, styles and fonts), the config, then every load event and what it chains, as the
browser runs them (this app has none: its opening run is in the config, so the files and the config are what a
student waits for before the page draws the first map). Then until the time is up it waits 1.5-4 s (uniform) and
does one thing of a teaching mix:

    lab_dk      30 %   move the lab's d_k (a power of two, as the log₂ slider gives)
    lab_scaled  15 %   switch the 1/√d_k scaling
    lab_keys    10 %   change the number of keys
    rerun       10 %   type a new text in the Transformer tab: the model reruns (visualize, then its chain)
    heads       10 %   click a head off in the explorer's "switch heads off" mode (or back on): its box (#heads_off)
                       written and #heads_apply pressed, the model reruns with them off (visualize's heads_off and,
                       one time in five, the other ablation); the notes must say which heads are off
    steps       15 %   open the steps view (Figure 2)
    lesson      10 %   the guided lesson's Next from the student's step (students start at steps spread over the
                       first eight; after the last, from the first again): the event #lesson_next's click runs
                       (a private one, found by its trigger in /config) with the step index, and every event
                       chained on it; the answer must show the next step ("Step N of M" in #lesson_text). Its steps
                       open other tabs and other models. The student then goes back to its own controls.

Every action also counts the events it sent (joined the queue). The page's own change listeners (a control a step
set) are not simulated: after the class, on the quiet server, `benchmarks.lesson_walk` presses Next through the whole
lesson in Chromium and counts every request each step sends, with its times.

`--real` sets the app up with a real model, the opus-mt-en-de configuration (Marian, 6 + 6 layers, 8 heads,
d_model 512, vocabulary 58,101: 74M parameters) with random weights, saved offline by devtools.hub_models, and
takes 10 % of the mix for it (`--real PERCENT` for another share; from the lab's d_k and the reruns): a student picks it and types a sentence
(`real`); the model is loaded once, by one run before the class arrives. Random weights never write the end
token, so each of its runs writes its whole budget (1.5 x the source + 10 tokens): the worst case. With
`--real-score PERCENT` as well, that share of the actions (taken from the steps) scores every head of the real
model on a new sentence (`real_score`: the grid, Michel's gradient and the prune curve, seconds of the model each).
`--real-model minilm` makes that real model the trained all-MiniLM-L6-v2 instead (a BERT encoder, 6 x 12 heads,
22.7M parameters, from the pinned PyPI package through devtools.trained_models): one pass per run, no decoding; its
heads cannot be scored (an encoder writes no output), so `--real-score` is refused with it.

`--browsers K` also opens the page K times in Debian's headless Chromium while the class works (the first during
the arrivals, the rest spread over the class, one at a time, each in a fresh context with an empty cache) and reports
the first drawn view from the navigation's start (benchmarks.page's measure: the explorer's first frame with its
grid; its clock is the page's performance.timeOrigin, the navigation's start, before GET / is sent): what a student
who arrives with the class waits for. Chromium runs on the same two cores as the server and the simulated class, so
this is a pessimistic figure; a lecture hall's browsers run on the students' own machines. The CPU table says how
much each took: the server, the simulated students (this process: time.process_time) and Chromium (its processes
and Playwright's driver once reaped: resource.getrusage(RUSAGE_CHILDREN)), while the class arrived and over the
class.

`--live` also trains live in the background for the whole class (`/live_train`, plain dot products at d_k 1024,
one run after another, as a teacher demonstrating it would): the other views must keep answering.

Latency = join the queue .. the last file of the answer fetched (what the browser waits for before it can
draw; the lab's PNGs on an app that still draws them, none on one whose page draws the numbers). Every
answer is checked (the lab's table is for the d_k asked, the view's notes describe a run, the steps text
is there); a wrong answer counts as an error. `--against REF` runs the same class (same seed, same
actions) against REF's app as well, exported with `git archive` into a temporary folder (nothing in the
repository is touched), one app after the other, so each has the machine to itself; the table of ratios
is this tree's over REF's. Never asserted on in tests: timings only ever go to the tables and JSON.
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from devtools.launcher import ROOT, Server

from . import lesson_walk
from .load import rss_kib
from .page import cpu_s
from .common import Timing, export_ref, load, ms, percentile, table, write_json
from .students import (ACTIONS, HTTP_TIMEOUT_S, REAL_MODELS, REAL_SHARE, THINK_S, WAIT_S, BrowserTransport,
                       RealModel, Student, Tally, real_actions)

ARRIVAL_S = 5.0   # students arrive (open the page) within this many seconds
SETTLE_S = 8.0    # after the first HTTP 200: the app's warm-up thread finishes before the class arrives
SETTLED_S = 15.0  # answers after this many seconds: the class arrived, opened the page and made its first moves
LABELS = {"open": "open the page: GET / .. the opening run (HTML, its files, config: the run is in it)",
          "lab_dk": "lab: move d_k",
          "lab_scaled": "lab: switch scaling", "lab_keys": "lab: number of keys",
          "rerun": "Transformer: new text (model reruns)", "heads": "Transformer: a head clicked off (model reruns)",
          "steps": "Transformer: open the steps view", "lesson": "lesson: Next (one step, its chains if any)",
          "real": "real model (74M): pick it, type a sentence",
          "real_score": "real model (74M): score every head of a sentence"}


def page_files(base: str) -> tuple[str, ...]:
    """The same-origin files (Gradio's scripts, styles, fonts, theme) one fresh Chromium opening of the page fetches,
    in order; () where Chromium cannot run here. (In a thread of its own: Playwright's sync API refuses a thread
    that runs an event loop.)"""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_record_page_files, base).result()


def _record_page_files(base: str) -> tuple[str, ...]:
    try:
        from playwright.sync_api import sync_playwright

        from devtools.browser import CHROMIUM, CHROMIUM_ARGS

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                page, seen = browser.new_page(), []
                page.on("request", lambda request: seen.append(request.url))
                page.goto(base + "/")
                page.wait_for_selector("#explorer .av-tile", timeout=60_000)
                page.wait_for_timeout(1000)
            finally:
                browser.close()
    except Exception as error:  # noqa: BLE001 - the class runs without the files, and says so
        print(f"page files not recorded ({type(error).__name__}: {error}); students fetch the HTML only", flush=True)
        return ()
    paths = [url[len(base):] for url in seen if url.startswith(base + "/")]
    return tuple(dict.fromkeys(p for p in paths if p.startswith(("/assets/", "/static/", "/theme.css"))))


def student(index: int, base: str, seed: int, start: float, duration_s: float, tally: Tally,
            files: tuple[str, ...] = (), mix: dict[str, int] = ACTIONS, patience_s: float | None = None,
            real: RealModel = REAL_MODELS["opus-mt-random"], pid: int | None = None) -> None:
    rng = random.Random(seed * 1000 + index)
    deadline = start + duration_s
    time.sleep(rng.uniform(0, ARRIVAL_S))
    with httpx.Client(timeout=HTTP_TIMEOUT_S, transport=BrowserTransport()) as client:
        try:
            t0 = time.perf_counter()
            page = Student(client, base, rng, files, patience_s, real)  # GET /, its files and the config, as a browser fetches them
            tally.record("open", time.perf_counter() - t0 + page.open(), None, page.estimations, page.requests)
            tally.opened(cpu_s(pid))
        except (httpx.HTTPError, OSError, RuntimeError, KeyError, IndexError) as error:  # FetchError: a RuntimeError
            tally.record("open", time.monotonic() - start, f"{type(error).__name__}: {error}")
            return
        while True:
            think = rng.uniform(*THINK_S)
            if time.monotonic() + think > deadline:
                break
            time.sleep(think)
            action = rng.choices(list(mix), weights=list(mix.values()))[0]
            t0 = time.perf_counter()
            try:
                seconds, wrong = page.act(action)
            except (httpx.HTTPError, RuntimeError, KeyError, IndexError, TypeError) as error:
                seconds, wrong = time.perf_counter() - t0, f"{type(error).__name__}: {error}"
            tally.record(action, seconds, wrong, page.estimations, page.requests)


def run_class(base: str, students: int, duration_s: float, seed: int, files: tuple[str, ...] = (),
              mix: dict[str, int] = ACTIONS, patience_s: float | None = None,
              real: RealModel = REAL_MODELS["opus-mt-random"], pid: int | None = None) -> dict:
    """`students` threads for `duration_s` against the app at `base`, each opening the page with `files`;
    per action: count, errors, p50, p95, events sent. `patience_s`: a student gives up on an answer this late (an
    error). `pid`: the server's, for its CPU while the class arrived (with this process's: the simulated students)."""
    tally = Tally()
    start, client_cpu, server_cpu = time.monotonic(), time.process_time(), cpu_s(pid)
    tally.opened(server_cpu)
    threads = [threading.Thread(target=student, args=(i, base, seed, start, duration_s, tally, files, mix, patience_s,
                                                      real, pid), daemon=True) for i in range(students)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, start + duration_s + ARRIVAL_S + 3 * HTTP_TIMEOUT_S - time.monotonic()))
    wall = time.monotonic() - start
    actions = {}
    for action in ("open", *mix):
        samples = tally.seconds.get(action, [])
        sent = tally.requests.get(action, [])
        actions[action] = {"n": len(samples), "errors": tally.errors.get(action, 0), "waited": tally.waited[action],
                           "told": tally.told[action], "eta": tally.eta[action],
                           "requests": [min(sent), statistics.mean(sent), max(sent)] if sent else None,
                           **(Timing(samples).to_dict() | {"max_s": max(samples)} if samples else {})}
    every = [s for name, samples in tally.seconds.items() if name != "open" for s in samples]
    settled = [s for name, samples in tally.seconds.items() if name != "open"
               for s, at in zip(samples, tally.answered_at[name]) if at - start > SETTLED_S]
    return {"students": students, "duration_s": duration_s, "wall_s": wall, "seed": seed,
            "answers_per_s": sum(len(s) for s in tally.seconds.values()) / wall, "actions": actions,
            "all": Timing(every).to_dict() if every else {}, "errors": sum(tally.errors.values()),
            "settled": Timing(settled).to_dict() if settled else {},
            "error_examples": tally.examples, "error_messages": tally.messages, "hung": sum(t.is_alive() for t in threads),
            "drain_s": max(0.0, tally.last_answer - (start + duration_s)),
            # the arrival: from the class's start to the last opening answered, and the CPU each side spent in it
            "arrival": {"s": tally.last_open[0] - start, "client_cpu_s": tally.last_open[1] - client_cpu,
                        "server_cpu_s": tally.last_open[2] - server_cpu}}


def reaped_cpu_s() -> float:
    """User + system CPU seconds of this process's children that have ended (and theirs): Chromium's, once closed."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def open_in_chromium(base: str, opens: int, start: float, duration_s: float, samples: list[dict]) -> None:
    """`opens` openings of the page in Chromium during the class: the first in the arrivals, the rest spread over the
    class; each the page's own times (benchmarks.page.open_once: firstView = ms from navigation start)."""
    from playwright.sync_api import sync_playwright

    from .explorer import ARGS, CHROMIUM
    from .page import open_once

    at = [start + 1.0 + i * (ARRIVAL_S + duration_s * 0.8) / max(1, opens) for i in range(opens)]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for when in at:
                time.sleep(max(0.0, when - time.monotonic()))
                try:
                    samples.append(open_once(browser, base + "/") | {"at_s": when - start})
                except Exception as error:  # noqa: BLE001 - a page that never drew is reported, not raised
                    samples.append({"at_s": when - start, "error": f"{type(error).__name__}: {error}"[:300]})
        finally:
            browser.close()


def train_live(base: str, stop: threading.Event, outcomes: list[str]) -> None:
    """Live runs one after another until `stop` (each one's last message kept), then cancel the one training."""
    from gradio_client import Client

    client = Client(base, verbose=False)
    while not stop.is_set():
        job = client.submit(task="reverse", d_k="1024", compatibility="dot", api_name="/live_train")
        while not job.done():
            if stop.is_set():
                client.predict(api_name="/live_cancel")
            time.sleep(0.2)
        try:
            outcomes.append(job.result(timeout=HTTP_TIMEOUT_S)[1])
        except Exception as error:  # noqa: BLE001 - reported in the table, never raised
            outcomes.append(f"{type(error).__name__}: {error}")


def watch_rss(pid: int, stop: threading.Event, samples: list[tuple[float, float]], every_s: float = 1.0) -> None:
    """(seconds since the start, the server's VmRSS in MiB) every `every_s` until `stop`."""
    t0 = time.monotonic()
    while True:
        try:
            samples.append((time.monotonic() - t0, rss_kib(pid)["VmRSS"] / 1024))
        except (OSError, KeyError):
            return
        if stop.wait(every_s):
            return


def real_model_folder(temp: Path, real_model: str = "opus-mt-random") -> Path:
    """The opus-mt-en-de configuration with random weights and a small real tokenizer, saved offline; or, for
    "minilm", the trained all-MiniLM-L6-v2's folder (devtools.trained_models)."""
    if real_model == "minilm":
        from devtools.trained_models import minilm_folder

        return minilm_folder()
    from devtools.hub_models import save_opus_mt_en_de_random

    return save_opus_mt_en_de_random(temp / REAL_MODELS[real_model].name)


def load_real_model(base: str, name: str = REAL_MODELS["opus-mt-random"].name) -> float:
    """One run of the real model before the class arrives (it loads once per process); its seconds."""
    from gradio_client import Client

    t0 = time.perf_counter()
    Client(base + "/", verbose=False).predict("Attention is all you need.", "hub:" + name, 64, "sqrt_dk", 1.0,
                                              True, True, 0, 64, 4, api_name="/visualize")
    return time.perf_counter() - t0


def serve_and_run(name: str, cwd: Path, students: int, duration_s: float, seed: int, log_dir: Path,
                  live: bool = False, with_files: bool = True, real: int = 0, browsers: int = 0,
                  real_score: int = 0, real_model: str = "opus-mt-random") -> dict:
    """Start `python app.py` in cwd (its own package on PYTHONPATH), let it settle, run the class (with live
    training in the background when `live`; with a real model among the choices when `real`), stop it."""
    temp = Path(tempfile.mkdtemp(prefix=f"attention_viz-classroom-{name}-"))
    env = {"PYTHONPATH": str(cwd), "GRADIO_TEMP_DIR": str(temp), "PYTHONDONTWRITEBYTECODE": "1"}
    if real:
        env |= {"ATTENTION_VIZ_HUB_MODELS": str(real_model_folder(temp, real_model)), "HF_HUB_OFFLINE": "1"}
    try:
        with Server([sys.executable, "app.py"], log_dir / f"classroom-{name}.log", env=env, cwd=cwd) as server, \
                httpx.Client(timeout=30) as http:
            startup = server.wait_http(http, timeout_s=300)
            time.sleep(SETTLE_S)
            real_load_s = load_real_model(server.base, REAL_MODELS[real_model].name) if real else None
            files = page_files(server.base) if with_files else ()
            time.sleep(2.0)  # that opening's own work on the server out of the way
            stop, outcomes, rss = threading.Event(), [], []
            trainer = threading.Thread(target=train_live, args=(server.base, stop, outcomes), daemon=True)
            if live:
                trainer.start()
            watcher = threading.Thread(target=watch_rss, args=(server.pid, stop, rss), daemon=True)
            watcher.start()
            client_cpu, server_cpu, children_cpu = time.process_time(), cpu_s(server.pid), reaped_cpu_s()
            opened: list[dict] = []
            chromium = threading.Thread(target=open_in_chromium,
                                        args=(server.base, browsers, time.monotonic(), duration_s, opened), daemon=True)
            if browsers:
                chromium.start()
            mix = real_actions(real, real_score) if real else ACTIONS
            result = run_class(server.base, students, duration_s, seed, files, mix, real=REAL_MODELS[real_model],
                               pid=server.pid)
            if browsers:
                chromium.join(timeout=120)
                # Chromium's processes and Playwright's driver, reaped once it closed (the server is still running)
                result |= {"chromium": opened, "chromium_cpu_s": reaped_cpu_s() - children_cpu}
            result |= {"client_cpu_s": time.process_time() - client_cpu, "server_cpu_s": cpu_s(server.pid) - server_cpu}
            stop.set()
            watcher.join()
            result["rss_mib"] = rss
            if live:
                trainer.join(timeout=3 * HTTP_TIMEOUT_S)
            if with_files:  # after the class (the class meets the lesson's steps uncached), on the quiet server
                time.sleep(2.0)
                with ThreadPoolExecutor(max_workers=1) as pool:  # Playwright's sync API: a thread of its own
                    result["lesson_walk"] = pool.submit(lesson_walk.walk, server.base).result()
            result |= {"startup_s": startup, "app_alive": server.process.poll() is None, "load_after": load(),
                       "page_files": len(files), "real_load_s": real_load_s,
                       "live_runs": outcomes if live else None}
            return result
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def run(students: int = 30, duration_s: float = 75.0, against: str | None = None, seed: int = 0,
        live: bool = False, with_files: bool = True, real: int = 0, browsers: int = 0, real_score: int = 0,
        real_model: str = "opus-mt-random") -> dict:
    """The class against this tree's app, then (with `against`) against that git ref's app; `live`: with live
    training in the background (this tree's app only: a ref may not have it)."""
    log_dir = ROOT / "benchmarks" / "results" / "logs"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    result: dict = {"students": students, "duration_s": duration_s, "seed": seed, "load_before": load(),
                    "apps": {}, "names": {"this": f"this tree ({head}{', modified' if dirty else ''})"}}
    result["with_files"] = with_files
    result["real"], result["real_score"], result["real_model"] = real, real_score, real_model
    result["apps"]["this"] = serve_and_run("this", ROOT, students, duration_s, seed, log_dir, live, with_files, real,
                                           browsers, real_score, real_model)
    if against:
        folder = Path(tempfile.mkdtemp(prefix="attention_viz-ref-"))
        try:
            commit = export_ref(against, folder / "tree")
            result["names"]["ref"] = f"{against} ({commit[:7]})"
            result["apps"]["ref"] = serve_and_run("ref", folder / "tree", students, duration_s, seed, log_dir,
                                                  with_files=with_files, browsers=browsers)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    return result


def sent(requests: list | None) -> str:
    """The events an action sent (its chains included): "1", or "min-max (mean)"."""
    if not requests:
        return ""
    low, mean, high = requests
    return f"{low}" if low == high else f"{low}-{high} ({mean:.1f})"


def _app_table(app: dict, labels: dict[str, str] = LABELS) -> str:
    waits = any(a.get("waited") for a in app["actions"].values())
    rows = [[labels[name], a["n"], a["errors"], ms(a["median_s"]) if a["n"] else "", ms(a["p95_s"]) if a["n"] else "",
             ms(a["max_s"]) if a["n"] else "", sent(a.get("requests"))]
            + ([a.get("waited", 0), a.get("told", 0), a.get("eta", 0)] if waits else [])
            for name, a in app["actions"].items()]
    if app["all"]:
        rows.append(["every action after opening", app["all"]["n"], app["errors"] - app["actions"]["open"]["errors"],
                     ms(app["all"]["median_s"]), ms(app["all"]["p95_s"]), "", ""]
                    + ([sum(a.get(k, 0) for n, a in app["actions"].items() if n != "open") for k in ("waited", "told", "eta")]
                       if waits else []))
    if app.get("settled"):
        rows.append([f"every action answered after the first {SETTLED_S:.0f} s", app["settled"]["n"], "",
                     ms(app["settled"]["median_s"]), ms(app["settled"]["p95_s"]), "", ""]
                    + (["", "", ""] if waits else []))
    waited = [f"waited > {WAIT_S:.0f} s", "told their place", "and a time"] if waits else []
    return table(["action", "count", "errors", "p50 ms", "p95 ms", "max ms", "events sent", *waited], rows)


def _cpu_table(app: dict) -> str:
    """The CPU each process on the machine's cores spent while the class arrived (until the last opening was
    answered) and over the whole class: what share of the students' wait is the benchmark's own clients."""
    arrival, wall = app.get("arrival") or {}, app["wall_s"]
    rows = [["the server", f"{arrival.get('server_cpu_s', 0):.1f}", f"{app['server_cpu_s']:.1f}"],
            ["the simulated students (this process)", f"{arrival.get('client_cpu_s', 0):.1f}",
             f"{app['client_cpu_s']:.1f}"]]
    if app.get("chromium_cpu_s") is not None:
        rows.append([f"Chromium ({len(app.get('chromium', []))} pages, and its driver)", "",
                     f"{app['chromium_cpu_s']:.1f}"])
    return table(["CPU s", f"while the class arrived ({arrival.get('s', 0):.1f} s)",
                  f"over the class ({wall:.0f} s, {2 * wall:.0f} core-s on two cores)"], rows)


def _memory_line(samples: list) -> str:
    """The server's VmRSS at the start, each third of the class and the end, and its peak."""
    rss = [mib for _, mib in samples]
    thirds = [rss[min(len(rss) - 1, len(rss) * k // 3)] for k in (1, 2)]
    return (f"server memory (VmRSS, MiB): start {rss[0]:.0f}, a third in {thirds[0]:.0f}, two thirds {thirds[1]:.0f}, "
            f"end {rss[-1]:.0f}, peak {max(rss):.0f}")


def report(result: dict) -> str:
    """A table per app, then this tree's p50 and p95 over the reference's, per action."""
    real = REAL_MODELS[result.get("real_model", "opus-mt-random")]
    labels = {name: text.replace("real model (74M)", real.label) for name, text in LABELS.items()}
    share = f"; the real model ({real.name}) in {result['real']} % of the actions" if result.get("real") else ""
    share += f", its heads scored in {result['real_score']} %" if result.get("real_score") else ""
    lines = [f"{result['students']} students, {result['duration_s']:.0f} s each app{share}, think time "
             f"{THINK_S[0]}-{THINK_S[1]} s, seed {result['seed']}; latency = join the queue .. last file fetched; "
             + ("opening the page fetches its files too" if result.get("with_files", True) else "opening: HTML only")]
    for key, app in result["apps"].items():
        lines += ["", f"### {result['names'][key]}: {app['answers_per_s']:.1f} answers/s, {app['errors']} errors"
                      f"{', ' + str(app['hung']) + ' students hung' if app['hung'] else ''}; load after {app['load_after']}",
                  "", _app_table(app, labels)]
        lines += [f"  error: {example}" for example in app["error_examples"]]
        if app.get("drain_s") is not None:
            lines += ["", f"the last answer came {app['drain_s']:.1f} s after the class stopped starting actions "
                          f"({app['hung']} students still waiting at the end)"]
        if app.get("server_cpu_s") is not None:
            lines += ["", _cpu_table(app)]
        if app.get("rss_mib"):
            lines.append(_memory_line(app["rss_mib"]))
        if app.get("chromium"):
            drawn = [o for o in app["chromium"] if "firstView" in o]
            views = [o["firstView"] / 1000 for o in drawn]
            lines += ["", f"the page opened in Chromium during the class, first drawn view from navigation start: "
                          + (f"p50 {ms(statistics.median(views))}, p95 {ms(percentile(views, 95))}, max "
                             f"{ms(max(views))} ms over {len(views)} openings" if views else "none drawn")
                          + (f"; {len(app['chromium']) - len(drawn)} never drawn" if len(drawn) < len(app["chromium"])
                             else "")]
        if app.get("lesson_walk"):
            lines += ["", lesson_walk.summary(app["lesson_walk"])]
        if app.get("real_load_s") is not None:
            lines += ["", f"the real model's first run (loading it): {app['real_load_s']:.1f} s, before the class"]
        if app.get("live_runs") is not None:
            lines += ["", f"live training in the background: {len(app['live_runs'])} runs, ending: "
                          + "; ".join(app["live_runs"])]
    if "ref" in result["apps"]:
        this, ref = result["apps"]["this"]["actions"], result["apps"]["ref"]["actions"]
        rows = []
        for name in this:
            if this[name]["n"] and ref[name]["n"]:
                rows.append([labels[name], ms(this[name]["median_s"]), ms(ref[name]["median_s"]),
                             f"{this[name]['median_s'] / ref[name]['median_s']:.2f}", ms(this[name]["p95_s"]),
                             ms(ref[name]["p95_s"]), f"{this[name]['p95_s'] / ref[name]['p95_s']:.2f}"])
        views = [[o["firstView"] / 1000 for o in result["apps"][key].get("chromium", []) if "firstView" in o]
                 for key in ("this", "ref")]
        if all(views):
            (a50, a95), (b50, b95) = [(statistics.median(v), percentile(v, 95)) for v in views]
            rows.insert(1, [f"open the page in Chromium: navigation start .. first map drawn ({len(views[0])} / "
                            f"{len(views[1])} openings)", ms(a50), ms(b50), f"{a50 / b50:.2f}", ms(a95), ms(b95),
                            f"{a95 / b95:.2f}"])
        lines += ["", f"this tree against {result['names']['ref']} (ratio < 1: this tree is faster)", "",
                  table(["action", "p50 this", "p50 ref", "ratio", "p95 this", "p95 ref", "ratio"], rows)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.classroom", description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--duration-s", type=float, default=75.0)
    parser.add_argument("--against", default=None, help="a git ref whose app runs the same class after this one")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--live", action="store_true", help="train live in the background for the whole class")
    parser.add_argument("--real", type=int, nargs="?", const=REAL_SHARE, default=0, metavar="PERCENT",
                        help="a real model among the choices (opus-mt-en-de's configuration, random weights), run "
                             f"by PERCENT of the actions (default {REAL_SHARE})")
    parser.add_argument("--real-model", choices=sorted(REAL_MODELS), default="opus-mt-random",
                        help="with --real, which: opus-mt-en-de's configuration with random weights (default), or "
                             "the trained all-MiniLM-L6-v2 (an encoder; devtools.trained_models)")
    parser.add_argument("--real-score", type=int, default=0, metavar="PERCENT",
                        help="with --real, PERCENT of the actions score every head of the real model (from the steps)")
    parser.add_argument("--browsers", type=int, default=0, metavar="K",
                        help="also open the page K times in Chromium during the class: the first drawn view")
    parser.add_argument("--no-files", action="store_true",
                        help="students fetch the page's HTML only, not Gradio's files (as this benchmark did before)")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    if not (1 <= args.students <= 400 and 5 <= args.duration_s <= 1800):
        parser.error("students 1..400, duration 5..1800 s")
    if args.real and args.against:
        parser.error("--real runs this tree's app only (a ref may not have real models)")
    if args.real_score and not args.real or not 0 <= args.real_score <= 15:
        parser.error("--real-score needs --real, and 0..15 percent")
    if args.real_model == "minilm" and args.real_score:
        parser.error("--real-score needs a model that writes text: all-MiniLM-L6-v2 is an encoder")
    if not 0 <= args.browsers <= 50:
        parser.error("browsers 0..50")
    result = run(args.students, args.duration_s, args.against, args.seed, args.live, not args.no_files, args.real,
                 args.browsers, args.real_score, args.real_model)
    print(report(result), flush=True)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results"
    print(f"\nresults in {write_json('classroom-' + time.strftime('%Y%m%d-%H%M%S'), result, out)}")
    return 0 if all(app["errors"] == 0 and not app["hung"] for app in result["apps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
