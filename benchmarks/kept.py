"""What the server keeps per visitor: its memory after many API calls and refused inputs, this tree's app against a
git ref's (default main), in one run.

    python -m benchmarks.kept [--calls 10000] [--refused 1000] [--against main] [--clients 4]

Each app is started as `python app.py` (devtools.launcher), warmed up with WARM_UP mixed calls, and then sent, over
Gradio's own protocol on 127.0.0.1 (join the queue, read the event stream, fetch the images an answer names):

1. `--calls` mixed API calls, each from a new session as API clients make them (gradio_client and the /call routes
   send a new session hash every time): visualize, steps, compare, the √d_k lab, an export, and refused inputs (a
   64 kB text, a word where d_k belongs), from `--clients` threads;
2. `--refused` texts of 1 MB, each refused, each from a new session.

Reported: the app's VmRSS (from /proc/<pid>/status, read after SETTLE_S idle) after the warm-up, after 1 and after
2, their growth over the warmed level; the files Gradio's cache and the app's export folders hold at the end; the
answers that were not what was expected (an error where an answer belongs, or the reverse).
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx

from devtools.launcher import ROOT, Server

from .app import Browser
from .common import export_ref, load, rss_kib, table, write_json
from .load import folder_bytes

WARM_UP = 200
SETTLE_S = 3.0
TEXTS = ("hello", "attention", "2026-11-22", "abcdef", "the cat sat", "xyzzy", "transformer", "query key")
MIX = (("visualize", 30), ("steps", 10), ("compare", 10), ("dk_lab", 25), ("export", 5), ("refused_text", 10),
       ("refused_dk", 10))
MiB = 1 << 20


def request(kind: str, rng: random.Random) -> tuple[str, dict[str, object], bool]:
    """(endpoint, values by elem_id, whether an answer is expected) for one call of `kind`."""
    text = rng.choice(TEXTS)
    if kind == "dk_lab":
        return "dk_lab", {"lab_dk": rng.choice((8, 64, 512)), "lab_keys": rng.choice((8, 32))}, True
    if kind == "refused_text":
        return "visualize", {"text": "x" * (64 << 10)}, False
    if kind == "refused_dk":
        return "visualize", {"text": text, "dk": "many"}, False
    return kind, {"text": text}, True


def call(browser: Browser, api: str, values: dict[str, object]) -> bool:
    """One call from a new session; whether it was answered (False: refused with a message)."""
    dep = browser.dependency(api)
    inputs = browser.initial_inputs(dep)
    for component_id in inputs:
        elem_id = browser.components[component_id].get("props", {}).get("elem_id")
        if elem_id in values:
            inputs[component_id] = values[elem_id]
    browser.session_hash = uuid.uuid4().hex[:11]
    try:
        browser.call(dep, inputs, trigger_id=None)
        return True
    except RuntimeError as error:
        if "'success': False" in str(error):
            return False
        raise


def mixed_calls(base: str, n: int, clients: int, seed: int, tally: Counter) -> float:
    """n mixed calls from `clients` threads; seconds taken. tally counts the kinds and the unexpected answers."""
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    lock, left = threading.Lock(), [n]

    def client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with httpx.Client(timeout=120) as http:
            browser = Browser(http, base)
            while True:
                with lock:
                    if left[0] == 0:
                        return
                    left[0] -= 1
                kind = rng.choice(kinds)
                api, values, expected = request(kind, rng)
                try:
                    answered = call(browser, api, values)
                except (RuntimeError, httpx.HTTPError):
                    answered = None
                with lock:
                    tally[kind] += 1
                    if answered is not expected:
                        tally["unexpected"] += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - t0


def refused_megabytes(base: str, n: int, tally: Counter) -> float:
    """n visualize calls with a 1 MB text, each from a new session; seconds taken."""
    t0 = time.perf_counter()
    with httpx.Client(timeout=120) as http:
        browser = Browser(http, base)
        for _ in range(n):
            try:
                answered = call(browser, "visualize", {"text": "x" * MiB})
            except httpx.HTTPStatusError as error:  # refused before the queue: 413 with its message (BodyLimit)
                answered = False if error.response.status_code == 413 else None
            except (RuntimeError, httpx.HTTPError):
                answered = None
            tally["refused_1mb"] += 1
            if answered is not False:
                tally["unexpected"] += 1
    return time.perf_counter() - t0


def settled_rss_mib(pid: int) -> float:
    time.sleep(SETTLE_S)
    return rss_kib(pid)["VmRSS"] / 1024


def serve_and_measure(name: str, cwd: Path, calls: int, refused: int, clients: int, seed: int, log_dir: Path) -> dict:
    temp = Path(tempfile.mkdtemp(prefix=f"attention_viz-kept-{name}-"))
    (temp / "tmp").mkdir()
    env = {"PYTHONPATH": str(cwd), "GRADIO_TEMP_DIR": str(temp / "gradio"), "TMPDIR": str(temp / "tmp"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    tally: Counter = Counter()
    try:
        with Server([sys.executable, "app.py"], log_dir / f"kept-{name}.log", env=env, cwd=cwd) as server, \
                httpx.Client(timeout=30) as http:
            server.wait_http(http, timeout_s=300)
            time.sleep(8.0)  # the app's warm-up thread
            mixed_calls(server.base, WARM_UP, clients, seed + 1, Counter())
            result = {"warmed": settled_rss_mib(server.pid)}
            result["calls_s"] = mixed_calls(server.base, calls, clients, seed, tally)
            result["after_calls"] = settled_rss_mib(server.pid)
            result["refused_s"] = refused_megabytes(server.base, refused, tally)
            result["after_refused"] = settled_rss_mib(server.pid)
            result["peak"] = rss_kib(server.pid)["VmHWM"] / 1024
            result["gradio_cache"] = folder_bytes(temp / "gradio") if (temp / "gradio").exists() else (0, 0)
            exports = [p for p in (temp / "tmp").glob("attention_viz-exports-*")]
            result["export_folders"] = [sum(x) for x in zip(*(folder_bytes(p) for p in exports))] or [0, 0]
            result["alive"] = server.process.poll() is None
        result["tally"] = dict(tally)
        result["left_after_stop"] = len(list((temp / "tmp").glob("attention_viz-exports-*")))
        return result
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def run(calls: int, refused: int, against: str | None, clients: int, seed: int = 0) -> dict:
    log_dir = ROOT / "benchmarks" / "results" / "logs"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"
    result: dict = {"calls": calls, "refused": refused, "clients": clients, "load_before": load(), "apps": {},
                    "names": {}}
    if against:
        folder = Path(tempfile.mkdtemp(prefix="attention_viz-ref-"))
        try:
            commit = export_ref(against, folder / "tree")
            result["names"]["ref"] = f"{against} ({commit[:7]})"
            result["apps"]["ref"] = serve_and_measure("ref", folder / "tree", calls, refused, clients, seed, log_dir)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    result["names"]["this"] = f"this tree ({head})"
    result["apps"]["this"] = serve_and_measure("this", ROOT, calls, refused, clients, seed, log_dir)
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    apps = result["apps"]
    names = [result["names"][key] for key in apps]

    def row(label: str, value) -> list:
        return [label] + [value(app) for app in apps.values()]

    mib = "{:.0f}".format
    rows = [
        row("VmRSS warmed (MiB)", lambda a: mib(a["warmed"])),
        row(f"after {result['calls']:,} mixed calls (MiB)", lambda a: mib(a["after_calls"])),
        row("  growth over warmed", lambda a: f"{a['after_calls'] - a['warmed']:+.0f}"),
        row(f"after {result['refused']:,} refused 1 MB texts (MiB)", lambda a: mib(a["after_refused"])),
        row("  growth over warmed", lambda a: f"{a['after_refused'] - a['warmed']:+.0f}"),
        row("peak VmHWM (MiB)", lambda a: mib(a["peak"])),
        row("mixed calls per second", lambda a: f"{result['calls'] / a['calls_s']:.0f}"),
        row("unexpected answers", lambda a: str(a["tally"].get("unexpected", 0))),
        row("Gradio's cache: files, MiB", lambda a: f"{a['gradio_cache'][0]}, {a['gradio_cache'][1] / MiB:.1f}"),
        row("export folders: files, MiB", lambda a: f"{a['export_folders'][0]}, {a['export_folders'][1] / MiB:.1f}"),
        row("export folders left after stop", lambda a: str(a["left_after_stop"])),
    ]
    mix = ", ".join(f"{kind} {weight}%" for kind, weight in MIX)
    head = (f"The app's memory after mixed API calls, each from a new session ({mix}; {result['clients']} clients) "
            f"and after 1 MB texts refused one at a time; load {result['load_before']} before, "
            f"{result['load_after']} after")
    return head + "\n\n" + table(["", *names], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kept", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--refused", type=int, default=1_000)
    parser.add_argument("--against", default="main", help="a git ref whose app is measured first ('' for none)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    result = run(args.calls, args.refused, args.against or None, args.clients)
    print(report(result), flush=True)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results"
    print(f"\nresults in {write_json('kept-' + time.strftime('%Y%m%d-%H%M%S'), result, out)}")
    return 0 if all(app["alive"] and not app["tally"].get("unexpected") for app in apps_of(result)) else 1


def apps_of(result: dict) -> list[dict]:
    return list(result["apps"].values())


if __name__ == "__main__":
    sys.exit(main())
