"""A flood from one client, and a visitor's view meanwhile: what a visitor waits while one client joins events
back to back under invented session ids.

`python -m benchmarks.fairness [--joins 1100] [--threads 4] [--against main] [--alone ROUNDS] [--real-scores N]`

The flood comes from 127.0.0.2 (the server sees a second client): `--joins` joins of /visualize at new texts, each
under a session of its own, never reading an answer; the visitor, from 127.0.0.1, asks a view every VISIT_EVERY_S
meanwhile: each wait or refusal. `--against REF`: the same on REF's app after this one; `--alone`: then both apps side
by side, no flood, in turn; `--real-scores N` instead: N scorings of a real model's heads joined from 127.0.0.2, then
the visitor's views. docs/reliability.md ("Fair queueing") keeps the tables; tests/e2e/test_fairness.py the behaviour.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from devtools.launcher import Server

from .app import API, Browser, random_text
from .common import LOGS, SETTLE_S, app_env, export_ref, percentile, table, write_json

FLOOD_ADDRESS = "127.0.0.2"  # Linux answers the whole of 127.0.0.0/8 on loopback; the server listens on 127.0.0.1
VISIT_EVERY_S = 0.5
AFTER_S = 3.0
PATIENCE_S = 120.0  # a visitor's view not answered this long after its join counts as unanswered
TEXT_LENGTH = 10


def detail(response: httpx.Response) -> str:
    """A refusal's message (FastAPI's {"detail": ...}), else its body."""
    try:
        return str(response.json().get("detail", response.text))
    except (ValueError, AttributeError):
        return response.text


def flood(base: str, joins: int, threads: int = 4, address: str = FLOOD_ADDRESS, seed: int = 1) -> dict:
    """`joins` /visualize joins from `address`, each under a new session id, `threads` at once; never reads an
    answer. Counts of accepted and refused joins, the refusals' messages, and the seconds it took."""
    with httpx.Client(timeout=30) as client:
        browser = Browser(client, base)
    dep = browser.dependency("visualize")
    values, text_id, rng = browser.initial_inputs(dep), browser.by_elem_id["text"], random.Random(seed)
    bodies = []
    for _ in range(joins):
        values[text_id] = random_text(rng, TEXT_LENGTH)
        bodies.append({"data": [values[i] for i in dep["inputs"]], "event_data": None, "fn_index": dep["id"],
                       "trigger_id": None, "session_hash": uuid.uuid4().hex[:11]})
    statuses: dict[int, int] = {}
    messages: set[str] = set()
    lock = threading.Lock()

    def send(share: list[dict]) -> None:
        transport = httpx.HTTPTransport(local_address=address)
        with httpx.Client(timeout=30, transport=transport) as own:
            for body in share:
                response = own.post(base + API + "/queue/join", json=body)
                with lock:
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    if response.status_code != 200:
                        messages.add(detail(response)[:100])

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(send, [bodies[i::threads] for i in range(threads)]))
    return {"joins": joins, "accepted": statuses.get(200, 0), "refused": joins - statuses.get(200, 0),
            "statuses": statuses, "messages": sorted(messages), "seconds": time.perf_counter() - t0}


def visit(base: str, stop: threading.Event, seed: int = 2) -> list[dict]:
    """One view every VISIT_EVERY_S until `stop`: {"wait_s"} answered, or {"refused"} / {"error"}."""
    visits, rng = [], random.Random(seed)
    with httpx.Client(timeout=PATIENCE_S) as client:
        browser = Browser(client, base, patience_s=PATIENCE_S)
        dep = browser.dependency("visualize")
        values, text_id = browser.initial_inputs(dep), browser.by_elem_id["text"]
        while not stop.is_set():
            values[text_id] = random_text(rng, TEXT_LENGTH)
            try:
                seconds, completed = browser.call(dep, values, None)
                visits.append({"wait_s": seconds})
            except httpx.HTTPStatusError as error:
                visits.append({"refused": detail(error.response)[:100]})
            except (RuntimeError, httpx.HTTPError) as error:
                visits.append({"error": str(error)[:100]})
            stop.wait(VISIT_EVERY_S)
    return visits


def measure(name: str, cwd: Path, joins: int, threads: int, log_dir: Path) -> dict:
    """Start `python app.py` in cwd, let it settle, flood it while the visitor asks, stop it."""
    env = app_env(cwd, tempfile.mkdtemp(prefix=f"attention_viz-fairness-{name}-"))
    with Server([sys.executable, "app.py"], log_dir / f"fairness-{name}.log", env=env, cwd=cwd) as server, \
            httpx.Client(timeout=30) as http:
        server.wait_http(http, 300)
        time.sleep(SETTLE_S)
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            visitor = pool.submit(visit, server.base, stop)
            flooded = flood(server.base, joins, threads)
            time.sleep(AFTER_S)
            stop.set()
            visits = visitor.result()
    waits = [v["wait_s"] for v in visits if "wait_s" in v]
    return {"name": name, "flood": flooded, "visits": len(visits), "answered": len(waits),
            "refused": sum("refused" in v for v in visits), "errors": sum("error" in v for v in visits),
            "refusals": sorted({v["refused"] for v in visits if "refused" in v}),
            "wait_p50_s": statistics.median(waits) if waits else None,
            "wait_p95_s": percentile(waits, 95) if waits else None, "wait_max_s": max(waits) if waits else None}


def alone(trees: dict[str, Path], rounds: int, log_dir: Path) -> dict:
    """Both apps side by side, no flood: a lab answer and a rerun at a new text from each, in turn (the first app
    first in odd rounds), `rounds` times; the median seconds of each, per app."""
    servers = {name: Server([sys.executable, "app.py"], log_dir / f"fairness-alone-{i}.log", cwd=tree,
                            env={"PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"})
               for i, (name, tree) in enumerate(trees.items())}
    try:
        with httpx.Client(timeout=60) as client:
            for server in servers.values():
                server.wait_http(client, 300)
            time.sleep(SETTLE_S)
            browsers = {name: Browser(client, server.base) for name, server in servers.items()}
            seconds = {name: {"lab": [], "rerun": []} for name in servers}
            rng = random.Random(0)
            for i in range(rounds):
                text = random_text(rng, TEXT_LENGTH)
                for name in (list(servers) if i % 2 else list(servers)[::-1]):
                    browser = browsers[name]
                    for kind, api in (("lab", "dk_lab"), ("rerun", "visualize")):
                        dep = browser.dependency(api)
                        values = browser.initial_inputs(dep)
                        if kind == "rerun":
                            values[browser.by_elem_id["text"]] = text
                        seconds[name][kind].append(browser.call(dep, values, None)[0])
    finally:
        for server in servers.values():
            server.stop()
    return {name: {kind: statistics.median(s) for kind, s in kinds.items()} for name, kinds in seconds.items()}


VISITS = 5


def measure_scores(name: str, cwd: Path, scores: int, model_folder: Path, log_dir: Path) -> dict:
    """Start the app with the real model, load it, join `scores` scorings of it, then VISITS views of our model."""
    from .trained_length import load_real_model
    from .students import REAL_MODELS

    env = app_env(cwd, tempfile.mkdtemp(prefix=f"attention_viz-fairness-{name}-")) | {
        "HF_HUB_OFFLINE": "1", "ATTENTION_VIZ_HUB_MODELS": str(model_folder)}
    with Server([sys.executable, "app.py"], log_dir / f"fairness-scores-{name}.log", env=env, cwd=cwd) as server, \
            httpx.Client(timeout=PATIENCE_S) as client:
        server.wait_http(client, 300)
        time.sleep(SETTLE_S)
        load_real_model(server.base)
        browser = Browser(client, server.base, patience_s=PATIENCE_S)
        dep = browser.dependency("importance")
        values = browser.initial_inputs(dep)
        values[browser.by_elem_id["model"]] = "hub:" + REAL_MODELS["opus-mt-random"].name
        statuses: dict[int, int] = {}
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=FLOOD_ADDRESS)) as own:
            for i in range(scores):
                values[browser.by_elem_id["text"]] = f"The house number {i} is green."
                response = own.post(server.base + API + "/queue/join", json={
                    "data": [values[c] for c in dep["inputs"]], "event_data": None, "fn_index": dep["id"],
                    "trigger_id": None, "session_hash": uuid.uuid4().hex[:11]})
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        visualize, rng, waits = browser.dependency("visualize"), random.Random(3), []
        view = browser.initial_inputs(visualize)
        for _ in range(VISITS):
            view[browser.by_elem_id["text"]] = random_text(rng, TEXT_LENGTH)
            waits.append(browser.call(visualize, view, None)[0])
    return {"name": name, "scores": scores, "statuses": statuses, "waits_s": waits,
            "wait_p50_s": statistics.median(waits), "wait_max_s": max(waits)}


def run_scores(scores: int, against: str | None) -> dict:
    from devtools.launcher import ROOT

    from .trained_length import real_model_folder

    log_dir = LOGS
    with tempfile.TemporaryDirectory(prefix="attention_viz-fairness-real-") as folder:
        model = real_model_folder(Path(folder))
        results = [measure_scores("this tree", ROOT, scores, model, log_dir)]
        if against:
            tree = Path(folder) / "tree"
            commit = export_ref(against, tree)
            results.append(measure_scores(f"{against} ({commit[:7]})", tree, scores, model, log_dir))
    print(table(["app", "scorings joined (status: count)", "a view's wait p50 s", "max s", "each s"],
                [[r["name"], str(r["statuses"]), f"{r['wait_p50_s']:.2f}", f"{r['wait_max_s']:.2f}",
                  " ".join(f"{w:.2f}" for w in r["waits_s"])] for r in results]))
    path = write_json("fairness-scores", {"scores": scores, "results": results})
    print(f"\n(written to {path})")
    return {"results": results}


def run(joins: int = 1100, threads: int = 4, against: str | None = None, rounds: int = 0) -> dict:
    from devtools.launcher import ROOT

    log_dir = LOGS
    results = [measure("this tree", ROOT, joins, threads, log_dir)]
    single = None
    if against:
        with tempfile.TemporaryDirectory(prefix="attention_viz-fairness-ref-") as folder:
            tree = Path(folder) / "tree"
            commit = export_ref(against, tree)
            name = f"{against} ({commit[:7]})"
            results.append(measure(name, tree, joins, threads, log_dir))
            if rounds:
                single = alone({"this tree": ROOT, name: tree}, rounds, log_dir)
    rows = []
    for r in results:
        f = r["flood"]
        wait = (lambda s: "-" if s is None else f"{s:.2f}")
        rows.append([r["name"], f"{f['accepted']} / {f['refused']}", f"{f['seconds']:.1f}", r["visits"], r["answered"],
                     r["refused"], r["errors"], wait(r["wait_p50_s"]), wait(r["wait_p95_s"]), wait(r["wait_max_s"])])
    print(table(["app", "flood accepted / refused", "flood s", "views asked", "answered", "refused", "errors",
                 "wait p50 s", "p95 s", "max s"], rows))
    for r in results:
        print(f"{r['name']}: flood refusals {r['flood']['messages'][:2]}; the visitor's refusals {r['refusals'][:2]}")
    if single:
        print("\none client alone, the apps called in turn (median ms):\n")
        print(table(["app", "lab answer", "rerun at a new text"],
                    [[name, f"{m['lab'] * 1e3:.1f}", f"{m['rerun'] * 1e3:.1f}"] for name, m in single.items()]))
    path = write_json("fairness", {"joins": joins, "threads": threads, "results": results, "alone": single})
    print(f"\n(written to {path})")
    return {"results": results}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks fairness", description=__doc__.splitlines()[0])
    parser.add_argument("--joins", type=int, default=1100)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--against", default=None, help="a git ref whose app to measure the same way after this one")
    parser.add_argument("--alone", type=int, default=0, metavar="ROUNDS",
                        help="with --against: then both apps side by side, no flood, called in turn ROUNDS times")
    parser.add_argument("--real-scores", type=int, default=0, metavar="N",
                        help="instead: N scorings of a real model through /importance, then a visitor's views")
    args = parser.parse_args(argv)
    if args.real_scores:
        run_scores(args.real_scores, args.against)
    else:
        run(args.joins, args.threads, args.against, args.alone)


if __name__ == "__main__":
    main()
