"""§3.2.1's claim in training: scaled dot product vs plain dot product vs additive attention, across d_k and seeds.

`python -m attention_viz.train.study --out assets/study` trains every member of the grid (arm x d_k x seed x
init), identical in everything else, skips members whose result file already exists for the same setup
(so a stopped study resumes), then writes OUT/results.json, OUT/table.md and the figures (attention_viz.draw.study).

Arms ("compatibility" in results.json): scaled_dot = Eq. 1 with 1/√d_k, dot = Eq. 1 with factor 1, additive =
per head w_hᵀ tanh(q_h + k_h) (hidden width d_k). Inits: unit_qk = footnote 4's premise (q, k components of
variance ≈ 1 at step 0), xavier = every matrix Xavier-uniform, the shipped models' initialisation.

With --ship DIR the members of one seed from unit_qk (one per arm and d_k) are also saved as checkpoints in DIR
(NAME = TASK_ARM_dkD, float16 on disk where their maps match float32 to 1e-3, else float32) with their training
snapshots (attention_viz.train.snapshots): what the app can show of attention forming.
"""

from __future__ import annotations

import argparse
import copy
import json
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
from attention_viz.data.checkpoints import WEIGHTS_SUFFIX, save_checkpoint
from attention_viz.data.snapshots import load_snapshots, snapshot_paths
from attention_viz.data.tasks import batches
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.train.family import steps_to
from attention_viz.train.mechanism import measure
from attention_viz.train.snapshots import SnapshotRecorder, log_steps, probe_texts
from attention_viz.train.trainer import TrainSettings, command_line, train

ARMS = {"scaled_dot": ("dot_product", "sqrt_dk"), "dot": ("dot_product", "none"), "additive": ("additive", "sqrt_dk")}
D_K = (8, 32, 128, 512, 1024)  # spans 128x, Britz et al.'s 128..1024 at the top
SEEDS = (0, 1, 2)
XAVIER_ARMS = ("scaled_dot", "dot")  # also trained from Xavier init (additive too with --xavier-arms; slow at large d_k)
# Everything but the arm, d_k and seed. Reverse needs a sharp, content-addressed anti-diagonal in the
# cross-attention, so a softmax stuck in saturation shows in accuracy. One head (d_v = d_model / h), as Britz et
# al.'s attention is one head whose width is the d_k they vary. d_model = 32 keeps the 15 shipped members small
# (the d_k = 1024 one is ~0.9 MB in float32) and the grid within an hour on 2 cores. In the pilot the reference
# arm (scaled dot product) reached 90% batch exact match at ~550-700 steps and 98-99% held-out at 1000, for d_k
# 8, 32 and 1024 alike: 1000 steps let it finish, and an arm twice as slow still shows at the end.
BASE = TrainSettings(
    task="reverse", d_model=32, n_heads=1, n_layers=1, d_ff=128, d_v=32, max_len=8, batch_size=32,
    steps=1000, lr=2e-3, warmup=50, log_every=25, heldout_size=1000, dropout=0.0,
)
HALF_PRECISION_TOLERANCE = 1e-3  # a shipped member is stored in float16 only if its maps move by at most this
PROBE_SEED = 424_242  # the fixed probe batch for the mechanism (its own seed, never a training stream's)


def probe_steps(steps: int) -> list[int]:
    """The steps the mechanism and the snapshots are measured at: 0 and ≥23 log-spaced steps up to `steps`."""
    return log_steps(steps)


def member_id(arm: str, d_k: int, seed: int, init: str) -> str:
    """e.g. member_id("dot", 512, 1, "unit_qk") == "dot_dk512_seed1_unit_qk"."""
    return f"{arm}_dk{d_k}_seed{seed}_{init}"


def shipped_name(task: str, arm: str, d_k: int) -> str:
    """The checkpoint name of a shipped member, e.g. shipped_name("reverse", "dot", 512) == "reverse_dot_dk512"."""
    return f"{task}_{arm}_dk{d_k}"


def member_settings(base: TrainSettings, arm: str, d_k: int, seed: int, init: str) -> TrainSettings:
    """The base settings with only the compared fields changed."""
    compatibility, scale = ARMS[arm]
    return replace(base, compatibility=compatibility, scale=scale, d_k=d_k, seed=seed, init=init)


def probe_batch(settings: TrainSettings):
    """The fixed batch the mechanism is measured on (same strings for every member)."""
    return next(batches(settings.task, CharTokenizer(max_len=settings.max_len), 64, seed=PROBE_SEED))


def run_member(settings: TrainSettings, arm: str, threads: int, ship: Path | None = None) -> dict:
    """Train one member; its record: metrics, curve, mechanism at log-spaced steps, timings.

    ship: a checkpoint stem; the trained model is saved there with its snapshots (see the module's doc).
    """
    torch.set_num_threads(threads)
    probe = probe_batch(settings)
    marks, mechanism = set(probe_steps(settings.steps)), []
    recorder = SnapshotRecorder(settings, probe_steps(settings.steps), probe_texts(settings.max_len)) if ship else None

    def observe(step: int, model: Transformer, batch: dict | None) -> None:
        if step in marks:
            mechanism.append({"step": step, **measure(model, probe.src, probe.tgt_in, settings.scale)})
        if recorder is not None:
            recorder(step, model, batch)

    model, card = train(settings, device="cpu", progress=False, observe=observe)
    mechanism = columns(mechanism)
    record = {
        "compatibility": arm, "d_k": settings.d_k, "seed": settings.seed, "init": settings.init,
        "heldout_exact_match": card["heldout_exact_match"],
        # the first curve point (mean over log_every training batches, 800 strings) at 90% exact match or more
        "steps_to_90": steps_to(card["curve"], "exact_match", 0.9),
        "final_loss": card["curve"]["loss"][-1],  # mean training loss over the last log_every steps
        "curve": card["curve"], "mechanism": mechanism,
        "train_seconds": card["train_seconds"], "wall_time_s": card["wall_time_s"], "cpu_time_s": card["cpu_time_s"],
        "load_average_1min": round(os.getloadavg()[0], 2), "n_params": card["n_params"],
    }
    if ship is not None:
        error = half_precision_error(model, [recorder.batch, probe], settings.scale)
        dtype = torch.float16 if error <= HALF_PRECISION_TOLERANCE else None
        card = {**card, "family": "study", "study_arm": arm, "half_precision_max_map_error": error,
                "snapshots": snapshot_paths(ship)[0].name, "command": command_line(settings, str(ship))}
        save_checkpoint(model, card, ship, dtype=dtype)
        recorder.save(ship, model=ship.name, arm=arm)
        record["checkpoint"] = ship.name
    return record


def columns(points: list[dict]) -> dict:
    """[{"step", KEY: {metric: value}}] -> {"step": [...], KEY: {metric: [...]}}: the mechanism, compactly."""
    out: dict = {"step": [p["step"] for p in points]}
    for key in (k for k in points[0] if k != "step"):
        out[key] = {metric: [p[key][metric] for p in points] for metric in points[0][key]}
    return out


@torch.no_grad()
def half_precision_error(model: Transformer, probes, scale) -> float:
    """The largest change of any attention weight on `probes` (batches) when the weights are rounded to float16."""
    rounded = copy.deepcopy(model).eval()
    for p in rounded.parameters():
        p.copy_(p.to(torch.float16).float())
    model.eval()
    worst = 0.0
    for batch in probes:
        _, full = model(batch.src, batch.tgt_in, scale=scale)
        _, half = rounded(batch.src, batch.tgt_in, scale=scale)
        worst = max(worst, *((full[k] - half[k]).abs().max().item() for k in full))
    return float(f"{worst:.3g}")


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
            "logit_std_step0": spread([r["mechanism"]["all"]["logit_std"][0] for r in rs]),
            "softmax_grad_norm_step0": spread([r["mechanism"]["all"]["softmax_grad_norm"][0] for r in rs]),
            "logit_std_final": spread([r["mechanism"]["all"]["logit_std"][-1] for r in rs]),
            "softmax_grad_norm_final": spread([r["mechanism"]["all"]["softmax_grad_norm"][-1] for r in rs]),
            "train_seconds": spread([r["train_seconds"] for r in rs]),
        })
    return rows


METRICS = {  # table.md's tables: (title, how one cell's spread is written)
    "heldout_exact_match": ("held-out exact match, % (1000 strings, greedy decoding)",
                            lambda s: f"{100 * s['mean']:.1f} ± {100 * s['std']:.1f}"),
    "steps_to_90": ("steps to 90% training exact match (first 25-step window at ≥ 90%)",
                    lambda s: f"{s['mean']:.0f} ± {s['std']:.0f}"),
    "final_loss": ("final training loss (mean of the last 25 steps)",
                   lambda s: f"{s['mean']:.3f} ± {s['std']:.3f}"),
}


def markdown_table(rows: list[dict]) -> str:
    """Britz et al.'s layout: one row per d_k, one column per compatibility, mean ± std over seeds; one table per
    metric and init. A run that never reached 90% is left out of that mean and counted as "k/n never"."""
    arms = [a for a in ARMS if any(r["compatibility"] == a for r in rows)]
    lines = []
    for init in sorted({r["init"] for r in rows}, key=lambda i: i != "unit_qk"):
        for metric, (title, cell) in METRICS.items():
            lines += [f"**init {init}: {title}**, mean ± std over seeds", "",
                      "| d_k | " + " | ".join(arms) + " |", "|---:|" + "---:|" * len(arms)]
            for d_k in sorted({r["d_k"] for r in rows if r["init"] == init}):
                cells = []
                for arm in arms:
                    r = next((r for r in rows if (r["init"], r["compatibility"], r["d_k"]) == (init, arm, d_k)), None)
                    if r is None:
                        cells.append("—")
                        continue
                    spread_ = r[metric]
                    text = cell(spread_) if spread_["n"] else "never"
                    if spread_["missing"]:
                        text += f" ({spread_['missing']}/{spread_['n'] + spread_['missing']} never)" if spread_["n"] else \
                            f" ({spread_['missing']}/{spread_['missing']})"
                    cells.append(text)
                lines.append(f"| {d_k} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)


def initialisation_table(rows: list[dict]) -> str:
    """Step 0 on the probe batch, per d_k: the variance of q·k (footnote 4 predicts d_k for unit-variance
    components) and the std of the softmax's logits per arm, for each init."""
    inits = sorted({r["init"] for r in rows}, key=lambda i: i != "unit_qk")
    arms = [a for a in ARMS if any(r["compatibility"] == a for r in rows)]

    def value(init, arm, d_k, key):
        return next(r[key] for r in rows if (r["init"], r["compatibility"], r["d_k"]) == (init, arm, d_k))

    head = ["d_k", *(f"var(q·k) {i}" for i in inits), *(f"logit std {a} ({i})" for i in inits for a in arms)]
    lines = ["**step 0 (probe batch, first seed): q·k variance and softmax logit std**", "",
             "| " + " | ".join(head) + " |", "|---:|" + "---:|" * (len(head) - 1)]
    for d_k in sorted({r["d_k"] for r in rows}):
        cells = [f"{value(i, 'scaled_dot', d_k, 'qk_var'):.3g}" for i in inits]
        cells += [f"{value(i, a, d_k, 'logit_std'):.3g}" for i in inits for a in arms]
        lines.append(f"| {d_k} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_json(path: Path, data) -> None:
    """Write atomically: a reader (or a resumed study) never sees half a file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    os.replace(partial, path)


def shipped_snapshots(results: dict, ship: Path | None) -> dict:
    """{d_k: {arm: Snapshots}} of the shipped members that have snapshots in `ship` ({} without --ship)."""
    found: dict[int, dict] = {}
    for r in results["runs"] if ship is not None else []:
        if "checkpoint" in r and all(p.is_file() for p in snapshot_paths(ship / r["checkpoint"])):
            found.setdefault(r["d_k"], {})[r["compatibility"]] = load_snapshots(ship / r["checkpoint"])
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m attention_viz.train.study", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for members/, results.json, table.md, *.png")
    parser.add_argument("--d-k", type=int, nargs="+", default=list(D_K))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--xavier-arms", nargs="*", choices=list(ARMS), default=list(XAVIER_ARMS),
                        help="arms also trained from Xavier init (the step-0 mechanism is measured for all)")
    parser.add_argument("--steps", type=int, default=BASE.steps)
    parser.add_argument("--ship", type=Path, default=None,
                        help="save one seed's unit_qk members (one per arm and d_k) here as checkpoints with snapshots, "
                             "e.g. attention_viz/data/models/study")
    parser.add_argument("--ship-seed", type=int, default=0, help="the seed whose members --ship saves")
    parser.add_argument("--cache", type=Path, default=None,
                        help="folder of the finished members' records, what a stopped study resumes from "
                             "(default OUT/members; e.g. runs/study to keep OUT small)")
    parser.add_argument("--jobs", type=int, default=2, help="members trained at once (processes)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per job")
    parser.add_argument("--figures-only", action="store_true", help="redraw from OUT/results.json, train nothing")
    parser.add_argument("--no-train", action="store_true",
                        help="assemble results from the members already finished; the rest are listed as missing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from attention_viz.draw.study import save_figures  # draw/ holds matplotlib; imported only here
    out = args.out
    members_dir = args.cache if args.cache is not None else out / "members"
    if args.figures_only:
        results = json.loads((out / "results.json").read_text())
        save_figures(results, out, snapshots=shipped_snapshots(results, args.ship))
        return
    members_dir.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    base = replace(BASE, steps=args.steps)
    grid = [(arm, d_k, seed, init) for init, arms in (("unit_qk", args.arms), ("xavier", args.xavier_arms))
            for d_k in args.d_k for arm in arms for seed in args.seeds]
    grid.sort(key=lambda m: -m[1] * (3 if m[0] == "additive" else 1))  # the slowest first: parallel jobs end together
    setup = {k: v for k, v in asdict(base).items() if k not in ("compatibility", "scale", "d_k", "seed", "init")}
    setup["probe_steps"] = probe_steps(base.steps)

    def ship_stem(arm: str, d_k: int, seed: int, init: str) -> Path | None:
        if args.ship is None or seed != args.ship_seed or init != "unit_qk":
            return None
        return args.ship / shipped_name(base.task, arm, d_k)

    def finished(stem: Path | None) -> bool:
        return stem is None or all(p.is_file() for p in (stem.with_name(stem.name + WEIGHTS_SUFFIX),
                                                         stem.with_name(stem.name + ".json"), *snapshot_paths(stem)))

    todo, records = [], {}
    for arm, d_k, seed, init in grid:
        path = members_dir / f"{member_id(arm, d_k, seed, init)}.json"
        done = json.loads(path.read_text()) if path.exists() else None
        stem = ship_stem(arm, d_k, seed, init)
        if done is not None and done.get("setup") == setup and finished(stem):
            records[path.stem] = done["record"]
        else:
            todo.append((arm, d_k, seed, init, path))
    missing = [path.stem for *_, path in todo] if args.no_train else []
    todo = [] if args.no_train else todo
    start, started_at = time.perf_counter(), time.strftime("%Y-%m-%d %H:%M:%S")
    bar = tqdm(total=len(grid), initial=len(grid) - len(todo), desc="study", unit="member", file=sys.stderr,
               dynamic_ncols=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_member, member_settings(base, arm, d_k, seed, init), arm, args.threads,
                               ship_stem(arm, d_k, seed, init)):
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
    wall = round(time.perf_counter() - start, 1)
    previous = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else {}
    same_setup = all(previous.get("setup", {}).get(key) == value for key, value in setup.items())
    invocations = previous["setup"].get("invocations", []) if previous and same_setup else []
    command = "python -m attention_viz.train.study " + " ".join(argv if argv is not None else sys.argv[1:])
    if todo:
        invocations = [*invocations, {"started": started_at, "wall_s": wall, "members_trained": len(todo),
                                      "command": command, "load_average_1min_end": round(os.getloadavg()[0], 2)}]
        trained_by = command
    else:  # assembling or redrawing: the command that trained them stays on record
        trained_by = previous.get("setup", {}).get("command", command) if same_setup else command
    results = {
        "setup": {**setup, "arms": {a: dict(zip(("compatibility", "scale"), ARMS[a])) for a in args.arms},
                  "d_k": args.d_k, "seeds": args.seeds,
                  "trained": {"unit_qk": args.arms, "xavier": args.xavier_arms}, "probe_seed": PROBE_SEED,
                  "heldout": f"{base.heldout_size} strings from heldout_strings(max_len={base.max_len})",
                  "command": trained_by,
                  "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
                  "jobs": args.jobs, "threads": args.threads,
                  "member_train_seconds_total": round(sum(r["train_seconds"] for r in ordered), 1),
                  "this_invocation_wall_s": wall, "members_trained_now": len(todo),
                  "invocations": invocations,  # every invocation that trained members, with its wall time
                  "shipped": sorted(r["checkpoint"] for r in ordered if "checkpoint" in r),
                  "missing": missing},
        "summary": rows,
        "initialisation": initialisation(base, args.d_k, args.seeds[:1]),
        "runs": ordered,
    }
    write_json(out / "results.json", results)
    (out / "table.md").write_text(markdown_table(rows) + "\n" + initialisation_table(results["initialisation"]))
    print(markdown_table(rows))
    save_figures(results, out, snapshots=shipped_snapshots(results, args.ship))
    print(f"wrote {out}/results.json, table.md and figures; {len(todo)} members trained in "
          f"{results['setup']['this_invocation_wall_s']:.0f}s")


if __name__ == "__main__":
    main()
