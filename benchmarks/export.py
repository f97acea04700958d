"""Export as a person meets it: the Export button pressed on the view on screen, the seconds until its first files
are listed and until every file is, on the shipped reverse model and on the trained all-MiniLM-L6-v2.

    python -m benchmarks export [--against main] [--rounds 5] [--no-real]

Every app of the run (this tree's, and REF's with --against) is up at once, a page open on each (benchmarks.browser,
the page's protocol); the rounds alternate between them, the order reversed every other round, so that both meet the
same machine. Each round, on each model, types a new one-word text (the MiniLM reads it as 3 tokens: [CLS] word
[SEP]) and makes its run (untimed: the view is on screen before Export is pressed), then presses Export on another
head: the button's event (its answer is the first list of files) and the events chained on its success, as the page
runs them (the last answer the whole list). One round first on each app and model, untimed, loads the real model.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from contextlib import ExitStack

import httpx

from devtools.launcher import ROOT, Server

from .browser import Page
from .common import LOGS, RESULTS_DIR, app_env, export_ref, own_loop, percentile, table, temp_folder, write_json
from .students import Student

WORDS = ("hello", "world", "paper", "class", "model", "token", "layer", "heads", "query", "value", "print", "water")
MINILM = "all-MiniLM-L6-v2"


class Exporter:
    """One app's page: a model's run made, then Export pressed on a head of it."""

    def __init__(self, name: str, base: str) -> None:
        self.name, self.base = name, base
        self.student: Student | None = None

    async def open(self) -> None:
        self.student = Student(Page(self.base, timeout_s=600), random.Random(0))
        await self.student.open()
        deps, ids = self.student.dependencies, self.student.ids
        self.click = next(d for d in deps if d.get("backend_fn") and [ids["export_button"], "click"]
                          in [list(t) for t in d["targets"]])
        self.chained = [d for d in deps if d.get("trigger_after") == self.click["id"] and d.get("backend_fn")
                        and d.get("queue") is not False]

    async def close(self) -> None:
        await self.student.browser.close()

    async def export(self, model: str, text: str, layer: int, head: int) -> dict:
        """The run of `text` on `model` made, then Export on (encoder.self_attn, layer, head): seconds to the first
        list of files and to the last, and how many each holds."""
        s = self.student
        s.values[s.ids["model"]], s.values[s.ids["text"]] = model, text
        await s.call(s.real_run if model.startswith("hub:") else s.api["visualize"], "text")
        s.values.update({s.ids["kind"]: "encoder.self_attn", s.ids["layer"]: layer, s.ids["head"]: head})
        t0 = time.perf_counter()
        first, completed = await s.browser.call(self.click, s.values, s.ids["export_button"])
        lists = [completed["output"]["data"][0]]
        for dep in self.chained:
            _, completed = await s.browser.call(dep, s.values, None)
            lists.append(completed["output"]["data"][0])
        every = time.perf_counter() - t0
        names = [sorted(str(f.get("orig_name")) for f in files or []) for files in lists]
        if not names[0] or not all(f"L{layer}_H{head}.csv" in " ".join(n) for n in names):
            raise RuntimeError(f"{self.name}: export on {model} listed {names}, not the files of L{layer}_H{head}")
        return {"first_s": first, "every_s": every, "first_files": len(names[0]), "files": len(names[-1])}


async def measure(apps: list[Exporter], models: dict[str, tuple[str, int, int]], rounds: int) -> dict:
    """Each round, every app and model in turn (the order of the apps reversed every other round)."""
    for app in apps:
        await app.open()
    results = {(app.name, label): [] for app in apps for label in models}
    try:
        for r in range(-1, rounds):  # round -1: untimed (the real model loaded, the figures' fonts read)
            for app in (apps if r % 2 == 0 else apps[::-1]):
                for label, (model, layers, heads) in models.items():
                    answer = await app.export(model, WORDS[(r + 1) % len(WORDS)], (r + 1) % layers, (r + 2) % heads)
                    if r >= 0:
                        results[(app.name, label)].append(answer)
    finally:
        for app in apps:
            await app.close()
    return results


def report(results: dict) -> str:
    rows = []
    for (name, label), answers in results.items():
        first = [a["first_s"] for a in answers]
        every = [a["every_s"] for a in answers]
        rows.append([label, name, f"{percentile(first, 50):.2f} ({max(first):.2f})", answers[0]["first_files"],
                     f"{percentile(every, 50):.2f} ({max(every):.2f})", answers[0]["files"]])
    return table(["model", "app", "first files listed, s: median (max)", "files", "every file listed, s", "files"],
                 rows)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks export", description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=None, help="a git ref whose app is measured in the same rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-real", action="store_true", help="the shipped reverse model only (no MiniLM)")
    args = parser.parse_args(argv)
    hub: list[str] = []
    models = {"reverse (2 layers x 4 heads)": ("reverse/sqrt_dk", 2, 4)}
    if not args.no_real:
        from devtools.trained_models import minilm_folder

        hub = [str(minilm_folder())]
        models[f"{MINILM} (6 layers x 12 heads)"] = (f"hub:{MINILM}", 6, 12)
    env = {"ATTENTION_VIZ_HUB_MODELS": ",".join(hub), "HF_HUB_OFFLINE": "1"} if hub else {}
    print(f"# Export: the button pressed, {args.rounds} rounds" + (f", this tree against {args.against}"
                                                                    if args.against else ""))
    with temp_folder("attention_viz-export-") as folder:
        trees = [("this tree", ROOT)]
        if args.against:
            commit = export_ref(args.against, folder / "tree")
            trees.append((f"{args.against} ({commit[:7]})", folder / "tree"))
        apps = []
        with ExitStack() as servers, httpx.Client(timeout=30) as http:
            for i, (name, tree) in enumerate(trees):
                temp = folder / f"temp{i}"
                temp.mkdir()
                server = servers.enter_context(Server([sys.executable, "app.py"], LOGS / f"export-{i}.log",
                                                      env={**app_env(tree, temp), **env}, cwd=tree))
                server.wait_http(http, timeout_s=300)
                apps.append(Exporter(name, server.base))
            time.sleep(5.0)  # the warm-up threads' work out of the way
            results = own_loop(measure(apps, models, args.rounds))
    print(report(results))
    out = {"args": vars(args), "results": {f"{app} | {label}": answers for (app, label), answers in results.items()}}
    path = write_json(f"export-{time.strftime('%Y%m%d-%H%M%S')}", out, RESULTS_DIR)
    print(f"results in {path}")
    return out


if __name__ == "__main__":
    main()
