"""Head importance on the shipped reverse model: how long the grid of every head and the prune curve take.

`python -m benchmarks.importance [--texts 50,100,200] [--rounds 3] [--threads 1] [--real]`

attention_viz.importance.head_importance on the first N held-out strings (every head off alone, the prune curve,
Michel's one-pass gradient), medians of `rounds`, one torch thread as the server runs. `--real`: the same on the
opus-mt-en-de configuration (144 heads, a 32-token source writing 32), with its FLOPs (real_flops) against this
machine's fp32 matrix-product rate measured in the same run, the first partial result, and the app's pass schedule
against `--chunk` rows every pass, interleaved, by wall and CPU time; `--reference`: each schedule's distance from
float64 scores; `--split`: one more run timed by part. docs/benchmarks.md ("Head importance") reads the tables.
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


def real(threads: int = 2, rounds: int = 1, split: bool = False, device: str = "cpu", chunk: int = 8,
         reference: bool = False) -> dict:
    """attention_viz.importance.real_head_importance on the opus-mt-en-de configuration (benchmarks.hub.build),
    with the FLOPs it needs, the device's fp32 matrix-product rate (benchmarks.kernel.mm_peak) and when its first
    partial result came (where the code has `partial`), for each pass schedule (where the code has `first`)."""
    import inspect

    import numpy as np

    from attention_viz.importance import real_head_importance

    from .hub import build, inputs
    from .kernel import mm_peak

    torch.set_num_threads(threads)
    model, _, _ = build(alone=True)
    device = torch.device(device)
    model.model.to(device)
    src, _ = inputs(32)
    src = src.to(device)
    model.encode = lambda text: type("Encoding", (), {"ids": src[0]})()  # the benchmark's 32 ids, whatever the text
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    parameters = inspect.signature(real_head_importance).parameters
    streams = "partial" in parameters
    schedules = {"app": {}, "chunk": {"first": chunk}} if "first" in parameters else {"app": {}}
    seconds = {name: [] for name in schedules}
    cpu = {name: [] for name in schedules}  # this process's CPU seconds: what a shared machine's load does not stretch
    first = {name: [] for name in schedules}
    results = {}
    for r in range(rounds):
        names = list(schedules)
        for name in names[r % len(names):] + names[: r % len(names)]:
            told = []  # (seconds, heads scored, CPU seconds) of each partial result
            t0, c0 = time.perf_counter(), time.process_time()

            def partial(part):
                sync()
                told.append((time.perf_counter() - t0, part.done, time.process_time() - c0))

            results[name] = real_head_importance(model, ["32 random pieces"], max_new_tokens=32, chunk=chunk,
                                                 **schedules[name], **({"partial": partial} if streams else {}))
            sync()
            seconds[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            first[name] += told[:1]
    result = results["app"]
    written, _ = model.greedy_decode(src, 32)
    peak = mm_peak(device)
    drops = {name: np.concatenate([imp.drop[key] for key in imp.keys]) for name, imp in results.items()}
    per = {name: {"median_s": statistics.median(seconds[name]), "seconds": seconds[name],
                  "cpu_s": statistics.median(cpu[name]),
                  "first_s": statistics.median(s for s, _, _ in first[name]) if first[name] else None,
                  "first_cpu_s": statistics.median(c for _, _, c in first[name]) if first[name] else None,
                  "first_heads": first[name][0][1] if first[name] else None} for name in schedules}
    out = {"median_s": per["app"]["median_s"], "heads": result.total, "threads": threads, "rounds": rounds,
           "chunk": chunk, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
           "flops": real_flops(model.model.config, src.size(1), written.size(1), result.order), "mm": peak,
           "first_s": per["app"]["first_s"], "first_heads": per["app"]["first_heads"], "schedules": per}
    if "chunk" in drops:
        out["differ"] = {"scores": int((drops["app"] != drops["chunk"]).sum()),
                         "max": float(np.abs(drops["app"] - drops["chunk"]).max())}
    if reference:  # the same in float64: each schedule's largest distance from it, in nats
        model.model.double()
        wide = real_head_importance(model, ["32 random pieces"], max_new_tokens=32, chunk=chunk)
        model.model.float()
        exact = np.concatenate([wide.drop[key] for key in wide.keys])
        out["reference"] = {name: float(np.abs(d - exact).max()) for name, d in drops.items()}
    if split:
        out["split"] = timed_parts(model, lambda: real_head_importance(model, ["32 random pieces"],
                                                                       max_new_tokens=32, chunk=chunk))
    return out


def real_flops(config, source: int, written: int, order: list[tuple[str, int]]) -> dict:
    """FLOPs of real_head_importance on a Marian-shaped model (2 per multiply-add; the linear layers, attention's
    two products and the vocabulary's projection; norms, softmaxes and the log-sum-exp left out), one text of
    `source` tokens writing `written`, heads least important first in `order`.

    Variants: the baseline and each head alone off (the grid), then the prune curve's k = 2 .. n - 1 (k = 0, 1 are
    the grid's). Each needs a decoder pass (its cross-attention's keys and values of the source included) and the
    vocabulary's projection of every written position; the encoder runs once per distinct set of encoder heads off
    in each of the two calls. Greedy decoding (one token a step, keys kept, then one full pass for the maps) and
    Michel's gradient (forward and backward: about 3 passes) come on top."""
    d, f, V = config.d_model, config.encoder_ffn_dim, config.vocab_size
    S, T = source, written
    encoder = 2 * config.encoder_layers * S * (4 * d * d + 2 * d * f + 2 * S * d)
    decoder = 2 * config.decoder_layers * (T * (6 * d * d + 2 * d * f + 2 * T * d + 2 * S * d) + 2 * S * d * d)
    vocabulary = 2 * T * d * V
    heads = len(order)
    variants = (1 + heads) + max(heads - 2, 0)
    grid, curve = [[]] + [[h] for h in order], [order[:k] for k in range(2, heads)]  # the heads off per variant
    encoder_passes = sum(len({frozenset(h for h in off if h[0].startswith("encoder.")) for off in call})
                         for call in (grid, curve))
    extra = (encoder + 2 * decoder + 2 * vocabulary) + 3 * (encoder + decoder + vocabulary)  # greedy, gradient
    total = variants * (decoder + vocabulary) + encoder_passes * encoder + extra
    return {"variants": variants, "encoder_passes": encoder_passes, "encoder": encoder, "decoder": decoder,
            "vocabulary": vocabulary, "greedy_and_gradient": extra, "total": total}


def timed_parts(model, run) -> dict[str, float]:
    """Seconds of one run(), by part: the encoder, the decoder (with the logits where they are written whole),
    the output head's blocks (fast.logprob), greedy decoding, Michel's gradient, the rest."""
    import attention_viz.importance.real as importance

    parts = {"encoder": (importance, "encoder_states"), "decoder": (importance, "decoder_states"),
             "decoder + logits": (importance, "decoder_logits"), "logits + log-sum-exp": (importance, "target_log_probs"),
             "greedy decoding": (model, "greedy_decode"), "gradient": (importance, "_real_michel")}
    spent = dict.fromkeys(parts, 0.0)
    originals = {name: getattr(owner, attr) for name, (owner, attr) in parts.items()}

    def timed(name, function):
        def call(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t0
        return call

    for name, (owner, attr) in parts.items():
        setattr(owner, attr, timed(name, originals[name]))
    try:
        t0 = time.perf_counter()
        run()
        total = time.perf_counter() - t0
    finally:
        for name, (owner, attr) in parts.items():
            if owner is model:
                delattr(owner, attr)  # the instance's wrapper shadowed its class's method
            else:
                setattr(owner, attr, originals[name])
    spent = {name: s for name, s in spent.items() if s > 0}
    return spent | {"rest": total - sum(spent.values()), "total": total}


def report(result: dict) -> str:
    return (f"reverse (d_k 16: 2 + 2 layers, 4 heads, 24 heads in all), torch threads {result['threads']}, "
            f"load {result['load']}\n\n" + table(
                ["held-out strings", "grid + prune curve + gradient (s)", "exact match",
                 "heads that can go (<= 1 point)",
                 "Spearman ρ (loss rise, gradient)"],
                [[r["texts"], f"{r['median_s']:.2f}", f"{r['baseline']:.3f}", f"{r['can_go']} of {r['heads']}",
                  f"{r['agreement']:.2f}"] for r in result["rows"]]))


def report_real(r: dict) -> str:
    f, mm = r["flops"], r["mm"]
    floor = f["total"] / (mm["best_gflops"] * 1e9)
    lines = [
        f"opus-mt-en-de's configuration, random weights, {r['heads']} heads, one 32-token source writing 32 tokens, "
        f"{r['threads']} threads, {r.get('device', 'CPU')}, {r['chunk']} rows a pass: grid + gradient + prune curve "
        f"{r['median_s']:.2f} s (median of {r['rounds']})",
        f"  work: {f['variants']} variants x (decoder {f['decoder'] / 1e9:.2f} + vocabulary {f['vocabulary'] / 1e9:.2f}"
        f" GFLOP), {f['encoder_passes']} encoder passes x {f['encoder'] / 1e9:.2f} GFLOP, greedy decoding and the "
        f"gradient {f['greedy_and_gradient'] / 1e9:.0f} GFLOP: {f['total'] / 1e12:.2f} TFLOP",
        f"  the device's fp32 matrix product ({mm['size']}², {r['threads']} threads): "
        f"{mm['best_gflops']:.0f} GFLOP/s at best (median {mm['gflops']:.0f}) -> at least {floor:.1f} s for this work; "
        f"the run reached {f['total'] / r['median_s'] / 1e9:.0f} GFLOP/s"]
    names = {"app": "the app's: the first row's heads, then " + f"{r['chunk']} rows a pass",
             "chunk": f"{r['chunk']} rows every pass"}
    per = r.get("schedules", {"app": r})
    rows = [[names[name], f"{s['median_s']:.2f} s", " / ".join(f"{x:.2f}" for x in s.get("seconds", [])),
             f"{s['cpu_s']:.2f} s" if "cpu_s" in s else "",
             f"{s['first_s']:.2f} s: the baseline and {s['first_heads']} heads" if s["first_s"] is not None else "none",
             f"{s['first_cpu_s']:.2f} s" if s.get("first_cpu_s") is not None else "",
             f"{r['reference'][name]:.1e}" if "reference" in r else ""] for name, s in per.items()]
    lines += ["", table(["pass schedule", "every head, gradient, prune curve (median)", "each round (s)", "its CPU",
                         "first partial result (median)", "its CPU", "max |Δ| from float64 (nats)"], rows)]
    if "chunk" in per:
        lines.append(f"  total: the app's over {r['chunk']} rows every pass "
                     f"{per['app']['median_s'] / per['chunk']['median_s']:.2f}x; scores that differ between the two: "
                     f"{r['differ']['scores']} of {r['heads']}, by at most {r['differ']['max']:.1e} nats")
    if "split" in r:
        s = r["split"]
        lines.append(f"  one run by part ({s['total']:.1f} s): " + ", ".join(
            f"{name} {seconds:.2f} s" for name, seconds in s.items() if name != "total"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks importance", description=__doc__.splitlines()[0])
    parser.add_argument("--texts", default="50,100,200")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 for ours, 2 with --real)")
    parser.add_argument("--real", action="store_true", help="also the opus-mt-en-de configuration (144 heads)")
    parser.add_argument("--split", action="store_true", help="with --real: one more run timed by part")
    parser.add_argument("--device", default="cpu", help="with --real: where the real model runs (cpu, cuda)")
    parser.add_argument("--no-ours", action="store_true", help="with --real: skip our models' table")
    parser.add_argument("--chunk", type=int, default=8, help="with --real: batch rows a pass (the app's: 64)")
    parser.add_argument("--reference", action="store_true", help="with --real: also score in float64, once")
    args = parser.parse_args(argv)
    if not args.no_ours:
        print(report(run(tuple(int(x) for x in args.texts.split(",")), args.rounds, args.threads or 1)))
    if args.real:
        print("\n" + report_real(real(threads=args.threads or 2, rounds=args.rounds, split=args.split, device=args.device,
                                       chunk=args.chunk, reference=args.reference)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
