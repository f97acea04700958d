"""What every model answers, ours (core.model.Transformer) and a real one (hub.PretrainedTransformer): AttentionModel
and its Abilities; research code asks it, never the model's type. input_ids [B, S]: an encoder-decoder model's source
(ours always is one), or the text of a model of one stack; decoder_input_ids [B, T]: an encoder-decoder's, else None.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from attention_viz.core.attention import SCALE_MODES
from attention_viz.core.maps import AttentionMaps, InputAxis
from attention_viz.core.trace import Traced
from attention_viz.core.variation import PAPER, Variation


@dataclass(frozen=True)
class Abilities:
    """What a model can do besides recording its maps, and which switches act on it."""

    writes_text: bool           # greedy decoding writes text (an encoder, or a checkpoint without its head: no)
    fills_masks: bool           # it fills its mask token (an encoder with its masked-LM head)
    causal: bool                # it has decoder self-attention under a causal mask (the causal switch acts)
    compatibility: str = "dot_product"  # §3.2.1: "dot_product" (Eq. 1) or "additive"
    scalings: tuple[str, ...] = SCALE_MODES  # the scalings it can switch; () when it has no 1/√d_k to remove
    d_k_fixed: bool = False     # its weights fix d_k (a real model); else the d_k control moves through models
    scored_on: str | None = None  # its heads are scored on "task" (held-out strings) or "text" (a text given);
                                  # None: they cannot be scored, and unscored says why
    unscored: str = ""          # why its heads cannot be scored (scored_on None), a sentence naming what to pick
    position_bias: bool = False  # it adds a position bias to QKᵀ (T5, ALiBi): the position_bias switch acts


@runtime_checkable
class AttentionModel(Protocol):
    """A model whose every attention runs core's pipeline, with its maps under our keys (module docstring)."""

    pretrained: bool            # read from a checkpoint with its own tokenizer (hub); False: ours, our characters
    abilities: Abilities
    eos_ids: set[int]           # the tokens that end a greedy decode
    # start_id: int, the decoder's first input token, where greedy decoding starts (an encoder-decoder's: a model of
    # one stack refuses with a sentence, its decoder input being its text, so isinstance does not ask for it)

    @property
    def map_keys(self) -> list[str]:
        """Every attention's map key, in our order (encoder layers, then each decoder layer's self, cross)."""

    def input_axis(self, tokens: Sequence[str] = ()) -> InputAxis:
        """What the model reads (the encoder's input, or a decoder-only model's text) as an axis: a text's `tokens`, or
        its modality's own, a picture's patches or a recording's frames (`tokens` then unused)."""

    def traced(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
               variation: Variation = PAPER, keep: Collection[str] = (), at: Collection[str] | None = None,
               head_means: Mapping[str, torch.Tensor] | None = None,
               gates: Mapping[str, torch.Tensor] | None = None) -> Traced:
        """One pass under `variation` (its heads off with head_means, or per-row gates), keeping core.trace's points
        `keep` at the map keys `at` (None: every key): its logits, every map and what was kept."""

    def greedy_decode(self, input_ids: torch.Tensor, max_new_tokens: int, *, variation: Variation | None = None,
                      head_means: Mapping[str, torch.Tensor] | None = None) -> tuple[torch.Tensor, AttentionMaps]:
        """Up to max_new_tokens per row, the most likely first, from start_id (or a decoder-only model's prompt) until
        one of eos_ids, under `variation` at every step -> (tokens [B, n] without the start, maps of the pass over the
        decoder input that wrote them: row t of a decoder map is the step that wrote token t)."""
