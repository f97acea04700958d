"""Requests checked once, at the boundary: raw control values in, typed requests the inner code trusts out.

Gradio checks little on the server and any HTTP client can call the app, so every value a user sends is
checked here (attention_viz.service.checks) and turned into a frozen dataclass. Messages name the input and
what it accepts; the app shows them as they are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Protocol

from attention_viz.core.ablation import switches
from attention_viz.core.attention import Scale
from attention_viz.core.maps import KINDS, keys_of
from attention_viz.core.variation import HeadsOff, Variation
from attention_viz.service.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
)
from attention_viz.service.limits import (
    ABLATIONS,
    COLOUR_SCALES,
    D_K_RANGE,
    D_MODEL_RANGE,
    DEFAULT_UNTRAINED,
    FACTOR_RANGE,
    HEADS_OFF_CHARS,
    HEADS_RANGE,
    PAD_TOKENS_RANGE,
    SCALE_CHOICES,
)



@dataclass(frozen=True)
class Settings:
    """Everything that changes the computation; hashable, so it keys the run cache."""

    text: str
    model: str                 # a family key ("reverse/sqrt_dk") or "untrained"
    checkpoint: str | None     # the family member used, None for the untrained model
    d_k: int                   # resolved: a trained member's d_k, or the untrained model's
    variation: Variation       # the pass's switches: scale ("sqrt_dk", "none" or a positive factor), causal and
                               # padding masks, heads off before W_O ((map key, heads) in the model's key order)
                               # and their ablation ("zero" or "mean")
    pad_tokens: int            # <pad> tokens appended to the source
    d_model: int               # the model's width and heads (from the card for a trained model)
    n_heads: int
    compatibility: str = "dot_product"  # the model's compatibility function: "dot_product" or "additive" (whose
                                        # runs ignore scaling, so their scale is always "none")
    typed: str | None = None   # the text as typed, when it differs from `text` (capitals lower-cased for a model
                               # trained on lower case); None when the model runs it as typed
    name: str = ""             # the model as every title, label, note and file name says it (Member.name): the
                               # picker's label, never the key

    def switched(self, **changes) -> Settings:
        """These settings with some of their Variation's fields changed (scale=, causal_mask=, padding_mask=,
        heads_off=, ablation=), checked by the Variation."""
        return replace(self, variation=replace(self.variation, **changes))

    @property
    def scale(self) -> Scale:
        return self.variation.scale

    @property
    def causal_mask(self) -> bool:
        return self.variation.causal_mask

    @property
    def padding_mask(self) -> bool:
        return self.variation.padding_mask

    @property
    def heads_off(self) -> HeadsOff:
        return self.variation.heads_off

    @property
    def ablation(self) -> str:
        return self.variation.ablation

    @property
    def position_bias(self) -> bool:
        return self.variation.position_bias

    @property
    def off(self) -> dict[str, list[int]] | None:
        """heads_off as the model's forward argument ({map key: [heads]}), None when every head is on."""
        return self.variation.off

    def as_record(self) -> dict:
        """Every setting as one flat dict of plain values, the variation's fields among them (what exports write)."""
        v = self.variation
        return {"text": self.text, "model": self.model, "checkpoint": self.checkpoint, "d_k": self.d_k,
                "scale": v.scale, "causal_mask": v.causal_mask, "padding_mask": v.padding_mask,
                "pad_tokens": self.pad_tokens, "d_model": self.d_model, "n_heads": self.n_heads,
                "compatibility": self.compatibility, "typed": self.typed, "name": self.name, "heads_off": v.heads_off,
                "ablation": v.ablation, **({} if v.position_bias else {"position_bias": False})}

    @property
    def n_off(self) -> int:
        return sum(len(heads) for _, heads in self.heads_off)


@dataclass(frozen=True)
class Member:
    """What a picker entry runs for the values asked (Entry.member): the model settled and the text it reads."""

    checkpoint: str | None      # a family's member nearest the d_k asked, a real model's name; None: the untrained model
    d_k: int                    # its d_k: the member's, the real model's own, or the one asked (untrained)
    d_model: int
    n_heads: int
    text: str                   # the text it runs
    typed: str | None           # the text as typed, when it runs another (capitals lower-cased for a lower-case model)
    compatibility: str          # "dot_product" (Eq. 1) or "additive"
    keys: dict[str, int]        # every map key -> its number of heads, in the model's order
    name: str = ""              # the model as a person knows it: the picker's label, with what tells this member apart
                                # (a trained family's d_k, the untrained model's sizes)
    position_bias: bool = False  # it adds a position bias to QKᵀ (T5, ALiBi): the position_bias switch acts


class Models(Protocol):
    """What parse_settings asks of the server's models (service.catalog.Catalog answers it): checking a request
    needs these four answers, not the models themselves."""

    def check_model(self, model: object) -> str:
        """The model key, checked (ValueError naming the choices)."""

    def with_compatibility(self, model: str, compatibility: object = None) -> str:
        """The key of the study's family of that compatibility function (None or "": `model`)."""

    def checked_text(self, model: str, text: object) -> str:
        """The text, checked by the rule of the model's kind."""

    def member(self, model: str, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """What the model runs for these values."""



def parse_settings(
    catalog: Models,
    text: object,
    model: object,
    d_k: object,
    scale_mode: object = "sqrt_dk",
    custom_factor: object = 1.0,
    causal_mask: object = True,
    padding_mask: object = True,
    pad_tokens: object = 0,
    d_model: object = DEFAULT_UNTRAINED["d_model"],
    n_heads: object = DEFAULT_UNTRAINED["n_heads"],
    compatibility: object = None,
    heads_off: object = None,
    ablation: object = None,
    position_bias: object = None,
) -> Settings:
    """Validate raw control values into Settings; a trained family's d_k snaps to its nearest member.

    compatibility: for a study model, "scaled_dot", "dot" or "additive" picks the study's family of that arm
    (None or "" keeps `model`; Catalog.with_compatibility). Additive attention has no QKᵀ to scale, so its
    scale is "none" whatever the scaling input says (the run does not pretend a scaling changed anything).

    heads_off: heads switched off before W_O, as text ("decoder.1.cross_attn: 0 2; encoder.0.self_attn: all") or
    {map key: [heads]}; None or "" for none (parse_heads_off). ablation: "zero" (None: the default) or "mean".
    position_bias: False takes out the bias a model adds to QKᵀ (T5's relative positions, ALiBi); None: True. A model
    that adds none runs as it is (its Variation keeps True: nothing to take out, one run cached).

    Raises:
        ValueError: with a message for the user, naming the input and its allowed values.
    """
    model = catalog.with_compatibility(catalog.check_model(model), compatibility)
    text = catalog.checked_text(model, text)  # the rule of its kind: a real model's Unicode, our ASCII
    d_k = check_int("d_k", d_k, *D_K_RANGE)
    mode = check_choice("scaling", scale_mode, SCALE_CHOICES)
    factor = check_float("custom scale factor", custom_factor, *FACTOR_RANGE)
    causal_mask = check_bool("causal mask", causal_mask)
    padding_mask = check_bool("padding mask", padding_mask)
    pad_tokens = check_int("pad tokens", pad_tokens, *PAD_TOKENS_RANGE)
    d_model = check_int("d_model", d_model, *D_MODEL_RANGE)
    n_heads = check_int("heads", n_heads, *HEADS_RANGE)
    member = catalog.member(model, text, d_k, d_model, n_heads)  # what it runs: its d_k, widths, text and keys
    scale: Scale = "none" if member.compatibility == "additive" else factor if mode == "custom" else mode
    ablation = check_choice("ablation", "zero" if ablation in (None, "") else ablation, ABLATIONS)
    off = parse_heads_off(heads_off, member.keys)
    bias = check_bool("position bias", True if position_bias is None else position_bias) or not member.position_bias
    variation = Variation(scale, causal_mask, padding_mask, off, ablation if off else "zero", bias)
    return Settings(member.text, model, member.checkpoint, member.d_k, variation, pad_tokens, member.d_model,
                    member.n_heads, member.compatibility, member.typed, member.name)


def model_keys(config) -> dict[str, int]:
    """Every map key of a model (a TransformerConfig or a real model's shape) -> its number of heads, in order."""
    kinds = getattr(config, "kinds", tuple(KINDS))
    return dict.fromkeys(keys_of(config.n_encoder_layers, config.n_decoder_layers, kinds), config.n_heads)


def parse_heads_off(value: object, keys: dict[str, int]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Heads switched off, checked against the model's keys -> ((key, heads), ...) in the model's key order.

    value: None or "" (none); text, one attention per part, parts split by ";" or new lines, each "key: heads" with
    heads as whole numbers split by spaces or commas, or "all" ("decoder.1.cross_attn: 0 2; encoder.0.self_attn:
    all"); or {key: [heads]} (or that as JSON text). Raises ValueError naming what is wrong (core.ablation.switches
    checks the keys, the heads' range and that some head stays on)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if isinstance(value, str):
        if len(value) > HEADS_OFF_CHARS:
            raise ValueError(f"heads off is {len(value)} characters; at most {HEADS_OFF_CHARS}")
        text = value.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError as error:
                raise ValueError(f"heads off is not valid JSON: {error.msg} at character {error.pos}") from None
            except RecursionError:
                raise ValueError("heads off is JSON nested too deeply: write {map key: [heads]}") from None
        else:
            value = _heads_off_text(text, keys)
    if not isinstance(value, dict):
        raise ValueError('heads off must be text such as "decoder.1.cross_attn: 0 2" or {map key: [heads]}')
    value = {key: (list(range(keys[key])) if heads == "all" and key in keys else heads)
             for key, heads in value.items()}
    switches(keys, value)  # unknown key, head out of range, every head of the model off: ValueError
    return tuple((key, tuple(sorted(set(value[key])))) for key in keys if value.get(key))


def _heads_off_text(text: str, keys: dict[str, int]) -> dict[str, object]:
    """The text form of heads off -> {key: [heads] or "all"}."""
    off: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[;\n]", text))):
        key, colon, heads = part.partition(":")
        key, heads = key.strip(), heads.strip()
        if not colon or not key:
            raise ValueError('heads off: write each attention as "key: heads", e.g. "decoder.1.cross_attn: 0 2"; '
                             f"got {part[:40]!r}")
        if key not in keys:
            raise ValueError(f"heads off names {key[:60]!r}, which this model does not have; its keys are "
                             f"{', '.join(keys)}")
        if heads.lower() == "all":
            off[key] = "all"
            continue
        numbers = [h for h in re.split(r"[\s,]+", heads) if h]
        if not numbers:
            raise ValueError(f"heads off: no heads after {key}: (write head numbers, or all)")
        bad = [h for h in numbers if not (h.isascii() and h.isdigit())]
        if bad:
            raise ValueError(f"heads off: {bad[0][:20]!r} after {key}: is not a head number (0 to {keys[key] - 1})")
        previous = off.get(key, [])
        off[key] = previous if previous == "all" else [*previous, *(int(h) for h in numbers)]
    return off


def heads_off_text(heads_off: tuple[tuple[str, tuple[int, ...]], ...], keys: dict[str, int] | None = None) -> str:
    """The text form of heads off, as parse_heads_off reads it: "decoder.1.cross_attn: 0 2; encoder.0.self_attn: all"
    (all: every head of the key, when keys are given)."""
    parts = []
    for key, heads in heads_off:
        whole = keys is not None and len(heads) == keys.get(key)
        parts.append(f"{key}: {'all' if whole else ' '.join(map(str, heads))}")
    return "; ".join(parts)


def known_case(text: str, alphabet: str | None) -> tuple[str, str | None]:
    """(the text the model runs, the text as typed or None): capitals become lower case when the model was
    trained on lower-case letters only (its card's alphabet) and the lower-case letter is in it."""
    if not alphabet or not any(ch.isupper() for ch in text):
        return text, None
    if any(ch.isupper() for ch in alphabet):
        return text, None
    run = "".join(ch.lower() if ch.isupper() and ch.lower() in alphabet else ch for ch in text)
    return run, (text if run != text else None)


@dataclass(frozen=True)
class HeadRequest:
    """One head of one run: an attention kind, a layer and a head, all within the model."""

    kind: str                  # a key of core.maps.KINDS
    layer: int
    head: int


def parse_head(config, kind: object, layer: object, head: object) -> HeadRequest:
    """Check kind, layer and head against the model's config (a TransformerConfig or a real model's shape)."""
    kind = check_choice("attention kind", kind, KINDS)
    n_layers = config.n_encoder_layers if kind.startswith("encoder") else config.n_decoder_layers
    kinds = getattr(config, "kinds", tuple(KINDS))
    if kind not in kinds or n_layers == 0:
        raise ValueError(f"This model has no {KINDS[kind]}; it has " + ", ".join(KINDS[k] for k in kinds) + ".")
    layer = check_int("layer", layer, 0, n_layers - 1)
    head = check_int("head", head, 0, config.n_heads - 1)
    return HeadRequest(kind, layer, head)


def parse_colour_scale(colour_scale: object) -> bool:
    """True for each head's own maximum ("per_head"), False for 0 → 1 ("absolute")."""
    return check_choice("colour scale", colour_scale, COLOUR_SCALES) == "per_head"
