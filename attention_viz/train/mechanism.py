"""Footnote 4's mechanism, measured in a model: the spread of the softmax's logits and the size of its gradient.

For every MultiHeadAttention of a model, on a fixed probe batch:
    logit_std          the std of the logits the softmax sees (QKᵀ·scale, or wᵀ tanh(q + k) for additive
                       attention), over the (query, key) pairs the mask allows, pooled over heads
    qk_var             the variance of the plain dot products q·k over the same pairs (footnote 4: d_k
                       when q and k have components of mean 0 and variance 1), whatever the compatibility
    softmax_grad_norm  the Frobenius norm of the softmax's Jacobian ∂p/∂s = diag(p) - p pᵀ, averaged over
                       query rows: 1/n - 1/n² for a uniform row over n keys, 0 for a one-hot (saturated) row
"""

from __future__ import annotations

import torch

from attention_viz.core.attention import MultiHeadAttention
from attention_viz.core.model import Transformer


def softmax_jacobian_norm(weights: torch.Tensor) -> torch.Tensor:
    """‖diag(p) - p pᵀ‖_F per row of weights [..., K] -> [...], in closed form: √(Σp² - 2Σp³ + (Σp²)²)."""
    p2 = weights.pow(2).sum(-1)  # (...)
    p3 = weights.pow(3).sum(-1)
    return (p2 - 2 * p3 + p2.pow(2)).clamp_min(0).sqrt()


@torch.no_grad()
def measure(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor, scale) -> dict[str, dict[str, float]]:
    """{map key: {"logit_std", "qk_var", "softmax_grad_norm"}} plus "all" (pooled), on src [B, S], tgt_in [B, T].

    Leaves the model in the mode it was in.
    """
    names = {module: name for name, module in model.named_modules() if isinstance(module, MultiHeadAttention)}
    found: dict[str, dict[str, torch.Tensor]] = {}

    def hook(module, args, kwargs, output):
        query, key, value, *rest = args
        mask = rest[0] if rest else kwargs.get("mask")
        q, k, _ = module.project(query, key, value)  # (B, H, Q, d_k), (B, H, K, d_k)
        logits = module.scores(q, k, rest[1] if len(rest) > 1 else kwargs.get("scale", "sqrt_dk"))  # (B, H, Q, K)
        dots = torch.matmul(q, k.transpose(-2, -1))  # (B, H, Q, K)
        allowed = torch.ones_like(logits, dtype=torch.bool) if mask is None else mask.expand_as(logits)
        weights = output[1]  # (B, H, Q, K)
        live = allowed.any(-1)  # (B, H, Q): rows with at least one key
        found[names[module]] = {
            "logits": logits[allowed], "dots": dots[allowed], "grad": softmax_jacobian_norm(weights)[live],
        }

    was_training = model.training
    handles = [module.register_forward_hook(hook, with_kwargs=True) for module in names]
    try:
        model.eval()
        model(src, tgt_in, scale=scale)
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    pooled = {part: torch.cat([f[part] for f in found.values()]) for part in ("logits", "dots", "grad")}
    out = {}
    for name, f in [*sorted(found.items()), ("all", pooled)]:
        key = name.replace(".self_attn", ".self").replace(".cross_attn", ".cross").replace("layers.", "")
        out[key] = {
            "logit_std": round(f["logits"].std().item(), 5),
            "qk_var": round(f["dots"].var().item(), 4),
            "softmax_grad_norm": round(f["grad"].mean().item(), 6),
        }
    return out
