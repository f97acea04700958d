"""Memory on a fixed workload: replay a load test's requests in one process and say what the caches hold.

`python -m benchmarks.replay TRACE [--code DIR] [--out DIR]`

TRACE is what `python -m benchmarks.load --trace TRACE` writes. Replaying one trace gives every commit the same
requests (a load test's own memory figure depends on its random mix), so two commits compare like for like
(`--code`: a worktree of another commit, whose attention_viz is imported). The requests go one at a time to the
functions the server calls (webui.handlers.Handlers), after the app's start-up; no Gradio, network or concurrency.
Reported: VmRSS at the start, after the 100th, 500th and last request, the requests after which it grew by 2 MiB or
more, and what each cache holds at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

from .common import rss_kib

COMPUTATION = ("text", "model", "dk", "scale", "factor", "causal", "padding", "pads", "d_model", "n_heads")
HEAD = ("kind", "layer", "head")
# endpoint -> the handler and the values (by elem_id) it takes, in order
CALLS = {
    "visualize": ("visualize", COMPUTATION + ("compatibility",)),
    "steps": ("steps", COMPUTATION + HEAD + ("compatibility",)),
    "compare": ("compare", COMPUTATION + HEAD + ("comparison", "compatibility")),
    "export": ("export", COMPUTATION + HEAD + ("colour", "compatibility")),
    "dk_lab": ("dk_lab", ("lab_dk", "lab_keys", "lab_scaled")),
    "model_controls": ("model_controls", ("model", "dk", "n_heads")),
}
GREW_MIB = 2.0


def rss_mib() -> float:
    return rss_kib()["VmRSS"] / 1024


def start_app():
    """Views and Handlers as app.py builds them, warmed up and frozen as the server is."""
    from attention_viz.service.limits import LAB_D_K, LAB_KEYS
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views
    from attention_viz.server import runtime
    from attention_viz.webui.handlers import Handlers, opening_settings

    runtime.tune_process()
    views = Views(Runs())
    handlers = Handlers(views)
    runtime.freeze_start_up_objects()
    views.warm_up(opening_settings(views), LAB_D_K, LAB_KEYS)
    return views, handlers


def replay(handlers, requests: list[dict]) -> tuple[list[dict], dict]:
    """Each request through its handler; VmRSS after each, and refusals counted by endpoint and exception (an older
    commit refuses, with gr.Error, what it lacks, such as a model added since)."""
    timeline, refused = [], {}
    for request in requests:
        endpoint = request["name"].split(":")[0]
        method, names = CALLS[endpoint]
        values = request["values"] or {}
        try:
            getattr(handlers, method)(*[values.get(name) for name in names])
        except Exception as error:  # noqa: BLE001 - counted and reported, not fatal
            what = f"{endpoint}: {type(error).__name__}"
            refused[what] = refused.get(what, 0) + 1
        timeline.append({"n": len(timeline) + 1, "endpoint": endpoint, "values": values, "rss": rss_mib()})
    return timeline, refused


def cache_report(views) -> list[list]:
    """[what, entries, MiB] for each cache the app keeps; a part an older commit lacks is left out."""
    import numpy as np
    import torch

    from attention_viz.core.model import Transformer
    from attention_viz.service.runs import Run

    def array_bytes(obj, seen: set) -> int:
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            return obj.nbytes
        if isinstance(obj, torch.Tensor):
            return obj.untyped_storage().nbytes()
        if isinstance(obj, dict):
            return sum(array_bytes(v, seen) for v in obj.values())
        if isinstance(obj, (list, tuple)):
            return sum(array_bytes(v, seen) for v in obj)
        return array_bytes(vars(obj), seen) if hasattr(obj, "__dict__") else 0

    gc.collect()
    rows = []
    runs = [o for o in gc.get_objects() if isinstance(o, Run)]
    rows.append(["runs (their maps)", len(runs), sum(array_bytes(r, set()) for r in runs) / 2**20])
    packed = getattr(views, "_packed", None)
    if hasattr(packed, "bytes"):
        rows.append(["packed runs (base64)", len(getattr(packed, "_kept", ())), packed.bytes / 2**20])
    untrained = getattr(views.runs.catalog, "_untrained", None)
    kept = getattr(untrained, "_kept", {})
    for key, (_, size) in kept.items():
        rows.append([f"untrained model d_model, heads, d_k = {', '.join(map(str, key))}", 1, size / 2**20])
    models = [o for o in gc.get_objects() if isinstance(o, Transformer)]
    trained = [m for m in models if all(m is not value for value, _ in kept.values())]
    rows.append(["trained checkpoints loaded", len(trained),
                 sum(p.numel() * p.element_size() for m in trained for p in m.parameters()) / 2**20])
    lab = getattr(views, "lab", None)
    for part in ("_histogram", "_query", "_sweep", "_numbers", "_samples"):
        info = getattr(getattr(lab, part, None), "cache_info", None)
        if info:
            rows.append([f"lab {part.strip('_')} (entries)", info().currsize, float("nan")])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks replay", description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="the file benchmarks.load --trace wrote")
    parser.add_argument("--code", default=None, help="a folder whose attention_viz to run (a worktree of a commit)")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    import attention_viz

    from .common import machine, save, table

    requests = json.loads(Path(args.trace).read_text())["requests"]
    info = machine(threads=1)
    print(f"# replay of {len(requests)} requests from {args.trace}; attention_viz from "
          f"{Path(attention_viz.__file__).parent.parent}; {info['cpu']}, {info['cores']} cores", flush=True)
    views, handlers = start_app()
    start = rss_mib()
    t0 = time.perf_counter()
    timeline, refused = replay(handlers, requests)
    wall = time.perf_counter() - t0
    at = {row["n"]: row["rss"] for row in timeline}
    last = timeline[-1]["n"]
    marks = [("at start (warmed up)", start)] + [(f"after {n} requests", at[n]) for n in (100, 500) if n in at]
    marks.append((f"after {last} requests", at[last]))
    grown = []
    previous = at.get(100, start)
    for row in timeline:
        if row["n"] > 100 and row["rss"] - previous >= GREW_MIB:
            grown.append(row | {"grew": row["rss"] - previous})
        previous = row["rss"]
    caches = cache_report(views)
    lines = [table(["VmRSS", "MiB"], [[name, f"{value:.1f}"] for name, value in marks]
                   + [[f"growth 100 -> {last}", f"{at[last] - at.get(100, start):+.1f}"]]),
             "", f"{len(requests)} requests in {wall:.0f} s; refused by this commit: {refused or 'none'}", "",
             f"requests after which VmRSS grew by {GREW_MIB:g} MiB or more (after the 100th):", "",
             table(["request", "grew MiB", "endpoint", "values"],
                   [[g["n"], f"{g['grew']:+.1f}", g["endpoint"], json.dumps(g["values"])[:110]]
                    for g in sorted(grown, key=lambda g: -g["grew"])[:10]]),
             "", "what the caches hold after the last request:", "",
             table(["cache", "entries", "MiB"], [[name, n, "" if size != size else f"{size:.1f}"]
                                                 for name, n, size in caches])]
    print("\n".join(lines), flush=True)
    save("replay", {"trace": args.trace, "code": str(Path(attention_viz.__file__).parent.parent), "machine": info,
                    "rss_mib": dict(marks), "refused": refused, "grew": grown, "caches": caches,
                    "timeline": [[row["n"], round(row["rss"], 2)] for row in timeline]}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
