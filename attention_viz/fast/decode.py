"""Greedy decoding of core's Transformer with less Python per step, bit-identical to Transformer.greedy_decode.

Chosen explicitly (service/own_model.py's runs call it). Same arguments, same answer: (tokens [B, n], the maps of the
last step), value_norms filled. Where the reference keeps the keys (eval mode, the causal mask on, dot-product
attention), each step runs the very operations of DecoderLayer.step in the same order on the same tensors, written
out flat (fast/passes.py), and so are the encoder's pass and the maps' pass. A switch of heads off is applied as the
reference applies it. Anything else (training, no causal mask, additive attention) is the reference itself. The saving
is the modules' calls: ~1/3 of the steps' time on the shipped models (docs/benchmarks.md).

A guess of what the decode writes (service/own_model.py: a trained model's answer to its own task) skips the steps
where it holds: one teacher-forced pass on <bos> + guess predicts every token of it, each with a clear lead (leads),
and that pass is the maps' own. The reference's steps and this pass differ only by float rounding, far below the lead
asked, so they pick the same tokens; the maps and value norms come from the same pass as the reference's. Where the
guess goes wrong, the tokens the pass settled (those it agrees on, and its own first that differs) are kept and the
pass runs again on them and its own tokens after them (settle: heads switched off change a token of the answer, and
the rest follows from it), for as long as it settles more; where the decode is still not whole, the settled tokens'
keys and values are computed in one pass and the steps go on from there, each with a clear lead, or start again.

Axes: B batch, H heads, T decoded positions, D d_model.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch

from attention_viz.core.attention import causal_mask as make_causal_mask
from attention_viz.core.attention import padding_mask as make_padding_mask
from attention_viz.core.model import RECORDS, Transformer, decoder_probes
from attention_viz.core.variation import variation_of
from attention_viz.fast import passes
from attention_viz.fast.passes import step


@torch.no_grad()
def greedy_decode(network: Transformer, src: torch.Tensor, max_new_tokens: int, *, scale="sqrt_dk",
                  causal_mask: bool = True, padding_mask: bool = True, heads_off=None, ablation: str = "zero",
                  head_means=None, gates=None, variation=None, value_norms: dict[str, torch.Tensor] | None = None,
                  guess: Sequence[int] | None = None):
    """network.greedy_decode(src, max_new_tokens, ...) (reuse_keys=True), bit for bit, with the steps written out
    flat.

    guess: token ids the decode is expected to write (a trained model's task answer, <eos> last), for one source
    (B = 1): checked by one teacher-forced pass, which is the maps' own pass when it holds (see verified)."""
    variation = variation_of(variation, scale, causal_mask, padding_mask, heads_off, ablation)
    c, max_len, bos_id, eos_id = network.config, max_new_tokens, network.start_id, network.config.eos_id
    if (network.training or not variation.causal_mask or c.compatibility != "dot_product"
            or isinstance(max_len, bool) or not isinstance(max_len, numbers.Integral) or max_len < 1):
        return network.greedy_decode(src, max_len, variation=variation, head_means=head_means, gates=gates,
                                     value_norms=value_norms)
    probes = network.probes(variation, head_means, gates)  # the steps': they record nothing
    kept = network.probes(variation, head_means, gates, ("v",) if value_norms is not None else (), records=RECORDS)
    memory, src_mask = passes.encode(network, src, variation, kept)
    B = src.size(0)
    layers = network.decoder.layers
    memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in layers]
    pe = passes.encoding(max_len, c.d_model, src.device)  # (max_len, D)
    layer_probes = [decoder_probes(probes, i) for i in range(len(layers))]

    def steps(tgt: torch.Tensor, past: list, checked: bool) -> torch.Tensor | None:
        """Decode on from tgt [B, t + 1] (<bos> + the tokens so far) with each layer's kept keys and values of its
        first t positions; checked: each token must lead the next by MARGIN (None where one does not)."""
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        for t in range(tgt.size(1) - 1, max_len):
            y = network.tgt_embed(tgt[:, -1:]) + pe[t]  # (B, 1, D): the newest position only
            self_mask = make_padding_mask(tgt, c.pad_id) if variation.padding_mask else None  # (B, 1, 1, t + 1)
            for i, layer in enumerate(layers):
                y, past[i] = step(layer, y, memory_kv[i], past[i], src_mask, variation.scale, self_mask,
                                     *layer_probes[i])
            if network.decoder.norm is not None:
                y = passes.norm(network.decoder.norm, y)
            logits = passes.linear(network.generator, y[:, -1])  # (B, V)
            if checked and not bool(leads(logits).all()):
                return None
            next_token = logits.argmax(-1).masked_fill(done, c.pad_id)  # (B,)
            tgt = torch.cat([tgt, next_token[:, None]], dim=1)  # (B, t + 2)
            done = done | (next_token == eos_id)
            if bool(done.all()):
                break
        return tgt

    tgt = None
    if guess is not None and B == 1:
        settled, found = settle(network, memory, memory_kv, src_mask, variation, kept, guess, max_len, bos_id, eos_id)
        if found:  # the last pass was the maps' own
            tokens = torch.tensor([settled], dtype=torch.long, device=src.device)  # (1, n)
            return tokens, network.recorded_maps(kept, value_norms)
        if settled:  # decode on from the tokens the passes settled, their keys and values from one pass of the steps
            tgt = torch.tensor([[bos_id] + settled], dtype=torch.long, device=src.device)  # (1, P + 1)
            past = _prefix(network, tgt[:, :-1], pe, memory_kv, src_mask, variation, layer_probes)
            tgt = tgt if settled[-1] == eos_id else steps(tgt, past, checked=True)
    if tgt is None:  # no guess, or decoding on from one was not clear: the reference's own steps
        tgt = steps(torch.full((B, 1), bos_id, dtype=torch.long, device=src.device), [None] * len(layers), False)
    passes.decode(network, tgt[:, :-1], memory, src_mask, variation, kept, memory_kv)
    return tgt[:, 1:], network.recorded_maps(kept, value_norms)


MARGIN = 1e-4  # a most likely token counts as settled only where it leads the next by MARGIN · (1 + |its logit|)


def leads(logits: torch.Tensor) -> torch.Tensor:
    """Whether each row's most likely token leads the next by MARGIN · (1 + |its logit|): [..., V] -> [...] bool.

    The reference's steps and a pass over many positions compute a position's logits with other matmul shapes, so
    they differ by float rounding, far below this lead: where it holds, both pick the same token."""
    top = logits.topk(2, dim=-1).values  # (..., 2)
    return top[..., 0] - top[..., 1] > MARGIN * (1 + top[..., 0].abs())


def settle(network: Transformer, memory, memory_kv, src_mask, variation, probes, guess: Sequence[int],
           max_len: int, bos_id: int, eos_id: int):
    """verified, again on a new guess for as long as the guess goes wrong and the pass settles more tokens: (the
    tokens settled, whether the last pass's guess is the whole decode: its probes then hold the maps).

    The new guess is the tokens settled, then the pass's own most likely tokens after them (Jacobi iteration of the
    teacher-forced pass): each pass settles at least one more token, and often the rest, where heads switched off
    change a token of the task's answer and what follows it follows from that token."""
    settled, found, predicted = verified(network, memory, memory_kv, src_mask, variation, probes, guess, max_len,
                                         bos_id, eos_id)
    while not found and settled and settled[-1] != eos_id and len(settled) < len(predicted):
        before = len(settled)
        settled, found, predicted = verified(network, memory, memory_kv, src_mask, variation, probes,
                                             settled + predicted[before:], max_len, bos_id, eos_id)
        if len(settled) <= before:  # a token without a clear lead: the steps decide it
            break
    return settled, found


def verified(network: Transformer, memory, memory_kv, src_mask, variation, probes, guess: Sequence[int],
             max_len: int, bos_id: int, eos_id: int):
    """One teacher-forced pass on <bos> + guess (cut after its first <eos> and at max_len): (the tokens it settles,
    whether the guess is the whole decode (the probes then hold the maps' records), the pass's most likely tokens).

    Settled: the pass's most likely tokens, each with a clear lead (leads), as long as they agree with the guess, and
    the first that does not; greedy decoding writes these first. The guess is the whole decode where every one
    agrees and it ends (<eos>, or max_len tokens): the pass is then the maps' own."""
    guess = list(guess[:max_len])
    if eos_id in guess:
        guess = guess[:guess.index(eos_id) + 1]
    if not guess:
        return [], False, []
    x = torch.tensor([[bos_id] + guess[:-1]], dtype=torch.long, device=memory.device)  # (1, n)
    logits = passes.decode(network, x, memory, src_mask, variation, probes, memory_kv)  # (1, n, V)
    predicted = logits[0].argmax(-1).tolist()
    settled = []
    for token, clear, expected in zip(predicted, leads(logits[0]).tolist(), guess):
        if not clear:
            break
        settled.append(token)
        if token != expected or token == eos_id:
            break
    if settled == guess and (guess[-1] == eos_id or len(guess) == max_len):
        return settled, True, predicted
    return settled, False, predicted


def _prefix(network: Transformer, x: torch.Tensor, pe: torch.Tensor, memory_kv, src_mask, variation,
            layer_probes) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each decoder layer's self-attention keys and values [1, H, P, d] of decoder input x [1, P] (<bos> + settled
    tokens but the last), from one pass of the flat steps over its P positions, causally masked."""
    mask = make_causal_mask(x.size(1), x.device)  # (P, P)
    if variation.padding_mask:
        mask = mask & make_padding_mask(x, network.config.pad_id)  # (1, 1, P, P)
    y = network.tgt_embed(x) + pe[:x.size(1)]  # (1, P, D)
    past = []
    for i, layer in enumerate(network.decoder.layers):
        y, kv = step(layer, y, memory_kv[i], None, src_mask, variation.scale, mask, *layer_probes[i])
        past.append(kv)
    return past
