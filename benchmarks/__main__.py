"""One command for every benchmark: `python -m benchmarks [--quick] [--only kernel,model,memory,app,explorer] [--device auto|cpu|cuda]`.

`python -m benchmarks classroom [--students 300] [--against 2d03545] [...]` runs a class of students on the app, the
server pinned to a core of its own (benchmarks/classroom.py; `python -m benchmarks classroom --help`), and
`python -m benchmarks payloads --against REF` checks that this tree's app answers a fixed script of requests as
REF's does, byte for byte (benchmarks/payloads.py).

`--only page` opens the app's page fresh 10 times and times it to the explorer's first drawn view
(benchmarks/page.py; not in the default set).

`--only hub` times a real model's maps through our Eq. 1 against transformers' own attention (benchmarks/hub.py;
not in the default set: it needs the hub extra).

`--only classroom [--students 30] [--duration-s 75] [--against main]` runs a class of students on the app
(benchmarks/classroom.py; not in the default set: it takes 1.5-3 minutes per app).

Prints Markdown tables and writes everything measured to benchmarks/results/<time>.json and
benchmarks/results/latest.json. Ours and PyTorch's references are measured in the same run,
interleaved, so their ratios hold even on a shared, noisy machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

DEFAULT_SECTIONS = ("kernel", "model", "memory", "app", "explorer")
SECTIONS = (*DEFAULT_SECTIONS, "page", "classroom", "hub")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (under a minute)")
    parser.add_argument("--only", default=",".join(DEFAULT_SECTIONS),
                        help="comma-separated sections: " + ",".join(SECTIONS) + " (default all but classroom)")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CPU tables, plus kernel and model on CUDA when a GPU is present; cpu or cuda: that one only",
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads for kernel, model, memory")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    parser.add_argument("--students", type=int, default=None, help="classroom: students (default 30, quick 5)")
    parser.add_argument("--duration-s", type=float, default=None, help="classroom: seconds per app (default 75, quick 20)")
    parser.add_argument("--against", default=None, help="classroom: also run the class against this git ref's app")
    args = parser.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    return args


COMMANDS = ("classroom", "payloads", "longclass")  # each with options of its own: `python -m benchmarks COMMAND --help`


def main(argv: list[str] | None = None) -> dict | int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        import importlib

        return importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])
    args = parse_args(argv)
    import torch

    from . import kernel, memory, model
    from .common import RESULTS_DIR, load, machine, write_json

    torch.set_num_threads(args.threads)
    info = machine(args.threads)
    results: dict = {"machine": info, "args": {k: v for k, v in vars(args).items()}, "sections": {}}
    print(f"# attention_viz benchmarks{' (quick)' if args.quick else ''}")
    print(
        f"machine: {info['cpu']}, {info['cores']} cores ({info['cpu_capability']}), torch {info['torch']} "
        f"with {args.threads} threads, gradio {info['gradio']}, Python {info['python']}; "
        f"load average {info['load_at_start']}"
    )
    started = time.perf_counter()

    def section(title: str, key: str, fn, report) -> None:
        print(f"\n## {title}  (load {load()})\n", flush=True)
        t0 = time.perf_counter()
        result = fn()
        result["seconds"] = time.perf_counter() - t0
        results["sections"][key] = result
        print(report(result), flush=True)

    devices = []
    if args.device in ("auto", "cpu"):
        devices.append(torch.device("cpu"))
    cuda_wanted = args.device in ("auto", "cuda") and {"kernel", "model"} & set(args.only)
    if cuda_wanted and torch.cuda.is_available():
        devices.append(torch.device("cuda"))

    for device in devices:
        label = "CPU" if device.type == "cpu" else f"GPU ({torch.cuda.get_device_name(0)})"
        if "kernel" in args.only:
            section(f"Kernel, {label}", f"kernel_{device.type}", lambda d=device: kernel.run(d, args.quick), kernel.report)
        if "model" in args.only:
            section(f"Model, {label}", f"model_{device.type}", lambda d=device: model.run(d, args.quick), model.report)
    if cuda_wanted and not torch.cuda.is_available():
        print("\n## Kernel and model, GPU\n\nno CUDA device: skipped")
        results["sections"]["gpu"] = {"skipped": "no CUDA device"}
    if "memory" in args.only and args.device != "cuda":
        section("Memory, CPU", "memory", lambda: memory.run(args.quick, threads=args.threads), memory.report)
    if "app" in args.only and args.device != "cuda":
        from . import app

        section("App latency over HTTP (Gradio queue protocol)", "app", lambda: app.run(args.quick), app.report)
    if "explorer" in args.only and args.device != "cuda":
        from . import explorer

        section("View changes in the browser (Chromium, performance marks)", "explorer",
                lambda: explorer.run(10 if args.quick else 40, app=not args.quick), explorer.report)
    if "page" in args.only and args.device != "cuda":
        from . import page

        section("The page complete in the browser (Chromium, fresh openings)", "page",
                lambda: page.run(3 if args.quick else 10), page.report)
    if "hub" in args.only and args.device != "cuda":
        from . import hub

        section("Real models: every map through our Eq. 1 against transformers' attention", "hub",
                lambda: hub.run(args.quick, threads=args.threads), hub.report)
    if "classroom" in args.only and args.device != "cuda":
        from . import classroom

        students = args.students or (5 if args.quick else 30)
        duration = args.duration_s or (20.0 if args.quick else 75.0)
        section(f"A class of {students} students", "classroom",
                lambda: classroom.run(students, duration, args.against), classroom.report)

    results["seconds"] = time.perf_counter() - started
    results["load_at_end"] = load()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_dir = RESULTS_DIR if args.out is None else __import__("pathlib").Path(args.out)
    path = write_json(f"run-{stamp}{'-quick' if args.quick else ''}", results, out_dir)
    write_json("latest", results, out_dir)
    print(f"\n{results['seconds']:.0f} s in all; load average at the end {results['load_at_end']}; results in {path}")
    return results


if __name__ == "__main__":
    answer = main()
    sys.exit(answer if isinstance(answer, int) else 0 if answer else 1)
