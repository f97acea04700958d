"""Memory benchmark: bytes held by the maps (AttentionMaps.nbytes) and peak RSS, against sequence length.

Each (model, length) runs in a fresh subprocess, so its peak RSS (resource.getrusage) belongs to
that one forward pass and not to whatever ran before it. The subprocess reports its RSS after
building the model (the baseline) and its peak after one forward pass capturing every map.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from .common import load, mib, rss_kib, table

LENGTHS = (16, 64, 256, 512, 1024, 2048)
QUICK_LENGTHS = (16, 256)
ROOT = Path(__file__).resolve().parent.parent


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far: VmHWM, and ru_maxrss (KiB on Linux), whichever is smaller.

    Linux carries ru_maxrss across execve, so a child forked from a large parent reports the parent's peak
    (every row the same); VmHWM belongs to the new address space and starts afresh.
    """
    return 1024 * min(rss_kib()["VmHWM"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def child(model: str, n: int, threads: int) -> dict:
    """One forward pass of `model` on n tokens, in this (fresh) process, then (app model) render it; what it measured."""
    import torch

    from attention_viz import Transformer, TransformerConfig

    from .model import VOCAB_SIZE, app_default_config

    torch.set_num_threads(threads)
    config = app_default_config(torch_compatible=False) if model == "app" else TransformerConfig(vocab_size=VOCAB_SIZE)
    torch.manual_seed(0)
    net = Transformer(config).eval()
    src = torch.randint(4, config.vocab_size, (1, n))  # (B, S)
    tgt = torch.randint(4, config.vocab_size, (1, n))  # (B, T)
    with torch.inference_mode():
        net(src[:, :4], tgt[:, :4])  # first-call costs (thread pool, kernels) out of the way
        baseline_rss = rss_kib()["VmRSS"] * 1024
        t0 = time.perf_counter()
        _, maps = net(src, tgt, causal_mask=True, padding_mask=True)
        seconds = time.perf_counter() - t0
    forward_peak = peak_rss_bytes()
    result = {
        "model": model,
        "config": config.to_dict(),
        "n": n,
        "maps": len(maps),
        "maps_bytes": maps.nbytes,
        "baseline_rss_bytes": baseline_rss,
        "peak_rss_bytes": forward_peak,
        "forward_s": seconds,
    }
    if model == "app":
        result.update(render(maps))
    return result


def render(maps) -> dict:
    """Render what the app shows for these maps: the grid of every encoder head and one head in detail, as PNG."""
    from attention_viz.draw import png, raster
    from attention_viz.service.views import grid_cell

    t0 = time.perf_counter()
    stacked = maps.kind("encoder.self_attn")[:, 0].numpy()  # (L, H, S, S)
    try:
        grid = raster.grid_image(stacked, cell=grid_cell(stacked.shape), labels=True)
        grid_png = png.array_to_png(grid)
        t1 = time.perf_counter()
        tokens = [f"t{i}" for i in range(stacked.shape[-1])]
        head = raster.head_image(stacked[0, 0], tokens, tokens, "encoder.0.self_attn head 0")
        head_png = png.array_to_png(head)
        t2 = time.perf_counter()
    except ValueError as error:  # the renderer refuses sizes it cannot show; say so in the table
        return {"render_error": str(error), "render_peak_rss_bytes": peak_rss_bytes()}
    return {
        "render_grid_s": t1 - t0,
        "render_head_s": t2 - t1,
        "grid_pixels": list(grid.shape[:2]),
        "png_bytes": len(grid_png) + len(head_png),
        "render_peak_rss_bytes": peak_rss_bytes(),
    }


def run(
    quick: bool = False, lengths: tuple[int, ...] | None = None, threads: int = 2, models: tuple[str, ...] | None = None
) -> dict:
    """Spawn one subprocess per (model, length) and collect their reports; quick runs the app's model only."""
    lengths = lengths or (QUICK_LENGTHS if quick else LENGTHS)
    models = models or (("app",) if quick else ("app", "base"))
    rows = []
    for model in models:
        for n in lengths:
            cmd = [sys.executable, "-m", "benchmarks.memory", "--child", model, str(n), str(threads)]
            done = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                rows.append({"model": model, "n": n, "error": (done.stderr.strip().splitlines() or ["killed"])[-1:]})
                continue
            rows.append({**json.loads(done.stdout.strip().splitlines()[-1]), "load": load()})
    return {"rows": rows}


def report(result: dict) -> str:
    """One Markdown table: maps bytes, RSS before and at peak, the forward's time, the render's time (app model)."""
    rows = []
    for row in result["rows"]:
        if "error" in row:
            rows.append([row["model"], row["n"], "failed: " + " ".join(row["error"]), "", "", "", "", "", ""])
            continue
        render = ""
        if "render_grid_s" in row:
            render = f"{row['render_grid_s'] * 1e3:.0f} + {row['render_head_s'] * 1e3:.0f}"
        elif "render_error" in row:
            render = "refused: " + row["render_error"].split(":")[0]
        peak = max(row["peak_rss_bytes"], row.get("render_peak_rss_bytes", 0))
        rows.append([
            row["model"],
            row["n"],
            row["maps"],
            mib(row["maps_bytes"]),
            mib(row["baseline_rss_bytes"]),
            mib(row["peak_rss_bytes"]),
            mib(peak),
            f"{row['forward_s'] * 1e3:.0f}",
            render,
        ])
    head = ("Memory of one forward pass capturing every map (a fresh process per row; src = tgt = n tokens); "
            "app rows also render the encoder grid and one head (numpy + PIL, token labels) to PNG")
    t = table(["model", "n", "maps", "maps MiB", "RSS before MiB", "peak RSS forward MiB", "peak RSS with render MiB",
               "forward ms", "render grid + head ms"], rows)
    return f"{head}\n\n{t}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", nargs=3, metavar=("MODEL", "N", "THREADS"), required=True)
    args = parser.parse_args()
    model, n, threads = args.child
    print(json.dumps(child(model, int(n), int(threads))))
