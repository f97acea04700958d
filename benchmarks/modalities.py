"""Pictures and sound: what capturing every map through our Eq. 1 costs against transformers' own attention.

`python -m benchmarks modalities [--rounds 15] [--threads 2]`

DeiT-tiny's shape at 224 px (12 layers, 3 heads, d_model 192: 198 tokens, the class and distillation tokens and 14 x 14
patches) and whisper-tiny's encoder (4 layers, 6 heads, d_model 384, 1,500 positions for 30 s), random weights from a
fixed seed (nothing downloaded), three copies: ours (PretrainedTransformer.forward, every map), transformers' eager
attention with output_attentions=True, and its sdpa (no maps: the floor). Ours is checked against eager's maps and
output first; then the process's CPU time of one pass of each, alternating who goes first (benchmarks.common.
cpu_medians), medians over the rounds.
"""

from __future__ import annotations

import copy
import time

import torch

from .common import command, cpu_medians, load, machine, save, table

DEIT_TINY = dict(image_size=224, patch_size=16, hidden_size=192, num_hidden_layers=12, num_attention_heads=3,
                 intermediate_size=768)
WHISPER_TINY = dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                    decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536, num_mel_bins=80,
                    max_source_positions=1500, vocab_size=51865)


def deit():
    """(ours, eager, sdpa, inputs, what the eager output's maps are called) for DeiT-tiny's shape."""
    from transformers import DeiTConfig, DeiTModel

    from attention_viz.hub import PretrainedTransformer
    from attention_viz.hub.images import Patches

    torch.manual_seed(0)
    base = DeiTModel(DeiTConfig(**DEIT_TINY)).eval()
    patches = Patches(None, (224, 224), 16, 3, ("[CLS]", "[DIST]"))
    pixels = patches.probe(1, "cpu")
    return base, patches, {"pixel_values": pixels}, pixels


def whisper_encoder():
    """Whisper-tiny's shape, its encoder alone (the decoder's maps are a text model's)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    return WhisperForConditionalGeneration(WhisperConfig(**WHISPER_TINY)).eval()


def measure(name: str, ours_pass, eager_pass, sdpa_pass, ours_maps, eager_maps, rounds: int) -> dict:
    """Check ours against eager, then the CPU medians of the three."""
    with torch.inference_mode():
        maps = ours_maps()
        theirs = eager_maps()
        worst = max(float((maps[f"encoder.{i}.self_attn"] - w).abs().max()) for i, w in enumerate(theirs))
        assert worst < 1e-4, (name, worst)
        cpu = cpu_medians({"ours": ours_pass, "eager": eager_pass, "sdpa": sdpa_pass}, rounds, warmup=1)
    return {"model": name, "maps": len(maps), "tokens": int(maps["encoder.0.self_attn"].size(-1)),
            "max_map_difference": worst, **cpu, "rounds": rounds, "load": load()}


def run(rounds: int = 15, threads: int = 2) -> dict:
    from attention_viz.hub import PretrainedTransformer
    from attention_viz.hub.speech import Frames

    torch.set_num_threads(threads)
    result = {"machine": machine(threads), "threads": threads, "load_before": load(), "rows": []}
    base, patches, kwargs, pixels = deit()
    eager, sdpa = copy.deepcopy(base), copy.deepcopy(base)
    eager.set_attn_implementation("eager")
    sdpa.set_attn_implementation("sdpa")
    ours = PretrainedTransformer(base, None, name="deit-tiny shape", modality=patches)
    result["rows"].append(measure(
        "DeiT-tiny's shape, 224 px", lambda: ours.forward(pixels), lambda: eager(**kwargs, output_attentions=True),
        lambda: sdpa(**kwargs), lambda: ours.forward(pixels)[1], lambda: eager(**kwargs, output_attentions=True)
        .attentions, rounds))
    whisper = whisper_encoder()
    frames = Frames(type("Extractor", (), {"nb_max_frames": 3000})(), 1500, 80, 30.0, 16000)
    eager_w, sdpa_w = copy.deepcopy(whisper), copy.deepcopy(whisper)
    eager_w.set_attn_implementation("eager")
    sdpa_w.set_attn_implementation("sdpa")
    ours_w = PretrainedTransformer(whisper, _Pieces(), name="whisper-tiny shape", modality=frames)
    features = frames.probe(1, "cpu")
    encoder = ours_w.model.get_encoder()

    def ours_encoder():
        with ours_w.switched(record=True) as run:
            encoder(input_features=features)
        return ours_w._maps(run)

    result["rows"].append(measure(
        "whisper-tiny's encoder, 30 s", ours_encoder,
        lambda: eager_w.get_encoder()(input_features=features, output_attentions=True),
        lambda: sdpa_w.get_encoder()(input_features=features), ours_encoder,
        lambda: eager_w.get_encoder()(input_features=features, output_attentions=True).attentions, rounds))
    result["load_after"] = load()
    return result


class _Pieces:
    """What a model built from a config lacks of a tokenizer: whisper-tiny's special ids."""

    pad_token_id, eos_token_id = 50257, 50257

    def convert_ids_to_tokens(self, ids):
        return [str(i) for i in ids]


def report(result: dict) -> str:
    rows = [[r["model"], r["tokens"], r["maps"], f"{r['max_map_difference']:.0e}", f"{r['ours'] * 1e3:.0f}",
             f"{r['eager'] * 1e3:.0f}", f"{r['sdpa'] * 1e3:.0f}", f"{r['ours'] / r['eager']:.3f}",
             f"{r['ours'] / r['sdpa']:.2f}"] for r in result["rows"]]
    return (f"torch threads {result['threads']}, load {result['load_before']} -> {result['load_after']}; CPU ms of "
            f"one pass, medians of {result['rows'][0]['rounds']} alternating rounds\n\n"
            + table(["model", "tokens", "maps", "ours vs eager", "ours (every map)", "eager + output_attentions",
                     "sdpa, no maps", "ours / eager", "ours / sdpa"], rows))


def main(argv: list[str] | None = None) -> dict:
    parser = command("modalities", __doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = run(args.rounds, args.threads)
    save("modalities", result, args.out, started, report)
    return result
