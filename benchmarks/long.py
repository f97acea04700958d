"""Attention at length: the long pass (hub.long) against transformers' own forward, in time and in memory.

`python -m benchmarks.long [--quick] [--threads 2] [--sizes 256,1024,4096] [--rounds 3] [--only time,memory]
[--against FILE]`

The model is shaped like SmolLM2-135M (Llama-class: 30 layers, 9 query heads on 3 key/value heads, d_model 576,
d_ff 1,536, rotary θ 100,000, tied embeddings) with random weights and its vocabulary cut to 4,096, built in memory
with a fixed seed: nothing is downloaded. At each length T (random ids), timed in interleaved rounds (medians):

    sdpa       transformers' default forward (PyTorch's fused attention): logits, no maps; the reference
    long       PretrainedTransformer.long_run: logits, every head's summaries, q, k and lse kept on disk
    eager      transformers' eager attention with output_attentions=True (to 1,024 tokens: L·H·T² weights)
    ours       PretrainedTransformer.forward, every map recorded (to 1,024 tokens, for the same reason)
    against    with --against FILE (another checkout's fast/blockwise.py, e.g. `git show main:attention_viz/fast/
               blockwise.py > /tmp/main_blockwise.py`): the long pass with that file's attend, interleaved with ours

and the CPU time of the same calls (the process's, every thread's: on a shared machine the wall clock also counts
the other work's turns), then the views of a long run: a head's overview (512 x 512, block max and block mean) and
a 256 x 256 region, with what the run kept on disk and in memory. Peak memory: each candidate in a fresh process,
the model built and warmed up on 16 tokens, the peak resident set (VmHWM, reset before the pass) less the resident
set before it; glibc's malloc tuned as the server tunes it (server/runtime.py's tune_malloc: a block of a MiB or more
mapped apart and given back when freed), or left as glibc sets it with --malloc default. One copy of the weights serves every candidate (the attention implementation is switched between calls).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from .common import command, interleaved, load, machine, ms, save, table

SMOLLM2_135M = dict(vocab_size=4096, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rope_theta=100000.0,
                    tie_word_embeddings=True, rms_norm_eps=1e-5)
CANDIDATES = ("sdpa", "long", "eager", "ours")
FULL_MAPS_UP_TO = 1024  # eager and ours keep L·H·T² weights: 1.1 GiB at 1,024 tokens, 18 GiB at 4,096


class Ids:
    """All the wrapper needs of a tokenizer here (the benchmark gives ids): no <pad>."""

    pad_token_id = eos_token_id = None

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def build(seed: int = 0, **overrides):
    """The SmolLM2-135M-shaped model (with `overrides`), random weights, wrapped: a PretrainedTransformer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from attention_viz.hub import PretrainedTransformer

    torch.manual_seed(seed)
    return PretrainedTransformer(LlamaForCausalLM(LlamaConfig(**(SMOLLM2_135M | overrides))), Ids())


def ids_of(T: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, SMOLLM2_135M["vocab_size"], (1, T), generator=torch.Generator().manual_seed(seed))


def attend_of(path: str):
    """The `attend` of a blockwise.py at `path` (another checkout's long-pass attention, to time against)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("against_blockwise", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.attend


def candidates(model, ids: torch.Tensor, names, against: str | None = None) -> dict:
    """name -> a call running that candidate once on ids [1, T] (the implementation switched for the call);
    "against": the long pass with the attend of the blockwise.py at `against`."""
    hf = model.model
    own = hf.config._attn_implementation

    def transformers_forward(implementation: str, **kwargs):
        def call():
            hf.set_attn_implementation(implementation)
            try:
                with torch.inference_mode():
                    return hf(input_ids=ids, use_cache=False, **kwargs).logits
            finally:
                hf.set_attn_implementation(own)
        return call

    def ours():
        with torch.inference_mode():
            return model.forward(ids)[0]

    def long_against():
        from attention_viz.hub import long as hub_long

        own, hub_long.attend = hub_long.attend, other
        try:
            return model.long_run(ids)
        finally:
            hub_long.attend = own

    other = attend_of(against) if against else None
    every = {"sdpa": transformers_forward("sdpa"), "long": lambda: model.long_run(ids), "against": long_against,
             "long_in_memory": lambda: model.long_run(ids, keep="memory"),
             "eager": transformers_forward("eager", output_attentions=True), "ours": ours}
    return {name: every[name] for name in names}


def names_at(T: int, wanted=CANDIDATES) -> tuple[str, ...]:
    """The candidates that fit at T tokens (eager and ours keep every map)."""
    return tuple(n for n in wanted if n not in ("eager", "ours") or T <= FULL_MAPS_UP_TO)


def check(model, T: int = 256) -> float:
    """The long pass's logits against sdpa's (float32): the largest difference; AssertionError past 1e-3."""
    ids = ids_of(T, seed=1)
    calls = candidates(model, ids, ("sdpa",))
    run = model.long_run(ids)
    difference = float((run.logits - calls["sdpa"]()).abs().max())
    assert difference < 1e-3, difference
    return difference


def cpu_timed(call, seconds: list[float]):
    """call, also appending each call's CPU time of the process (every thread's, spinning included) to seconds: on
    a shared machine the wall clock counts the other work's turns, the CPU time does not."""
    def timed():
        t0 = time.process_time()
        try:
            return call()
        finally:
            seconds.append(time.process_time() - t0)
    return timed


def timings(model, sizes, rounds: int, against: str | None = None) -> list[dict]:
    """Each candidate at each length, interleaved rounds; the views of a long run at each length."""
    rows = []
    for T in sizes:
        ids = ids_of(T)
        cpu: dict[str, list[float]] = {}
        names = names_at(T) + (("against",) if against else ())
        calls = {name: cpu_timed(call, cpu.setdefault(name, [])) for name, call in
                 candidates(model, ids, names, against).items()}
        timed = interleaved(calls, rounds=rounds, sample_s=0.0, warmup=0)
        row = {"tokens": T, **{name: t.to_dict() | {"cpu_median_s": statistics.median(cpu[name][1:])}
                               for name, t in timed.items()}, "load": load()}
        run = model.long_run(ids)
        key, head = run.keys[len(run.keys) // 2], run.n_heads // 2
        middle = max(0, T // 2 - 128)
        views = {
            "overview_max": lambda: run.overview(key, head, size=512),
            "overview_mean": lambda: run.overview(key, head, size=512, reduce="mean"),
            "region": lambda: run.region(key, head, slice(middle, middle + 256), slice(middle, middle + 256)),
        }
        memory_run = model.long_run(ids, keep="memory")
        views["region_in_memory"] = lambda: memory_run.region(key, head, slice(middle, middle + 256),
                                                              slice(middle, middle + 256))
        views["overview_max_in_memory"] = lambda: memory_run.overview(key, head, size=512)
        row["views"] = {name: t.to_dict() for name, t in interleaved(views, rounds=7, sample_s=0.0, warmup=1).items()}
        row["kept_bytes"] = run.kept_bytes
        run.close()
        del memory_run
        rows.append(row)
        print(f"  {T} tokens: " + ", ".join(f"{n} {ms(row[n]['median_s'])} ms" for n in calls), flush=True)
    return rows


PROBE = """
import sys, torch
sys.path.insert(0, {root!r})
torch.set_num_threads({threads})
if {tuned!r}:
    from attention_viz.server.runtime import tune_malloc
    tune_malloc()
from benchmarks.common import peak_bytes, reset_peak, status
from benchmarks.long import build, ids_of, candidates
model = build()
call = candidates(model, ids_of(16), [{name!r}], {against!r})[{name!r}]
call()
call = candidates(model, ids_of({tokens}), [{name!r}], {against!r})[{name!r}]
before = status('VmRSS')
reset = reset_peak()
result = call()
print(before, peak_bytes(reset), status('VmRSS'), int(reset))
"""


def memory(sizes, threads: int, names=("sdpa", "long", "long_in_memory", "eager", "ours"),
           against: str | None = None, tuned: bool = True) -> list[dict]:
    """Each candidate's peak resident memory over the built, warmed-up model, in a fresh process of its own (malloc
    tuned as the server's, or glibc's defaults)."""
    root = str(Path(__file__).resolve().parents[1])
    rows = []
    for T in sizes:
        row = {"tokens": T}
        for name in names_at(T, names) + (("against",) if against else ()):
            probe = PROBE.format(root=root, threads=threads, tokens=T, name=name, against=against, tuned=tuned)
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=1800)
            if out.returncode != 0:
                raise RuntimeError(out.stderr[-2000:])
            before, peak, after, reset = (int(x) for x in out.stdout.split()[-4:])
            row[name] = {"before_bytes": before, "peak_bytes": peak, "after_bytes": after, "hwm_reset": bool(reset)}
        rows.append(row)
        print(f"  {T} tokens: " + ", ".join(f"{n} +{(v['peak_bytes'] - v['before_bytes']) / 2**20:.0f} MiB"
                                           for n, v in row.items() if isinstance(v, dict)), flush=True)
    return rows


def run(sizes=(256, 1024, 4096), rounds: int = 3, threads: int = 2, parts=("time", "memory"),
        against: str | None = None, malloc: str = "server") -> dict:
    torch.set_num_threads(threads)
    result = {"machine": machine(threads), "load_before": load(), "threads": threads, "sizes": list(sizes),
              "against": against, "malloc": malloc}
    if "time" in parts:
        model = build()
        result["check_max_abs_logits"] = check(model)
        result["time"] = timings(model, sizes, rounds, against)
        del model
    if "memory" in parts:
        result["memory"] = memory(sizes, threads, against=against, tuned=malloc == "server")
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    """Markdown tables: time per pass, the views of a long run, peak memory."""
    lines = [f"SmolLM2-135M's shape (30 layers x 9 heads, 3 key/value heads, random weights, vocabulary 4,096), "
             f"float32, torch threads {result['threads']}, load {result['load_before']} -> {result['load_after']}; "
             f"medians of interleaved rounds"]
    against = [f"long, {Path(result['against']).name}'s attend"] if result.get("against") else []
    extra = lambda cell: [cell("against")] if against else []  # noqa: E731
    if "time" in result:
        rows = []
        for r in result["time"]:
            sdpa = r["sdpa"]["median_s"]
            cell = lambda n: f"{ms(r[n]['median_s'])} ({r[n]['median_s'] / sdpa:.2f}x)" if n in r else "—"  # noqa: E731
            rows.append([r["tokens"], ms(sdpa), cell("long"), cell("eager"), cell("ours")] + extra(cell))
        lines += ["", f"One pass, ms (x sdpa); long's logits checked against sdpa's first (max |Δ| "
                      f"{result['check_max_abs_logits']:.1e}):", "",
                  table(["T", "sdpa (no maps)", "long (summaries, q k lse kept)", "eager + output_attentions",
                         "ours, every map"] + against, rows)]
        rows = []
        for r in result["time"]:
            sdpa = r["sdpa"]["cpu_median_s"]
            cell = lambda n: (f"{ms(r[n]['cpu_median_s'])} ({r[n]['cpu_median_s'] / sdpa:.2f}x)"  # noqa: E731
                              if n in r else "—")
            rows.append([r["tokens"], ms(sdpa), cell("long"), cell("eager"), cell("ours")] + extra(cell))
        lines += ["", "The same passes' CPU time, ms (x sdpa): the process's, every thread's (the machine's other "
                      "work not counted; a waiting thread's spinning counted):", "",
                  table(["T", "sdpa (no maps)", "long (summaries, q k lse kept)", "eager + output_attentions",
                         "ours, every map"] + against, rows)]
        rows = [[r["tokens"], ms(r["views"]["overview_max"]["median_s"]), ms(r["views"]["overview_mean"]["median_s"]),
                 ms(r["views"]["region"]["median_s"]), ms(r["views"]["overview_max_in_memory"]["median_s"]),
                 ms(r["views"]["region_in_memory"]["median_s"]), f"{r['kept_bytes'] / 2**20:.1f}"]
                for r in result["time"]]
        lines += ["", "The views of a long run (a middle layer's middle head), ms:", "",
                  table(["T", "overview 512, max", "overview 512, mean", "region 256 x 256",
                         "overview, kept in memory", "region, kept in memory", "kept, MiB"], rows)]
    if "memory" in result:
        rows = []
        for r in result["memory"]:
            delta = {n: (v["peak_bytes"] - v["before_bytes"]) / 2**20 for n, v in r.items() if isinstance(v, dict)}
            sdpa = delta["sdpa"]
            cell = lambda n: f"+{delta[n]:.0f} ({delta[n] / sdpa:.2f}x)" if n in delta else "—"  # noqa: E731
            rows.append([r["tokens"], f"+{sdpa:.0f}", cell("long"), cell("long_in_memory"), cell("eager"),
                         cell("ours"), f"{r['sdpa']['before_bytes'] / 2**20:.0f}"] + extra(cell))
        malloc = ("glibc's malloc tuned as the server's" if result.get("malloc", "server") == "server"
                  else "glibc's malloc as it comes")
        lines += ["", f"Peak resident memory of one pass over the loaded model, MiB (x sdpa's), each in a fresh "
                      f"process, {malloc}:", "",
                  table(["T", "sdpa", "long (kept on disk)", "long (kept in memory)", "eager + output_attentions",
                         "ours, every map", "the loaded model's process"] + against, rows)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command("long", __doc__)
    parser.add_argument("--quick", action="store_true", help="256 and 1,024 tokens, 2 rounds")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2, the machine's cores)")
    parser.add_argument("--sizes", default="256,1024,4096", help="comma-separated lengths in tokens")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per length")
    parser.add_argument("--only", default="time,memory", help="comma-separated parts: time, memory")
    parser.add_argument("--against", default=None, help="another blockwise.py whose attend the long pass also runs")
    parser.add_argument("--malloc", choices=("server", "default"), default="server",
                        help="peak memory with glibc's malloc tuned as the server tunes it (default) or as glibc sets it")
    args = parser.parse_args(argv)
    sizes = (256, 1024) if args.quick else tuple(int(s) for s in args.sizes.split(","))
    rounds = 2 if args.quick else args.rounds
    parts = tuple(p.strip() for p in args.only.split(",") if p.strip())
    t0 = time.perf_counter()
    result = run(sizes, rounds, args.threads, parts, args.against, args.malloc)
    save("long", result, args.out, t0, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
