"""Training live, timed: `python -m benchmarks.live [--tasks reverse] [--d-ks 8,128,1024] [--threads 1]`.

Each compatibility function at each d_k runs one live run as the app does (service.live.LiveTrainer, one torch
thread as the server sets it, 600 steps or 55 s), and the table says how far it got and how long it took:
wall seconds to the last snapshot, steps per second, the outcome and the held-out score. Run it on an idle
machine: another process on the two cores slows every row alike.
"""

from __future__ import annotations

import argparse
import time

import torch

from attention_viz.service.catalog import Catalog
from attention_viz.service.limits import LIVE_ARMS, LIVE_D_KS, LIVE_TASKS
from attention_viz.service.live import LiveTrainer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks live", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="reverse", help=f"comma-separated, of {', '.join(LIVE_TASKS)}")
    parser.add_argument("--d-ks", default=",".join(map(str, LIVE_D_KS)), help="comma-separated d_k")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the server uses 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    live = LiveTrainer(Catalog())
    print(f"torch threads {args.threads}; one run at a time, as the app trains them\n")
    print("| task | d_k | compatibility | outcome | steps | wall s | steps/s | first view s | held out |")
    print("|:--|--:|:--|:--|--:|--:|--:|--:|--:|")
    for task in args.tasks.split(","):
        for d_k in args.d_ks.split(","):
            for arm in LIVE_ARMS:
                start = time.perf_counter()
                first, last = None, None
                for update in live.run(task, d_k, arm):
                    first = first if first is not None else time.perf_counter() - start
                    last = update
                wall = time.perf_counter() - start
                view = last["view"]
                steps = view["steps"][-1] if view else 0
                heldout = view["arms"][0]["heldout_exact_match"] if view else None
                print(f"| {task} | {d_k} | {arm} | {last['state']} | {steps} | {wall:.1f} | {steps / wall:.1f} | "
                      f"{first:.2f} | {'–' if heldout is None else f'{100 * heldout:.0f}%'} |", flush=True)


if __name__ == "__main__":
    main()
