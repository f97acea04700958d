"""The research functions' costs: `python -m benchmarks.research [--quick]`.

Rollout against attention flow over one example's six-layer stack at T = 8 .. 32 tokens (flow solves T² maximum-flow
problems on L·T² edges, in plain Python: MAX_FLOW_TOKENS bounds it), and save_figure's SVG, PDF and PNG of a grid of
2 layers × 4 heads on 20 tokens; and what the app's explorer pays per new run (service.stacks.stack_views: rollout
of both stacks, flow within FLOW_WORK) against packing the run without it. Medians over interleaved rounds
(benchmarks.common), one thread.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from attention_viz import attention_flow, rollout, save_figure
from attention_viz.core.maps import token_masks
from attention_viz.explorer.pack import pack, payload_bytes
from attention_viz.service.stacks import stack_views
from benchmarks.common import interleaved, load, ms, table


def stack(n: int, n_layers: int = 6, n_heads: int = 8, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    maps = {}
    for layer in range(n_layers):
        a = rng.random((1, n_heads, n, n)) ** 4
        maps[f"encoder.{layer}.self_attn"] = a / a.sum(-1, keepdims=True)
    return maps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks research", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="T 8 and 16 only, fewer rounds")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rounds = 3 if args.quick else 5
    rows = []
    for n in ((8, 16) if args.quick else (8, 16, 24, 32)):
        maps = stack(n)
        timings = interleaved({"rollout": lambda: rollout(maps), "flow": lambda: attention_flow(maps)}, rounds,
                              sample_s=0.05, warmup=1)
        rows.append([f"T = {n}, L = 6, H = 8", ms(timings["rollout"].median), ms(timings["flow"].median),
                     f"{timings['flow'].median / timings['rollout'].median:,.0f}x"])
    print(table(["one example", "rollout (ms)", "attention flow (ms)", "flow / rollout"], rows))
    print()
    maps, tokens = stack(20, n_layers=2, n_heads=4), [f"tok{i}" for i in range(20)]
    with tempfile.TemporaryDirectory() as folder:
        figures = {suffix: (lambda s=suffix: save_figure(maps, "encoder.self_attn", None, Path(folder) / f"g.{s}",
                                                         tokens=tokens)) for suffix in ("svg", "pdf", "png")}
        timings = interleaved(figures, rounds, sample_s=0.05, warmup=1)
        sizes = {suffix: (Path(folder) / f"g.{suffix}").stat().st_size for suffix in figures}
    print(table(["save_figure, 2 × 4 heads, 20 tokens", "median (ms)", "file (kB)"],
                [[suffix.upper(), ms(timings[suffix].median), f"{sizes[suffix] / 1e3:.0f}"] for suffix in figures]))
    print()
    rows = []
    for n_layers, n in ((2, 8), (2, 10), (6, 6), (6, 8)):  # our models on "softmax", "attention"; a 6-layer real model
        maps = {**stack(n, n_layers, 4), **{k.replace("encoder", "decoder"): v for k, v in stack(n, n_layers, 4, 1).items()}}
        maps = {k: v[0] for k, v in maps.items()}  # (H, T, T), as a run holds them
        tokens = [f"t{i}" for i in range(n)]
        masks = token_masks(tokens, tokens, True, False)
        timings = interleaved({"pack": lambda: pack(maps, tokens, tokens, masks=masks),
                               "stacks": lambda: stack_views(maps, True)}, rounds, sample_s=0.05, warmup=1)
        views = stack_views(maps, True)
        plain, more = payload_bytes(pack(maps, tokens, tokens, masks=masks)), payload_bytes(
            pack(maps, tokens, tokens, masks=masks, stacks=views))
        rows.append([f"L = {n_layers}, T = {n}, 2 stacks", ms(timings["pack"].median), ms(timings["stacks"].median),
                     "yes" if views["encoder.self_attn"]["flow"] is not None else "no", f"+{(more - plain) / 1e3:.1f}"])
    print(table(["explorer, one new run", "pack (ms)", "rollout + flow (ms)", "flow sent", "payload (kB)"], rows))
    print(f"\nload average during the run: {', '.join(f'{x:.1f}' for x in load())}")


if __name__ == "__main__":
    main()
