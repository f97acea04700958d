"""A class on the app: students on one event loop, each a browser (its own session, six connections) that opens the
page and then, after 1.5-4 s of thought each time, does one thing of a teaching mix (students.ACTIONS: the lab's
d_k, scaling and number of keys, a new text, a head clicked off, the steps view, the lesson's Next); then the lesson
walked in Chromium on the quiet server; then the server's CPU per answer by kind, every app up at once and measured
in turn (costs).

    python -m benchmarks classroom --students 300 --against REF   # a lecture hall; --help for every option

The server runs pinned to a core of its own (taskset), the class on another, so the figures are the server's. Latency
runs from joining the queue to the last file of the answer fetched, and every answer is checked (a wrong one is an
error). `--against REF` runs the same class (same seed, same actions) on REF's app from `git archive`, one app after
the other. `--real` puts a real model among the choices (benchmarks.trained_length), `--live` trains live in the
background. The page complete in Chromium is benchmarks.page's (Chromium beside the class would take the class's
core). docs/benchmarks.md says how to read the tables (benchmarks.classroom_report) and keeps the latest; never
asserted on in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
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

from attention_viz.service.limits import WARM_REAL_ENV
from devtools.launcher import ROOT, Server

from .classroom_chromium import page_files, walk_lesson
from .classroom_report import report
from .classroom_costs import cost_phase
from .common import (LOGS, SETTLE_S, Timing, app_env, capped, command, cores, cpu_s, export_ref, head, load, own_loop,
                     save, temp_folder, wait_idle, watch_rss)
from .trained_length import load_real_model, real_model_folder
from .browser import HTTP_TIMEOUT_S, KEEP_ALIVE_S, Page
from .students import (ACTIONS, ARRIVAL_S, REAL_MODELS, REAL_SHARE, SETTLED_S, THINK_S, RealModel, Student,
                       Tally, real_actions)



async def student(index: int, base: str, seed: int, start: float, duration_s: float, tally: Tally,
                  files: tuple[str, ...] = (), mix: dict[str, int] = ACTIONS, patience_s: float | None = None,
                  real: tuple[RealModel, ...] = (REAL_MODELS["opus-mt-random"],), pid: int | None = None,
                  keep_alive_s: float = KEEP_ALIVE_S):
    """One student (a coroutine): arrives within ARRIVAL_S, opens the page, then acts until the time is up; its
    browser keeps an idle connection `keep_alive_s`."""
    rng = random.Random(seed * 1000 + index)
    deadline = start + duration_s
    await asyncio.sleep(rng.uniform(0, ARRIVAL_S))
    page = Page(base, patience_s, keep_alive_s=keep_alive_s)
    try:
        try:
            t0 = time.perf_counter()
            me = Student(page, rng, real)
            await me.open(files)  # GET /, its files and the config, as a browser fetches them
            tally.record("open", time.perf_counter() - t0, None, me.estimations, me.requests)
            tally.opened(cpu_s(pid))
        except (OSError, RuntimeError, KeyError, IndexError, ValueError, asyncio.TimeoutError) as error:
            tally.record("open", time.monotonic() - start, f"{type(error).__name__}: {error}")  # aiohttp's: OSError
            return
        while True:
            think = rng.uniform(*THINK_S)
            if time.monotonic() + think > deadline:
                break
            await asyncio.sleep(think)
            action = rng.choices(list(mix), weights=list(mix.values()))[0]
            t0 = time.perf_counter()
            try:
                seconds, wrong = await me.act(action)
            except (OSError, RuntimeError, KeyError, IndexError, TypeError, ValueError, asyncio.TimeoutError) as error:
                seconds, wrong = time.perf_counter() - t0, f"{type(error).__name__}: {error}"
            tally.record(action, seconds, wrong, me.estimations, me.requests)
            if action == "lesson" and wrong is None and me.real_step:
                tally.real_steps.append(seconds)
    finally:
        tally.resent += page.resent
        await page.close()


def run_class(base: str, students: int, duration_s: float, seed: int, files: tuple[str, ...] = (),
              mix: dict[str, int] = ACTIONS, patience_s: float | None = None,
              real: tuple[RealModel, ...] = (REAL_MODELS["opus-mt-random"],), pid: int | None = None,
              keep_alive_s: float = KEEP_ALIVE_S) -> dict:
    """`students` students (coroutines of one event loop) for `duration_s` against the app at `base`, each opening the
    page with `files`; per action: count, errors, p50, p95, events sent. `patience_s`: a student gives up on an answer
    this late (an error). `pid`: the server's, for its CPU while the class arrived and over the class (with this
    process's: the simulated students). `keep_alive_s`: how long each student's browser keeps an idle connection."""
    return own_loop(_class(base, students, duration_s, seed, files, mix, patience_s, real, pid, keep_alive_s))


async def _class(base, students, duration_s, seed, files, mix, patience_s, real, pid, keep_alive_s) -> dict:
    tally = Tally()
    start, client_cpu, server_cpu = time.monotonic(), time.process_time(), cpu_s(pid)
    tally.opened(server_cpu)
    tasks = [asyncio.ensure_future(student(i, base, seed, start, duration_s, tally, files, mix, patience_s, real, pid,
                                           keep_alive_s)) for i in range(students)]
    by_third = asyncio.ensure_future(_cpu_by_third(pid, duration_s, tally))
    _, hung = await asyncio.wait(tasks, timeout=max(1.0, start + duration_s + ARRIVAL_S + 3 * HTTP_TIMEOUT_S
                                                    - time.monotonic()))
    for task in hung:
        task.cancel()
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
            "real_steps": Timing(tally.real_steps).to_dict() if tally.real_steps else {},
            "error_examples": tally.examples, "error_messages": tally.messages, "hung": len(hung),
            "resent": tally.resent, "keep_alive_s": keep_alive_s,
            "drain_s": max(0.0, tally.last_answer - (start + duration_s)),
            "server_cpu_s": cpu_s(pid) - server_cpu, "client_cpu_s": time.process_time() - client_cpu,
            "server_ms_by_third": await by_third,
            # the arrival: from the class's start to the last opening answered, and the CPU each side spent in it
            "arrival": {"s": tally.last_open[0] - start, "client_cpu_s": tally.last_open[1] - client_cpu,
                        "server_cpu_s": tally.last_open[2] - server_cpu}}


async def _cpu_by_third(pid: int | None, duration_s: float, tally: Tally) -> list[float]:
    """The server's CPU per answer (openings included) in each third of the class: whether an answer costs more as a
    lecture goes on (a server's state grows with the answers it gave)."""
    marks = [(cpu_s(pid), sum(map(len, tally.seconds.values())))]
    for _ in range(3):
        await asyncio.sleep(duration_s / 3)
        marks.append((cpu_s(pid), sum(map(len, tally.seconds.values()))))
    return [1e3 * (c1 - c0) / max(1, n1 - n0) for (c0, n0), (c1, n1) in zip(marks, marks[1:])]


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


def serve_and_run(name: str, cwd: Path, students: int, duration_s: float, seed: int, log_dir: Path,
                  live: bool = False, with_files: bool = True, real: int | None = None, real_score: int = 0,
                  real_model: tuple[str, ...] = ("opus-mt-random",),
                  full_budget: bool = False, pin: bool = True, walk: bool = True, share: int | None = None,
                  keep_alive_s: float = KEEP_ALIVE_S) -> dict:
    """Start `python app.py` in cwd (its own package on PYTHONPATH; pinned to a core of its own unless `pin` is off),
    let it settle, run the class (with live training in the background when `live`; with the real models set up
    when `real` is a share, 0 included, and among the choices in that share of the actions, their budget a trained
    model's length unless `full_budget`: benchmarks.trained_length),
    then on the quiet server the lesson walked in Chromium (`walk`), stop it. `students` 0: no class. `share`: the
    server's core capped at that percent of its time (common.capped: a slower core)."""
    temp = Path(tempfile.mkdtemp(prefix=f"attention_viz-classroom-{name}-"))
    env = app_env(cwd, temp)
    argv = [sys.executable, "app.py"]
    if real is not None:
        folders = [str(real_model_folder(temp, key)) for key in real_model]
        # set up as for a class (a Space's default): the lesson's real steps computed at start, before it arrives
        env |= {"ATTENTION_VIZ_HUB_MODELS": ",".join(folders), "HF_HUB_OFFLINE": "1", WARM_REAL_ENV: "1"}
        argv = argv if full_budget else [sys.executable, "-m", "benchmarks.trained_length"]
    prefix, own, where = cores() if pin else ([], None, "not pinned (--no-pin)")
    if share is not None:
        prefix, capping = capped(prefix, share, f"attention_viz-classroom-{name}")
        where += f"; {capping}"
    before = os.sched_getaffinity(0)
    try:
        with Server(prefix + argv, log_dir / f"classroom-{name}.log", env=env, cwd=cwd) as server, \
                httpx.Client(timeout=30) as http:
            startup = server.wait_http(http, timeout_s=300)
            time.sleep(SETTLE_S)
            real_load_s = sum(load_real_model(server.base, REAL_MODELS[key].name) for key in real_model) \
                if real is not None else None
            real_warm_s = wait_idle(server.pid) if real is not None else None  # the lesson's real steps computed
            files = page_files(server.base) if with_files else ()
            time.sleep(2.0)  # that opening's own work on the server out of the way
            if own:
                os.sched_setaffinity(0, own)  # the class on the other core
            result: dict = {"cores": where}
            stop, outcomes, rss = threading.Event(), [], []
            trainer = threading.Thread(target=train_live, args=(server.base, stop, outcomes), daemon=True)
            if live:
                trainer.start()
            watcher = threading.Thread(target=watch_rss, args=(server.pid, stop, rss), daemon=True)
            watcher.start()
            mix = real_actions(real, real_score, real_model) if real else ACTIONS
            if students:
                result |= run_class(server.base, students, duration_s, seed, files, mix,
                                    real=tuple(REAL_MODELS[key] for key in real_model), pid=server.pid,
                                    keep_alive_s=keep_alive_s)
            stop.set()
            watcher.join()
            result["rss_mib"] = rss
            if live:
                trainer.join(timeout=3 * HTTP_TIMEOUT_S)
            if with_files and walk:  # after the class (the class meets the lesson's steps uncached), on the quiet server
                time.sleep(2.0)
                with ThreadPoolExecutor(max_workers=1) as pool:  # Playwright's sync API: a thread of its own
                    result["lesson_walk"] = pool.submit(walk_lesson, server.base).result()
            result |= {"startup_s": startup, "app_alive": server.process.poll() is None, "load_after": load(),
                       "page_files": len(files), "real_load_s": real_load_s,
                       "real_warm_s": real_warm_s,
                       "live_runs": outcomes if live else None}
            return result
    finally:
        os.sched_setaffinity(0, before)
        shutil.rmtree(temp, ignore_errors=True)


def run(students: int = 30, duration_s: float = 75.0, against: str | None = None, seed: int = 0,
        live: bool = False, with_files: bool = True, real: int | None = None, real_score: int = 0,
        real_model: str | tuple[str, ...] = ("opus-mt-random",), full_budget: bool = False, ref_first: bool = False,
        pin: bool = True, cost: bool = True, walk: bool = True, share: int | None = None,
        keep_alive_s: float = KEEP_ALIVE_S) -> dict:
    """The class against this tree's app and (with `against`) against that git ref's app, one after the other
    (`ref_first`: the ref's first), each with the machine to itself; `live`: with live training in the background
    (this tree's app only: a ref may not have it). Then (`cost`) the server's CPU per answer by kind, every app up
    at once and measured in turn (benchmarks.classroom_costs). `share`: each class's server on a core capped at
    that percent of its time (a slower core); the cost phase's are not capped (a cap leaves the CPU per answer)."""
    log_dir = LOGS
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    result: dict = {"students": students, "duration_s": duration_s, "seed": seed, "load_before": load(),
                    "apps": {}, "names": {"this": f"this tree ({head()}{', modified' if dirty else ''})"},
                    "order": ["ref", "this"] if against and ref_first else ["this", "ref"] if against else ["this"]}
    result["with_files"] = with_files
    real_model = (real_model,) if isinstance(real_model, str) else tuple(real_model)  # one key, or several
    result["real"], result["real_score"], result["real_model"] = real, real_score, list(real_model)
    result["full_budget"] = full_budget
    with temp_folder("attention_viz-ref-") as folder:
        trees = {"this": ROOT}
        if against:
            commit = export_ref(against, folder / "tree")
            result["names"]["ref"] = f"{against} ({commit[:7]})"
            trees["ref"] = folder / "tree"
        for key in result["order"]:
            if not students and not walk:  # nothing to do on the app alone
                result["apps"][key] = {"cores": cores()[2] if pin else "not pinned (--no-pin)"}
            elif key == "this":
                result["apps"]["this"] = serve_and_run("this", ROOT, students, duration_s, seed, log_dir, live,
                                                       with_files, real, real_score, real_model,
                                                       full_budget, pin, walk, share, keep_alive_s)
            else:
                result["apps"]["ref"] = serve_and_run("ref", trees["ref"], students, duration_s, seed, log_dir,
                                                      with_files=with_files, pin=pin, walk=walk, share=share,
                                                      keep_alive_s=keep_alive_s)
        if cost:
            order = {key: trees[key] for key in result["order"]}  # the first round in the classes' order
            for key, its_costs in cost_phase(order, seed, log_dir, with_files, pin).items():
                result["apps"][key]["costs"] = its_costs
    result["load_after"] = load()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = command("classroom", __doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    result = run_from(parser, args)
    save("classroom", result, args.out, report=report)
    return 0 if all(app.get("errors", 0) == 0 and not app.get("hung") for app in result["apps"].values()) else 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--students", type=int, default=30, help="0: no class, the cost of each answer only")
    parser.add_argument("--duration-s", type=float, default=75.0)
    parser.add_argument("--against", default=None, help="a git ref whose app runs the same class (after this one)")
    parser.add_argument("--ref-first", action="store_true", help="with --against: the ref's app first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pin", action="store_true",
                        help="leave the server and the class on every core (default: one core each, by taskset)")
    parser.add_argument("--no-cost", action="store_true", help="skip the cost of each kind of answer")
    parser.add_argument("--no-walk", action="store_true", help="skip the lesson walked in Chromium")
    parser.add_argument("--live", action="store_true", help="train live in the background for the whole class")
    parser.add_argument("--server-share", type=int, default=None, metavar="PERCENT",
                        help="the class's server on a core capped at PERCENT of its time (a CPU cgroup; needs root): "
                             "a core that many times slower, as a Space's may be")
    parser.add_argument("--real", type=int, nargs="?", const=REAL_SHARE, default=None, metavar="PERCENT",
                        help="a real model set up on the server (opus-mt-en-de's configuration, random weights; the "
                             "lesson's real steps computed at start) and among the choices, run by PERCENT of the "
                             f"actions (default {REAL_SHARE}; 0: set up, the teaching mix as it is)")
    parser.add_argument("--real-model", default="opus-mt-random", metavar="|".join(sorted(REAL_MODELS)),
                        help="with --real, which (comma-separated for several, the share split between them): "
                             "opus-mt-en-de's configuration with random weights (default), or the trained "
                             "all-MiniLM-L6-v2 (an encoder; devtools.trained_models)")
    parser.add_argument("--full-budget", action="store_true",
                        help="with --real: the random opus-mt writes the app's whole budget (1.5 x its source + 10, "
                             "the worst case) instead of a trained model's length (benchmarks.trained_length)")
    parser.add_argument("--real-score", type=int, default=0, metavar="PERCENT",
                        help="with --real, PERCENT of the actions score every head of the real model (from the steps)")
    parser.add_argument("--keep-alive-s", type=float, default=KEEP_ALIVE_S, metavar="SECONDS",
                        help=f"how long each student's browser keeps an idle connection (default {KEEP_ALIVE_S:g}, "
                             "under uvicorn's own 5 s; aiohttp keeps them 15 s, proxies often 60 s)")
    parser.add_argument("--no-files", action="store_true",
                        help="students fetch the page's HTML only, not Gradio's files")


def run_from(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    """Check the options (parser.error on a wrong one), then run."""
    models = tuple(dict.fromkeys(key.strip() for key in args.real_model.split(",") if key.strip()))
    if not models or not set(models) <= set(REAL_MODELS):
        parser.error(f"--real-model: one or more of {', '.join(sorted(REAL_MODELS))}, comma-separated")
    if not (0 <= args.students <= 1000 and 5 <= args.duration_s <= 1800):
        parser.error("students 0..1000, duration 5..1800 s")
    if args.real is not None and args.against:
        parser.error("--real runs this tree's app only (a ref may not have real models)")
    if not 0.5 <= args.keep_alive_s <= 600:
        parser.error("--keep-alive-s: 0.5..600 seconds")
    if args.server_share is not None and not 5 <= args.server_share <= 100:
        parser.error("--server-share: 5..100 percent")
    if args.real is not None and not 0 <= args.real <= 50:
        parser.error("--real: 0..50 percent")
    if args.real_score and not args.real or not 0 <= args.real_score <= 15:
        parser.error("--real-score needs --real, and 0..15 percent")
    if args.real_score and not any(REAL_MODELS[key].writes_text for key in models):
        parser.error("--real-score needs a model that writes text: all-MiniLM-L6-v2 is an encoder")
    return run(args.students, args.duration_s, args.against, args.seed, args.live, not args.no_files, args.real,
               args.real_score, models, args.full_budget, args.ref_first, not args.no_pin,
               not args.no_cost, not args.no_walk, args.server_share, args.keep_alive_s)


if __name__ == "__main__":
    sys.exit(main())
