"""Models bigger than the machine: the long pass under a placement against transformers' SDPA forward under the same.

`python -m benchmarks offload [--shape tiny|1b|8b] [--place disk|cpu|cuda] [--dtype float32|bfloat16|float16]
[--sizes 1024,2048] [--rounds 1] [--threads 2] [--rows 64] [--folder DIR]`

A Llama-class shape with random weights (seeded; nothing downloaded):

    tiny   2 layers, d_model 64, 4 query heads on 2 key/value heads (the benchmark's own check: seconds)
    1b     Llama 3.2 1B's: 16 layers, d_model 2,048, 32 query heads on 8 key/value heads (d_k 64), d_ff 8,192,
           vocabulary 128,256, tied embeddings (1.24 billion parameters)
    8b     Llama 3.1 8B's: 32 layers, d_model 4,096, 32 query heads on 8 key/value heads (d_k 128), d_ff 14,336,
           vocabulary 128,256 (8.03 billion parameters)

The placement, the same for both candidates:

    disk   every decoder layer on disk, read from the model's own safetensors files for its pass (accelerate's
           hooks); the embeddings, the final norm and the output head on the CPU. The model is saved once to
           --folder (default a folder under the system's temporary one, kept for the next run) and loaded by
           load_pretrained with that device map, the proof on load included.
    cpu    the whole model on the CPU, loaded the same way.
    cuda   the whole model on cuda:0, built there (not saved: nothing to read from disk), wrapped with the proof.

At each length T (random ids), each candidate in a fresh process (the model loaded there, both passes warmed up on
16 tokens first):

    sdpa   transformers' forward with its SDPA attention (PyTorch's fused kernels): no maps, the output head on the
           last position only (logits_to_keep=1)
    long   model.long_run(ids, last_logits=True): every head's summaries, q, k and each row's lse kept on disk

Each: the pass's wall time and the process's CPU time, and its peak memory over what the loaded model holds: the
peak resident set (VmHWM, reset before the pass) less the resident set before it; on CUDA also
torch.cuda.max_memory_allocated less memory_allocated before the pass. Before timing, the long pass's last logits
are checked against sdpa's on 64 tokens.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from .common import command, load, machine, ms, save, table

SHAPES = {
    "tiny": dict(vocab_size=4096, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, tie_word_embeddings=True),
    "1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True),
    "8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
COMMON = dict(max_position_embeddings=131072, rope_theta=500000.0, rms_norm_eps=1e-5)
PLACES = ("disk", "cpu", "cuda")


def config_of(shape: str, tokenizer=None):
    """The LlamaConfig of a shape (its special ids the tokenizer's, when given)."""
    from transformers import LlamaConfig

    ids = {} if tokenizer is None else dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    return LlamaConfig(**SHAPES[shape], **COMMON, **ids)


def saved(shape: str, dtype: torch.dtype, folder: Path | None = None, seed: int = 0) -> Path:
    """The folder of the shape's model in `dtype` (random weights, a Llama 2-style tokenizer of devtools.hub_models),
    saved there unless it already holds it."""
    from transformers import LlamaForCausalLM

    from devtools.hub_models import _llama_tokenizer

    kind = str(dtype).removeprefix("torch.")
    folder = Path(folder or Path(tempfile.gettempdir()) / f"attention_viz-offload-{shape}-{kind}")
    if (folder / "done").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _llama_tokenizer()
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # the weights made in their dtype: the 1B model is 2.5 GB in bfloat16, not 5
    try:
        model = LlamaForCausalLM(config_of(shape, tokenizer)).eval()
    finally:
        torch.set_default_dtype(previous)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    (folder / "done").write_text("")
    return folder


def device_map(place: str, layers: int) -> dict | None:
    """The placement as load_pretrained takes it."""
    if place == "cpu":
        return {"": "cpu"}
    rest = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    return rest | {f"model.layers.{i}": "disk" for i in range(layers)}


def loaded(shape: str, place: str, dtype: torch.dtype, folder: Path | None, offload: Path):
    """The model placed: a PretrainedTransformer (the proof on load passed)."""
    if place == "cuda":
        from transformers import LlamaForCausalLM

        from attention_viz.hub import PretrainedTransformer
        from benchmarks.long import Ids

        torch.manual_seed(0)
        previous = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device("cuda:0"):
                hf = LlamaForCausalLM(config_of(shape)).eval()
        finally:
            torch.set_default_dtype(previous)
        return PretrainedTransformer(hf, Ids(), name=f"llama-{shape}")
    from attention_viz.hub import load_pretrained

    layers = SHAPES[shape]["num_hidden_layers"]
    return load_pretrained(saved(shape, dtype, folder), device_map=device_map(place, layers), offload_folder=offload,
                           dtype=dtype)


def ids_of(T: int, vocabulary: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, vocabulary, (1, T), generator=torch.Generator().manual_seed(seed))


def calls(model, ids: torch.Tensor, rows: int) -> dict:
    """name -> the candidate's pass on ids [1, T]: the last position's logits."""
    hf = model.model
    ids = ids.to(model.device)

    def sdpa():
        own = hf.config._attn_implementation
        hf.set_attn_implementation("sdpa")
        try:
            with torch.inference_mode():
                return hf(input_ids=ids, use_cache=False, logits_to_keep=1).logits
        finally:
            hf.set_attn_implementation(own)

    def long():
        run = model.long_run(ids, rows=rows, last_logits=True, warn=False)
        run.close()
        return run.logits

    return {"sdpa": sdpa, "long": long}


PROBE = """
import json, sys, time, torch
sys.path.insert(0, {root!r})
torch.set_num_threads({threads})
from attention_viz.server.runtime import tune_malloc
tune_malloc()
from benchmarks.common import peak_bytes, reset_peak, status
from benchmarks.offload import calls, ids_of, loaded, SHAPES
dtype = getattr(torch, {dtype!r})
model = loaded({shape!r}, {place!r}, dtype, {folder!r}, {offload!r})
vocabulary = SHAPES[{shape!r}]['vocab_size']
out = {{}}
if {check!r}:
    short = calls(model, ids_of(64, vocabulary, 1), {rows})
    out['check_max_abs_logits'] = float((short['long']().float() - short['sdpa']().float()).abs().max())
calls(model, ids_of(16, vocabulary), {rows})[{name!r}]()
call = calls(model, ids_of({tokens}, vocabulary), {rows})[{name!r}]
cuda = torch.cuda.is_available() and model.device.type == 'cuda'
before = status('VmRSS')
reset = reset_peak()
if cuda:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    allocated = torch.cuda.memory_allocated()
t0, c0 = time.perf_counter(), time.process_time()
call()
if cuda:
    torch.cuda.synchronize()
out.update(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0, before_bytes=before,
           peak_bytes=peak_bytes(reset), hwm_reset=reset)
if cuda:
    out.update(device_before_bytes=allocated, device_peak_bytes=torch.cuda.max_memory_allocated())
print(json.dumps(out))
"""


def measured(shape: str, place: str, dtype: torch.dtype, sizes, rounds: int, threads: int, rows: int,
             folder: Path | None) -> list[dict]:
    """Each candidate at each length, `rounds` times, each time in a fresh process (alternating who goes first)."""
    root = str(Path(__file__).resolve().parents[1])
    kind = str(dtype).removeprefix("torch.")
    results = []
    if place != "cuda":
        saved(shape, dtype, folder)  # once, before any timing
    with tempfile.TemporaryDirectory(prefix="attention_viz-offload-") as offload:
        checked = False
        for T in sizes:
            row = {"tokens": T, "sdpa": [], "long": []}
            for r in range(rounds):
                for name in (("sdpa", "long") if r % 2 == 0 else ("long", "sdpa")):
                    probe = PROBE.format(root=root, threads=threads, dtype=kind, shape=shape, place=place,
                                         folder=str(folder) if folder else None, offload=offload, rows=rows,
                                         tokens=T, name=name, check=not checked)
                    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                         timeout=3600)
                    if out.returncode != 0:
                        raise RuntimeError(out.stderr[-3000:])
                    value = json.loads(out.stdout.strip().splitlines()[-1])
                    if "check_max_abs_logits" in value:
                        row["check_max_abs_logits"] = value.pop("check_max_abs_logits")
                        checked = True
                    row[name].append(value)
                    print(f"  {T} tokens, {name}: {value['wall_s']:.1f} s, +"
                          f"{(value['peak_bytes'] - value['before_bytes']) / 2**20:.0f} MiB", flush=True)
            results.append(row)
    return results


def run(shape: str = "tiny", place: str = "disk", dtype: torch.dtype = torch.float32, sizes=(256,), rounds: int = 1,
        threads: int = 2, rows: int = 64, folder: Path | None = None) -> dict:
    result = {"machine": machine(threads), "load_before": load(), "shape": shape, "place": place,
              "dtype": str(dtype).removeprefix("torch."), "threads": threads, "rows": rows, "sizes": list(sizes)}
    result["passes"] = measured(shape, place, dtype, sizes, rounds, threads, rows, folder)
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    """One table: time and peak memory of each candidate at each length, and the ratios."""
    headers = ["T", "sdpa, s", "long, s (x sdpa)", "sdpa CPU s", "long CPU s (x)", "sdpa peak, MiB",
               "long peak, MiB (x sdpa)", "resident before, MiB", "whole peak: sdpa, long, MiB (x)"]
    cuda = result["place"] == "cuda"
    if cuda:
        headers += ["sdpa device peak, MiB", "long device peak, MiB (x)"]
    rows = []
    for r in result["passes"]:
        med = {n: {k: statistics.median(v[k] for v in r[n]) for k in r[n][0] if k != "hwm_reset"}
               for n in ("sdpa", "long")}
        grow = {n: (med[n]["peak_bytes"] - med[n]["before_bytes"]) / 2**20 for n in med}
        row = [r["tokens"], f"{med['sdpa']['wall_s']:.1f}",
               f"{med['long']['wall_s']:.1f} ({med['long']['wall_s'] / med['sdpa']['wall_s']:.2f}x)",
               f"{med['sdpa']['cpu_s']:.1f}",
               f"{med['long']['cpu_s']:.1f} ({med['long']['cpu_s'] / med['sdpa']['cpu_s']:.2f}x)",
               f"+{grow['sdpa']:.0f}", f"+{grow['long']:.0f} ({grow['long'] / max(grow['sdpa'], 1e-9):.2f}x)",
               f"{med['sdpa']['before_bytes'] / 2**20:.0f}",
               f"{med['sdpa']['peak_bytes'] / 2**20:.0f}, {med['long']['peak_bytes'] / 2**20:.0f} "
               f"({med['long']['peak_bytes'] / med['sdpa']['peak_bytes']:.2f}x)"]
        if cuda:
            dev = {n: (med[n]["device_peak_bytes"] - med[n]["device_before_bytes"]) / 2**20 for n in med}
            row += [f"+{dev['sdpa']:.0f}", f"+{dev['long']:.0f} ({dev['long'] / max(dev['sdpa'], 1e-9):.2f}x)"]
        rows.append(row)
    check = next((r["check_max_abs_logits"] for r in result["passes"] if "check_max_abs_logits" in r), None)
    return "\n".join([
        f"Llama-class shape {result['shape']} ({result['dtype']}, random weights), placement {result['place']}, "
        f"torch threads {result['threads']}, blocks of {result['rows']} rows, load {result['load_before']} -> "
        f"{result['load_after']}; each pass in a fresh process, medians of {len(result['passes'][0]['sdpa'])}; "
        f"the long pass's last logits against sdpa's on 64 tokens: max |Δ| {check:.1e}", "",
        table(headers, rows)])


def main(argv: list[str] | None = None) -> int:
    parser = command("offload", __doc__)
    parser.add_argument("--shape", choices=tuple(SHAPES), default="tiny")
    parser.add_argument("--place", choices=PLACES, default="disk")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    parser.add_argument("--sizes", default="256", help="comma-separated lengths in tokens")
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per candidate and length")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2, this machine's cores)")
    parser.add_argument("--rows", type=int, default=64, help="query rows per block of the long pass")
    parser.add_argument("--folder", default=None, help="where the model is saved (kept for the next run)")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.shape, args.place, getattr(torch, args.dtype), tuple(int(s) for s in args.sizes.split(",")),
                 args.rounds, args.threads, args.rows, Path(args.folder) if args.folder else None)
    save("offload", result, args.out, t0, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
