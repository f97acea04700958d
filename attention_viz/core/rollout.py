"""Attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers", §3): how much each output
token of a stack draws on each input token, through every self-attention layer and its residual connection.

Each layer l of the stack becomes a [T, T] mixing matrix
    Ã_l = residual · I + (1 − residual) · mean_h A_l        (the paper: 0.5 · A + 0.5 · I for the residual)
with its rows renormalised to sum to 1, and the rollout multiplies them, the first layer rightmost:
    R = Ã_L ··· Ã_2 Ã_1                                     R[i, j]: output token i's share of input token j
Only self-attention layers enter: for the decoder of an encoder-decoder model that is its masked self-attention
alone (encoder-decoder attention mixes in source tokens, which are not positions of this stack).

Axes: B batch, L layers, H heads, T positions (queries = keys in self-attention).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from attention_viz.core.maps import kind_key

STACKS = ("encoder", "decoder")


def as_array(value) -> np.ndarray:
    """A map as float64 numpy (a torch tensor detached and moved to the CPU), without a torch import here."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def self_attention_layers(maps: Mapping, stack: str | None = None) -> tuple[str, np.ndarray]:
    """(stack, its self-attention maps float64 [B, L, H, T, T]) from any mapping key -> [B, H, T, T] or [H, T, T].

    stack None takes the encoder when the maps have one, else the decoder (a decoder-only model's).
    """
    present = [s for s in STACKS if kind_key(f"{s}.self_attn", 0) in maps]
    if stack is None:
        if not present:
            raise ValueError(f"these maps have no self-attention (keys {list(maps)[:4]}...): rollout needs "
                             "encoder.{i}.self_attn or decoder.{i}.self_attn maps")
        stack = present[0]
    if stack not in STACKS:
        raise ValueError(f"stack must be 'encoder' or 'decoder', got {stack!r}")
    if stack not in present:
        raise ValueError(f"these maps have no {stack} self-attention; they have: {', '.join(present) or 'none'}")
    layers = []
    while kind_key(f"{stack}.self_attn", len(layers)) in maps:
        a = as_array(maps[kind_key(f"{stack}.self_attn", len(layers))])
        layers.append(a[None] if a.ndim == 3 else a)  # (B, H, T, T)
    shapes = {a.shape for a in layers}
    if len(shapes) != 1 or len(layers[0].shape) != 4 or layers[0].shape[-1] != layers[0].shape[-2]:
        raise ValueError(f"the {stack} self-attention maps must all be [B, H, T, T]; got {sorted(shapes)}")
    return stack, np.stack(layers, axis=1)  # (B, L, H, T, T)


def check_residual(residual: float) -> float:
    """The residual's share as a float in [0, 1], or a ValueError saying so."""
    try:
        value = float(residual)
    except (TypeError, ValueError):
        raise ValueError(f"residual must be a number in [0, 1], got {residual!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"residual must be in [0, 1] (0.5 is the paper's), got {value}")
    return value


def mixing_matrices(layers: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Ã_l = residual·I + (1 − residual)·mean_h A_l, rows renormalised: [B, L, H, T, T] -> [B, L, T, T] float64.

    A row with no weight at all (every key masked) and no residual stays 0.
    """
    residual = check_residual(residual)
    n = layers.shape[-1]
    mixed = residual * np.eye(n) + (1.0 - residual) * layers.mean(axis=2)  # (B, L, T, T)
    total = mixed.sum(-1, keepdims=True)
    return np.divide(mixed, total, out=np.zeros_like(mixed), where=total > 0)


def rollout(maps: Mapping, stack: str | None = None, residual: float = 0.5) -> np.ndarray:
    """Attention rollout of one stack: R = Ã_L ··· Ã_1 (Abnar & Zuidema 2020), float64 [B, T, T].

    Args:
        maps: AttentionMaps (key -> [B, H, T, T]) or a mapping key -> [H, T, T] (one example, e.g. a TextMaps').
        stack: "encoder" or "decoder" (its masked self-attention only); None: the encoder if there is one.
        residual: the identity's share in each layer's matrix (0.5 in the paper; 0 multiplies the bare head means).

    Row i of the result is output token i's mixture of the input tokens: each row sums to 1 (where the tokens'
    maps attend to anything).
    """
    _, layers = self_attention_layers(maps, stack)
    mixing = mixing_matrices(layers, residual)  # (B, L, T, T)
    result = mixing[:, 0]
    for layer in range(1, mixing.shape[1]):
        result = mixing[:, layer] @ result  # Ã_l (Ã_{l-1} ··· Ã_1)
    return result
