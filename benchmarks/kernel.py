"""Kernel benchmark: our Eq. 1 with weights against PyTorch's attention, and the machine's own GEMM peak.

Candidates, on q, k, v of shape [1, h=8, n, d_k=64] (no mask):
    sdpa          F.scaled_dot_product_attention: returns no weights, so it is the floor
    ours          attention_viz.fast's Eq. 1 (what the app runs): output and weights
    reference     attention_viz.core's Eq. 1, the readable one: output and the same weights, bit for bit
    naive         matmul, softmax, matmul with fresh tensors: what ours was before the in-place steps
and the same comparison one level up, on x of shape [1, n, d_model=512] (self-attention):
    ours_mha      attention_viz.MultiHeadAttention: output and per-head weights
    torch_mha_w   nn.MultiheadAttention(need_weights=True, average_attn_weights=False), same weights
    torch_mha     nn.MultiheadAttention(need_weights=False): PyTorch's module without weights
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attention_viz.core import attention as reference
from attention_viz.core.attention import MultiHeadAttention
from attention_viz.fast.attention import scaled_dot_product_attention
from attention_viz.core.interop import load_multihead_attention

from .common import interleaved, load, ms, table

SIZES = (16, 64, 256, 1024, 2048)
QUICK_SIZES = (16, 64)
HEADS, D_K = 8, 64
D_MODEL = HEADS * D_K
CANDIDATES = ("sdpa", "ours", "reference", "naive", "ours_mha", "torch_mha_w", "torch_mha")
LABELS = {"sdpa": "sdpa (no weights)", "ours": "ours (fast kernel)", "reference": "ours (core reference)",
          "naive": "naive", "ours_mha": "ours MHA", "torch_mha_w": "nn.MHA weights", "torch_mha": "nn.MHA no weights"}


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(QKᵀ/√d_k)V keeping the weights, every step a fresh tensor."""
    weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1)), dim=-1)  # (B, H, Q, K)
    return torch.matmul(weights, v), weights


def mm_peak(device: torch.device, size: int = 2048, rounds: int = 7) -> dict:
    """GFLOP/s of a square fp32 torch.mm (median and best sample): the physical limit the others are compared with."""
    a, b = torch.randn(2, size, size, device=device).unbind(0)
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    t = interleaved({"mm": lambda: torch.mm(a, b)}, rounds=rounds, sample_s=0.05, sync=sync)["mm"]
    flops = 2 * size**3
    return {"size": size, "median_s": t.median, "gflops": flops / t.median / 1e9, "best_gflops": flops / min(t.samples) / 1e9}


def attention_flops(n: int) -> int:
    """QKᵀ and weights·V: 2·h·n²·d_k + 2·h·n²·d_v."""
    return 4 * HEADS * n * n * D_K


def projection_flops(n: int) -> int:
    """W_Q, W_K, W_V and W_O on n positions."""
    return 4 * 2 * n * D_MODEL * D_MODEL


@torch.inference_mode()
def bench_size(n: int, device: torch.device, rounds: int, budget_s: float) -> dict:
    """Check every candidate against the reference, then time them interleaved."""
    g = torch.Generator(device="cpu").manual_seed(n)
    q, k, v = torch.randn(3, 1, HEADS, n, D_K, generator=g).to(device).unbind(0)  # (B, H, n, d_k) each
    x = torch.randn(1, n, D_MODEL, generator=g).to(device)  # (B, n, d_model)
    torch_mha = nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True).to(device).eval()
    ours_mha = MultiHeadAttention(D_MODEL, HEADS, D_K, D_K, kernel=scaled_dot_product_attention)
    ours_mha = load_multihead_attention(ours_mha, torch_mha).to(device).eval()

    # The harness proves it times the same computation before it times anything.
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(weights, naive_attention(q, k, v)[1], atol=1e-5, rtol=1e-4)
    out_ours, w_ours = ours_mha(x, x, x)
    out_ref, w_ref = torch_mha(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out_ours, out_ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(w_ours, w_ref, atol=1e-5, rtol=1e-4)

    candidates = {
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
        "ours": lambda: scaled_dot_product_attention(q, k, v),
        "reference": lambda: reference.scaled_dot_product_attention(q, k, v),
        "naive": lambda: naive_attention(q, k, v),
        "ours_mha": lambda: ours_mha(x, x, x),
        "torch_mha_w": lambda: torch_mha(x, x, x, need_weights=True, average_attn_weights=False),
        "torch_mha": lambda: torch_mha(x, x, x, need_weights=False),
    }
    sync = torch.cuda.synchronize if device.type == "cuda" else None
    timings = interleaved(candidates, rounds=rounds, sample_s=0.01, sync=sync, budget_s=budget_s)
    result = {"n": n, "weights_bytes": weights.numel() * weights.element_size()}
    result["flops"] = {"attention": attention_flops(n), "module": attention_flops(n) + projection_flops(n)}
    result["timings"] = {name: t.to_dict() for name, t in timings.items()}
    result["load"] = load()
    return result


def run(device: torch.device, quick: bool = False, sizes: tuple[int, ...] | None = None, rounds: int | None = None) -> dict:
    """The kernel table for `device`: one row per sequence length."""
    sizes = sizes or (QUICK_SIZES if quick else SIZES)
    rounds = rounds or (5 if quick else 15)
    size = 512 if quick else 2048
    before = mm_peak(device, size=size, rounds=min(rounds, 7))
    rows = [bench_size(n, device, rounds=rounds, budget_s=2 if quick else 25) for n in sizes]
    after = mm_peak(device, size=size, rounds=min(rounds, 7))
    peak = max(before, after, key=lambda p: p["best_gflops"])  # the machine's best: it drifts on a shared host
    peak = {**peak, "gflops_before": before["best_gflops"], "gflops_after": after["best_gflops"]}
    return {"device": str(device), "heads": HEADS, "d_k": D_K, "mm_peak": peak, "sizes": rows}


def report(result: dict) -> str:
    """Two Markdown tables: times per candidate, then ratios, throughput and bytes."""
    peak = result["mm_peak"]["best_gflops"]
    times, ratios = [], []
    for row in result["sizes"]:
        t = {name: row["timings"][name]["median_s"] for name in CANDIDATES}
        times.append([row["n"], *(ms(t[name]) for name in CANDIDATES)])
        gflops = row["flops"]["attention"] / t["ours"] / 1e9
        ratios.append([
            row["n"],
            f"{t['ours'] / t['sdpa']:.2f}x",
            f"{t['naive'] / t['ours']:.2f}x",
            f"{t['torch_mha_w'] / t['ours']:.2f}x",
            f"{t['torch_mha_w'] / t['ours_mha']:.2f}x",
            f"{gflops:.0f}",
            f"{100 * gflops / peak:.0f}%",
            f"{row['flops']['module'] / t['ours_mha'] / 1e9:.0f}",
            f"{row['weights_bytes'] / 2**20:.3g}",
        ])
    head = (
        f"Kernel on {result['device']}: h={result['heads']}, d_k={result['d_k']}, batch 1, no mask; "
        f"medians in ms; torch.mm {result['mm_peak']['size']}² peak {peak:.0f} GFLOP/s (best of the runs before and after)"
    )
    t1 = table(["n", *(LABELS[name] for name in CANDIDATES)], times)
    t2 = table(
        ["n", "ours / sdpa", "naive / ours", "nn.MHA w / ours", "nn.MHA w / ours MHA", "ours GFLOP/s", "of mm peak", "ours MHA GFLOP/s", "weights MiB"],
        ratios,
    )
    return f"{head}\n\n{t1}\n\n{t2}"
