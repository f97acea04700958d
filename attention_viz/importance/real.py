"""Which heads a real model needs (attention_viz.hub.PretrainedTransformer): each head switched off alone on texts
it writes for itself, scored by the log-probability of its own greedy output, teacher-forced; Michel's gradient
estimate beside it, and the prune curve. Variants run as batch rows with per-row gates, a chunk at a time; an
encoder-decoder model's encoder once per distinct set of encoder heads off. What is scored so far can be told after
each chunk (real_head_importance's `partial`: a RealPartial), so a page can draw the grid as it fills in: the grid's
first pass is small (the baseline and the first map key's heads: its first row), the rest a chunk a pass.

Which rows run together is a function of the variants and the chunk only (never of timing or of what ran before), so
a text's scores are the same on every call. They are float32 sums whose last bit may depend on the pass's size (the
matrix products' kernels are chosen by shape); tests/hub/test_hub_importance.py holds them to a float64 reference.

The passes the scoring runs (a part of the model under the switches, or the base model without its output head)
are at the end: encoder_states, decoder_logits, final_states, decoder_states, output_head.

Axes: N texts, S source (or prompt) positions, T decoder positions, D model width, V vocabulary, H heads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from attention_viz.core.ablation import ABLATIONS, mean_outputs
from attention_viz.core.maps import MapKey
from attention_viz.core.model import PAPER
from attention_viz.core.variation import Variation
from attention_viz.fast.logprob import target_log_probs
from attention_viz.importance.common import ONE_POINT, spearman, variant_gates


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


@dataclass(frozen=True)
class RealPartial:
    """What real_head_importance has scored so far, told after each pass (the first row, then a chunk of variants): the grid's heads (the
    baseline first, then the heads in map-key order), then, with Michel's gradient, the prune curve's points."""

    keys: list[str]
    n_heads: int
    texts: int
    ablation: str
    baseline: float
    drop: dict[str, np.ndarray]            # key -> [H]: as RealHeadImportance.drop, NaN where not scored yet
    done: int                              # heads of the grid scored
    gradient: dict[str, np.ndarray] | None = None  # once every head is scored
    prune: list[float] = field(default_factory=list)  # the prune curve's points so far (k = 0, 1, ...)

    @property
    def total(self) -> int:
        return len(self.keys) * self.n_heads


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


def _passes(n: int, first: int, step: int) -> list[range]:
    """Items 0 .. n - 1 in passes: `first` in the first, then `step` a pass (the last may be shorter)."""
    starts = [0] + list(range(max(1, first), n, max(1, step)))
    return [range(start, end) for start, end in zip(starts, starts[1:] + [n]) if start < end]


def _real_scores(model, ids, mask, decoder, targets, keys, variants, variation: Variation, means, chunk: int,
                 told: Callable[[np.ndarray], None] | None = None, first: int | None = None) -> np.ndarray:
    """Per variant (a set of heads off, as per-row gates under `variation`: its ablation, with mean ablation's
    `means`): mean log-probability per scored token of the model's own output. Variants run `chunk` rows at
    a time (the first pass `first` rows, if given); `told`, if given, gets the scores so far (variants 0 .. v) after
    each pass. An encoder-decoder model's encoder runs once per distinct set of encoder heads off: the variants that
    switch off decoder heads only (two thirds of a Marian model's) share the plain encoder's states. The scored
    tokens' log-probabilities: _scored_logprobs (through the output head's blocks where it is linear)."""
    N, H = ids.size(0), model.n_heads
    dtype = next(model.model.parameters()).dtype
    scored = targets != -100  # (N, T)
    shared = model.layout == "encoder-decoder"
    encoder_keys = [key for key in keys if MapKey.parse(key).stack == "encoder"] if shared else []
    decoder_keys = [key for key in keys if key not in encoder_keys]
    signature = lambda off: frozenset(head for head in off if head[0] in encoder_keys)  # noqa: E731
    step = max(1, chunk // N)
    passes = _passes(len(variants), step if first is None else min(step, max(1, first // N)), step)
    signatures = [signature(off) for off in variants]
    small = len(passes[0]) < step  # a small first pass: the encoder's first pass only the sets it needs
    state = _real_encoder_states(model, ids, mask, encoder_keys, signatures, variation, means, chunk,
                                 len(set(signatures[: len(passes[0])])) if small else step) if shared else None
    head = _linear_head(model)
    logprob = []
    for rows in passes:
        part = variants[rows.start: rows.stop]
        rep = lambda t: None if t is None else t.repeat(len(part), 1)  # noqa: E731
        gates = variant_gates(decoder_keys, H, part, N, dtype, ids.device)  # every key's, without a shared encoder
        with torch.no_grad():
            encoded = torch.cat([state(signature(off)) for off in part]) if shared else None  # (P·N, S, D)
            picked = _scored_logprobs(model, head, None if shared else rep(ids), rep(mask), rep(decoder),
                                      rep(targets), encoded, variation, means, gates)  # (P·R,): variant by variant
        logprob += (picked.view(len(part), -1).sum(1) / scored.sum()).double().tolist()
        if told is not None:
            told(np.array(logprob))
    return np.array(logprob)


def _scored_logprobs(model, head, ids, mask, decoder, targets, encoded, variation: Variation = PAPER,
                     head_means=None, gates=None) -> torch.Tensor:
    """log p(target) at the rows' scored positions (targets [B, T] != -100), row by row -> [R], under `variation`
    (with head_means and per-row gates, as traced takes them).

    encoded: an encoder-decoder model's encoder states [B, S, D], which its decoder reads (ids unused); None for a
    decoder-only model. head: the output head (W, b) when the logits are exactly h Wᵀ + b (_linear_head): then the
    final hidden states at the scored positions go through fast.logprob, and the [B, T, V] logits and their
    log-softmax are never written; None: the logits' log-softmax, gathered."""
    real = targets != -100  # (B, T)
    switches = dict(variation=variation, head_means=head_means, gates=gates)
    if head is not None:
        if encoded is not None:
            final = decoder_states(model, encoded, decoder, attention_mask=mask, **switches)  # (B, T, D)
        else:
            final = final_states(model, ids, decoder, attention_mask=mask, **switches)  # (B, T, D)
        return target_log_probs(final[real], targets[real], *head)  # (R,)
    if encoded is not None:
        logits = decoder_logits(model, encoded, decoder, attention_mask=mask, **switches)  # (B, T, V)
    else:
        logits = model.traced(ids, decoder, attention_mask=mask, **switches).logits  # (B, T, V)
    logp = torch.log_softmax(_wide(logits), -1)  # (B, T, V)
    return logp.gather(-1, targets.clamp_min(0)[..., None])[..., 0][real]  # (R,)


def _linear_head(model) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The model's output head (W [V, D], b [V] or None) for fast.logprob, or None: a head not known to be
    exactly h Wᵀ + b (output_head), or half-precision weights, whose blocks' log-sum-exp
    would be taken in half precision (the logits path widens the logits to float32 first)."""
    head = output_head(model)
    if head is None or head[0].dtype not in (torch.float32, torch.float64):
        return None
    return head


def _real_encoder_states(model, ids, mask, encoder_keys, signatures, variation: Variation, means, chunk: int,
                         first: int):
    """The encoder's states [N, S, D] per distinct set of encoder heads off (a frozenset of (key, head)), as a
    function of the set. The distinct sets, in order, run `first` sets in the first pass, then `chunk` rows a pass;
    a pass runs when one of its sets is first asked for, so the first variants' states come without waiting for the
    rest, and the passes (which rows run together) are the same whatever is asked first."""
    distinct = list(dict.fromkeys(signatures))
    dtype = next(model.model.parameters()).dtype
    N, states = ids.size(0), {}
    passes = _passes(len(distinct), first, max(1, chunk // N))
    among = {signature: rows for rows in passes for signature in distinct[rows.start: rows.stop]}  # its pass

    def state(signature: frozenset) -> torch.Tensor:
        if signature not in states:
            part = distinct[among[signature].start: among[signature].stop]
            gates = variant_gates(encoder_keys, model.n_heads, [set(s) for s in part], N, dtype, ids.device)
            with torch.no_grad():
                encoded = encoder_states(model, ids.repeat(len(part), 1), attention_mask=mask.repeat(len(part), 1),
                                         variation=variation, head_means=means, gates=gates)  # (P·N, S, D)
            states.update(zip(part, encoded.split(N)))
        return states[signature]

    return state


def real_head_importance(model, texts: list[str], *, ablation: str = "zero", max_new_tokens: int = 20,
                         chunk: int = 64, first: int | None = None,
                         partial: Callable[[RealPartial], None] | None = None) -> RealHeadImportance:
    """Every head of a real model (attention_viz.hub.PretrainedTransformer) alone off, on its own greedy output of
    `texts` (teacher-forced): the drop in its log-probability per token, Michel's gradient estimate, the prune
    curve. `chunk`: batch rows per pass (memory: rows x T x vocab where the logits are written whole; rows x T x
    d_model where the output head is linear and its log-sum-exp runs a block at a time, fast.logprob). `first`: the
    rows of the grid's first pass (default: the baseline and the first map key's heads, each text a row: the grid's
    first row, told soon; at most `chunk`).
    `partial`, if given, is called with what is scored so far (a RealPartial) after each pass of the grid, once
    with the gradient when the grid is done, and after each pass of the prune curve; the numbers are the same with
    or without it (the same passes run, in the same order).

    Raises ValueError for a model that writes no text (an encoder only, a checkpoint without its output head: it
    writes nothing to score), no texts, or an unknown ablation."""
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {ablation!r}")
    if not model.abilities.writes_text:
        what = "an encoder only" if model.layout == "encoder" else "saved without its output head"
        raise ValueError(f"{model.family.name} is {what}: it writes no output whose probability could drop; head "
                         "importance needs a model that writes text.")
    if not texts:
        raise ValueError("head importance needs at least one text")
    ids, mask, decoder, targets = _own_outputs(model, list(texts), max_new_tokens)
    keys = model.map_keys
    H = model.n_heads
    means = _real_means(model, ids, mask, decoder, targets) if ablation == "mean" else None
    variation = Variation(ablation=ablation)  # the paper's pass; each variant's heads off come as per-row gates
    heads = [(key, h) for key in keys for h in range(H)]
    index = {head: 1 + i for i, head in enumerate(heads)}

    def drops(logprob: np.ndarray) -> dict[str, np.ndarray]:  # the grid's variants so far -> key -> [H], NaN: not yet
        return {key: np.array([logprob[0] - logprob[index[(key, h)]] if index[(key, h)] < len(logprob) else np.nan
                               for h in range(H)]) for key in keys}

    def told(logprob: np.ndarray, **more) -> None:
        partial(RealPartial(keys, H, len(texts), ablation, float(logprob[0]), drops(logprob), len(logprob) - 1,
                            **more))

    first = (1 + H) * len(texts) if first is None else first  # rows: the baseline and the first key's heads
    logprob = _real_scores(model, ids, mask, decoder, targets, keys, [set()] + [{x} for x in heads], variation,
                           means, chunk, told if partial else None, first)
    drop = drops(logprob)
    gradient = _real_michel(model, ids, mask, decoder, targets, keys, variation, means)
    order = sorted(heads, key=lambda kh: drop[kh[0]][kh[1]])
    # the prune curve's first two points are the grid's: no head off (k = 0), the least important alone off (k = 1)
    prune = [logprob[0], logprob[index[order[0]]]][: len(heads)]

    def curve(points: np.ndarray) -> None:  # the prune curve's points after its first two, so far
        told(logprob, gradient=gradient, prune=[float(x) for x in prune + list(points)])

    if partial:
        curve(np.array([]))
    if len(heads) > 2:
        prune += list(_real_scores(model, ids, mask, decoder, targets, keys,
                                   [set(order[:k]) for k in range(2, len(heads))], variation, means, chunk,
                                   curve if partial else None))
    agreement = spearman(np.concatenate([drop[k] for k in keys]), np.concatenate([gradient[k] for k in keys]))
    return RealHeadImportance(keys, H, len(texts), ablation, float(logprob[0]), drop, gradient, agreement, order,
                              [float(x) for x in prune])


def real_head_means(model, texts: list[str], *, max_new_tokens: int = 20, variation: Variation = PAPER
                    ) -> dict[str, torch.Tensor]:
    """Each head's mean output [H, d_v] per map key of a real model, over `texts` and what it writes for them
    (teacher-forced; padding left out) under `variation`'s scale and masks, every head on: mean ablation's
    reference."""
    if not texts:
        raise ValueError("mean ablation needs at least one reference text")
    if model.layout == "encoder" or (model.layout == "decoder" and not model.abilities.writes_text):  # one pass
        ids = torch.nn.utils.rnn.pad_sequence([model.encode(t).ids for t in texts], batch_first=True,
                                              padding_value=model.pad_id if model.pad_id is not None else 0)
        mask = torch.nn.utils.rnn.pad_sequence([torch.ones(len(model.encode(t).ids), dtype=torch.long)
                                                for t in texts], batch_first=True).to(model.device)
        return _real_means(model, ids.to(model.device), mask, None, None, variation)
    ids, mask, decoder, targets = _own_outputs(model, list(texts), max_new_tokens)
    return _real_means(model, ids, mask, decoder, targets, variation)


def _real_means(model, ids, mask, decoder, targets, variation: Variation = PAPER) -> dict[str, torch.Tensor]:
    """Mean head outputs over the rows' real positions: the source's (or prompt's) tokens, the decoder's inputs."""
    with torch.no_grad():
        outputs = model.head_outputs(ids, decoder, attention_mask=mask,
                                     variation=replace(variation, heads_off=(), ablation="zero"))
    real = mask.bool()  # (N, S)
    decoded = (targets != -100) if decoder is not None else real  # (N, T): the start token and the written ones
    return mean_outputs(outputs, {key: real if MapKey.parse(key).stack == "encoder" or decoder is None else decoded
                                  for key in outputs})


def _real_michel(model, ids, mask, decoder, targets, keys, variation: Variation, means) -> dict[str, np.ndarray]:
    """Michel's I_h for a real model: per-row gates ξ = 1 under `variation` (its ablation, with mean ablation's
    `means`), L(x) = -mean log p(own output), one backward pass."""
    N, H = ids.size(0), model.n_heads
    dtype = next(model.model.parameters()).dtype
    gates = {key: torch.ones(N, H, dtype=dtype, device=ids.device, requires_grad=True) for key in keys}
    with torch.enable_grad():
        logits = model.traced(ids, decoder, variation=variation, attention_mask=mask, head_means=means,
                                    gates=gates).logits
        logp = torch.log_softmax(_wide(logits), -1).gather(-1, targets.clamp_min(0)[..., None])[..., 0]
        real = (targets != -100).to(logp.dtype)
        grads = torch.autograd.grad((-(logp * real).sum(1) / real.sum(1)).sum(), list(gates.values()))
    return {key: g.abs().mean(0).double().cpu().numpy() for key, g in zip(gates, grads)}


def _wide(logits: torch.Tensor) -> torch.Tensor:
    """Logits at least float32 (a half-precision model's are widened before the log-softmax)."""
    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()


# ----------------------------------------------------------------------------- the passes the scoring runs

def encoder_states(model, input_ids: torch.Tensor, *, attention_mask: torch.Tensor | None = None,
                   variation: Variation = PAPER, head_means=None, gates=None) -> torch.Tensor:
    """An encoder-decoder model's encoder alone under `variation` (with head_means and gates, as traced takes
    them; heads off in the decoder do nothing here): its last hidden states [B, S, D], what the decoder's
    cross-attention reads (decoder_logits takes them)."""
    if model.layout != "encoder-decoder":
        raise ValueError(f"{model.family.name} has no separate encoder to run alone.")
    attention_mask = model.padding_of(input_ids) if attention_mask is None else attention_mask
    with model.switched(variation, head_means=head_means, gates=gates):
        return model.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def decoder_logits(model, encoder_states: torch.Tensor, decoder_input_ids: torch.Tensor, *,
                   attention_mask: torch.Tensor, variation: Variation = PAPER, head_means=None, gates=None
                   ) -> torch.Tensor:
    """An encoder-decoder model's decoder on given encoder states [B, S, D] (attention_mask [B, S]: the source's
    tokens) under `variation` (with head_means and gates, as traced takes them): the logits [B, T, V]. On
    encoder_states' own encoder pass they equal traced's logits, so variants that differ in decoder heads only
    can share one encoder pass."""
    with model.switched(variation, head_means=head_means, gates=gates):
        return model.model(encoder_outputs=model.encoder_output(encoder_states), attention_mask=attention_mask,
                           decoder_input_ids=decoder_input_ids, use_cache=False).logits


def final_states(model, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
                 attention_mask: torch.Tensor | None = None, variation: Variation = PAPER, head_means=None,
                 gates=None) -> torch.Tensor:
    """traced without its output head: the base model's last hidden states [B, T, D] (the decoder's, for an
    encoder-decoder model) under `variation` (with head_means and gates), what output_head turns into traced's
    logits. No map is recorded."""
    kwargs = model.model_inputs(input_ids, decoder_input_ids, attention_mask)
    with model.switched(variation, head_means=head_means, gates=gates):
        return model.model.base_model(**kwargs).last_hidden_state


def decoder_states(model, encoder_states: torch.Tensor, decoder_input_ids: torch.Tensor, *,
                   attention_mask: torch.Tensor, variation: Variation = PAPER, head_means=None, gates=None
                   ) -> torch.Tensor:
    """decoder_logits without the output head: the decoder's last hidden states [B, T, D] on given encoder states
    [B, S, D] under `variation` (with head_means and gates; output_head turns them into decoder_logits' logits)."""
    with model.switched(variation, head_means=head_means, gates=gates):
        return model.model.base_model(encoder_outputs=model.encoder_output(encoder_states), attention_mask=attention_mask,
                                      decoder_input_ids=decoder_input_ids, use_cache=False).last_hidden_state


def output_head(model) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The output head as (W [V, D], b [V] or None) when the model's logits are exactly h Wᵀ + b on final_states'
    h: proven on load (hub.proof: lm_head(h) plus the buffers it found reproduced the probe's logits); None for any
    model where they are not (BERT's masked-LM head has a transform and a norm; a soft cap or a scale on the logits)
    or may no longer be (a replaced lm_head, one with hooks): use the logits then."""
    hf, buffers = model.model, model.linear_head
    lm_head = hf.get_output_embeddings()
    if buffers is None or type(lm_head) is not torch.nn.Linear or not (_unpatched(hf) and _unpatched(lm_head)):
        return None
    bias = lm_head.bias  # (V,) or None
    for name in buffers:
        extra = hf.get_buffer(name).reshape(-1)  # (1, V) -> (V,)
        bias = extra if bias is None else bias + extra
    return lm_head.weight, bias


def _unpatched(module: torch.nn.Module) -> bool:
    """No forward hooks and no forward of the instance's own (accelerate's offloading wraps it): its class's
    forward is what runs."""
    return not (module._forward_hooks or module._forward_pre_hooks or "forward" in vars(module))
