"""The classroom benchmark's cost phase (benchmarks.classroom): the server's CPU per answer by kind, every app of the
run started afresh at once, pinned to the same core, and measured in turn in rounds; last in each turn the mix
itself, each page's answers drawn from it as a class asks them. `python -m benchmarks classroom --students 0
--against REF` runs it alone."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from attention_viz.server.liveness import HEALTH_PATH
from devtools.launcher import Server

from .classroom_chromium import page_files
from .common import SETTLE_S, app_env, cores, cpu_s, own_loop, temp_folder
from .browser import Page
from .students import ACTIONS, Student

COST_PAGES = 8    # the cost of each kind of answer: this many pages open, then each asks COST_ACTIONS of one kind,
COST_ACTIONS = 8  # in each of COST_ROUNDS rounds (every app in turn)
COST_ROUNDS = 6
MIXED = "mixed"   # the cost phase's last window: the mix itself, each page's answers drawn from it
OUTSIDE = "outside"  # for scale: a request outside Gradio's queue, through the same middleware (GET /healthz)
OUTSIDE_GETS = 25    # this many a page for each answer of a kind: /proc counts CPU in 10 ms ticks, a GET takes ~0.3 ms
IDLE_S = 2.0      # the server's idle CPU is measured this long first (and taken off each window)


def costs(apps: dict[str, tuple[str, int | None]], files: dict[str, tuple[str, ...]], mix: dict[str, int] = ACTIONS,
          seed: int = 0, pages: int = COST_PAGES, per_page: int = COST_ACTIONS, rounds: int = COST_ROUNDS) -> dict:
    """The server's CPU per answer, one kind at a time, on quiet servers: `apps` name -> (base URL, server pid), all
    up at once on the same core, measured in `rounds` rounds, each round visiting every app in turn (the order
    reversed every other round), so that each app meets the same machine. In an app's turn `pages` fresh pages open
    (two at a time: the opening's cost; `files[name]` the files each fetches), then, per kind of the mix, each page
    does `per_page` of it back to back, all pages at once. A window's cost: the server's CPU (/proc/<pid>/stat) over
    it, less what that server spends idle over as long, over the answers. Per kind: the median of the rounds and
    each round's; the mix's average weighs each kind's median by its share. Last in each turn, "mixed": each page
    does `per_page` answers drawn from the mix by its shares, the mix's cost as a class asks it, one answer at a time
    (the pages in turn), each answer's CPU kept by its kind ("by_kind": where the mix's time goes). For scale, before
    it, "outside": each page's `per_page` x OUTSIDE_GETS GETs of /healthz, a request through the same middleware
    but no queue. Answers name -> that app's costs."""
    return own_loop(_costs(apps, files, mix, seed, pages, per_page, rounds))


async def _app_turn(base: str, pid: int | None, files: tuple[str, ...], mix: dict[str, int], seed: int, pages: int,
                    per_page: int, idle: float) -> dict[str, dict]:
    """One app's turn of a round (benchmarks.classroom_costs.costs): kind -> answers, errors, CPU ms per answer."""
    students = [Student(Page(base), random.Random(seed * 1000 + 500 + i)) for i in range(pages)]
    kinds: dict[str, dict] = {}
    try:
        async def window(name: str, count) -> None:
            """A window of answers (`count(errors)` asks them and says how many) and the server's CPU over it."""
            errors: list[str] = []
            t0, c0 = time.monotonic(), cpu_s(pid)
            n = await count(errors)
            cpu = cpu_s(pid) - c0 - idle * (time.monotonic() - t0)
            kinds[name] = {"n": n, "errors": errors, "cpu_ms": 1e3 * cpu / max(1, n)}

        lock = asyncio.Semaphore(2)

        async def opening(s: Student, errors: list) -> int:
            async with lock:
                try:
                    await s.open(files)
                    return 1
                except (OSError, RuntimeError, KeyError, ValueError) as error:
                    errors.append(f"{type(error).__name__}: {error}")
                    return 0

        async def every_page(work, errors: list) -> int:
            return sum(await asyncio.gather(*(work(s, errors) for s in students)))

        await window("open", lambda errors: every_page(opening, errors))

        async def answer(s: Student, kind: str, errors: list) -> None:
            try:
                _, wrong = await s.act(kind)
            except (OSError, RuntimeError, KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
                wrong = f"{type(error).__name__}: {error}"
            if wrong:
                errors.append(wrong)

        async def acts(s: Student, errors: list, kind: str) -> int:
            for _ in range(per_page):
                await answer(s, kind, errors)
            return per_page

        for kind in mix:
            await window(kind, lambda errors, kind=kind: every_page(lambda s, e: acts(s, e, kind), errors))

        async def outside(s: Student, errors: list) -> int:
            for _ in range(per_page * OUTSIDE_GETS):
                try:
                    await s.browser.get(HEALTH_PATH)
                except (OSError, RuntimeError) as error:
                    errors.append(f"{type(error).__name__}: {error}")
            return per_page * OUTSIDE_GETS

        await window(OUTSIDE, lambda errors: every_page(outside, errors))
        # then the mix as a class asks it: each page's answers drawn from the mix by its shares (a kind asked alone
        # meets the caches its own last answers left; in a class a rerun's new text meets none, and a head a student
        # switched off stays off for its next reruns), one answer at a time, each answer's CPU kept by its kind
        draws = [random.Random(seed * 1000 + 900 + i) for i in range(len(students))]
        by_kind: dict[str, list[float]] = {kind: [] for kind in mix}

        async def one_at_a_time(errors: list) -> int:
            for i in range(len(students) * per_page):
                kind = draws[i % len(students)].choices(list(mix), weights=list(mix.values()))[0]
                t0, c0 = time.monotonic(), cpu_s(pid)
                await answer(students[i % len(students)], kind, errors)
                by_kind[kind].append(cpu_s(pid) - c0 - idle * (time.monotonic() - t0))
            return len(students) * per_page

        await window(MIXED, one_at_a_time)
        kinds[MIXED]["by_kind"] = by_kind
    finally:
        for s in students:
            await s.browser.close()
    return kinds


async def _costs(apps, files, mix, seed, pages, per_page, rounds) -> dict:
    await asyncio.sleep(1.0)
    pids = {name: pid for name, (_, pid) in apps.items()}
    t0, c0 = time.monotonic(), {name: cpu_s(pid) for name, pid in pids.items()}
    await asyncio.sleep(IDLE_S)
    idle = {name: (cpu_s(pid) - c0[name]) / (time.monotonic() - t0) for name, pid in pids.items()}  # CPU/s, idle
    turns: dict[str, list[dict]] = {name: [] for name in apps}
    order = list(apps)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            base, pid = apps[name]
            turns[name].append(await _app_turn(base, pid, files.get(name, ()), mix, seed + r, pages, per_page,
                                               idle[name]))
    result = {}
    for name, rounds_of in turns.items():
        kinds = {}
        for kind in rounds_of[0]:
            each = [turn[kind] for turn in rounds_of]
            errors = [error for turn in each for error in turn["errors"]]
            kinds[kind] = {"n": sum(turn["n"] for turn in each), "errors": len(errors), "examples": errors[:3],
                           "cpu_ms": statistics.median(turn["cpu_ms"] for turn in each),
                           "rounds_ms": [round(turn["cpu_ms"], 2) for turn in each]}
        mixed = kinds.pop(MIXED)
        samples = {kind: [s for turn in rounds_of for s in turn[MIXED]["by_kind"][kind]] for kind in mix}
        total = sum(sum(s) for s in samples.values()) or 1.0
        # a mean, not a median: /proc counts CPU in ticks of 10 ms, so one answer's reads 0, 10 or 20 ms
        mixed["by_kind"] = {kind: {"n": len(s), "cpu_ms": 1e3 * statistics.mean(s) if s else None,
                                   "share": sum(s) / total} for kind, s in samples.items()}
        mixes = [sum(turn[k]["cpu_ms"] * w for k, w in mix.items()) / sum(mix.values()) for turn in rounds_of]
        result[name] = {"mixed": mixed, "idle_cpu_ms_per_s": idle[name] * 1e3, "pages": pages, "per_page": per_page,
                        "rounds": rounds, "order": order, "kinds": kinds,
                        "mix_cpu_ms": sum(kinds[k]["cpu_ms"] * w for k, w in mix.items()) / sum(mix.values()),
                        "mix_rounds_ms": [round(m, 2) for m in mixes]}
    return result


def cost_phase(trees: dict[str, Path], seed: int, log_dir: Path, with_files: bool = True, pin: bool = True) -> dict:
    """Every tree's app started at once (each `python app.py` in its tree, pinned to the server's core unless `pin`
    is off, the measuring loop on the other), settled, then costs over them all, interleaved:
    name -> its costs."""
    prefix, own, _ = cores() if pin else ([], None, "")
    before = os.sched_getaffinity(0)
    with ExitStack() as stack, httpx.Client(timeout=30) as http:
        servers = {}
        for name, tree in trees.items():
            temp = Path(stack.enter_context(temp_folder(f"attention_viz-cost-{name}-")))
            servers[name] = stack.enter_context(Server(prefix + [sys.executable, "app.py"],
                                                       log_dir / f"classroom-cost-{name}.log",
                                                       env=app_env(tree, temp), cwd=tree))
        for server in servers.values():
            server.wait_http(http, timeout_s=300)
        time.sleep(SETTLE_S)
        files = {name: page_files(server.base) if with_files else () for name, server in servers.items()}
        time.sleep(2.0)  # those openings' own work out of the way
        try:
            if own:
                os.sched_setaffinity(0, own)
            return costs({name: (server.base, server.pid) for name, server in servers.items()}, files, ACTIONS, seed)
        finally:
            os.sched_setaffinity(0, before)
