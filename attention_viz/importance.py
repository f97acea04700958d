"""Which heads a trained model needs (§3.2.2 taken apart): each head switched off alone, its one-pass gradient
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

from dataclasses import dataclass, field

import numpy as np
import torch

from attention_viz.core.ablation import ABLATIONS, mean_outputs
from attention_viz.core.attention import target_mask
from attention_viz.core.maps import map_key
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import heldout_strings, make_batch, task_max_len
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.fast.logprob import target_log_probs

HELDOUT_STRINGS = 200  # held-out strings scored by default: enough for a point of exact match to mean 2 strings
ONE_POINT = 0.01       # "at most one point lost" on the prune curve


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


def attention_keys(model: Transformer) -> list[str]:
    """The model's map keys in our order."""
    c = model.config
    keys = [map_key("encoder", i, "self_attn") for i in range(c.n_encoder_layers)]
    for i in range(c.n_decoder_layers):
        keys += [map_key("decoder", i, "self_attn"), map_key("decoder", i, "cross_attn")]
    return keys


def variant_gates(keys: list[str], n_heads: int, variants: list[set[tuple[str, int]]], rows: int,
                  dtype: torch.dtype, device) -> dict[str, torch.Tensor]:
    """Per-row gates [V·rows, H] per key: variant v (a set of heads off) on rows v·rows .. (v + 1)·rows - 1."""
    gates = {key: torch.ones(len(variants), n_heads, dtype=dtype, device=device) for key in keys}
    for v, off in enumerate(variants):
        for key, h in off:
            if key in gates:  # heads of other keys are another call's
                gates[key][v, h] = 0.0
    return {key: g.repeat_interleave(rows, dim=0) for key, g in gates.items()}  # (V·rows, H)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two equal-length vectors (average ranks for ties)."""
    def ranks(x):
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for value in np.unique(x):  # ties share their mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


@torch.no_grad()
def _exact_and_loss(model: Transformer, batch, tokenizer, keys: list[str], variants: list[set[tuple[str, int]]],
                    scale, ablation: str, means) -> tuple[np.ndarray, np.ndarray]:
    """Per variant (a set of heads off): exact match of greedy decoding and mean teacher-forced loss (nats per
    token), from one teacher-forced pass: greedy decoding writes the answer exactly when, fed the answer, the
    model's most likely next token is right at every position (<eos> included), since each step then sees what
    greedy wrote.

    Variants share what they have in common: the encoder runs once per distinct set of encoder heads off, and each
    decoder layer once per distinct set of heads off up to it (two variants that differ only in layer 1 share
    layer 0), so the grid of every head alone costs little more than a few passes."""
    rows, pad = batch.src.size(0), model.config.pad_id
    encoder_keys = [key for key in keys if key.startswith("encoder.")]
    signatures = [frozenset(head for head in off if head[0] in encoder_keys) for off in variants]
    distinct = list(dict.fromkeys(signatures))  # the encoder runs needed
    encoder_gates = variant_gates(encoder_keys, model.config.n_heads, [set(s) for s in distinct], rows,
                                  next(model.parameters()).dtype, batch.src.device)
    switched = model.head_switches(gates=encoder_gates, ablation=ablation, head_means=means)
    memory, src_mask, _ = model.encode(batch.src.repeat(len(distinct), 1), scale, True, switched)  # (U·rows, S, D)
    memories = dict(zip(distinct, memory.split(rows)))
    src_mask = src_mask[:rows]  # (rows, 1, 1, S): the same for every variant
    tgt_mask = target_mask(batch.tgt_in, pad)  # (rows, 1, T, T)
    layers = model.decoder.layers

    def off_in(off: set, layer: int) -> frozenset:
        return frozenset(head for head in off if head[0].startswith(f"decoder.{layer}."))

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
                layer_switches = model.head_switches(heads_off or None, ablation, means) or {}
                computed[after], _, _ = layer(states[prefixes[v]], memories[signatures[v]], tgt_mask, src_mask, scale,
                                              layer_switches.get(map_key("decoder", i, "self_attn")),
                                              layer_switches.get(map_key("decoder", i, "cross_attn")))
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
) -> HeadImportance:
    """Every head of `model` switched off alone on `task` (default: the first n_texts of its held-out strings).

    A real model (attention_viz.hub) has no task: give `texts`, and each head is scored by what its loss costs the
    model's own greedy output (real_head_importance). ablation: "zero" (the head's output set to 0 before W_O) or
    "mean" (its mean output over these strings). Raises ValueError for an unknown ablation, no task for one of our
    models, or an empty list of texts.
    """
    if hasattr(model, "family"):  # a real model: attention_viz.hub.PretrainedTransformer
        return real_head_importance(model, list(texts or []), ablation=ablation)
    if task is None:
        raise ValueError("head_importance needs the task the model was trained on (e.g. task=\"reverse\")")
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {ablation!r}")
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
    keys, H, rows = attention_keys(model), model.config.n_heads, len(texts)
    means = batch_head_means(model, batch, tokenizer.pad_id, scale=scale) if ablation == "mean" else None
    try:
        # every head alone off, after the baseline (variant 0)
        heads = [(key, h) for key in keys for h in range(H)]
        variants = [set()] + [{head} for head in heads]
        exact, loss = _exact_and_loss(model, batch, tokenizer, keys, variants, scale, ablation, means)
        drop = {key: np.array([exact[0] - exact[1 + keys.index(key) * H + h] for h in range(H)]) for key in keys}
        rise = {key: np.array([loss[1 + keys.index(key) * H + h] - loss[0] for h in range(H)]) for key in keys}
        gradient = michel(model, batch, tokenizer, keys, H, scale, ablation, means)
        flat_rise = np.concatenate([rise[key] for key in keys])
        flat_grad = np.concatenate([gradient[key] for key in keys])
        # least important first: the smallest exact-match drop, then the smallest loss rise
        order = sorted(heads, key=lambda kh: (drop[kh[0]][kh[1]], rise[kh[0]][kh[1]]))
        curve = [set(order[:k]) for k in range(len(heads))]  # k = 0 .. n - 1 heads off (never all)
        prune, _ = _exact_and_loss(model, batch, tokenizer, keys, curve, scale, ablation, means)
    finally:
        model.train(was_training)
    return HeadImportance(keys, H, rows, ablation, float(exact[0]), float(loss[0]), drop, rise, gradient,
                          spearman(flat_rise, flat_grad), order, [float(x) for x in prune])


def head_means(model: Transformer, texts: list[str], task: str, tokenizer: CharTokenizer, *, scale="sqrt_dk",
               causal_mask: bool = True, padding_mask: bool = True) -> dict[str, torch.Tensor]:
    """Each head's mean output [H, d_v] per map key over `texts` of `task`, teacher-forced, <pad> positions left
    out: mean ablation's reference (core.ablation.mean_outputs)."""
    device = next(model.parameters()).device
    batch = make_batch(texts, task, tokenizer)
    batch = type(batch)(batch.src.to(device), batch.tgt_in.to(device), batch.tgt_out.to(device))
    return batch_head_means(model, batch, tokenizer.pad_id, scale=scale, causal_mask=causal_mask,
                            padding_mask=padding_mask)


def batch_head_means(model: Transformer, batch, pad_id: int, *, scale="sqrt_dk", causal_mask: bool = True,
                     padding_mask: bool = True) -> dict[str, torch.Tensor]:
    """head_means of a batch already made (src [N, S], tgt_in [N, T])."""
    with torch.no_grad():
        outputs = model.head_outputs(batch.src, batch.tgt_in, scale=scale, causal_mask=causal_mask,
                                     padding_mask=padding_mask)
    query_masks = {key: (batch.src if key.startswith("encoder") else batch.tgt_in) != pad_id for key in outputs}
    return mean_outputs(outputs, query_masks)


def michel(model: Transformer, batch, tokenizer: CharTokenizer, keys: list[str], H: int, scale, ablation: str,
           means) -> dict[str, np.ndarray]:
    """Michel et al.'s I_h = mean over strings of |∂L(x)/∂ξ_h|, per-row gates ξ = 1, one backward pass."""
    dtype, device, rows = next(model.parameters()).dtype, batch.src.device, batch.src.size(0)
    gates = {key: torch.ones(rows, H, dtype=dtype, device=device, requires_grad=True) for key in keys}
    with torch.enable_grad():
        logits, _ = model(batch.src, batch.tgt_in, scale=scale, gates=gates, ablation=ablation, head_means=means)
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch.tgt_out,
                                                   ignore_index=tokenizer.pad_id, reduction="none")  # (rows, T)
        real = (batch.tgt_out != tokenizer.pad_id).to(losses.dtype)
        per_string = (losses * real).sum(1) / real.sum(1)  # (rows,): L(x)
        # row b's gates get ∂L(x_b)/∂ξ (the strings share no gate); only the gates' gradients are computed, so a
        # model shared by a server is left as it was (no .grad on its weights)
        grads = torch.autograd.grad(per_string.sum(), list(gates.values()))
    return {key: g.abs().mean(0).double().cpu().numpy() for key, g in zip(gates, grads)}


# ----------------------------------------------------------------------------- real models (attention_viz.hub)

@dataclass(frozen=True)
class RealHeadImportance:
    """Every head of a real model switched off alone, on texts it writes for itself: what it costs its own output."""

    keys: list[str]
    n_heads: int
    texts: int
    ablation: str
    baseline: float                        # mean log-probability per token of its own greedy output, all heads on
    drop: dict[str, np.ndarray]            # key -> [H]: log-probability per token lost with that head alone off
    gradient: dict[str, np.ndarray]        # key -> [H]: Michel's I_h = mean |∂L/∂ξ_h|, L = -log p(own output)
    agreement: float                       # Spearman's ρ between the drop and the gradient rankings
    order: list[tuple[str, int]]           # heads, least important first
    prune: list[float] = field(default_factory=list)  # log-probability per token with the first k of order off

    @property
    def total(self) -> int:
        return len(self.keys) * self.n_heads

    def can_go(self, tolerance: float = ONE_POINT) -> int:
        """Heads that can go, least important first, losing at most `tolerance` of log-probability per token."""
        ok = [k for k, lp in enumerate(self.prune) if lp >= self.baseline - tolerance - 1e-12]
        return max(ok, default=0)


def _own_outputs(model, texts: list[str], max_new_tokens: int):
    """The model's own greedy output for each text, as teacher-forcing rows: (input_ids [N, S], attention_mask,
    decoder_input_ids [N, T] or None, targets [N, T'] with -100 where not scored)."""
    rows = []
    for text in texts:
        src = model.encode(text).ids[None].to(model.device)  # (1, S)
        written, _ = model.greedy_decode(src, max_new_tokens)
        rows.append((src[0], written[0]))
    pad = model.pad_id if model.pad_id is not None else 0
    if model.layout == "encoder-decoder":
        S = max(len(s) for s, _ in rows)
        T = max(len(w) for _, w in rows)
        ids = torch.full((len(rows), S), pad, dtype=torch.long, device=model.device)
        mask = torch.zeros_like(ids)
        decoder = torch.full((len(rows), T), pad, dtype=torch.long, device=model.device)
        targets = torch.full((len(rows), T), -100, dtype=torch.long, device=model.device)
        for i, (s, w) in enumerate(rows):
            ids[i, : len(s)], mask[i, : len(s)] = s, 1
            decoder[i, 0] = model.start_id
            decoder[i, 1: len(w)] = w[:-1]
            targets[i, : len(w)] = w
        return ids, mask, decoder, targets
    L = max(len(s) + len(w) - 1 for s, w in rows)  # decoder only: the prompt and what it wrote, but the last
    ids = torch.full((len(rows), L), pad, dtype=torch.long, device=model.device)
    mask = torch.zeros_like(ids)
    targets = torch.full((len(rows), L), -100, dtype=torch.long, device=model.device)
    for i, (s, w) in enumerate(rows):
        sequence = torch.cat([s, w[:-1]])
        ids[i, : len(sequence)], mask[i, : len(sequence)] = sequence, 1
        targets[i, len(s) - 1: len(s) - 1 + len(w)] = w  # position t predicts token t + 1: the written ones
    return ids, mask, None, targets


def _real_scores(model, ids, mask, decoder, targets, keys, variants, ablation, means, chunk: int) -> np.ndarray:
    """Per variant: mean log-probability per scored token of the model's own output. Variants run `chunk` rows at
    a time. An encoder-decoder model's encoder runs once per distinct set of encoder heads off: the variants that
    switch off decoder heads only (two thirds of a Marian model's) share the plain encoder's states. The scored
    tokens' log-probabilities: _scored_logprobs (through the output head's blocks where it is linear)."""
    N, H = ids.size(0), model.n_heads
    dtype = next(model.model.parameters()).dtype
    scored = targets != -100  # (N, T)
    shared = model.layout == "encoder-decoder"
    encoder_keys = [key for key in keys if key.startswith("encoder.")] if shared else []
    decoder_keys = [key for key in keys if key not in encoder_keys]
    signature = lambda off: frozenset(head for head in off if head[0] in encoder_keys)  # noqa: E731
    states = _real_encoder_states(model, ids, mask, encoder_keys, [signature(off) for off in variants], ablation,
                                  means, chunk) if shared else None
    head = _linear_head(model)
    logprob = []
    for start in range(0, len(variants), max(1, chunk // N)):
        part = variants[start: start + max(1, chunk // N)]
        rep = lambda t: None if t is None else t.repeat(len(part), 1)  # noqa: E731
        gates = variant_gates(decoder_keys, H, part, N, dtype, ids.device)  # every key's, without a shared encoder
        heads = model.head_switches(gates=gates, ablation=ablation, head_means=means)
        with torch.no_grad():
            encoded = torch.cat([states[signature(off)] for off in part]) if shared else None  # (P·N, S, D)
            picked = _scored_logprobs(model, head, None if shared else rep(ids), rep(mask), rep(decoder),
                                      rep(targets), encoded, heads)  # (P·R,): variant by variant
        logprob += (picked.view(len(part), -1).sum(1) / scored.sum()).double().tolist()
    return np.array(logprob)


def _scored_logprobs(model, head, ids, mask, decoder, targets, encoded, heads) -> torch.Tensor:
    """log p(target) at the rows' scored positions (targets [B, T] != -100), row by row -> [R].

    encoded: an encoder-decoder model's encoder states [B, S, D], which its decoder reads (ids unused); None for a
    decoder-only model. head: the output head (W, b) when the logits are exactly h Wᵀ + b (_linear_head): then the
    final hidden states at the scored positions go through fast.logprob, and the [B, T, V] logits and their
    log-softmax are never written; None: the logits' log-softmax, gathered."""
    real = targets != -100  # (B, T)
    if head is not None:
        if encoded is not None:
            final = model.decoder_states(encoded, decoder, attention_mask=mask, heads=heads)  # (B, T, D)
        else:
            final = model.final_states(ids, decoder, attention_mask=mask, heads=heads)  # (B, T, D)
        return target_log_probs(final[real], targets[real], *head)  # (R,)
    if encoded is not None:
        logits = model.decoder_logits(encoded, decoder, attention_mask=mask, heads=heads)  # (B, T, V)
    else:
        logits = model.forward_pass(ids, decoder, attention_mask=mask, heads=heads).logits  # (B, T, V)
    logp = torch.log_softmax(_wide(logits), -1)  # (B, T, V)
    return logp.gather(-1, targets.clamp_min(0)[..., None])[..., 0][real]  # (R,)


def _linear_head(model) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The model's output head (W [V, D], b [V] or None) for fast.logprob, or None: a head not known to be
    exactly h Wᵀ + b (PretrainedTransformer.output_head), or half-precision weights, whose blocks' log-sum-exp
    would be taken in half precision (the logits path widens the logits to float32 first)."""
    head = model.output_head()
    if head is None or head[0].dtype not in (torch.float32, torch.float64):
        return None
    return head


def _real_encoder_states(model, ids, mask, encoder_keys, signatures, ablation, means, chunk: int) -> dict:
    """The encoder's states [N, S, D] per distinct set of encoder heads off (a frozenset of (key, head)), `chunk`
    rows a pass."""
    distinct = list(dict.fromkeys(signatures))
    dtype = next(model.model.parameters()).dtype
    N, step, states = ids.size(0), max(1, chunk // ids.size(0)), {}
    for start in range(0, len(distinct), step):
        part = distinct[start: start + step]
        gates = variant_gates(encoder_keys, model.n_heads, [set(s) for s in part], N, dtype, ids.device)
        heads = model.head_switches(gates=gates, ablation=ablation, head_means=means)
        with torch.no_grad():
            encoded = model.encoder_states(ids.repeat(len(part), 1), attention_mask=mask.repeat(len(part), 1),
                                           heads=heads)  # (P·N, S, D)
        states.update(zip(part, encoded.split(N)))
    return states


def real_head_importance(model, texts: list[str], *, ablation: str = "zero", max_new_tokens: int = 20,
                         chunk: int = 64) -> RealHeadImportance:
    """Every head of a real model (attention_viz.hub.PretrainedTransformer) alone off, on its own greedy output of
    `texts` (teacher-forced): the drop in its log-probability per token, Michel's gradient estimate, the prune
    curve. `chunk`: batch rows per pass (memory: rows x T x vocab where the logits are written whole; rows x T x
    d_model where the output head is linear and its log-sum-exp runs a block at a time, fast.logprob).

    Raises ValueError for an encoder-only model (it writes nothing to score), no texts, or an unknown ablation."""
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {ablation!r}")
    if model.layout == "encoder":
        raise ValueError(f"{model.family.name} is an encoder only: it writes no output whose probability could "
                         "drop; head importance needs a model that writes text.")
    if not texts:
        raise ValueError("head importance needs at least one text")
    ids, mask, decoder, targets = _own_outputs(model, list(texts), max_new_tokens)
    keys = model.map_keys
    H = model.n_heads
    means = _real_means(model, ids, mask, decoder, targets) if ablation == "mean" else None
    heads = [(key, h) for key in keys for h in range(H)]
    logprob = _real_scores(model, ids, mask, decoder, targets, keys, [set()] + [{x} for x in heads], ablation, means,
                           chunk)
    index = {head: 1 + i for i, head in enumerate(heads)}
    drop = {key: np.array([logprob[0] - logprob[index[(key, h)]] for h in range(H)]) for key in keys}
    gradient = _real_michel(model, ids, mask, decoder, targets, keys, ablation, means)
    order = sorted(heads, key=lambda kh: drop[kh[0]][kh[1]])
    # the prune curve's first two points are the grid's: no head off (k = 0), the least important alone off (k = 1)
    prune = [logprob[0], logprob[index[order[0]]]][: len(heads)]
    if len(heads) > 2:
        prune += list(_real_scores(model, ids, mask, decoder, targets, keys,
                                   [set(order[:k]) for k in range(2, len(heads))], ablation, means, chunk))
    agreement = spearman(np.concatenate([drop[k] for k in keys]), np.concatenate([gradient[k] for k in keys]))
    return RealHeadImportance(keys, H, len(texts), ablation, float(logprob[0]), drop, gradient, agreement, order,
                              [float(x) for x in prune])


def real_head_means(model, texts: list[str], *, max_new_tokens: int = 20, scale="sqrt_dk", causal_mask: bool = True,
                    padding_mask: bool = True) -> dict[str, torch.Tensor]:
    """Each head's mean output [H, d_v] per map key of a real model, over `texts` and what it writes for them
    (teacher-forced; padding left out): mean ablation's reference."""
    if not texts:
        raise ValueError("mean ablation needs at least one reference text")
    if model.layout == "encoder":
        ids = torch.nn.utils.rnn.pad_sequence([model.encode(t).ids for t in texts], batch_first=True,
                                              padding_value=model.pad_id if model.pad_id is not None else 0)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(model.encode(t).ids), dtype=torch.long)
                                                for t in texts], batch_first=True).to(model.device)
        return _real_means(model, ids.to(model.device), mask, None, None, scale, causal_mask, padding_mask)
    ids, mask, decoder, targets = _own_outputs(model, list(texts), max_new_tokens)
    return _real_means(model, ids, mask, decoder, targets, scale, causal_mask, padding_mask)


def _real_means(model, ids, mask, decoder, targets, scale="sqrt_dk", causal_mask=True, padding_mask=True
                ) -> dict[str, torch.Tensor]:
    """Mean head outputs over the rows' real positions: the source's (or prompt's) tokens, the decoder's inputs."""
    with torch.no_grad():
        outputs = model.head_outputs(ids, decoder, attention_mask=mask, scale=scale, causal_mask=causal_mask,
                                     padding_mask=padding_mask)
    real = mask.bool()  # (N, S)
    decoded = (targets != -100) if decoder is not None else real  # (N, T): the start token and the written ones
    return mean_outputs(outputs, {key: real if key.startswith("encoder") or decoder is None else decoded
                                  for key in outputs})


def _real_michel(model, ids, mask, decoder, targets, keys, ablation, means) -> dict[str, np.ndarray]:
    """Michel's I_h for a real model: per-row gates ξ = 1, L(x) = -mean log p(own output), one backward pass."""
    N, H = ids.size(0), model.n_heads
    dtype = next(model.model.parameters()).dtype
    gates = {key: torch.ones(N, H, dtype=dtype, device=ids.device, requires_grad=True) for key in keys}
    heads = model.head_switches(gates=gates, ablation=ablation, head_means=means)
    with torch.enable_grad():
        logits = model.forward_pass(ids, decoder, attention_mask=mask, heads=heads).logits
        logp = torch.log_softmax(_wide(logits), -1).gather(-1, targets.clamp_min(0)[..., None])[..., 0]
        real = (targets != -100).to(logp.dtype)
        grads = torch.autograd.grad((-(logp * real).sum(1) / real.sum(1)).sum(), list(gates.values()))
    return {key: g.abs().mean(0).double().cpu().numpy() for key, g in zip(gates, grads)}


def _wide(logits: torch.Tensor) -> torch.Tensor:
    """Logits at least float32 (a half-precision model's are widened before the log-softmax)."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
