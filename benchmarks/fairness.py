"""A flood from one client, and a visitor's view meanwhile: what a visitor waits while one client joins events
back to back under invented session ids.

`python -m benchmarks fairness [--joins 1100] [--threads 4] [--against main]`

The flood comes from 127.0.0.2 (the server sees a second client): `--joins` joins of /visualize at new texts, each
under a session of its own, never reading an answer; the visitor (benchmarks.browser.Page), from 127.0.0.1, asks a
view every VISIT_EVERY_S meanwhile: each wait or refusal. `--against REF`: the same on REF's app after this one.
docs/reliability.md ("Fair queueing") keeps the tables; tests/e2e/test_fairness.py the behaviour.
"""

from __future__ import annotations

import argparse
import asyncio
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

from .common import LOGS, SETTLE_S, app_env, export_ref, percentile, table, write_json
from .browser import API, Page, Refused, dependency, elem_ids, opening_values
from .students import random_text

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
    config = httpx.get(base + "/config", timeout=30).json()
    dep = dependency(config, "visualize")
    values, text_id, rng = opening_values(config), elem_ids(config)["text"], random.Random(seed)
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


async def visit(base: str, stop: threading.Event, seed: int = 2) -> list[dict]:
    """One view every VISIT_EVERY_S until `stop`: {"wait_s"} answered, or {"refused"} / {"error"}."""
    visits, rng, page = [], random.Random(seed), Page(base, patience_s=PATIENCE_S)
    try:
        await page.open()
        dep, values, text_id = dependency(page.config, "visualize"), opening_values(page.config), \
            elem_ids(page.config)["text"]
        while not stop.is_set():
            values[text_id] = random_text(rng, TEXT_LENGTH)
            try:
                seconds, _ = await page.call(dep, values, None)
                visits.append({"wait_s": seconds})
            except Refused as error:
                visits.append({"refused": error.detail[:100]})
            except (RuntimeError, OSError, asyncio.TimeoutError) as error:  # aiohttp's errors are OSErrors
                visits.append({"error": str(error)[:100]})
            await asyncio.sleep(VISIT_EVERY_S)
    finally:
        await page.close()
    return visits


def measure(name: str, cwd: Path, joins: int, threads: int, log_dir: Path) -> dict:
    """Start `python app.py` in cwd, let it settle, flood it while the visitor asks, stop it."""
    env = app_env(cwd, tempfile.mkdtemp(prefix=f"attention_viz-fairness-{name}-"))
    with Server([sys.executable, "app.py"], log_dir / f"fairness-{name}.log", env=env, cwd=cwd) as server, \
            httpx.Client(timeout=30) as http:
        server.wait_http(http, 300)
        time.sleep(SETTLE_S)
        stop = threading.Event()
        with ThreadPoolExecutor(1) as pool:  # the visitor's event loop on a thread of its own, the flood on this one
            visitor = pool.submit(asyncio.run, visit(server.base, stop))
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


def run(joins: int = 1100, threads: int = 4, against: str | None = None) -> dict:
    from devtools.launcher import ROOT

    log_dir = LOGS
    results = [measure("this tree", ROOT, joins, threads, log_dir)]
    if against:
        with tempfile.TemporaryDirectory(prefix="attention_viz-fairness-ref-") as folder:
            tree = Path(folder) / "tree"
            commit = export_ref(against, tree)
            results.append(measure(f"{against} ({commit[:7]})", tree, joins, threads, log_dir))
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
    path = write_json("fairness", {"joins": joins, "threads": threads, "results": results})
    print(f"\n(written to {path})")
    return {"results": results}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks fairness", description=__doc__.splitlines()[0])
    parser.add_argument("--joins", type=int, default=1100)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--against", default=None, help="a git ref whose app to measure the same way after this one")
    args = parser.parse_args(argv)
    run(args.joins, args.threads, args.against)


if __name__ == "__main__":
    main()
