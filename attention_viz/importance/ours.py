"""Which heads one of our trained models needs (§3.2.2 taken apart): each head switched off alone, its one-pass gradient
estimate, and the prune curve.

    imp = head_importance(model, task="reverse")      # a shipped model on its task's held-out strings
    imp.drop["decoder.1.cross_attn"][2]               # exact match lost with that head alone off
    imp.can_go()                                      # heads that can go, least important first, losing <= 1 point

For each head (every layer of every kind), with it alone switched off (core.ablation: zero, or its mean output):
the drop in exact match of greedy decoding and the rise in teacher-forced loss on the strings. Beside it the
estimate of Michel et al. (2019), I_h = E_x |∂L(x)/∂ξ_h| with gates ξ_h = 1 on every head's output, from one
backward pass, and how well the two rankings agree (Spearman's ρ). The prune curve takes heads away one at a time,
least important first, and gives exact match against the number left. Every variant of the model is a batch row
of its own (per-row gates), so a whole grid or curve is one greedy decode, not one per head.

Axes: A attentions (map keys), H heads, B batch rows, N strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attention_viz.core.ablation import ABLATIONS, mean_outputs
from attention_viz.core.attention import target_mask
from attention_viz.core.maps import MapKey
from attention_viz.core.model import PAPER, Transformer, decoder_probes
from attention_viz.core.variation import Variation, variation_of
from attention_viz.data.tasks import heldout_strings, make_batch, task_max_len
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.importance.common import ONE_POINT, spearman, variant_gates
from attention_viz.importance.real import real_head_importance

HELDOUT_STRINGS = 200  # held-out strings scored by default: enough for a point of exact match to mean 2 strings


@dataclass(frozen=True)
class HeadImportance:
    """Every head's importance on a set of strings, the gradient estimate beside it, and the prune curve."""

    keys: list[str]                        # map keys (attentions) in our order
    n_heads: int
    texts: int                             # strings scored
    ablation: str                          # "zero" or "mean"
    baseline: float                        # exact match with every head on
    baseline_loss: float                   # teacher-forced loss (nats per token) with every head on
    drop: dict[str, np.ndarray]            # key -> [H]: exact match lost with that head alone off
    loss_rise: dict[str, np.ndarray]       # key -> [H]: teacher-forced loss gained with that head alone off
    gradient: dict[str, np.ndarray]        # key -> [H]: Michel's I_h = mean |∂L/∂ξ_h|
    agreement: float                       # Spearman's ρ between the loss-rise and the gradient rankings
    order: list[tuple[str, int]]           # heads, least important first (the prune curve's order)
    prune: list[float] = field(default_factory=list)  # exact match with the first k of `order` off, k = 0 .. n - 1

    @property
    def total(self) -> int:
        return len(self.keys) * self.n_heads

    def can_go(self, tolerance: float = ONE_POINT) -> int:
        """How many heads can be taken away, least important first, with at most `tolerance` of exact match lost."""
        ok = [k for k, em in enumerate(self.prune) if em >= self.baseline - tolerance - 1e-12]
        return max(ok, default=0)

    def table(self) -> list[list]:
        """One row per head: key, head, exact-match drop, loss rise, gradient estimate (the export's rows)."""
        return [[key, h, float(self.drop[key][h]), float(self.loss_rise[key][h]), float(self.gradient[key][h])]
                for key in self.keys for h in range(self.n_heads)]


@torch.no_grad()
def _exact_and_loss(model: Transformer, batch, tokenizer, keys: list[str], variants: list[set[tuple[str, int]]],
                    variation: Variation, means) -> tuple[np.ndarray, np.ndarray]:
    """Per variant (a set of heads off): exact match of greedy decoding and mean teacher-forced loss (nats per
    token), from one teacher-forced pass: greedy decoding writes the answer exactly when, fed the answer, the
    model's most likely next token is right at every position (<eos> included), since each step then sees what
    greedy wrote.

    Variants share what they have in common: the encoder runs once per distinct set of encoder heads off, and each
    decoder layer once per distinct set of heads off up to it (two variants that differ only in layer 1 share
    layer 0), so the grid of every head alone costs little more than a few passes."""
    rows, pad = batch.src.size(0), model.config.pad_id
    encoder_keys = [key for key in keys if MapKey.parse(key).stack == "encoder"]
    signatures = [frozenset(head for head in off if head[0] in encoder_keys) for off in variants]
    distinct = list(dict.fromkeys(signatures))  # the encoder runs needed
    encoder_gates = variant_gates(encoder_keys, model.config.n_heads, [set(s) for s in distinct], rows,
                                  next(model.parameters()).dtype, batch.src.device)
    probes = model.probes(variation, means, encoder_gates)
    memory, src_mask = model.encode(batch.src.repeat(len(distinct), 1), variation, probes)  # (U·rows, S, D)
    memories = dict(zip(distinct, memory.split(rows)))
    src_mask = src_mask[:rows] if src_mask is not None else None  # (rows, 1, 1, S): the same for every variant
    tgt_mask = target_mask(batch.tgt_in, pad, variation.causal_mask, variation.padding_mask)  # (rows, 1, T, T)
    layers = model.decoder.layers

    def off_in(off: set, layer: int) -> frozenset:
        return frozenset(head for head in off if MapKey.parse(head[0]) in (MapKey("decoder", layer, "self_attn"),
                                                                             MapKey("decoder", layer, "cross_attn")))

    prefixes = [(sig,) for sig in signatures]
    start = model._embed(model.tgt_embed, batch.tgt_in)  # (rows, T, D): every variant's decoder input
    states = {prefix: start for prefix in prefixes}
    for i, layer in enumerate(layers):
        computed = {}
        for v, off in enumerate(variants):
            here = off_in(off, i)
            after = prefixes[v] + (here,)
            if after not in computed:
                heads_off = {}
                for key, h in here:
                    heads_off.setdefault(key, []).append(h)
                layer_probes = model.probes(replace(variation, heads_off=heads_off), means)
                computed[after] = layer(states[prefixes[v]], memories[signatures[v]], tgt_mask, src_mask,
                                              variation, *decoder_probes(layer_probes, i))
            prefixes[v] = after
        states = computed
    real = batch.tgt_out != tokenizer.pad_id  # (rows, T)
    weight = real.to(next(model.parameters()).dtype)
    scored = {}
    for prefix, y in states.items():
        if model.decoder.norm is not None:
            y = model.decoder.norm(y)
        logits = model.generator(y)  # (rows, T, V)
        hit = ((logits.argmax(-1) == batch.tgt_out) | ~real).all(1).double().mean()
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out,
                                                   ignore_index=tokenizer.pad_id, reduction="none")  # (rows, T)
        scored[prefix] = (float(hit), float((losses * weight).sum() / weight.sum()))
    return (np.array([scored[p][0] for p in prefixes]), np.array([scored[p][1] for p in prefixes]))


def head_importance(
    model,
    task: str | None = None,
    texts: list[str] | None = None,
    *,
    tokenizer: CharTokenizer | None = None,
    scale: str = "sqrt_dk",
    ablation: str = "zero",
    n_texts: int = HELDOUT_STRINGS,
    variation: Variation | None = None,
) -> HeadImportance:
    """Every head of `model` switched off alone on `task` (default: the first n_texts of its held-out strings).

    A real model (attention_viz.hub) has no task: give `texts`, and each head is scored by what its loss costs the
    model's own greedy output (real_head_importance). ablation: "zero" (the head's output set to 0 before W_O) or
    "mean" (its mean output over these strings). Raises ValueError for an unknown ablation, no task for one of our
    models, or an empty list of texts. variation: scale and ablation (and the masks) as one core.variation.Variation;
    its heads off are refused, since every head is switched off in turn here.
    """
    if model.pretrained:  # a real model (core.protocol): scored on the texts given
        return real_head_importance(model, list(texts or []), ablation=ablation)
    if task is None:
        raise ValueError("head_importance needs the task the model was trained on (e.g. task=\"reverse\")")
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {ablation!r}")
    variation = variation_of(variation, scale, ablation=ablation)
    if variation.heads_off:
        raise ValueError("head_importance switches every head off in turn: give a variation without heads_off")
    ablation = variation.ablation
    tokenizer = tokenizer or CharTokenizer(max_len=task_max_len(task))
    texts = list(texts) if texts is not None else heldout_strings(tokenizer.max_len, n_texts, task=task)
    if not texts:
        raise ValueError("head_importance needs at least one text")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    batch = make_batch(texts, task, tokenizer)
    batch = type(batch)(batch.src.to(device), batch.tgt_in.to(device), batch.tgt_out.to(device))
    keys, H, rows = model.map_keys, model.config.n_heads, len(texts)
    means = batch_head_means(model, batch, tokenizer.pad_id, variation) if ablation == "mean" else None
    try:
        # every head alone off, after the baseline (variant 0)
        heads = [(key, h) for key in keys for h in range(H)]
        variants = [set()] + [{head} for head in heads]
        exact, loss = _exact_and_loss(model, batch, tokenizer, keys, variants, variation, means)
        drop = {key: np.array([exact[0] - exact[1 + keys.index(key) * H + h] for h in range(H)]) for key in keys}
        rise = {key: np.array([loss[1 + keys.index(key) * H + h] - loss[0] for h in range(H)]) for key in keys}
        gradient = michel(model, batch, tokenizer, keys, H, variation, means)
        flat_rise = np.concatenate([rise[key] for key in keys])
        flat_grad = np.concatenate([gradient[key] for key in keys])
        # least important first: the smallest exact-match drop, then the smallest loss rise
        order = sorted(heads, key=lambda kh: (drop[kh[0]][kh[1]], rise[kh[0]][kh[1]]))
        curve = [set(order[:k]) for k in range(len(heads))]  # k = 0 .. n - 1 heads off (never all)
        prune, _ = _exact_and_loss(model, batch, tokenizer, keys, curve, variation, means)
    finally:
        model.train(was_training)
    return HeadImportance(keys, H, rows, ablation, float(exact[0]), float(loss[0]), drop, rise, gradient,
                          spearman(flat_rise, flat_grad), order, [float(x) for x in prune])


def head_means(model: Transformer, texts: list[str], task: str, tokenizer: CharTokenizer,
               variation: Variation = PAPER) -> dict[str, torch.Tensor]:
    """Each head's mean output [H, d_v] per map key over `texts` of `task`, teacher-forced under `variation`'s
    scaling and masks (every head on), <pad> positions left out: mean ablation's reference
    (core.ablation.mean_outputs)."""
    device = next(model.parameters()).device
    batch = make_batch(texts, task, tokenizer)
    batch = type(batch)(batch.src.to(device), batch.tgt_in.to(device), batch.tgt_out.to(device))
    return batch_head_means(model, batch, tokenizer.pad_id, variation)


def batch_head_means(model: Transformer, batch, pad_id: int, variation: Variation = PAPER
                     ) -> dict[str, torch.Tensor]:
    """head_means of a batch already made (src [N, S], tgt_in [N, T]), every head on whatever variation says."""
    plain = replace(variation, heads_off=(), ablation="zero")
    with torch.no_grad():
        outputs = model.head_outputs(batch.src, batch.tgt_in, variation=plain)
    query_masks = {key: (batch.src if MapKey.parse(key).stack == "encoder" else batch.tgt_in) != pad_id
                   for key in outputs}
    return mean_outputs(outputs, query_masks)


def michel(model: Transformer, batch, tokenizer: CharTokenizer, keys: list[str], H: int, variation: Variation,
           means) -> dict[str, np.ndarray]:
    """Michel et al.'s I_h = mean over strings of |∂L(x)/∂ξ_h|, per-row gates ξ = 1, one backward pass, under
    `variation` (means: each head's mean output, for its mean ablation)."""
    dtype, device, rows = next(model.parameters()).dtype, batch.src.device, batch.src.size(0)
    gates = {key: torch.ones(rows, H, dtype=dtype, device=device, requires_grad=True) for key in keys}
    with torch.enable_grad():
        logits, _ = model(batch.src, batch.tgt_in, gates=gates, head_means=means, variation=variation)
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out,
                                                   ignore_index=tokenizer.pad_id, reduction="none")  # (rows, T)
        real = (batch.tgt_out != tokenizer.pad_id).to(losses.dtype)
        per_string = (losses * real).sum(1) / real.sum(1)  # (rows,): L(x)
        # row b's gates get ∂L(x_b)/∂ξ (the strings share no gate); only the gates' gradients are computed, so a
        # model shared by a server is left as it was (no .grad on its weights)
        grads = torch.autograd.grad(per_string.sum(), list(gates.values()))
    return {key: g.abs().mean(0).double().cpu().numpy() for key, g in zip(gates, grads)}
