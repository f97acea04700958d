"""Footnote 4 measured on a model's own queries and keys (§3.2.1).

Footnote 4: if the components of q and k are independent with mean 0 and variance 1, q·k has mean 0 and variance
d_k. A trained model's q and k need not be like that; this module measures, per head, what they are:

    stats = qk_statistics(model, ["hello", "attention"])            # our Transformer (our tokenizer) or a real model
    s = stats["decoder.1.cross_attn"]
    s.logit_var, s.predicted, s.ratio                     # [H] each: Var q·k, d_k·Var q·Var k, their ratio

What is pooled. For one map key and head, every (query, key) pair of every text together, real tokens only: no
<pad> as query or key; a decoder's self-attention pairs a query with the keys up to it (causal). Variances are
population variances (divide by the count) around the pooled mean:
    logit_var   the raw q·k over those pairs (no 1/√d_k)
    q_var       the components of q over those pairs, all d_k components together (a query counts once per key it
    k_var       meets, a key once per query that meets it: the same pairs as the logits)
    predicted   d_k · q_var · k_var, footnote 4's variance for independent components of those variances
    ratio       logit_var / predicted (1 where footnote 4's premise holds; a head whose q and k are aligned, or whose
                components have a mean, is far from it)
    row_var     the variance of q·k across one query row's keys, averaged over the query rows: the part of logit_var
                the softmax sees (it ignores a shift of a whole row, q·k̄, which logit_var counts)
    entropy_scaled, entropy_unscaled: the softmax's entropy in nats of each real query row over its allowed keys, with
                the factor 1/√d_k and with 1 on q·k, averaged over the query rows.

Which pass. The statistics come from one teacher-forced pass over the texts, under the scaling the model runs with
(`scale`: a model trained without 1/√d_k should run without it, or its upper layers see inputs they never saw):
    an encoder (and the encoder of an encoder-decoder model) reads each text;
    the decoder of an encoder-decoder model reads what the model itself writes for the text by greedy decoding
        (its start token, then every written token but the last: the pass whose maps a decode shows);
    a decoder-only model (GPT-2, Llama) reads the text.
The texts run as one padded batch; padding changes nothing (tests/test_qkstats.py).

Axes: B texts, H heads, Q queries, K keys, d = d_k, N pooled pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_viz.core.attention import Scale
from attention_viz.core.maps import MapKey, kind_of
from attention_viz.core.protocol import AttentionModel
from attention_viz.core.variation import Variation, variation_of
from attention_viz.data.tokenizer import CharTokenizer

REAL_MAX_NEW_TOKENS = 40  # a real encoder-decoder model's decode length, by default


@dataclass(frozen=True)
class QKStatistics:
    """One attention's q·k statistics, per head ([H] float64 arrays); see the module's docstring."""

    d_k: int
    n_pairs: int                 # (query, key) pairs pooled, per head
    n_queries: int               # real query rows (the entropies' average)
    logit_var: np.ndarray        # [H] Var q·k, raw
    q_var: np.ndarray            # [H] Var of q's components
    k_var: np.ndarray            # [H] Var of k's components
    row_var: np.ndarray          # [H] mean over query rows of Var q·k across the row's keys
    entropy_scaled: np.ndarray   # [H] nats, factor 1/√d_k
    entropy_unscaled: np.ndarray  # [H] nats, factor 1
    logits: np.ndarray | None = None  # [H, N] float32 raw q·k of every pooled pair, when asked for (keep_logits)

    @property
    def n_heads(self) -> int:
        return int(self.logit_var.shape[0])

    @property
    def predicted(self) -> np.ndarray:
        """[H] footnote 4's variance of q·k from the head's own component variances: d_k · Var q · Var k."""
        return self.d_k * self.q_var * self.k_var

    @property
    def ratio(self) -> np.ndarray:
        """[H] logit_var / predicted: 1 where the components behave as footnote 4 assumes."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.logit_var / self.predicted


def pair_statistics(q: torch.Tensor, k: torch.Tensor, allowed: torch.Tensor, keep_logits: bool = False
                    ) -> QKStatistics:
    """The pooled statistics of q [B, H, Q, d] and k [B, H, K, d] over the pairs allowed [B, Q, K] (True = pooled),
    in float64. Every row of `allowed` with a True is a query row; it needs at least one pair."""
    if not bool(allowed.any()):
        raise ValueError("no (query, key) pair to pool: every text is empty")
    q, k = q.double(), k.double()
    d = q.size(-1)
    logits = q @ k.transpose(-1, -2)  # (B, H, Q, K)
    pooled = logits.transpose(0, 1)[:, allowed]  # (H, N)
    weight_q = allowed.sum(-1).to(q.dtype)  # (B, Q) keys each query meets
    weight_k = allowed.sum(-2).to(q.dtype)  # (B, K) queries each key meets
    rows = allowed.any(-1)  # (B, Q) real query rows

    def component_var(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """Population variance of x's components [B, H, P, d], position p counted weight[b, p] times -> (H,)."""
        w = weight[:, None, :, None]  # (B, 1, P, 1)
        count = weight.sum() * d
        mean = (x * w).sum(dim=(0, 2, 3)) / count  # (H,)
        return ((x - mean[None, :, None, None]) ** 2 * w).sum(dim=(0, 2, 3)) / count

    def row_var() -> torch.Tensor:
        """Mean over real query rows of the population variance of the row's allowed logits -> (H,)."""
        n = weight_q.clamp(min=1)[:, None, :]  # (B, 1, Q)
        x = logits.masked_fill(~allowed[:, None], 0.0)
        mean = x.sum(-1) / n  # (B, H, Q)
        var = ((x - mean[..., None]) ** 2).masked_fill(~allowed[:, None], 0.0).sum(-1) / n  # (B, H, Q)
        return var.transpose(0, 1)[:, rows].mean(-1)  # (H,)

    def entropy(factor: float) -> torch.Tensor:
        """Mean over real query rows of the softmax's entropy (nats) at this factor on q·k -> (H,)."""
        z = (logits * factor).masked_fill(~allowed[:, None], float("-inf"))  # (B, H, Q, K)
        log_p = torch.log_softmax(z, dim=-1).masked_fill(~allowed[:, None], 0.0)
        h = -(log_p.exp() * log_p).sum(-1)  # (B, H, Q)
        return h.transpose(0, 1)[:, rows].mean(-1)  # (H,)

    def numpy(x: torch.Tensor) -> np.ndarray:
        array = x.cpu().numpy()
        array.setflags(write=False)
        return array

    return QKStatistics(
        d_k=d,
        n_pairs=int(allowed.sum()),
        n_queries=int(rows.sum()),
        logit_var=numpy(pooled.var(dim=-1, unbiased=False)),
        q_var=numpy(component_var(q, weight_q)),
        k_var=numpy(component_var(k, weight_k)),
        row_var=numpy(row_var()),
        entropy_scaled=numpy(entropy(1 / math.sqrt(d))),
        entropy_unscaled=numpy(entropy(1.0)),
        logits=numpy(pooled.float()) if keep_logits else None,
    )


def qk_statistics(model, texts: str | Sequence[str], *, tokenizer: CharTokenizer | None = None,
                  scale: Scale = "sqrt_dk", max_new_tokens: int | None = None, keep_logits: bool = False,
                  variation: Variation | None = None) -> dict[str, QKStatistics]:
    """Per map key (in the model's order), footnote 4's numbers measured on the model's own q and k over `texts`.

    Args:
        model: our Transformer (attention_viz.core.model, dot-product attention), or a real model
            (attention_viz.hub.PretrainedTransformer).
        texts: one text or several; for our models, characters of the task's alphabet.
        tokenizer: our models only: the CharTokenizer that encodes the texts (default CharTokenizer(): up to 20
            characters; pass CharTokenizer(max_len=card["max_len"]) for a shipped model). A real model uses its own.
        scale: the scaling the model runs with ("sqrt_dk", "none" or a factor): a shipped model's card["scale"].
        max_new_tokens: the longest decode of an encoder-decoder model (default: tokenizer.max_len + 1 for ours,
            40 for a real model). A decoder-only or encoder-only model does not decode.
        keep_logits: also keep every pooled raw q·k (QKStatistics.logits [H, N]) for a histogram.
        variation: the switches of the passes as one core.variation.Variation (instead of scale).

    Returns: {map key: QKStatistics}. Raises ValueError for no text, an empty text, or a model without q·k
    (additive attention).
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not texts or not all(isinstance(t, str) and t for t in texts):
        raise ValueError("give at least one text, and no empty one")
    variation = variation_of(variation, scale)
    if not isinstance(model, AttentionModel):
        raise ValueError(f"qk_statistics takes our Transformer or a hub PretrainedTransformer, "
                         f"not {type(model).__name__}")
    if model.abilities.compatibility != "dot_product":
        raise ValueError(f"this model's attention is {model.abilities.compatibility}: it has no q·k to measure")
    if model.pretrained and tokenizer is not None:
        raise ValueError("a real model reads text with its own tokenizer: give no tokenizer")
    ids, decoder_ids, src_real, tgt_real, options = _inputs(model, texts, tokenizer or CharTokenizer(), variation,
                                                            max_new_tokens)
    with torch.no_grad():  # one pass keeps every attention's q and k
        kept = model.traced(ids, decoder_ids, variation=variation, keep=("q", "k"), **options).kept
    return {key: pair_statistics(kept[key]["q"], kept[key]["k"], _allowed(key, src_real, tgt_real), keep_logits)
            for key in model.map_keys}  # q [B, H, Q, d], k [B, H, K, d]: a real model's grouped keys repeated


# ---------------------------------------------------------------------------------------------- the passes

def _padded(rows: list[torch.Tensor], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids [B, L] and which positions are real [B, L] (bool)."""
    L = max(len(r) for r in rows)
    ids = torch.full((len(rows), L), pad, dtype=torch.long, device=device)
    real = torch.zeros(len(rows), L, dtype=torch.bool, device=device)
    for i, r in enumerate(rows):
        ids[i, : len(r)], real[i, : len(r)] = r, True
    return ids, real


def _allowed(key: str, src_real: torch.Tensor, tgt_real: torch.Tensor | None) -> torch.Tensor:
    """The pooled pairs [B, Q, K] of one map key: real queries × real keys, causal for a decoder's self-attention."""
    key = MapKey.parse(key)
    if key.stack == "encoder" or tgt_real is None:
        query_real = key_real = src_real
    else:
        query_real, key_real = tgt_real, (tgt_real if key.name == "self_attn" else src_real)
    allowed = query_real[:, :, None] & key_real[:, None, :]  # (B, Q, K)
    if key.kind == "decoder.self_attn":
        Q, K = allowed.shape[1:]
        allowed = allowed & torch.ones(Q, K, dtype=torch.bool, device=allowed.device).tril()
    return allowed


@torch.no_grad()
def _inputs(model: AttentionModel, texts: list[str], tokenizer: CharTokenizer, variation: Variation,
            max_new_tokens: int | None):
    """(ids [B, S], an encoder-decoder's decoder ids [B, T] (else None), their real positions, the pass's options):
    the texts as the model reads them (ours: our characters, <eos> ended) and, decoded alone, what it writes for each:
    its start token, then every written token but the last."""
    if model.pretrained:  # its own tokenizer
        device, pad, steps = model.device, model.pad_id if model.pad_id is not None else 0, REAL_MAX_NEW_TOKENS
        sources = [model.encode(t).ids.to(device) for t in texts]  # (S_b,) each
    else:
        device, pad, steps = next(model.parameters()).device, model.config.pad_id, tokenizer.max_len + 1
        sources = [torch.tensor(tokenizer.encode(t).ids, device=device) for t in texts]  # (S_b,) each
    ids, src_real = _padded(sources, pad, device)  # (B, S)
    decoder_ids = tgt_real = None
    if any(kind_of(key) == "decoder.cross_attn" for key in model.map_keys):  # an encoder-decoder: it writes
        written = [model.greedy_decode(src[None], max_new_tokens or steps, variation=variation)[0] for src in sources]
        decoder_ids, tgt_real = _padded([torch.cat([src.new_tensor([model.start_id]), w[0, :-1]])
                                         for src, w in zip(sources, written)], pad, device)  # (B, T)
    if not model.pretrained:
        model.eval()
    return ids, decoder_ids, src_real, tgt_real, {"attention_mask": src_real.long()} if model.pretrained else {}
