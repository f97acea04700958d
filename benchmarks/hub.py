"""Real models: what capturing every map through our Eq. 1 costs against transformers' own attention.

`python -m benchmarks.hub [--quick] [--threads N] [--only forward,decode,memory,proof,architectures]`
(or `python -m benchmarks --only hub`)

opus-mt-en-de's configuration (Marian, 74M parameters) with random weights built in memory from a fixed seed (nothing
downloaded), three copies in interleaved rounds: ours (PretrainedTransformer.forward, all 18 maps), transformers'
eager attention with output_attentions=True, and its sdpa (no maps: the floor), ours checked against eager's logits
and maps first. Then greedy decoding (ours keeping keys, ours rerunning the decoder, `generate`; the same tokens
checked), a fresh process's memory, the proof on load (proof), and Gemma 2, Qwen3 and gpt-oss from configs by CPU
time (architectures, not by default). docs/benchmarks.md and docs/real_models.md say how to read the tables.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time

import torch

from .common import command, cpu_medians, interleaved, load, machine, ms, parts_of, save, table

OPUS_MT_EN_DE = dict(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6, encoder_attention_heads=8,
                     decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048, pad_token_id=58100,
                     decoder_start_token_id=58100, eos_token_id=0, max_position_embeddings=512,
                     activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True)


class Pieces:
    """What a model built from a config lacks of a tokenizer: special ids (opus-mt-en-de's), pieces named by id."""

    def __init__(self, pad_token_id: int = 58100, eos_token_id: int = 0) -> None:
        self.pad_token_id, self.eos_token_id = pad_token_id, eos_token_id

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def build(seed: int = 0, alone: bool = False, **overrides):
    """(ours, eager, sdpa): three copies of the opus-mt-en-de configuration (with `overrides`) with the same random
    weights; alone: ours only, (ours, None, None)."""
    from transformers import MarianConfig, MarianMTModel

    from attention_viz.hub import PretrainedTransformer

    torch.manual_seed(seed)
    base = MarianMTModel(MarianConfig(**(OPUS_MT_EN_DE | overrides))).eval()
    if alone:
        base.generation_config.bad_words_ids = [[58100]]
        return PretrainedTransformer(base, Pieces()), None, None
    eager, sdpa = copy.deepcopy(base), copy.deepcopy(base)
    eager.set_attn_implementation("eager")
    sdpa.set_attn_implementation("sdpa")
    base.generation_config.bad_words_ids = eager.generation_config.bad_words_ids = [[58100]]
    return PretrainedTransformer(base, Pieces()), eager, sdpa


def inputs(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A source of n tokens (random pieces, </s> last) and a decoder input of n tokens (start token first)."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 58000, (1, n), generator=generator)
    src[0, -1] = 0
    tgt = torch.randint(1, 58000, (1, n), generator=generator)
    tgt[0, 0] = 58100
    return src, tgt


def eager_maps(out) -> dict[str, torch.Tensor]:
    """transformers' output_attentions under our map keys."""
    maps = {f"encoder.{i}.self_attn": a for i, a in enumerate(out.encoder_attentions)}
    maps |= {f"decoder.{i}.self_attn": a for i, a in enumerate(out.decoder_attentions)}
    return maps | {f"decoder.{i}.cross_attn": a for i, a in enumerate(out.cross_attentions)}


def check_forward(ours, eager, sdpa, src: torch.Tensor, tgt: torch.Tensor) -> dict:
    """Ours gives eager's logits and every one of its maps, and sdpa's logits; AssertionError otherwise."""
    logits, maps = ours.forward(src, tgt)
    out = eager(input_ids=src, decoder_input_ids=tgt, output_attentions=True, use_cache=False)
    reference = eager_maps(out)
    assert sorted(maps) == sorted(reference), (sorted(maps), sorted(reference))
    torch.testing.assert_close(logits, out.logits, atol=1e-4, rtol=1e-4)
    for key, weights in reference.items():
        torch.testing.assert_close(maps[key], weights, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(logits, sdpa(input_ids=src, decoder_input_ids=tgt, use_cache=False).logits,
                               atol=1e-3, rtol=1e-4)
    return {"maps": len(maps), "maps_bytes": maps.nbytes}


def capture(sizes=(8, 32, 128), rounds: int = 15, decode=(8, 32), decode_rounds: int = 5, **overrides) -> dict:
    """The forward and decoding tables' numbers (overrides: a smaller configuration, for the smoke test)."""
    ours, eager, sdpa = build(**overrides)
    rows = []
    for n in sizes:
        src, tgt = inputs(n)
        with torch.inference_mode():
            checked = check_forward(ours, eager, sdpa, src, tgt)
            timings = interleaved({
                "ours": lambda: ours.forward(src, tgt),
                "eager": lambda: eager(input_ids=src, decoder_input_ids=tgt, output_attentions=True, use_cache=False),
                "sdpa": lambda: sdpa(input_ids=src, decoder_input_ids=tgt, use_cache=False),
            }, rounds=rounds, sample_s=0.05)
        rows.append({"tokens": n, **checked, **{name: t.to_dict() for name, t in timings.items()}, "load": load()})
    decodes = []
    for n in decode:
        src, _ = inputs(12)
        candidates = {
            "ours": lambda: ours.greedy_decode(src, n)[0],
            "ours_no_keys": lambda: ours.greedy_decode(src, n, reuse_keys=False)[0],
            "generate": lambda: eager.generate(src, attention_mask=torch.ones_like(src), max_new_tokens=n,
                                               num_beams=1, do_sample=False, output_attentions=True,
                                               return_dict_in_generate=True).sequences[:, 1:],
        }
        with torch.inference_mode():
            written = {name: fn() for name, fn in candidates.items()}
            assert all(torch.equal(w, written["generate"]) for w in written.values()), written
            timings = interleaved(candidates, rounds=decode_rounds, sample_s=0.0, warmup=1)
        decodes.append({"written": n, **{name: t.to_dict() for name, t in timings.items()}, "load": load()})
    return {"forward": rows, "decode": decodes}


MEMORY_PROBE = """
import sys
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024
before_import = rss()
import torch
sys.path.insert(0, {root!r})
from benchmarks.hub import build, inputs
torch.set_num_threads({threads})
import transformers.models.marian.modeling_marian, attention_viz.hub
after_import = rss()
ours, _, _ = build(alone=True)
built = rss()
src, tgt = inputs(32)
with torch.inference_mode():
    ours.forward(src, tgt)
    ours.greedy_decode(src, 16)
print(before_import, after_import, built, rss())
"""


LOADED_PROBE = """
import sys, torch
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024
sys.path.insert(0, {root!r})
torch.set_num_threads({threads})
from attention_viz.hub import load_pretrained
after_import = rss()
model = load_pretrained({folder!r})
loaded = rss()
src = model.encode("Attention is all you need, and the students learn quickly today.").ids[None]
with torch.inference_mode():
    model.greedy_decode(src, 16)
print(after_import, loaded, rss())
"""


def memory(threads: int, loaded: bool = True) -> dict:
    """Resident memory of a fresh process: before importing torch, after importing torch and transformers, with the
    model built (one copy, as a server holds it), and after a 32-token capture and a 16-token decode; loaded: also a
    fresh process loading it from a saved folder (with a trained tokenizer) as the app does."""
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", MEMORY_PROBE.format(root=root, threads=threads)], capture_output=True,
                         text=True, check=True, timeout=600).stdout.split()
    before_import, after_import, built, used = (int(x) for x in out[-4:])
    result = {"before_import_bytes": before_import, "after_import_bytes": after_import, "built_bytes": built,
              "used_bytes": used}
    if not loaded:
        return result
    import tempfile

    from devtools.hub_models import save_opus_mt_en_de_random

    with tempfile.TemporaryDirectory() as tmp:  # as the app holds it: loaded from a saved folder
        folder = save_opus_mt_en_de_random(Path(tmp) / "opus-mt-en-de-random")
        out = subprocess.run([sys.executable, "-c", LOADED_PROBE.format(root=root, threads=threads, folder=str(folder))],
                             capture_output=True, text=True, check=True, timeout=600, env={**__import__("os").environ,
                                                                                           "HF_HUB_OFFLINE": "1"})
    _, loaded, loaded_used = (int(x) for x in out.stdout.split()[-3:])
    return result | {"loaded_bytes": loaded, "loaded_used_bytes": loaded_used}


def proof_cost(rounds: int = 5) -> list[dict]:
    """Seconds of load_pretrained (the proof included) and of the proof alone, for each model: medians of rounds."""
    import statistics
    import tempfile
    from pathlib import Path

    from attention_viz.hub import load_pretrained
    from attention_viz.hub.families import family_of
    from attention_viz.hub.proof import prove
    from devtools.hub_models import save_opus_mt_en_de_random
    from devtools.trained_models import minilm_folder

    rows = []
    with tempfile.TemporaryDirectory(prefix="attention_viz-proof-") as temp:
        for name, folder in (("opus-mt-en-de's size (74M, random)", save_opus_mt_en_de_random(Path(temp) / "opus")),
                             ("all-MiniLM-L6-v2 (22.7M, trained)", minilm_folder())):
            model = load_pretrained(folder, device="cpu")  # the files into the page cache, the code warm
            loads, proofs = [], []
            for _ in range(rounds):
                t0 = time.perf_counter()
                model = load_pretrained(folder, device="cpu")
                loads.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                prove(model.model, family_of(model.model.config), model.kernel)
                proofs.append(time.perf_counter() - t0)
            rows.append({"model": name, "load_s": statistics.median(loads), "proof_s": statistics.median(proofs),
                         "fidelity": str(model.fidelity), "rounds": rounds, "load": load()})
    return rows


# Three architectures beyond the first families, each at one shape (d_model 256, 4 layers, 4 heads sharing 2 key-value
# heads, vocabulary 4,096, random weights): Gemma 2's soft cap and sliding window, Qwen3's q/k norms, gpt-oss's sinks
# and experts.
ARCHITECTURES = {
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(head_dim=64, sliding_window=256, attn_logit_softcapping=50.0,
                                                           query_pre_attn_scalar=64)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=64)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM", dict(head_dim=64, num_local_experts=4, num_experts_per_tok=2,
                                                           sliding_window=256)),
}


def architectures(sizes=(16, 128, 512), rounds: int = 15) -> list[dict]:
    """Each of ARCHITECTURES: one pass with every map, ours against eager with output_attentions, by the process's
    CPU time (one pass a sample, alternating who goes first), after checking ours gives eager's maps and logits."""
    import transformers

    from attention_viz.hub import PretrainedTransformer

    rows = []
    for name, (config_name, class_name, extra) in ARCHITECTURES.items():
        torch.manual_seed(0)
        config = getattr(transformers, config_name)(vocab_size=4096, hidden_size=256, num_hidden_layers=4,
                                                    num_attention_heads=4, num_key_value_heads=2,
                                                    intermediate_size=1024, max_position_embeddings=1024, **extra)
        hf = getattr(transformers, class_name)(config).eval()
        eager = copy.deepcopy(hf)
        eager.set_attn_implementation("eager")
        ours = PretrainedTransformer(hf, Pieces(0, 1), name=name)
        for n in sizes:
            ids = torch.randint(3, 4096, (1, n), generator=torch.Generator().manual_seed(n))
            with torch.inference_mode():
                logits, maps = ours.forward(ids)
                out = eager(input_ids=ids, output_attentions=True)
            worst = max(float((maps[k] - w).abs().max()) for k, w in zip(ours.map_keys, out.attentions))
            worst_logit = float((logits - out.logits).abs().max())
            with torch.inference_mode():
                cpu = cpu_medians({"ours": lambda: ours.forward(ids),
                                   "eager": lambda: eager(input_ids=ids, output_attentions=True)}, rounds)
            rows.append({"model": name, "tokens": n, "max_map_difference": worst, "max_logit_difference": worst_logit,
                         **cpu, "rounds": rounds, "load": load()})
    return rows


PARTS = ("forward", "decode", "memory", "proof", "architectures")


def run(quick: bool = False, threads: int = 2, parts: tuple[str, ...] = PARTS) -> dict:
    """The tables' numbers (parts: which tables); quick: 8 and 32 tokens, 8 written, fewer rounds, and no model
    loaded from a folder."""
    torch.set_num_threads(threads)
    sizes, rounds, decode = ((8, 32), 5, (8,)) if quick else ((8, 32, 128), 15, (8, 32))
    result = {"machine": machine(threads), "load_before": load(), "threads": threads, "forward": [], "decode": []}
    if "forward" in parts or "decode" in parts:
        result |= capture(sizes if "forward" in parts else (), rounds, decode if "decode" in parts else (),
                          3 if quick else 5)
    if "memory" in parts:
        result["memory"] = memory(threads, loaded=not quick)
    if "proof" in parts:
        result["proof"] = proof_cost(3 if quick else 5)
    if "architectures" in parts:
        result["architectures"] = architectures((16, 128) if quick else (16, 128, 512), 5 if quick else 15)
    result["load_after"] = load()
    return result


def report(result: dict) -> str:
    """Three Markdown tables: one forward pass with every map, greedy decoding, resident memory."""
    lines = [f"opus-mt-en-de's configuration (74M parameters, random weights), torch threads {result['threads']}, "
             f"load {result['load_before']} -> {result['load_after']}; medians of interleaved rounds, ms"]
    rows = [[r["tokens"], ms(r["ours"]["median_s"]), ms(r["eager"]["median_s"]), ms(r["sdpa"]["median_s"]),
             f"{r['ours']['median_s'] / r['eager']['median_s']:.2f}", f"{r['ours']['median_s'] / r['sdpa']['median_s']:.2f}"]
            for r in result["forward"]]
    if rows:
        lines += ["", "One forward pass that gives every map (source = decoder input = N tokens; ours checked equal to "
                  "eager's logits and maps first):", "",
                  table(["N", "ours (18 maps)", "eager + output_attentions", "sdpa, no maps", "ours / eager",
                         "ours / sdpa"], rows)]
    rows = []
    for d in result["decode"]:
        generate = d["generate"]["median_s"]
        no_keys = d.get("ours_no_keys", {}).get("median_s")
        rows.append([d["written"], ms(d["ours"]["median_s"]), ms(no_keys) if no_keys else "", ms(generate),
                     f"{d['ours']['median_s'] / generate:.2f}", f"{no_keys / generate:.2f}" if no_keys else ""])
    if rows:
        lines += ["", "Greedy decoding of a 12-token source (all three checked to write the same tokens first):", "",
                  table(["tokens written", "ours, kept keys (maps of the last step)", "ours, decoder rerun every step",
                         "generate (eager, cache, every step's maps)", "ours kept / generate",
                         "ours rerun / generate"], rows)]
    if result.get("proof"):
        rows = [[r["model"], ms(r["load_s"]), ms(r["proof_s"]), ms(r["load_s"] - r["proof_s"]),
                 f"{r['proof_s'] / r['load_s']:.0%}"] for r in result["proof"]]
        lines += ["", "The proof on load (medians; the load without it is the difference):", "",
                  table(["model", "load_pretrained, proof included", "the proof alone", "load without the proof",
                         "proof's share"], rows), ""] + [f"{r['model']}: {r['fidelity']}" for r in result["proof"]]
    if result.get("architectures"):
        rows = [[r["model"], r["tokens"], ms(r["ours"]), ms(r["eager"]), f"{r['ours'] / r['eager']:.2f}",
                 f"{r['max_map_difference']:.0e}"] for r in result["architectures"]]
        lines += ["", "Three architectures (d_model 256, 4 layers, 4 heads, 2 key-value heads, random weights): one "
                  "pass with every map, by CPU time (medians):", "",
                  table(["model", "tokens", "ours", "eager + output_attentions", "ours / eager",
                         "largest map difference"], rows)]
    if "memory" not in result:
        return "\n".join(lines)
    m = result["memory"]
    mib = lambda b: f"{b / 2**20:.0f}"  # noqa: E731
    memory_rows = []
    if "before_import_bytes" in m:
        memory_rows.append(["Python alone, before importing torch", mib(m["before_import_bytes"])])
    memory_rows += [["torch, transformers' Marian and attention_viz.hub imported", mib(m["after_import_bytes"])],
                    ["the model built (random initialisation)", mib(m["built_bytes"])],
                    ["after a 32-token capture and a 16-token decode", mib(m["used_bytes"])]]
    if "loaded_bytes" in m:
        memory_rows += [["instead loaded from its saved folder, as the app does", mib(m["loaded_bytes"])],
                        ["after a 16-token decode of a sentence", mib(m["loaded_used_bytes"])]]
    lines += ["", table(["resident memory (VmRSS of a fresh process)", "MiB"], memory_rows)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = command("hub", __doc__)
    parser.add_argument("--quick", action="store_true",
                        help="8 and 32 tokens, 8 written, few rounds, no folder load (under a minute)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2, the machine's cores)")
    parser.add_argument("--only", default=",".join(PARTS[:4]), help="comma-separated tables: " + ",".join(PARTS))
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args.quick, args.threads, parts_of(parser, args.only, PARTS))
    save("hub", result, args.out, t0, report=report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
