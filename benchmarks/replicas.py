"""Replicas: a class on one app process, then on two behind nginx with sticky sessions, then on two without.

`python -m benchmarks.replicas [--students 100] [--duration-s 60] [--replicas 2] [--patience-s 60] [--no-files]`

The class of benchmarks.classroom (same seed, students and actions) three times: `one` (python app.py, the students
straight at it), `sticky` (`--replicas` processes behind nginx routing by a cookie: devtools/proxy.py) and
`round_robin` (each request to the next process). All on this machine's cores, loopback only: the rows compare
set-ups, not a cluster. Errors are counted by what the student saw; nginx's log tells which processes answered each
browser. docs/deploy.md keeps the tables; tests/e2e/test_replicas.py asserts on errors and routes, never on times.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import httpx

from devtools.launcher import ROOT, Server
from devtools.proxy import Proxy, ensure_nginx

from .classroom import run_class
from .classroom_chromium import page_files
from .classroom_report import LABELS
from .common import SETTLE_S, command, load, ms, save, table

PHASES = {"one": "one process", "sticky": "{n} processes, nginx sticky (cookie)",
          "round_robin": "{n} processes, nginx round robin"}
# What a student saw, by the first pattern its error message holds (browser.Page's and common.EventStream's).
ERROR_KINDS = (("session not found", "the stream's process never saw the session (404 in the stream)"),
               ("answered another event", "the stream answered an earlier event of the session"),
               ("no answer in", "no answer: the stream stayed open, heartbeats only"),
               ("503", "queue full (503)"))


def error_kind(message: str) -> str:
    return next((kind for pattern, kind in ERROR_KINDS if pattern in message), "other: " + message[:120])


def start_apps(n: int, folder: Path, stack: ExitStack, settle_s: float = SETTLE_S,
               env: dict[str, str] | None = None) -> list[Server]:
    """n `python app.py` processes on free loopback ports, each with its own temporary folder (as pods have)."""
    servers = []
    for i in range(n):
        environ = {"PYTHONPATH": str(ROOT), "GRADIO_TEMP_DIR": str(folder / f"gradio-{i}"),
                   "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
        servers.append(stack.enter_context(Server([sys.executable, "app.py"], folder / f"app-{i}.log", env=environ)))
    with httpx.Client(timeout=30) as http:
        for server in servers:
            server.wait_http(http, timeout_s=300)
    time.sleep(settle_s)  # each app's warm-up thread done before the class arrives
    return servers


def alive(base: str) -> bool:
    """The app at `base` answers /healthz."""
    try:
        return httpx.get(base + "/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def routes_summary(proxy: Proxy) -> dict:
    """From the proxy's log: browsers seen, how many were answered by more than one process, requests per process."""
    routes = proxy.routes()
    per_replica: Counter = Counter()
    for line in (proxy.folder / "access.log").read_text().splitlines():
        per_replica[line.split(" ")[0]] += 1
    return {"browsers": len(routes), "browsers_on_several": sum(len(r) > 1 for r in routes.values()),
            "requests_per_replica": dict(per_replica)}


def summarise(phase: dict) -> dict:
    """Answers that came right, per second of the class; errors by kind."""
    answered = sum(a["n"] for a in phase["actions"].values())
    phase["ok_per_s"] = (answered - phase["errors"]) / phase["wall_s"]
    phase["error_kinds"] = dict(Counter(error_kind(m) for m in phase["error_messages"]))
    phase["students_refused_at_open"] = phase["actions"]["open"]["errors"]
    return phase


def run(students: int = 100, duration_s: float = 60.0, replicas: int = 2, seed: int = 0,
        patience_s: float = 60.0, with_files: bool = True, phases: tuple[str, ...] = tuple(PHASES),
        settle_s: float = SETTLE_S, app_env: dict[str, str] | None = None, bases: list[str] | None = None) -> dict:
    """The class against each of `phases` in turn, one after the other on this machine; `app_env`: more
    environment for the apps (the e2e test's GRADIO_HEARTBEAT_INTERVAL, so a hung stream is seen sooner); `bases`:
    the proxied phases' apps, already running (the e2e tests share theirs), instead of `replicas` started here."""
    ensure_nginx()
    folder = Path(tempfile.mkdtemp(prefix="attention_viz-replicas-"))
    result: dict = {"students": students, "duration_s": duration_s, "replicas": replicas, "seed": seed,
                    "patience_s": patience_s, "with_files": with_files, "load_before": load(), "phases": {}}
    files: tuple[str, ...] = ()
    try:
        if "one" in phases:
            with ExitStack() as stack:
                (app,) = start_apps(1, folder / "one", stack, settle_s, app_env)
                files = page_files(app.base) if with_files else ()
                time.sleep(2.0)  # that opening's own work out of the way
                result["phases"]["one"] = summarise(run_class(app.base, students, duration_s, seed, files,
                                                              patience_s=patience_s))
        proxied = [p for p in phases if p != "one"]
        if proxied:
            with ExitStack() as stack:
                apps = start_apps(replicas, folder / "replicas", stack, settle_s, app_env) if bases is None else []
                urls = bases if bases is not None else [a.base for a in apps]
                if with_files and not files:
                    files = page_files(urls[0])
                for name in proxied:
                    with Proxy(urls, folder / f"nginx-{name}", sticky=name == "sticky") as proxy:
                        phase = summarise(run_class(proxy.base, students, duration_s, seed, files,
                                                    patience_s=patience_s))
                        phase["routes"] = routes_summary(proxy)
                    phase["apps_alive"] = all(alive(url) for url in urls)
                    result["phases"][name] = phase
        result["page_files"] = len(files)
        result["load_after"] = load()
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(result: dict) -> str:
    """One row per set-up; the errors by kind; then each set-up's actions."""
    n = result["replicas"]
    head = (f"{result['students']} students, {result['duration_s']:.0f} s per set-up, think time 1.5-4 s, seed "
            f"{result['seed']}, patience {result['patience_s']:.0f} s; opening the page "
            + (f"fetches its {result['page_files']} files too" if result["with_files"] else "fetches the HTML only")
            + f"; load {result['load_before']} before, {result.get('load_after')} after")
    phases = result["phases"]
    one = phases.get("one")
    rows = []
    for name, phase in phases.items():
        every = phase["all"]
        routes = phase.get("routes")
        lab = phase["actions"]["lab_dk"]
        rows.append([PHASES[name].format(n=n), f"{phase['ok_per_s']:.1f}",
                     f"{phase['ok_per_s'] / one['ok_per_s']:.2f}x" if one and one["ok_per_s"] else "",
                     sum(a["n"] for a in phase["actions"].values()), phase["errors"],
                     f"{phase['students_refused_at_open']} / {phase['students']}",
                     ms(every["median_s"]) if every else "", ms(every["p95_s"]) if every else "",
                     ms(lab["p95_s"]) if lab["n"] else "",
                     f"{routes['browsers_on_several']} / {routes['browsers']}" if routes else "",
                     phase["hung"]])
    lines = [head, "", table(["set-up", "right answers/s", "vs one", "actions", "errors", "refused at opening",
                              "p50 ms", "p95 ms", "lab d_k p95 ms", "browsers on 2+ processes", "hung"], rows)]
    kinds = [[PHASES[name].format(n=n), kind, count] for name, phase in phases.items()
             for kind, count in sorted(phase["error_kinds"].items(), key=lambda kv: -kv[1])]
    if kinds:
        lines += ["", "What the students saw when an action failed:", "", table(["set-up", "error", "count"], kinds)]
    for name, phase in phases.items():
        rows = [[LABELS[action], a["n"], a["errors"], ms(a["median_s"]) if a["n"] else "",
                 ms(a["p95_s"]) if a["n"] else ""] for action, a in phase["actions"].items()]
        lines += ["", f"### {PHASES[name].format(n=n)}", "", table(["action", "count", "errors", "p50 ms", "p95 ms"],
                                                                  rows)]
        if phase.get("routes"):
            lines += ["", "requests per process: " + ", ".join(
                f"{upstream}: {count}" for upstream, count in sorted(phase["routes"]["requests_per_replica"].items()))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command("replicas", __doc__)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--patience-s", type=float, default=60.0, help="a student gives up on an answer this late")
    parser.add_argument("--only", default=",".join(PHASES), help="comma-separated: " + ",".join(PHASES))
    parser.add_argument("--no-files", action="store_true", help="students fetch the page's HTML only")
    args = parser.parse_args(argv)
    phases = tuple(p.strip() for p in args.only.split(",") if p.strip())
    if not (1 <= args.students <= 200 and 5 <= args.duration_s <= 1800 and 2 <= args.replicas <= 8) or \
            not set(phases) <= set(PHASES):
        parser.error("students 1..200, duration 5..1800 s, replicas 2..8, --only from " + ",".join(PHASES))
    result = run(args.students, args.duration_s, args.replicas, args.seed, args.patience_s, not args.no_files, phases)
    save("replicas", result, args.out, report=report)
    sticky = result["phases"].get("sticky")
    return 0 if sticky is None or (sticky["errors"] == 0 and not sticky["hung"]) else 1


if __name__ == "__main__":
    sys.exit(main())
