"""AttentionMaps: every attention matrix of one forward pass, under stable keys, plus per-head statistics.

Keys, in this order (L_enc encoder layers, L_dec decoder layers):
    encoder.{i}.self_attn    [B, H, S, S]   encoder self-attention
    decoder.{i}.self_attn    [B, H, T, T]   masked decoder self-attention
    decoder.{i}.cross_attn   [B, H, T, S]   encoder-decoder attention (queries from the decoder)
Every tensor is [batch, heads, query, key], recorded after the softmax and before dropout.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import TypeVar

import numpy as np
import torch

ArrayT = TypeVar("ArrayT", np.ndarray, torch.Tensor)

# The three ways the paper uses attention (§3.2.3), by the suffix of their keys.
KINDS: dict[str, str] = {
    "encoder.self_attn": "encoder self-attention",
    "decoder.self_attn": "masked decoder self-attention",
    "decoder.cross_attn": "encoder-decoder attention",
}


def map_key(stack: str, layer: int, name: str) -> str:
    """The key of one layer's map, e.g. map_key("decoder", 1, "cross_attn") == "decoder.1.cross_attn"."""
    return f"{stack}.{layer}.{name}"


def split_kind(kind: str) -> tuple[str, str]:
    """A kind of KINDS split into (stack, name), e.g. "decoder.cross_attn" -> ("decoder", "cross_attn")."""
    if kind not in KINDS:
        raise KeyError(f"unknown attention kind {kind!r}; choose one of {list(KINDS)}")
    stack, name = kind.split(".")
    return stack, name


def kind_key(kind: str, layer: int) -> str:
    """The key of one layer's map of a kind, e.g. kind_key("decoder.cross_attn", 1) == "decoder.1.cross_attn"."""
    stack, name = split_kind(kind)
    return map_key(stack, layer, name)


def stack_kind(maps: Mapping[str, ArrayT], kind: str, n_layers: int | None = None) -> ArrayT:
    """Every layer of one kind stacked on a new first axis: maps of shape [...] -> [L, ...].

    Works for numpy arrays and torch tensors alike (per-key [B, H, Q, K] gives [L, B, H, Q, K]; the app's
    per-example [H, Q, K] gives [L, H, Q, K]). n_layers None takes layers 0, 1, ... while their keys exist;
    an integer asks for exactly that many and raises KeyError if one is missing.
    """
    if n_layers is None:
        n_layers = 0
        while kind_key(kind, n_layers) in maps:
            n_layers += 1
    layers = [maps[kind_key(kind, i)] for i in range(n_layers)]
    if not layers:
        raise KeyError(f"no maps of kind {kind!r}")
    return torch.stack(layers) if isinstance(layers[0], torch.Tensor) else np.stack(layers)


class AttentionMaps(Mapping[str, torch.Tensor]):
    """An ordered, read-only record of attention weights, one [B, H, Q, K] tensor per key."""

    def __init__(self, maps: dict[str, torch.Tensor]) -> None:
        self._maps = dict(maps)

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._maps[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._maps)

    def __len__(self) -> int:
        return len(self._maps)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {list(v.shape)}" for k, v in self._maps.items())
        return f"AttentionMaps({shapes})"

    def kind(self, kind: str) -> torch.Tensor:
        """All layers of one kind ("encoder.self_attn", ...) stacked: [L, B, H, Q, K]."""
        return stack_kind(self._maps, kind)

    def to_numpy(self) -> dict[str, np.ndarray]:
        """The maps as float32 numpy arrays on the CPU, same keys."""
        return {k: v.detach().float().cpu().numpy() for k, v in self._maps.items()}

    def select(self, index: int) -> "AttentionMaps":
        """The maps of one batch element, keeping a batch axis of size 1; Python indexing (-1 is the last).

        Raises IndexError for an index outside [-B, B).
        """
        index = operator.index(index)
        sizes = {v.size(0) for v in self._maps.values()}  # B, the same for every map
        for size in sizes:
            if not -size <= index < size:
                raise IndexError(f"batch index {index} is out of range for a batch of {size}")
        return AttentionMaps({k: v[index % v.size(0)][None] for k, v in self._maps.items()})

    @property
    def nbytes(self) -> int:
        """Bytes held by all maps."""
        return sum(v.numel() * v.element_size() for v in self._maps.values())


def head_statistics(weights: np.ndarray) -> dict[str, np.ndarray]:
    """Per-head summaries of weights [..., Q, K], averaged over the query rows that attend to anything.

    entropy        -Σ_j p_ij log p_ij in nats (0 = one key, log K = uniform)
    max_weight     the largest weight of a row
    mean_distance  Σ_j p_ij |i - j|, how far (in positions) a query looks
    diagonal       p_ii, the weight a query puts on the key at its own position
    Each is returned with shape [...].
    """
    p = np.asarray(weights, dtype=np.float64)
    n_q, n_k = p.shape[-2:]
    live = p.sum(-1) > 0  # [..., Q]: rows with at least one unmasked key
    n_live = np.maximum(live.sum(-1), 1)

    def row_mean(x: np.ndarray) -> np.ndarray:
        return np.where(live, x, 0.0).sum(-1) / n_live

    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    distance = np.abs(np.arange(n_q)[:, None] - np.arange(n_k)[None, :])  # (Q, K)
    eye = np.eye(n_q, n_k, dtype=bool)
    return {
        "entropy": row_mean(-plogp.sum(-1)),
        "max_weight": row_mean(p.max(-1)),
        "mean_distance": row_mean((p * distance).sum(-1)),
        "diagonal": row_mean(np.where(eye, p, 0.0).sum(-1)),
    }


def weight_on(weights: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """How much of its weight a head puts on target keys: weights [..., Q, K], targets bool [Q, K] -> [...].

    The mean, over the query rows that have a target key and attend to anything, of Σ_j p_ij over the targets
    (1 = every such row looks only at its targets; a uniform head scores about targets per row / K). NaN where no
    row has a target. Used for a task's known alignment and for simple patterns (previous token, first token, sink).
    """
    p = np.asarray(weights)
    if p.dtype not in (np.float32, np.float64):
        p = p.astype(np.float64)
    targets = np.asarray(targets, dtype=bool)
    if targets.shape != p.shape[-2:]:
        raise ValueError(f"targets have shape {list(targets.shape)}, the maps [Q, K] = {list(p.shape[-2:])}")
    rows = targets.any(-1) & (p.sum(-1) > 0)  # [..., Q]
    # Σ_j p_ij t_ij without a full-size temporary (the app scores every head of every run it packs)
    on = np.einsum("...qk,qk->...q", p, targets.astype(p.dtype)).astype(np.float64)  # [..., Q]
    n = rows.sum(-1)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, np.where(rows, on, 0.0).sum(-1) / np.maximum(n, 1), np.nan)
