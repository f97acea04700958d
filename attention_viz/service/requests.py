"""Requests checked once, at the boundary: raw control values in, typed requests the inner code trusts out.

Gradio checks little on the server and any HTTP client can call the app, so every value a user sends is
checked here (attention_viz.service.checks) and turned into a frozen dataclass. Messages name the input and
what it accepts; the app shows them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from attention_viz.core.attention import Scale
from attention_viz.core.config import TransformerConfig
from attention_viz.core.maps import KINDS
from attention_viz.service.catalog import Catalog
from attention_viz.service.real_models import display_name
from attention_viz.service.checks import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_text,
    check_unicode_text,
)
from attention_viz.service.limits import (
    COLOUR_SCALES,
    D_K_RANGE,
    D_MODEL_RANGE,
    DEFAULT_UNTRAINED,
    FACTOR_RANGE,
    HEADS_RANGE,
    HUB_PREFIX,
    MAX_HEAD_WIDTH,
    PAD_TOKENS_RANGE,
    REAL_SOURCE_TOKENS,
    REAL_TEXT_CHARS,
    SCALE_MODES,
    UNTRAINED,
    UNTRAINED_LAYERS,
)


@dataclass(frozen=True)
class Settings:
    """Everything that changes the computation; hashable, so it keys the run cache."""

    text: str
    model: str                 # a family key ("reverse/sqrt_dk") or "untrained"
    checkpoint: str | None     # the family member used, None for the untrained model
    d_k: int                   # resolved: a trained member's d_k, or the untrained model's
    scale: Scale               # "sqrt_dk", "none" or a positive factor
    causal_mask: bool
    padding_mask: bool
    pad_tokens: int            # <pad> tokens appended to the source
    d_model: int               # the model's width and heads (from the card for a trained model)
    n_heads: int
    compatibility: str = "dot_product"  # the model's compatibility function: "dot_product" or "additive" (whose
                                        # runs ignore scaling, so their scale is always "none")
    typed: str | None = None   # the text as typed, when it differs from `text` (capitals lower-cased for a model
                               # trained on lower case); None when the model runs it as typed

    @property
    def real(self) -> bool:
        """A real model (attention_viz.hub) set up on this server: model is "hub:" + its name."""
        return self.model.startswith(HUB_PREFIX)


def parse_settings(
    catalog: Catalog,
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
) -> Settings:
    """Validate raw control values into Settings; a trained family's d_k snaps to its nearest member.

    compatibility: for a study model, "scaled_dot", "dot" or "additive" picks the study's family of that arm
    (None or "" keeps `model`; Catalog.with_compatibility). Additive attention has no QKᵀ to scale, so its
    scale is "none" whatever the scaling input says (the run does not pretend a scaling changed anything).

    Raises:
        ValueError: with a message for the user, naming the input and its allowed values.
    """
    model = catalog.with_compatibility(catalog.check_model(model), compatibility)
    if model in catalog.real:
        text = check_unicode_text(text, REAL_TEXT_CHARS)
    else:
        text = check_text(text, catalog.tokenizer.max_len)
    d_k = check_int("d_k", d_k, *D_K_RANGE)
    mode = check_choice("scaling", scale_mode, SCALE_MODES)
    factor = check_float("custom scale factor", custom_factor, *FACTOR_RANGE)
    causal_mask = check_bool("causal mask", causal_mask)
    padding_mask = check_bool("padding mask", padding_mask)
    pad_tokens = check_int("pad tokens", pad_tokens, *PAD_TOKENS_RANGE)
    d_model = check_int("d_model", d_model, *D_MODEL_RANGE)
    n_heads = check_int("heads", n_heads, *HEADS_RANGE)
    checkpoint, kind, typed = None, "dot_product", None
    if model in catalog.real:
        checkpoint, d_k, d_model, n_heads = real_model(catalog, model, text)
    elif model == UNTRAINED:
        if n_heads * d_k > MAX_HEAD_WIDTH:
            raise ValueError(
                f"heads × d_k is {n_heads} × {d_k} = {n_heads * d_k}; the untrained model allows at most "
                f"{MAX_HEAD_WIDTH}. Lower d_k or the number of heads."
            )
    else:
        d_k, checkpoint = catalog.families[model].nearest(d_k)
        text, typed = known_case(text, catalog.cards[checkpoint].get("alphabet"))
        config = catalog.cards[checkpoint]["config"]
        d_model, n_heads = config["d_model"], config["n_heads"]
        kind = config.get("compatibility", "dot_product")
    scale: Scale = "none" if kind == "additive" else factor if mode == "custom" else mode
    return Settings(text, model, checkpoint, d_k, scale, causal_mask, padding_mask, pad_tokens, d_model, n_heads,
                    kind, typed)


def real_model(catalog: Catalog, model: str, text: str) -> tuple[str, int, int, int]:
    """A real model's (name, d_k, d_model, heads), loading it if need be; ValueError when the text has more tokens
    than REAL_SOURCE_TOKENS as its tokenizer cuts it."""
    shape = catalog.real.shape(model)
    n_tokens = len(catalog.real.get(model).encode(text).ids)
    if n_tokens > REAL_SOURCE_TOKENS:
        raise ValueError(f"Text is {n_tokens} tokens for this model's tokenizer; the maximum is {REAL_SOURCE_TOKENS}. "
                         "Shorten it.")
    return display_name(model), shape.d_k, shape.d_model, shape.n_heads


def known_case(text: str, alphabet: str | None) -> tuple[str, str | None]:
    """(the text the model runs, the text as typed or None): capitals become lower case when the model was
    trained on lower-case letters only (its card's alphabet) and the lower-case letter is in it."""
    if not alphabet or not any(ch.isupper() for ch in text):
        return text, None
    if any(ch.isupper() for ch in alphabet):
        return text, None
    run = "".join(ch.lower() if ch.isupper() and ch.lower() in alphabet else ch for ch in text)
    return run, (text if run != text else None)


def model_config(catalog: Catalog, settings: Settings) -> TransformerConfig:
    """The config of the model `settings` runs (without building it)."""
    if settings.checkpoint is not None:
        return TransformerConfig(**catalog.cards[settings.checkpoint]["config"])
    return TransformerConfig(vocab_size=catalog.tokenizer.vocab_size, n_encoder_layers=UNTRAINED_LAYERS,
                             n_decoder_layers=UNTRAINED_LAYERS, d_model=settings.d_model, n_heads=settings.n_heads,
                             d_k=settings.d_k, d_v=max(1, settings.d_model // settings.n_heads),
                             d_ff=4 * settings.d_model, dropout=0.0)


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
