"""What every model answers, ours (core.model.Transformer) and a real one (hub.PretrainedTransformer): AttentionModel
and its Abilities; research code asks it, never the model's type. input_ids [B, S]: an encoder-decoder model's source
(ours always is one), or the text of a model of one stack; decoder_input_ids [B, T]: an encoder-decoder's, else None.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from attention_viz.core.ablation import switches
from attention_viz.core.attention import SCALE_MODES
from attention_viz.core.maps import AttentionMaps, InputAxis, in_order
from attention_viz.core.trace import Trace, Traced, trace
from attention_viz.core.variation import PAPER, Variation, variation_of


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


SWITCHES = ("scale", "causal_mask", "padding_mask", "heads_off", "ablation", "position_bias")  # Variation's fields


class Passes:
    """What a model answers from one traced pass, written once for ours and a real model over what both have
    (AttentionModel: `traced`, `map_keys`; and `n_heads`, `w_o(key)`). The switches as one Variation (variation=...)
    or its fields as keywords (SWITCHES); other keywords (head_means, gates, a real model's attention_mask) go to
    `traced`. input_ids [B, S], decoder_input_ids [B, T] as core.protocol reads them."""

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
                variation: Variation | None = None, **keywords) -> tuple[torch.Tensor, AttentionMaps]:
        """One pass -> (logits [B, T, V] (a model without an output head: its last states), every map). Heads
        switched off (heads_off, ablation, head_means, or per-row gates: core.ablation) pass their replacement to
        W_O; their maps are still recorded as computed."""
        traced = self._traced(input_ids, decoder_input_ids, variation, keywords)
        return traced.logits, traced.maps

    def head_outputs(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
                     variation: Variation | None = None, **keywords) -> dict[str, torch.Tensor]:
        """Every attention's heads' outputs [B, H, Q, d_v] before W_O in forward: what mean ablation averages
        (core.ablation.mean_outputs). The variation's heads off apply."""
        kept = self._traced(input_ids, decoder_input_ids, variation, keywords, ("heads",)).kept
        return {key: kept[key]["heads"] for key in in_order(kept)}

    def value_norms(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
                    variation: Variation | None = None, **keywords) -> dict[str, torch.Tensor]:
        """‖v_j^h W_O^h‖ per map key [B, H, K] in forward with these switches: how far key j's value would move the
        output through head h at weight 1 (value_flows is the maps times these)."""
        return self.norms_of(self._traced(input_ids, decoder_input_ids, variation, keywords, ("v",)).kept)

    def value_flows(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
                    variation: Variation | None = None, **keywords) -> dict[str, torch.Tensor]:
        """What flows, not only the weight (Kobayashi et al. 2020): per map key, α_ij · ‖v_j^h W_O^h‖ [B, H, Q, K]
        in forward: a head that looks hard at a key whose value carries almost nothing shows it."""
        traced = self._traced(input_ids, decoder_input_ids, variation, keywords, ("v",))
        norms = self.norms_of(traced.kept)
        return {key: traced.maps[key] * norms[key][:, :, None, :] for key in norms}

    def norms_of(self, kept: dict[str, dict]) -> dict[str, torch.Tensor]:
        """‖v_j^h W_O^h‖ per map key [B, H, K] from what a pass kept (its values "v", [B, H, K, d_v]: a grouped-query
        model's repeated for every query head, as they are used), W_O^h being the columns of W_O [D, H·d_v] that
        head h's output meets."""
        norms = {}
        for key in in_order(kept):
            w_o = self.w_o(key)  # (D, H·d_v)
            w_o = w_o.view(-1, self.n_heads, w_o.size(1) // self.n_heads)  # (D, H, d_v)
            norms[key] = torch.einsum("bhkv,dhv->bhkd", kept[key]["v"], w_o).norm(dim=-1)  # (B, H, K)
        return norms

    def probes(self, variation: Variation, head_means=None, gates=None, keep: Collection[str] = (),
               at: Collection[str] | None = None, records: Collection[str] = ()) -> Trace | None:
        """The probes of one pass: the variation's heads off (core.ablation.switches, with head_means or per-row
        gates; ValueError naming what is wrong), the points `keep` at the keys `at` and `records` at every key;
        None: a plain pass."""
        if not (variation.heads_off or gates or keep or records):
            return None  # the plain pass
        keys = self.map_keys
        heads = (switches(dict.fromkeys(keys, self.n_heads), variation.off, variation.ablation, head_means, gates)
                 if variation.heads_off or gates else None)
        return trace(keys, heads, keep, at, records)

    def _traced(self, input_ids, decoder_input_ids, variation: Variation | None, keywords: dict,
                keep: Collection[str] = ()) -> Traced:
        """`traced` under the variation or the switches among `keywords`, the rest of them handed on."""
        given = {name: keywords.pop(name) for name in SWITCHES if name in keywords}
        return self.traced(input_ids, decoder_input_ids, variation=variation_of(variation, **given), keep=keep,
                           **keywords)
