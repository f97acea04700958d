"""The switches of one pass as one value: a variation on the paper's model (after Table 3, "Variations on the
Transformer", which varies the model; a Variation varies one forward pass of a trained one).

    variation = Variation(scale="none", heads_off={"decoder.1.cross_attn": [0, 2]})
    logits, maps = model(src, tgt, variation=variation)      # the same as model(src, tgt, scale="none", heads_off=...)

Fields (checked once, here; a ValueError names the field and what it accepts):
    scale         "sqrt_dk" (1/√d_k, the paper) | "none" (factor 1) | a positive finite factor (core.attention)
    causal_mask   the decoder self-attention's mask of future positions (§3.2.3)
    padding_mask  hide <pad> keys in every attention
    heads_off     ((map key, (heads, ...)), ...): heads switched off before W_O (core.ablation); {key: [heads]} is
                  accepted and stored in this form, keys in the order given, heads sorted
    ablation      what a switched-off head passes on: "zero" or "mean" (its mean output, given per pass as head_means)
    position_bias a bias the model adds to its scaled QKᵀ (T5's relative positions): off takes it out, as if it were
                  zero (our Transformer adds none: nothing to take out)

Frozen and hashable, so it keys caches. What a pass computes per model or batch (head_means, gates) is not part of
it: those stay arguments beside it. Whether heads_off's keys and heads exist is the model's to say
(core.ablation.switches), since only the model knows its keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from attention_viz.core.ablation import ABLATIONS
from attention_viz.core.attention import Scale, check_scale
from attention_viz.core.messages import shown

HeadsOff = tuple[tuple[str, tuple[int, ...]], ...]  # ((map key, heads switched off), ...)


@dataclass(frozen=True)
class Variation:
    """scale, causal_mask, padding_mask, heads_off, ablation, position_bias of one pass; the defaults are the paper's
    model (and a real model as it is)."""

    scale: Scale = "sqrt_dk"
    causal_mask: bool = True
    padding_mask: bool = True
    heads_off: HeadsOff = ()
    ablation: str = "zero"
    position_bias: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the checked, normalised values are written once, here
        set_(self, "scale", check_scale(self.scale))
        set_(self, "causal_mask", _check_flag("causal_mask", self.causal_mask))
        set_(self, "padding_mask", _check_flag("padding_mask", self.padding_mask))
        set_(self, "heads_off", _check_heads_off(self.heads_off))
        set_(self, "position_bias", _check_flag("position_bias", self.position_bias))
        if not isinstance(self.ablation, str) or self.ablation not in ABLATIONS:
            raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {shown(self.ablation)}")

    @property
    def off(self) -> dict[str, list[int]] | None:
        """heads_off as core.ablation.switches takes it ({map key: [heads]}), None when every head is on."""
        return {key: list(heads) for key, heads in self.heads_off} or None


def variation_of(variation: Variation | None = None, scale: Scale = "sqrt_dk", causal_mask: bool = True,
                 padding_mask: bool = True, heads_off: Mapping[str, Sequence[int]] | HeadsOff | None = None,
                 ablation: str = "zero", position_bias: bool = True) -> Variation:
    """The keyword front: `variation` as given, or one built from the switches as keywords (ValueError for both)."""
    if variation is None:
        return Variation(scale, causal_mask, padding_mask, heads_off or (), ablation, position_bias)
    if not isinstance(variation, Variation):
        raise ValueError(f"variation must be a Variation, got {shown(variation)}")
    defaults = ("sqrt_dk", True, True, "zero", True)
    if (scale, causal_mask, padding_mask, ablation, position_bias) != defaults or heads_off:
        raise ValueError("give the switches either as a Variation or as keywords (scale, causal_mask, padding_mask, "
                         "heads_off, ablation, position_bias), not both")
    return variation


def _check_flag(name: str, value: object) -> bool:
    if isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {shown(value)}")


def _check_heads_off(value: object) -> HeadsOff:
    """{key: [heads]} or ((key, heads), ...) -> ((key, sorted distinct heads), ...) without keys whose list is empty."""
    if value is None:
        return ()
    pairs = list(value.items()) if isinstance(value, Mapping) else value
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise ValueError(f"heads_off must be {{map key: [heads]}} or ((map key, heads), ...), got {shown(value)}")
    checked, seen = [], set()
    for pair in pairs:
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(f"heads_off must be {{map key: [heads]}} or ((map key, heads), ...), got {shown(value)}")
        key, heads = pair
        if not isinstance(key, str):
            raise ValueError(f"heads_off's keys must be map keys such as 'decoder.1.cross_attn', got {shown(key)}")
        if key in seen:
            raise ValueError(f"heads_off names {shown(key)} twice")
        seen.add(key)
        if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence):
            raise ValueError(f"heads_off[{key!r}] must be a list of head indices, got {shown(heads)}")
        for head in heads:
            if isinstance(head, bool) or not isinstance(head, int) or head < 0:
                raise ValueError(f"heads_off[{key!r}]: head {shown(head)} does not exist; heads are numbered from 0")
        if heads:
            checked.append((key, tuple(sorted(set(int(h) for h in heads)))))
    return tuple(checked)


PAPER = Variation()  # the paper's model: 1/√d_k, both masks, every head on
