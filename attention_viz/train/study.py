"""§3.2.1's claim in training: scaled dot product vs plain dot product vs additive attention, across d_k and seeds.

`python -m attention_viz.train.study --out assets/study` trains every member of the grid (arm x d_k x seed x
init), identical in everything else, skips members whose result file already exists for the same setup
(so a stopped study resumes), then writes OUT/results.json, OUT/table.md and the figures (attention_viz.draw.study).

Arms ("compatibility" in results.json): scaled_dot = Eq. 1 with 1/√d_k, dot = Eq. 1 with factor 1, additive =
per head w_hᵀ tanh(q_h + k_h) (hidden width d_k). Inits: unit_qk = footnote 4's premise (q, k components of
variance ≈ 1 at step 0), xavier = every matrix Xavier-uniform, the shipped models' initialisation.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tqdm import tqdm

from attention_viz.core.model import Transformer
from attention_viz.data.tasks import batches, heldout_strings, make_batch
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.train.mechanism import measure
from attention_viz.train.trainer import TrainSettings, train

ARMS = {"scaled_dot": ("dot_product", "sqrt_dk"), "dot": ("dot_product", "none"), "additive": ("additive", "sqrt_dk")}
D_K = (8, 32, 128, 512, 1024)  # spans 128x, Britz et al.'s 128..1024 at the top
SEEDS = (0, 1, 2)
XAVIER_ARMS = ("scaled_dot", "dot")  # also trained from Xavier init (additive too with --xavier-arms; slow at large d_k)
# Everything but the arm, d_k and seed: reverse needs a sharp, content-addressed anti-diagonal in the
# cross-attention, so a softmax stuck in saturation shows in accuracy; small so the grid fits on 2 cores.
BASE = TrainSettings(
    task="reverse", d_model=64, n_heads=2, n_layers=1, d_ff=128, d_v=16, max_len=8, batch_size=32,
    steps=1000, lr=2e-3, warmup=50, log_every=25, heldout_size=1000, dropout=0.0,
)
PROBE_SEED = 424_242  # the fixed probe batch for the mechanism (its own seed, never a training stream's)


def probe_steps(steps: int, points: int = 16) -> list[int]:
    """0 plus about `points` log-spaced steps up to `steps` (always including `steps`)."""
    marks = {0, steps} | {round(steps ** (i / points)) for i in range(points)}
    return sorted(m for m in marks if 0 <= m <= steps)


def member_id(arm: str, d_k: int, seed: int, init: str) -> str:
    """e.g. member_id("dot", 512, 1, "unit_qk") == "dot_dk512_seed1_unit_qk"."""
    return f"{arm}_dk{d_k}_seed{seed}_{init}"


def member_settings(base: TrainSettings, arm: str, d_k: int, seed: int, init: str) -> TrainSettings:
    """The base settings with only the compared fields changed."""
    compatibility, scale = ARMS[arm]
    return replace(base, compatibility=compatibility, scale=scale, d_k=d_k, seed=seed, init=init)


def probe_batch(settings: TrainSettings):
    """The fixed batch the mechanism is measured on (same strings for every member)."""
    return next(batches(settings.task, CharTokenizer(max_len=settings.max_len), 64, seed=PROBE_SEED))


def run_member(settings: TrainSettings, arm: str, threads: int) -> dict:
    """Train one member; its record: metrics, curve, mechanism at log-spaced steps, timings."""
    torch.set_num_threads(threads)
    probe = probe_batch(settings)
    marks, mechanism, first_90 = set(probe_steps(settings.steps)), [], [None]

    def observe(step: int, model: Transformer, batch: dict | None) -> None:
        if batch is not None and first_90[0] is None and batch["exact_match"] >= 0.9:
            first_90[0] = step
        if step in marks:
            mechanism.append({"step": step, **measure(model, probe.src, probe.tgt_in, settings.scale)})

    _, card = train(settings, device="cpu", progress=False, observe=observe)
    return {
        "compatibility": arm, "d_k": settings.d_k, "seed": settings.seed, "init": settings.init,
        "heldout_exact_match": card["heldout_exact_match"],
        "steps_to_90": first_90[0],  # first step whose training batch reached 90% exact match
        "final_loss": card["curve"]["loss"][-1],  # mean training loss over the last log_every steps
        "curve": card["curve"], "mechanism": mechanism,
        "train_seconds": card["train_seconds"], "wall_time_s": card["wall_time_s"], "n_params": card["n_params"],
    }


def initialisation(base: TrainSettings, d_ks, seeds, inits=("unit_qk", "xavier")) -> list[dict]:
    """Step-0 mechanism for every (init, arm, d_k, seed), no training: why Xavier made the effect mild."""
    rows = []
    for init in inits:
        for arm in ARMS:
            for d_k in d_ks:
                for seed in seeds:
                    s = member_settings(base, arm, d_k, seed, init)
                    torch.manual_seed(seed)
                    model = Transformer(s.model_config())
                    probe = probe_batch(s)
                    rows.append({"init": init, "compatibility": arm, "d_k": d_k, "seed": seed,
                                 **measure(model, probe.src, probe.tgt_in, s.scale)["all"]})
    return rows


def spread(values: list[float | None]) -> dict:
    """mean, std (sample, n-1), median, min, max of the non-null values and how many were null."""
    got = [v for v in values if v is not None]
    if not got:
        return {"n": 0, "missing": len(values)}
    return {"n": len(got), "missing": len(values) - len(got), "mean": statistics.fmean(got),
            "std": statistics.stdev(got) if len(got) > 1 else 0.0, "median": statistics.median(got),
            "min": min(got), "max": max(got)}


def summarize(records: list[dict]) -> list[dict]:
    """One row per (init, compatibility, d_k): spreads of the held-out score, final loss, steps to 90%, logit std."""
    cells: dict[tuple, list[dict]] = {}
    for r in records:
        cells.setdefault((r["init"], r["compatibility"], r["d_k"]), []).append(r)
    order = list(ARMS)
    rows = []
    for (init, arm, d_k), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][2], order.index(kv[0][1]))):
        rows.append({
            "init": init, "compatibility": arm, "d_k": d_k, "seeds": sorted(r["seed"] for r in rs),
            "heldout_exact_match": spread([r["heldout_exact_match"] for r in rs]),
            "final_loss": spread([r["final_loss"] for r in rs]),
            "steps_to_90": spread([r["steps_to_90"] for r in rs]),
            "logit_std_step0": spread([r["mechanism"][0]["all"]["logit_std"] for r in rs]),
            "softmax_grad_norm_step0": spread([r["mechanism"][0]["all"]["softmax_grad_norm"] for r in rs]),
        })
    return rows


def markdown_table(rows: list[dict]) -> str:
    """Britz et al.'s layout: one row per d_k, held-out exact match (%) mean ± std per compatibility."""
    arms = [a for a in ARMS if any(r["compatibility"] == a for r in rows)]
    lines = []
    for init in sorted({r["init"] for r in rows}):
        lines += [f"init = {init}; held-out exact match %, mean ± std over seeds (steps to 90%: median, "
                  "never = n/N runs never got there)", "",
                  "| d_k | " + " | ".join(arms) + " |", "|---:|" + "---:|" * len(arms)]
        for d_k in sorted({r["d_k"] for r in rows if r["init"] == init}):
            cells = []
            for arm in arms:
                r = next((r for r in rows if (r["init"], r["compatibility"], r["d_k"]) == (init, arm, d_k)), None)
                if r is None:
                    cells.append("—")
                    continue
                em, s90 = r["heldout_exact_match"], r["steps_to_90"]
                steps = f"{s90['median']:.0f}" if s90["n"] else "never"
                never = f", never {s90['missing']}/{s90['n'] + s90['missing']}" if s90["missing"] and s90["n"] else ""
                cells.append(f"{100 * em['mean']:.2f} ± {100 * em['std']:.2f} (90% at {steps}{never})")
            lines.append(f"| {d_k} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def write_json(path: Path, data) -> None:
    """Write atomically: a reader (or a resumed study) never sees half a file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    os.replace(partial, path)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.train.study", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for members/, results.json, table.md, *.png")
    parser.add_argument("--d-k", type=int, nargs="+", default=list(D_K))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--xavier-arms", nargs="*", choices=list(ARMS), default=list(XAVIER_ARMS),
                        help="arms also trained from Xavier init (the step-0 mechanism is measured for all)")
    parser.add_argument("--steps", type=int, default=BASE.steps)
    parser.add_argument("--jobs", type=int, default=2, help="members trained at once (processes)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per job")
    parser.add_argument("--figures-only", action="store_true", help="redraw from OUT/results.json, train nothing")
    parser.add_argument("--no-train", action="store_true",
                        help="assemble results from the members already finished; the rest are listed as missing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from attention_viz.draw.study import save_figures  # draw/ holds matplotlib; imported only here
    out, members_dir = args.out, args.out / "members"
    if args.figures_only:
        save_figures(json.loads((out / "results.json").read_text()), out)
        return
    members_dir.mkdir(parents=True, exist_ok=True)
    base = replace(BASE, steps=args.steps)
    grid = [(arm, d_k, seed, init) for init, arms in (("unit_qk", args.arms), ("xavier", args.xavier_arms))
            for d_k in args.d_k for arm in arms for seed in args.seeds]
    grid.sort(key=lambda m: -m[1] if m[0] == "additive" else 0)  # the slowest first, so parallel jobs end together
    setup = {k: v for k, v in asdict(base).items() if k not in ("compatibility", "scale", "d_k", "seed", "init")}
    todo, records = [], {}
    for arm, d_k, seed, init in grid:
        path = members_dir / f"{member_id(arm, d_k, seed, init)}.json"
        done = json.loads(path.read_text()) if path.exists() else None
        if done is not None and done.get("setup") == setup:
            records[path.stem] = done["record"]
        else:
            todo.append((arm, d_k, seed, init, path))
    missing = [path.stem for *_, path in todo] if args.no_train else []
    todo = [] if args.no_train else todo
    start = time.perf_counter()
    bar = tqdm(total=len(grid), initial=len(grid) - len(todo), desc="study", unit="member", file=sys.stderr,
               dynamic_ncols=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_member, member_settings(base, arm, d_k, seed, init), arm, args.threads):
                   (arm, d_k, seed, init, path) for arm, d_k, seed, init, path in todo}
        for future in as_completed(futures):
            arm, d_k, seed, init, path = futures[future]
            record = future.result()
            write_json(path, {"setup": setup, "record": record})
            records[path.stem] = record
            bar.update(1)
            bar.write(f"{path.stem}: held-out {100 * record['heldout_exact_match']:.1f}%  90% at "
                      f"{record['steps_to_90']}  loss {record['final_loss']:.4f}  {record['train_seconds']:.0f}s")
    bar.close()
    ordered = [records[member_id(*m)] for m in sorted(grid, key=lambda m: (m[3], m[1], list(ARMS).index(m[0]), m[2]))
               if member_id(*m) in records]
    rows = summarize(ordered)
    results = {
        "setup": {**setup, "arms": {a: dict(zip(("compatibility", "scale"), ARMS[a])) for a in args.arms},
                  "d_k": args.d_k, "seeds": args.seeds,
                  "trained": {"unit_qk": args.arms, "xavier": args.xavier_arms}, "probe_seed": PROBE_SEED,
                  "heldout": f"{base.heldout_size} strings from heldout_strings(max_len={base.max_len})",
                  "command": "python -m attention_viz.train.study " + " ".join(argv if argv is not None else sys.argv[1:]),
                  "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
                  "jobs": args.jobs, "threads": args.threads,
                  "member_train_seconds_total": round(sum(r["train_seconds"] for r in ordered), 1),
                  "this_invocation_wall_s": round(time.perf_counter() - start, 1), "members_trained_now": len(todo),
                  "missing": missing},
        "summary": rows,
        "initialisation": initialisation(base, args.d_k, args.seeds[:1]),
        "runs": ordered,
    }
    write_json(out / "results.json", results)
    (out / "table.md").write_text(markdown_table(rows))
    print(markdown_table(rows))
    save_figures(results, out)
    print(f"wrote {out}/results.json, table.md and figures; {len(todo)} members trained in "
          f"{results['setup']['this_invocation_wall_s']:.0f}s")


if __name__ == "__main__":
    main()
