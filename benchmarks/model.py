"""Model benchmark: our forward capturing every map, against the same weights in PyTorch's nn.Transformer.

Candidates, on src and tgt of n tokens each, decoder causal mask and padding masks on (as in the app):
    torch        nn.Transformer (batch_first, eval, PyTorch's fast paths allowed), our embeddings and
                 generator around it: the same model and weights, no maps
    no_capture   our model running F.scaled_dot_product_attention as its kernel (use_kernel): same code, no maps
    ours         our model, every map returned: the thing the app runs
`ours / no_capture` is the cost of capture itself; `ours / torch` is the cost against PyTorch's best.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.fast import attention as fast
from attention_viz import Transformer, TransformerConfig, transformer_from_torch
from attention_viz.core.attention import scale_factor

from .common import interleaved, load, ms, table

LENGTHS = (16, 64, 256)
QUICK_LENGTHS = (16,)
VOCAB_SIZE = 99  # the app's character tokenizer; a 37k-token generator would dwarf what is compared here
CANDIDATES = ("torch", "no_capture", "ours")


def model_configs() -> dict[str, TransformerConfig]:
    """The paper's base size and the app's default model."""
    return {"base": TransformerConfig(vocab_size=VOCAB_SIZE), "app": app_default_config()}


def app_default_config(torch_compatible: bool = True) -> TransformerConfig:
    """The config of the model the app opens with (attention_viz.service.catalog); the small preset without that module.

    torch_compatible: set d_k = d_v = d_model / h, so that nn.Transformer can hold the same weights.
    """
    try:
        from attention_viz.service.catalog import Catalog, build_untrained
        from attention_viz.service.limits import DEFAULT_UNTRAINED

        catalog = Catalog()
        config = catalog.model_shape(catalog.default_model)
        if config is None:  # the untrained model
            config = build_untrained(**DEFAULT_UNTRAINED, vocab_size=catalog.tokenizer.vocab_size).config
    except ImportError:
        config = TransformerConfig.small(vocab_size=VOCAB_SIZE)
    if not torch_compatible:
        return config
    d_head = config.d_model // config.n_heads
    return replace(config, d_k=d_head, d_v=d_head, dropout=0.0)


def sdpa_without_weights(q, k, v, mask=None, scale="sqrt_dk", dropout_p=0.0, **dot_product):
    """Eq. 1 through PyTorch's kernel (the dot product, nothing added); returns an empty tensor where the weights
    would be."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale_factor(scale, q.size(-1)))
    return out, q.new_empty(0)


class TorchReference(nn.Module):
    """nn.Transformer between our embeddings and our generator: the same model, computed by PyTorch."""

    def __init__(self, stacks: nn.Transformer, ours: Transformer) -> None:
        super().__init__()
        self.stacks, self.ours = stacks, ours

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """src [B, S], tgt [B, T] -> logits [B, T, V]."""
        pad = self.ours.config.pad_id
        T = tgt.size(1)
        future = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)  # (T, T) True = hidden
        y = self.stacks(
            self.ours._embed(self.ours.src_embed, src),
            self.ours._embed(self.ours.tgt_embed, tgt),
            tgt_mask=future,
            tgt_is_causal=True,
            src_key_padding_mask=src == pad,
            tgt_key_padding_mask=tgt == pad,
            memory_key_padding_mask=src == pad,
        )
        return self.ours.generator(y)


def build_pair(config: TransformerConfig, device: torch.device) -> tuple[TorchReference, Transformer]:
    """An nn.Transformer of `config`'s sizes and ours with its weights, both in eval mode on `device`."""
    torch.manual_seed(0)
    stacks = nn.Transformer(
        d_model=config.d_model,
        nhead=config.n_heads,
        num_encoder_layers=config.n_encoder_layers,
        num_decoder_layers=config.n_decoder_layers,
        dim_feedforward=config.d_ff,
        dropout=0.0,
        batch_first=True,
    )
    ours = transformer_from_torch(stacks, config.vocab_size, pad_id=config.pad_id).to(device).eval()
    return TorchReference(stacks.to(device).eval(), ours).eval(), ours


@torch.inference_mode()
def bench_length(reference: TorchReference, ours: Transformer, n: int, device: torch.device, rounds: int, budget_s: float) -> dict:
    """Check the three candidates agree, then time them interleaved."""
    g = torch.Generator().manual_seed(n)
    src = torch.randint(4, ours.config.vocab_size, (1, n), generator=g).to(device)  # (B, S)
    tgt = torch.randint(4, ours.config.vocab_size, (1, n), generator=g).to(device)  # (B, T)

    def run_ours():  # the app's kernel: attention_viz.fast's Eq. 1, bit-identical to the reference
        return ours.use_kernel(fast.scaled_dot_product_attention)(src, tgt, causal_mask=True, padding_mask=True)

    def run_no_capture():
        return ours.use_kernel(sdpa_without_weights)(src, tgt, causal_mask=True, padding_mask=True)

    logits, maps = run_ours()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
        torch.testing.assert_close(logits, reference(src, tgt), atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(logits, run_no_capture()[0], atol=1e-3, rtol=1e-4)

    candidates = {"torch": lambda: reference(src, tgt), "no_capture": run_no_capture, "ours": run_ours}
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    with warnings.catch_warnings():  # nn.Transformer's encoder fast path warns on every call that nested tensors are a prototype
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
        timings = interleaved(candidates, rounds=rounds, sample_s=0.02, warmup=3, sync=sync, budget_s=budget_s)
    return {
        "n": n,
        "maps": len(maps),
        "maps_bytes": maps.nbytes,
        "timings": {name: t.to_dict() for name, t in timings.items()},
        "load": load(),
    }


def run(
    device: torch.device,
    quick: bool = False,
    lengths: tuple[int, ...] | None = None,
    models: tuple[str, ...] | None = None,
    rounds: int | None = None,
) -> dict:
    """The model table for `device`: one row per (model, length); quick runs the app's model only."""
    lengths = lengths or (QUICK_LENGTHS if quick else LENGTHS)
    models = models or (("app",) if quick else ("base", "app"))
    rows = []
    for name, config in model_configs().items():
        if name not in models:
            continue
        reference, ours = build_pair(config, device)
        for n in lengths:
            row = bench_length(reference, ours, n, device, rounds=rounds or (5 if quick else 21), budget_s=2 if quick else 20)
            rows.append({"model": name, "config": config.to_dict(), **row})
    return {"device": str(device), "rows": rows}


def describe(config: dict) -> str:
    """'N=6, d_model=512, h=8, d_ff=2048' from a config dict."""
    return (f"N={config['n_encoder_layers']}, d_model={config['d_model']}, h={config['n_heads']}, "
            f"d_k={config['d_k']}, d_ff={config['d_ff']}")


def report(result: dict) -> str:
    """One Markdown table: medians of the three candidates and the two ratios."""
    rows = []
    for row in result["rows"]:
        t = {name: row["timings"][name]["median_s"] for name in CANDIDATES}
        rows.append([
            f"{row['model']} ({describe(row['config'])})",
            row["n"],
            ms(t["torch"]),
            ms(t["no_capture"]),
            ms(t["ours"]),
            f"{t['ours'] / t['torch']:.2f}x",
            f"{100 * (t['ours'] / t['no_capture'] - 1):+.1f}%",
            f"{row['maps']} / {row['maps_bytes'] / 2**20:.3g}",
        ])
    head = (
        f"Model forward on {result['device']}, src = tgt = n tokens, vocab {VOCAB_SIZE}, causal + padding masks; "
        "medians in ms"
    )
    t = table(["model", "n", "nn.Transformer", "ours, no capture", "ours, every map", "ours / nn.Transformer", "capture cost", "maps / MiB"], rows)
    return f"{head}\n\n{t}"
