"""AttentionMaps: every attention matrix of one forward pass, under stable keys, plus per-head statistics.

Keys, in this order (L_enc encoder layers, L_dec decoder layers):
    encoder.{i}.self_attn    [B, H, S, S]   encoder self-attention
    decoder.{i}.self_attn    [B, H, T, T]   masked decoder self-attention
    decoder.{i}.cross_attn   [B, H, T, S]   encoder-decoder attention (queries from the decoder)
Every tensor is [batch, heads, query, key], recorded after the softmax and before dropout.
TextMaps holds one example's maps with its tokens; head_grid picks the heads a figure or a comparison shows.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class MapKey:
    """One attention's map key as a value: MapKey("decoder", 1, "cross_attn") is "decoder.1.cross_attn"; parse reads
    one (and refuses anything else), str writes it, kind is its kind of KINDS ("decoder.cross_attn")."""

    stack: str  # "encoder" or "decoder"
    layer: int
    name: str   # "self_attn" or "cross_attn"

    @classmethod
    def parse(cls, key: object) -> "MapKey":
        """A key read once; ValueError for anything that is not one (e.g. "decoder.1.cross_attn")."""
        parts = key.split(".") if isinstance(key, str) else []
        if len(parts) != 3 or f"{parts[0]}.{parts[2]}" not in KINDS or not parts[1].isdigit():
            raise ValueError(f"{key!r} is not a map key: keys look like 'encoder.0.self_attn' "
                             f"(a kind of {', '.join(KINDS)} with its layer)")
        return cls(parts[0], int(parts[1]), parts[2])

    @classmethod
    def of(cls, kind: str, layer: int) -> "MapKey":
        """Layer `layer`'s key of a kind of KINDS; KeyError for an unknown kind."""
        if kind not in KINDS:
            raise KeyError(f"unknown attention kind {kind!r}; choose one of {list(KINDS)}")
        stack, name = kind.split(".")
        return cls(stack, layer, name)

    @property
    def kind(self) -> str:
        return f"{self.stack}.{self.name}"

    @property
    def order(self) -> tuple[int, int, int]:
        """Its place in our order (keys_of's): encoder layers, then each decoder layer's self, cross."""
        return (self.stack != "encoder", self.layer, self.name != "self_attn")

    def __str__(self) -> str:
        return f"{self.stack}.{self.layer}.{self.name}"


def map_key(stack: str, layer: int, name: str) -> str:
    """The key of one layer's map, e.g. map_key("decoder", 1, "cross_attn") == "decoder.1.cross_attn"."""
    return str(MapKey(stack, layer, name))


def kind_key(kind: str, layer: int) -> str:
    """The key of one layer's map of a kind, e.g. kind_key("decoder.cross_attn", 1) == "decoder.1.cross_attn"."""
    return str(MapKey.of(kind, layer))


def kind_of(key: str) -> str:
    """A map key's kind: "decoder.3.cross_attn" -> "decoder.cross_attn" (ValueError for what is not a key)."""
    return MapKey.parse(key).kind


def in_order(keys) -> list[str]:
    """Map keys sorted into our order (MapKey.order)."""
    return sorted(keys, key=lambda key: MapKey.parse(key).order)


def layers_of(keys, kind: str) -> int:
    """How many consecutive layers 0, 1, ... of a kind the keys (or maps) hold."""
    n = 0
    while kind_key(kind, n) in keys:
        n += 1
    return n


def keys_of(n_encoder_layers: int, n_decoder_layers: int, kinds: Sequence[str] = tuple(KINDS)) -> list[str]:
    """Every map key of a model with these layers and kinds, in our order: encoder layers, then each decoder layer's
    self- and cross-attention."""
    keys = [kind_key("encoder.self_attn", i) for i in range(n_encoder_layers if "encoder.self_attn" in kinds else 0)]
    return keys + [kind_key(kind, i) for i in range(n_decoder_layers) for kind in list(KINDS)[1:] if kind in kinds]


def stack_kind(maps: Mapping[str, ArrayT], kind: str, n_layers: int | None = None) -> ArrayT:
    """Every layer of one kind stacked on a new first axis: maps of shape [...] -> [L, ...].

    Works for numpy arrays and torch tensors alike (per-key [B, H, Q, K] gives [L, B, H, Q, K]; the app's
    per-example [H, Q, K] gives [L, H, Q, K]). n_layers None takes layers 0, 1, ... while their keys exist;
    an integer asks for exactly that many and raises KeyError if one is missing.
    """
    layers = [maps[kind_key(kind, i)] for i in range(layers_of(maps, kind) if n_layers is None else n_layers)]
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
    """How much of its weight a head puts on target keys: weights [..., Q, K], targets bool [Q, K] -> [...] (or
    several grids of targets at once, [..., Q, K] broadcast against the weights' leading axes).

    The mean, over the query rows that have a target key and attend to anything, of Σ_j p_ij over the targets
    (1 = every such row looks only at its targets; a uniform head scores about targets per row / K). NaN where no
    row has a target. Used for a task's known alignment and for simple patterns (previous token, first token, sink).
    """
    p = np.asarray(weights)
    if p.dtype not in (np.float32, np.float64):
        p = p.astype(np.float64)
    targets = np.asarray(targets, dtype=bool)
    if targets.shape[-2:] != p.shape[-2:]:
        raise ValueError(f"targets have shape {list(targets.shape)}, the maps [Q, K] = {list(p.shape[-2:])}")
    rows = targets.any(-1) & (p.sum(-1) > 0)  # [..., Q]
    # Σ_j p_ij t_ij without a full-size temporary (the app scores every head of every run it packs)
    on = np.einsum("...qk,...qk->...q", p, targets.astype(p.dtype)).astype(np.float64)  # [..., Q]
    n = rows.sum(-1)
    with np.errstate(invalid="ignore"):
        return np.where(n > 0, np.where(rows, on, 0.0).sum(-1) / np.maximum(n, 1), np.nan)


@dataclass(frozen=True)
class InputAxis:
    """What a model reads, as the axis its maps' positions lie on: a text's tokens, a picture's patches (its special
    tokens, then the grid row by row) or a recording's frames (the encoder's time axis), each position labelled."""

    name: str                             # "tokens", "patches" or "frames"
    labels: tuple[str, ...]               # one per position
    grid: tuple[int, int] | None = None   # patches: the grid's (rows, columns), after the special tokens
    seconds: float | None = None          # frames: the seconds one position spans


def axis_of(labels: "InputAxis | Sequence[str]") -> InputAxis:
    """An axis as given, or a text's tokens as one."""
    return labels if isinstance(labels, InputAxis) else InputAxis("tokens", tuple(str(label) for label in labels))


# The token lists that label each kind's (query, key) axes: "source" is what the encoder read, "target" the decoder's
# input (a decoder-only model's text).
AXES = {
    "encoder.self_attn": ("source", "source"),
    "decoder.self_attn": ("target", "target"),
    "decoder.cross_attn": ("target", "source"),
}


def token_masks(source: Sequence[str], target: Sequence[str], causal_mask: bool = True, padding_mask: bool = True,
                pad_token: str = "<pad>") -> dict[str, np.ndarray]:
    """[Q, K] bool masks per kind (True = may attend), as our model applies them: padded keys, and the causal mask of
    decoder self-attention."""
    masks = {}
    for kind, (q_axis, k_axis) in AXES.items():
        queries = source if q_axis == "source" else target
        keys = source if k_axis == "source" else target
        allowed = np.ones((len(queries), len(keys)), dtype=bool)
        if padding_mask:
            allowed &= np.array([token != pad_token for token in keys], dtype=bool)[None, :]
        if kind == "decoder.self_attn" and causal_mask:
            allowed &= np.tril(np.ones_like(allowed))
        masks[kind] = allowed
    return masks


class TextMaps(Mapping[str, np.ndarray]):
    """One example's maps with its inputs: key -> [H, Q, K] float32, the source and target axes (InputAxis: a text's
    tokens, or what the model read of a picture or a recording; source_tokens and target_tokens their labels), the
    masks applied (kind -> [Q, K] bool, True = may attend), the output and the settings it ran with. A Mapping of its
    maps, so whatever takes maps (rollout, pattern scores, show, save_figure) takes it, and finds its tokens on it."""

    def __init__(self, maps: Mapping, source: InputAxis | Sequence[str] = (), target: InputAxis | Sequence[str] = (),
                 masks: Mapping[str, np.ndarray] | None = None, output: str = "",
                 settings: Mapping[str, str] | None = None) -> None:
        self.maps = {key: _one_example(key, value) for key, value in maps.items()}
        self.source, self.target = axis_of(source), axis_of(target)
        self.source_tokens, self.target_tokens = list(self.source.labels), list(self.target.labels)
        self.masks = {kind: np.asarray(mask, dtype=bool) for kind, mask in (masks or {}).items()}
        self.output = output
        self.settings = dict(settings or {})

    def __getitem__(self, key: str) -> np.ndarray:
        return self.maps[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.maps)

    def __len__(self) -> int:
        return len(self.maps)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {list(v.shape)}" for k, v in self.maps.items())
        return f"TextMaps(source={self.source_tokens}, target={self.target_tokens}, {shapes})"

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of one kind."""
        queries, keys = AXES[kind]
        named = {"source": self.source_tokens, "target": self.target_tokens}
        return list(named[queries]), list(named[keys])


def _one_example(key: str, value) -> np.ndarray:
    """A map as float32 [H, Q, K]: a batch axis of 1 dropped; a batch of more refused."""
    array = value.detach().float().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value, np.float32)
    if array.ndim == 4:
        if array.shape[0] != 1:
            raise ValueError(f"{key} holds a batch of {array.shape[0]}: one example's maps are wanted (maps.select(i))")
        array = array[0]
    if array.ndim != 3:
        raise ValueError(f"{key} must be [H, Q, K] (or [1, H, Q, K]), got shape {list(array.shape)}")
    return array


@dataclass(frozen=True)
class HeadGrid:
    """Heads chosen for a figure or a comparison: weights [R, C, Q, K], row r layer layers[r], column c head heads[c]."""

    kind: str
    layers: tuple[int, ...]
    heads: tuple[int, ...]
    weights: np.ndarray  # (R, C, Q, K) float32


def head_grid(maps: Mapping, key: str, head: int | None = None, index: int = 0) -> HeadGrid:
    """The heads a (key, head) choice names, as the app's exports name them:

        kind ("encoder.self_attn"), head None     every layer × every head (the exported grid)
        map key ("encoder.1.self_attn"), head h   one head (the exported head)
        map key, head None                        that layer's heads, in a row
        kind, head h                              head h of every layer, in a column

    maps: key -> [B, H, Q, K] (batch element `index` is taken) or [H, Q, K].
    """
    if not isinstance(key, str):
        raise ValueError(f"key must be a map key like 'encoder.0.self_attn' or a kind like 'encoder.self_attn', "
                         f"got {key!r}")
    if key in KINDS:
        kind, layers = key, list(range(layers_of(maps, key)))
    else:
        try:
            where = MapKey.parse(key)
        except ValueError:
            raise ValueError(f"{key!r} is neither a map key (e.g. 'encoder.0.self_attn') nor a kind "
                             f"({', '.join(KINDS)})") from None
        kind, layers = where.kind, [where.layer]
    if not layers or kind_key(kind, layers[0]) not in maps:
        raise ValueError(f"these maps have no {key!r}; they have {', '.join(list(maps)[:6])}")
    weights = []
    for layer in layers:
        value = maps[kind_key(kind, layer)]
        array = value.detach().float().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        if array.ndim == 4:
            if not -array.shape[0] <= index < array.shape[0]:
                raise ValueError(f"batch index {index} is out of range for a batch of {array.shape[0]}")
            array = array[index]
        weights.append(array.astype(np.float32))  # (H, Q, K)
    n_heads = weights[0].shape[0]
    if head is None:
        heads = list(range(n_heads))
    else:
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < n_heads:
            raise ValueError(f"head must be None (every head) or an integer in [0, {n_heads - 1}], got {head!r}")
        heads = [int(head)]
    stacked = np.stack([w[heads] for w in weights])  # (R, C, Q, K)
    return HeadGrid(kind, tuple(layers), tuple(heads), stacked)
