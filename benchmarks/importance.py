"""Head importance on the shipped reverse model: how long the grid of every head and the prune curve take.

`python -m benchmarks.importance [--texts 50,100,200] [--rounds 3] [--threads 1]`

attention_viz.importance.head_importance on the first N of reverse's held-out strings: every head switched off
alone (24 variants and the baseline) and the prune curve (24 more), batched as per-row gates in one teacher-forced
pass each (the encoder once per distinct set of encoder heads off), and Michel's estimate from one backward pass.
Medians of `rounds`, one torch thread as the server runs. Never asserted on in tests.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from .common import load, table


def run(texts=(50, 100, 200), rounds: int = 3, threads: int = 1) -> dict:
    import attention_viz as av

    torch.set_num_threads(threads)
    model, _ = av.load_model("reverse")
    rows = []
    for n in texts:
        seconds, result = [], None
        for _ in range(rounds):
            t0 = time.perf_counter()
            result = av.head_importance(model, "reverse", n_texts=n)
            seconds.append(time.perf_counter() - t0)
        rows.append({"texts": n, "median_s": statistics.median(seconds), "baseline": result.baseline,
                     "can_go": result.can_go(), "heads": result.total, "agreement": result.agreement})
    return {"rows": rows, "threads": threads, "load": load()}


def report(result: dict) -> str:
    return (f"reverse (d_k 16: 2 + 2 layers, 4 heads, 24 heads in all), torch threads {result['threads']}, "
            f"load {result['load']}\n\n" + table(
                ["held-out strings", "grid + prune curve + gradient (s)", "exact match", "heads that can go (<= 1 point)",
                 "Spearman ρ (loss rise, gradient)"],
                [[r["texts"], f"{r['median_s']:.2f}", f"{r['baseline']:.3f}", f"{r['can_go']} of {r['heads']}",
                  f"{r['agreement']:.2f}"] for r in result["rows"]]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.importance", description=__doc__.splitlines()[0])
    parser.add_argument("--texts", default="50,100,200")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    print(report(run(tuple(int(x) for x in args.texts.split(",")), args.rounds, args.threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
