"""Head importance on the shipped reverse model: how long the grid of every head and the prune curve take.

`python -m benchmarks.importance [--texts 50,100,200] [--rounds 3] [--threads 1] [--real]`

attention_viz.importance.head_importance on the first N of reverse's held-out strings: every head switched off
alone (24 variants and the baseline) and the prune curve (24 more), batched as per-row gates in one teacher-forced
pass each (the encoder once per distinct set of encoder heads off), and Michel's estimate from one backward pass.
Medians of `rounds`, one torch thread as the server runs. `--real` also times the same on the opus-mt-en-de
configuration with random weights (6 + 6 layers, 8 heads: 144 heads) on one 32-token source writing 32 tokens
(log-probability of its own output; 2 threads; the encoder once per distinct set of encoder heads off). Never
asserted on in tests.
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


def real(threads: int = 2, rounds: int = 1) -> dict:
    """attention_viz.importance.real_head_importance on the opus-mt-en-de configuration (benchmarks.hub.build)."""
    from attention_viz.importance import real_head_importance

    from .hub import build, inputs

    torch.set_num_threads(threads)
    model, _, _ = build(alone=True)
    src, _ = inputs(32)
    model.encode = lambda text: type("Encoding", (), {"ids": src[0]})()  # the benchmark's 32 ids, whatever the text
    seconds = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = real_head_importance(model, ["32 random pieces"], max_new_tokens=32, chunk=8)
        seconds.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(seconds), "heads": result.total, "threads": threads}


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
    parser.add_argument("--real", action="store_true", help="also the opus-mt-en-de configuration (144 heads)")
    args = parser.parse_args(argv)
    print(report(run(tuple(int(x) for x in args.texts.split(",")), args.rounds, args.threads)))
    if args.real:
        r = real()
        print(f"\nopus-mt-en-de's configuration, random weights, {r['heads']} heads, one 32-token source writing 32 "
              f"tokens, {r['threads']} threads: grid + gradient + prune curve {r['median_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
