"""The families of Hugging Face models whose attention runs through our Eq. 1, and where their maps go.

Each family names the transformers model types it covers, its layout (encoder-decoder, encoder only,
decoder only) and, for each attention module, the map key it records under: a pattern on the module's
dotted name in the model (`model.decoder.layers.3.encoder_attn` -> `decoder.3.cross_attn`). A model type
outside the table is refused with the reason: an attention we have not proven equal to its own eager
implementation is not shown as if it were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attention_viz.core.maps import map_key

_ENCODER_DECODER = (
    (r"encoder\.layers\.(\d+)\.self_attn", "encoder", "self_attn"),
    (r"decoder\.layers\.(\d+)\.self_attn", "decoder", "self_attn"),
    (r"decoder\.layers\.(\d+)\.encoder_attn", "decoder", "cross_attn"),
)


class ModelRefusedError(ValueError):
    """A model that attention_viz will not run, and why. Its str() is a complete sentence, safe to show a web visitor
    as it is: it names the model by its folder's own name or its Hub id (never a server path) and what is wrong
    (the file, the field, the limit). load_pretrained turns every failure of a bad folder into one of these."""


class UnsupportedModelError(ModelRefusedError):
    """A model whose attention cannot go through our Eq. 1 (the message says why)."""


@dataclass(frozen=True)
class Family:
    """Models of one architecture: how their attention modules map onto our keys."""

    name: str                                   # what the app and the notes call it ("Marian")
    model_types: tuple[str, ...]                # transformers' config.model_type values
    layout: str                                 # "encoder-decoder", "encoder" or "decoder"
    modules: tuple[tuple[str, str, str], ...]   # (pattern ending a module's name, stack, name)
    about: str                                  # one line: norm placement, positions, what is special
    w_o: str = "out_proj"                       # W_O, from the attention module: a child's name, or "../x" for a
                                                # sibling's child (BERT's attention.output.dense)
    w_o_transposed: bool = False                # its weight is [in, out] (GPT-2's Conv1D), not [out, in]
    linear_heads: tuple[str, ...] = ()          # transformers classes whose logits are exactly lm_head(h) (+ the
                                                # buffer logits_bias), h the base model's last hidden state
    logits_bias: str | None = None              # a buffer [1, V] their forward adds to lm_head's output

    def key_of(self, module_name: str) -> str | None:
        """The map key of the attention module with this dotted name, or None if it is not one."""
        for pattern, stack, name in self.modules:
            found = re.search(rf"(?:^|\.){pattern}$", module_name)
            if found:
                return map_key(stack, int(found.group(1)), name)
        return None


FAMILIES = (
    Family("Marian", ("marian",), "encoder-decoder", _ENCODER_DECODER,
           "the paper's own architecture: post-norm, sinusoidal positions, h = 8, d_k = 64 in opus-mt",
           linear_heads=("MarianMTModel",), logits_bias="final_logits_bias"),
    Family("BART", ("bart",), "encoder-decoder", _ENCODER_DECODER,
           "post-norm, learned positions, a denoising autoencoder",
           linear_heads=("BartForConditionalGeneration",), logits_bias="final_logits_bias"),
    Family("mBART", ("mbart",), "encoder-decoder", _ENCODER_DECODER,
           "pre-norm, learned positions, many languages",
           linear_heads=("MBartForConditionalGeneration",), logits_bias="final_logits_bias"),
    Family("BERT", ("bert",), "encoder",
           ((r"encoder\.layer\.(\d+)\.attention\.self", "encoder", "self_attn"),),
           "encoder only: post-norm, learned positions, every token sees every other", w_o="../output.dense"),
    Family("GPT-2", ("gpt2",), "decoder", ((r"h\.(\d+)\.attn", "decoder", "self_attn"),),
           "decoder only: pre-norm, learned positions, causal self-attention", w_o="c_proj", w_o_transposed=True,
           linear_heads=("GPT2LMHeadModel",)),
    Family("Llama-class", ("llama", "qwen2", "mistral"), "decoder",
           ((r"layers\.(\d+)\.self_attn", "decoder", "self_attn"),),
           "decoder only: pre-norm (RMSNorm), rotary positions, grouped-query attention", w_o="o_proj",
           linear_heads=("LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM")),
)

# Families refused with the reason (anything else is refused as not proven).
REFUSED = {
    "t5": "T5 adds a learned relative-position bias to QKᵀ and folds 1/√d_k into its weights, so its attention "
          "is not Eq. 1 and has no scaling to switch",
    "mt5": "mT5 is T5's architecture: a relative-position bias on QKᵀ and no 1/√d_k to switch",
}


def family_of(config) -> Family:
    """The family of a transformers config; UnsupportedModelError naming why a model is refused."""
    model_type = getattr(config, "model_type", None)
    if model_type in REFUSED:
        raise UnsupportedModelError(f"{model_type} models are not supported: {REFUSED[model_type]}.")
    for family in FAMILIES:
        if model_type in family.model_types:
            check_config(family, config)
            return family
    known = ", ".join(t for f in FAMILIES for t in f.model_types)
    raise UnsupportedModelError(
        f"{model_type!r} models are not supported: attention_viz runs only families whose attention it has proven "
        f"equal to transformers' own ({known})."
    )


def check_config(family: Family, config) -> None:
    """Refuse configurations of a supported family whose attention is not Eq. 1 the way we route it."""
    if family.layout == "encoder" and getattr(config, "is_decoder", False):
        raise UnsupportedModelError("a BERT built as a decoder (is_decoder=True) is not supported; load it as an "
                                    "encoder.")
    if getattr(config, "add_cross_attention", False) and family.layout != "encoder-decoder":
        raise UnsupportedModelError(f"a {family.name} model with added cross-attention is not supported.")
    if family.layout == "encoder-decoder":
        heads = {getattr(config, "encoder_attention_heads", None), getattr(config, "decoder_attention_heads", None)}
        if len(heads) != 1:
            raise UnsupportedModelError("the encoder and decoder have different numbers of heads; the views need one.")
