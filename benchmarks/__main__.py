"""One command for every benchmark.

    python -m benchmarks [--quick] [--only kernel,model,memory,explorer,page,hub] [--device auto|cpu|cuda]
    python -m benchmarks NAME [options]      # one benchmark (COMMANDS below); `python -m benchmarks NAME --help`

The first runs the default tables (kernel, model, memory, explorer; page and hub on request), interleaved, ours
and PyTorch's references in the same run, and writes everything measured to benchmarks/results/<time>.json and
latest.json. The second runs one benchmark with its own options: `classroom --students 300 --against REF` (a lecture
hall, the server on a core of its own, its CPU per answer by kind), `payloads --against REF` (every answer of a fixed
script byte for byte against REF's), `replicas`, `fairness`, `long`, `hub`, ...; docs/benchmarks.md
says what each measures and its latest table.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

DEFAULT_SECTIONS = ("kernel", "model", "memory", "explorer")
SECTIONS = (*DEFAULT_SECTIONS, "page", "hub")
# `python -m benchmarks NAME ...`: the module benchmarks.NAME's main(argv), with options of its own
COMMANDS = ("classroom", "payloads", "decode", "replicas", "fairness", "page", "explorer", "hub", "long",
            "importance", "trained", "live", "research", "longclass", "export", "modalities", "offload")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (under a minute)")
    parser.add_argument("--only", default=",".join(DEFAULT_SECTIONS),
                        help="comma-separated sections: " + ",".join(SECTIONS) + " (default all but page and hub)")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CPU tables, plus kernel and model on CUDA when a GPU is present; cpu or cuda: that one only",
    )
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads for kernel, model, memory")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)} "
                     f"(or run one benchmark: python -m benchmarks NAME, NAME one of {', '.join(COMMANDS)})")
    return args


def main(argv: list[str] | None = None) -> dict | int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in COMMANDS:
        return importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])
    args = parse_args(argv)
    import torch

    from . import kernel, model
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
    cpu_sections = {  # key: (title, run); each module imported only when asked, its report printed
        "memory": ("Memory, CPU", lambda m: m.run(args.quick, threads=args.threads)),
        "explorer": ("View changes in the browser (Chromium, performance marks)",
                     lambda m: m.run(10 if args.quick else 40, app=not args.quick)),
        "page": ("The page complete in the browser (Chromium, fresh openings)", lambda m: m.run(3 if args.quick else 10)),
        "hub": ("Real models: every map through our Eq. 1 against transformers' attention",
                lambda m: m.run(args.quick, threads=args.threads)),
    }
    for key, (title, run) in cpu_sections.items():
        if key in args.only and args.device != "cuda":
            module = importlib.import_module(f"benchmarks.{key}")
            section(title, key, lambda m=module, run=run: run(m), module.report)

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
    sys.exit(answer if isinstance(answer, int) else 0)
