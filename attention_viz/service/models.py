"""What the service asks of a model, whichever kind it is: the protocol ServedModel, and what it answers with.

Two kinds of model satisfy it: our own Transformer with our character tokenizer (service.own_model.OwnModel) and a
real model loaded through transformers (service.hub_model.HubModel). The catalog hands out the one a Settings or a
model key names (Catalog.attention_model); runs and views ask it, never which kind it is. What a model can and
cannot do (write text, fill masks, switch its scaling) is its Abilities.

Each picker entry is an Entry (Catalog.entry hands out the one a model key names): it answers what the picker, the
controls and the requests ask before any model runs (its d_k values, its shape, the text it reads, the member a
request runs, its ModelControls) and hands out its ServedModel. Three kinds: a trained family and the untrained
model (service.own_model), a real model (service.hub_model). The controls a picker entry gets (its d_k, layer and
head ranges, what the text box says, which switches show) are a ModelControls; which switches act is read from the
same Abilities the model answers, so a kind says it once. A fourth kind of model brings its own module with an Entry
and a ServedModel, and a line in Catalog.entries; the views ask the catalog and never branch on the kind.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import torch

from attention_viz.core.attention import attention_masks
from attention_viz.core.config import TransformerConfig
from attention_viz.core.maps import KINDS, head_statistics, MapKey, kind_key, stack_kind
from attention_viz.core.protocol import Abilities
from attention_viz.service.requests import HeadRequest, Member, Settings, parse_head

HeadMeans = Callable[[Settings], dict[str, torch.Tensor]]  # settings -> each head's mean output [H, d_v] per map key


def pass_arguments(settings: Settings, means: HeadMeans, heads: bool = True) -> dict:
    """A model's pass arguments under `settings`: its Variation and, for heads off by their mean output, the heads'
    means (means(settings), computed here: before any run line, which they take too). heads=False: every head on."""
    if not (heads and settings.heads_off):
        return {"variation": replace(settings.variation, heads_off=(), ablation="zero")}
    return {"variation": settings.variation, "head_means": means(settings) if settings.ablation == "mean" else None}


@dataclass(frozen=True)
class ModelControls:
    """Ranges and values of the controls that depend on the picked model; which switches act come from its Abilities."""

    abilities: Abilities        # what the model can switch: the scaling control (scalings), the causal mask (causal)
    untrained: bool
    d_k: int                    # the d_k to show: the requested one, or the family member nearest it
    log_d_k_min: float          # the log₂ d_k slider: the family's range, or 0 .. 10 for the untrained model
    log_d_k_max: float
    log_d_k_step: float
    max_layer: int
    max_head: int
    layer: int                  # the requested layer and head, clamped into range
    head: int
    scale_mode: str             # how the model was trained ("sqrt_dk" for the untrained one)
    d_k_note: str               # which d_k values exist
    study: bool = False         # a study model: the compatibility picker shows
    compatibility: str | None = None  # the picker's value: the study family's arm, None for other models
    trained_d_ks: tuple[int, ...] = ()  # a trained family's sizes: the d_k control stops at these only
    text_info: str = ""                 # under the text box: what this model was trained on, before any run
    text_label: str = ""                # the text box's label (its limits); "" keeps the page's own
    d_k_label: str = "d_k: the sizes this model was trained at"  # the trained sizes' radio
    examples: tuple[str, ...] = ()      # the example texts offered with this model (EXAMPLES, by what it reads)
    scale_info: str = ""                # under the scaling control: what a model without 1/√d_k does instead (T5)

    @property
    def scaling_applies(self) -> bool:
        """The scaling control changes something: False for additive attention (no 1/√d_k to remove)."""
        return bool(self.abilities.scalings)

    @property
    def bias_applies(self) -> bool:
        """The position bias control acts: the model adds a position bias to QKᵀ (T5, ALiBi)."""
        return self.abilities.position_bias

    @property
    def causal_applies(self) -> bool:
        """The causal mask control acts: False for an encoder alone (no decoder self-attention to mask)."""
        return self.abilities.causal


class ServedModel(Protocol):
    """What the service asks of a model (module docstring). Settings carry the switches of a pass; `means` given
    to a model (HeadMeans) answers mean ablation's reference, computed and cached by service.runs.Runs."""

    abilities: Abilities
    shape: object               # layers, heads and widths: a TransformerConfig (ours) or a RealShape
    sink: str                   # its end token as its tokens write it: the sink pattern's key

    @property
    def keys(self) -> dict[str, int]:
        """Every map key it has -> its number of heads, in the model's order."""

    def tokens(self, text: str) -> list[str]:
        """The tokens it reads `text` as: our characters, or its own subword pieces."""

    def run(self, settings: Settings) -> Run:
        """The text greedy-decoded under the switches: tokens, output and every map of the last step."""

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """Maps [H, Q, K] of one pass on `run`'s source and decoder input under `settings`' switches."""

    def masks_under(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """Kind -> [Q, K] bool: the masks a pass on `run`'s ids applies under `settings`' switches."""

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]]:
        """Each decode step's own decoder maps (step t: key -> [H, t + 1, K]), for a run without the causal mask."""

    def steps(self, run: Run, request: HeadRequest) -> Steps:
        """Every intermediate of Eq. 1 for one head (Figure 2, left), from the inputs that attention received."""

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        """‖v_j^h W_O^h‖ per map key [H, K] of `run`'s own pass."""

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Each head's mean output [H, d_v] per map key over its reference texts: mean ablation's reference."""

    def head_importance(self, settings: Settings, ablation: str, n_texts: int, chunk: int,
                        partial: Callable | None = None):
        """Every head switched off alone (attention_viz.importance): a HeadImportance on `n_texts` held-out strings
        of its task, or a RealHeadImportance on the text (batches of `chunk` rows, each told to `partial`)."""

    def qk_statistics(self, n_texts: int, sentences: tuple[str, ...]) -> dict:
        """Footnote 4's numbers per map key (attention_viz.qkstats, logits kept): on `n_texts` held-out strings of
        its task, or on `sentences`."""

    def qk_texts(self, n_texts: int, sentences: tuple[str, ...]) -> str:
        """What qk_statistics measured on, in words."""

    def notes(self, run: Run) -> list[str]:
        """The first notes on a run: what the model is, and how this run differs from how it was trained."""

    def output_text(self, run: Run) -> str:
        """The output box: what it wrote, or why there is nothing to read."""


class Entry(Protocol):
    """One entry of the model picker, answering for itself (module docstring); Catalog.entry hands it out for a
    checked model key, and Catalog's methods of the same names ask it. ValueErrors carry a message for the user."""

    key: str                    # the picker's value ("reverse/sqrt_dk", "untrained", "hub:" + a real model's name)
    label: str                  # what the picker shows

    def d_k_choices(self) -> list[int]:
        """The d_k values it has: a family's trained ones, a real model's own; [] when any d_k goes (untrained)."""

    def default_d_k(self) -> int:
        """The d_k it opens with."""

    def model_shape(self, d_k: object = None) -> object:
        """Its layers, heads and widths at d_k (checked; None: its default): a TransformerConfig, a RealShape, or
        None when they are the request's own (untrained)."""

    def largest(self) -> tuple[int, int]:
        """(layers, heads) of its largest model, before any is loaded: the API's bounds for the layer and head."""

    def controls(self, d_k: int, layer: int, head: int, n_heads: object, progress=None) -> ModelControls:
        """Its controls at d_k with layer and head clamped into its ranges; progress(fraction, text) hears a load."""

    def checked_text(self, text: object) -> str:
        """`text` checked by the rule of what it reads."""

    def member(self, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """What it runs for these checked values: the model settled, the text it reads, its map keys."""

    def attention_model(self, settings: Settings | None, means: HeadMeans | None = None) -> ServedModel:
        """Its model for `settings` (service.models.ServedModel); None: the entry's only model (a real one)."""


@dataclass(frozen=True)
class Run:
    """The result of one forward pass: tokens, output string and every map as [H, Q, K] numpy arrays."""

    settings: Settings
    config: TransformerConfig
    card: dict | None = field(repr=False, hash=False, compare=False)
    src_ids: tuple[int, ...]               # text + <eos> + pads
    tgt_ids: tuple[int, ...]               # the decoder input of the last step: <bos> + output[:-1]
    src_tokens: tuple[str, ...]
    tgt_tokens: tuple[str, ...]
    generated: tuple[str, ...]             # the greedy output tokens, <eos> included when emitted
    output: str                            # the generated text, up to <eos>
    finished: bool                         # <eos> was emitted
    expected: str | None                   # what the trained task asks for, None when untrained
    maps: dict[str, np.ndarray] = field(repr=False, hash=False, compare=False)  # key -> [H, Q, K], read-only
    applied: dict[str, np.ndarray] | None = field(default=None, repr=False, hash=False, compare=False)
    # the masks as the model applied them (kind -> [Q, K] bool), when its rules are its own (a real model's); None:
    # core's attention_masks of the ids (ours)
    notes: tuple[str, ...] = ()            # what the run itself has to say (a real model's unfinished output, ...)
    norms: dict[str, np.ndarray] | None = field(default=None, repr=False, hash=False, compare=False)
    # ‖v_j^h W_O^h‖ per key [H, K] of the run's own pass, when the model computed them with its maps (a real model's:
    # its decode's last pass keeps its values); None: asked of the model when needed
    biases: dict[str, np.ndarray] | None = field(default=None, repr=False, hash=False, compare=False)
    # the position bias B each attention added to its scaled QKᵀ (key -> [H, Q, K]; a real model's T5 or ALiBi,
    # where the position_bias switch is on); None or a key left out: it added none

    @property
    def kinds(self) -> list[str]:
        """The kinds of attention this run's model has, in KINDS order."""
        return [kind for kind in KINDS if kind in getattr(self.config, "kinds", KINDS) and self.n_layers(kind)]

    @property
    def trained(self) -> bool:
        return self.card is not None

    def n_layers(self, kind: str) -> int:
        """Number of layers that have attention of this kind."""
        stack = MapKey.of(kind, 0).stack
        return self.config.n_encoder_layers if stack == "encoder" else self.config.n_decoder_layers

    def weights(self, kind: str) -> np.ndarray:
        """Every layer of one kind stacked: [L, H, Q, K]."""
        return stack_kind(self.maps, kind, self.n_layers(kind))

    def head_request(self, kind: object, layer: object, head: object) -> HeadRequest:
        """Kind, layer and head checked against this run's model."""
        return parse_head(self.config, kind, layer, head)

    def head(self, kind: object, layer: object, head: object) -> np.ndarray:
        """One head's weights [Q, K], with kind, layer and head checked against this model."""
        request = self.head_request(kind, layer, head)
        return self.maps[kind_key(request.kind, request.layer)][request.head]

    def ids(self, kind: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(query ids, key ids) of one kind."""
        queries = self.src_ids if kind == "encoder.self_attn" else self.tgt_ids
        keys = self.tgt_ids if kind == "decoder.self_attn" else self.src_ids
        return queries, keys

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of one kind: the axes of its heatmaps."""
        queries = self.src_tokens if kind == "encoder.self_attn" else self.tgt_tokens
        keys = self.tgt_tokens if kind == "decoder.self_attn" else self.src_tokens
        return list(queries), list(keys)

    @functools.cached_property
    def masks(self) -> dict[str, np.ndarray]:
        """Kind -> [Q, K] bool, True = may attend: the masks the model applied to this run's ids (core's
        attention_masks of src_ids and tgt_ids under the run's switches; a real model's as it applied them)."""
        if self.applied is not None:
            return self.applied
        return self.masks_under(self.settings)

    def masks_under(self, settings: Settings) -> dict[str, np.ndarray]:
        """Kind -> [Q, K] bool: the masks a forward pass on this run's ids applies under other settings' switches."""
        src, tgt = torch.tensor([self.src_ids]), torch.tensor([self.tgt_ids])  # (1, S), (1, T)
        masks = attention_masks(src, tgt, self.config.pad_id, settings.causal_mask, settings.padding_mask,
                                dense=True)  # kind -> (1, Q, K)
        arrays = {kind: mask[0].numpy() for kind, mask in masks.items()}
        for array in arrays.values():
            array.setflags(write=False)  # shared between users through the cache
        return arrays

    def mask(self, kind: str) -> np.ndarray:
        """[Q, K] bool in the package's convention, True = may attend: the mask the model applied (drawn grey)."""
        MapKey.of(kind, 0)  # KeyError for an unknown kind
        return self.masks[kind]

    def statistics(self, kind: str) -> list[list[float]]:
        """One row per (layer, head) of this kind, columns as STAT_HEADERS (maps.head_statistics)."""
        stats = head_statistics(self.weights(kind))  # each [L, H]
        n_layers, n_heads = stats["entropy"].shape
        return [
            [layer, head] + [round(float(stats[name][layer, head]), 4)
                             for name in ("entropy", "max_weight", "mean_distance", "diagonal")]
            for layer in range(n_layers) for head in range(n_heads)
        ]


@dataclass(frozen=True)
class Steps:
    """Figure 2 (left) for one head: QKᵀ, scaled, masked, softmax weights [Q, K] and weights·V [Q, d_v]."""

    arrays: dict[str, np.ndarray]
    query_tokens: list[str]
    key_tokens: list[str]
    factor: float               # what QKᵀ was multiplied by


def frozen(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The arrays made read-only (shared between users through the caches), in place; returned."""
    for array in arrays.values():
        array.setflags(write=False)
    return arrays
