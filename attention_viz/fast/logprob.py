"""The log-probability of given tokens under a linear output head, without the [rows, V] logits.

    logp = target_log_probs(h, targets, W, b)    # = log_softmax(h @ W.T + b, -1).gather(-1, targets[:, None])[:, 0]

Chosen explicitly (importance's scores of real models use it when the model's output head is exactly h Wᵀ + b:
hub.PretrainedTransformer.output_head); equal to the reference within float rounding, not bit for bit: the
log-sum-exp is taken a block of the vocabulary at a time and the target's logit by its own dot product.

Why: for a large vocabulary the logits are most of a scoring pass. Written out whole, they and their log-softmax
are two tensors of rows x V floats (59 MB for 256 rows of opus-mt's 58,101) that the matrix product and the
log-softmax must stream through memory; a block of BLOCK rows of W meets h while it is in cache, and only its
log-sum-exp per row survives (docs/benchmarks.md, "Head importance").

Axes: R rows (scored positions), D model width, V vocabulary, C a block of the vocabulary.
"""

from __future__ import annotations

import torch

BLOCK = 1024  # vocabulary rows a block (2 MB of W at D = 512, float32): measured best at 256 and 2048 rows


def target_log_probs(hidden: torch.Tensor, targets: torch.Tensor, weight: torch.Tensor,
                     bias: torch.Tensor | None = None, block: int | None = None) -> torch.Tensor:
    """log softmax(h Wᵀ + b)[target] per row: hidden [R, D], targets [R] (0 <= target < V), weight [V, D],
    bias [V] or None -> [R], in hidden's dtype.

    log p(target) = z_target - logsumexp_v z_v with z = h Wᵀ + b, the log-sum-exp combined from one per block of
    `block` vocabulary rows (default BLOCK)."""
    block = BLOCK if block is None else int(block)
    hidden_t = hidden.t()  # (D, R)
    per_block = []
    for start in range(0, weight.size(0), block):
        w = weight[start: start + block]  # (C, D)
        z = w @ hidden_t if bias is None else torch.addmm(bias[start: start + block, None], w, hidden_t)  # (C, R)
        per_block.append(torch.logsumexp(z, 0))  # (R,)
    lse = torch.logsumexp(torch.stack(per_block), 0)  # (R,)
    target = (hidden * weight[targets]).sum(-1)  # (R,): z_target
    if bias is not None:
        target = target + bias[targets]
    return target - lse
