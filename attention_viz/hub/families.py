"""Which Hugging Face models run through our Eq. 1, and where their maps go: found from the model, not from a list.

Any model whose attention goes through transformers' attention interface runs with our Eq. 1 inside; hub.proof
proves each one on load against its own eager attention. What this module holds is what that proof needs: the
refusals known before anything runs (each with its reason), and how the calls of the attention function in one
probe pass become the model's layout, our map keys and each attention's W_O:

    stack     an encoder-decoder model's encoder attentions are the modules inside model.get_encoder(); in a model
              of one stack, a layer whose probe mask hides every later key is a decoder's, one that does not an
              encoder's (a model with both kinds is refused)
    name      cross_attn when its keys are not its own queries' positions (the probe's decoder input is shorter
              than its source), self_attn when they are
    layer     the i-th call of that stack and name in the pass
    W_O       the first linear layer whose input is the attention function's output (the same data, or equal)

Keys stay `encoder.{i}.self_attn`, `decoder.{i}.self_attn`, `decoder.{i}.cross_attn`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from attention_viz.core.maps import map_key


class ModelRefusedError(ValueError):
    """A model that attention_viz will not run, and why. Its str() is a complete sentence, safe to show a web visitor
    as it is: it names the model by its folder's own name or its Hub id (never a server path) and what is wrong
    (the file, the field, the limit). load_pretrained turns every failure of a bad folder into one of these."""


class UnsupportedModelError(ModelRefusedError):
    """A model whose attention cannot go through our Eq. 1 (the message says why)."""


@dataclass(frozen=True)
class Family:
    """A model's architecture as attention_viz sees it: its name, layout and, once probed, its attentions' map keys
    and W_O."""

    name: str                                   # what the app and the notes call it ("Marian", "Gemma2")
    model_type: str                             # transformers' config.model_type
    layout: str                                 # "encoder-decoder", "encoder" or "decoder"
    about: str                                  # one line: norm placement, positions, what is special
    keys: tuple[tuple[str, str], ...] = ()      # (attention module's dotted name, map key), in call order (probed)
    w_o: tuple[tuple[str, str, bool], ...] = ()  # (map key, W_O's dotted name, its weight is [in, out]) (probed)

    def key_of(self, module_name: str) -> str | None:
        """The map key of the attention module with this dotted name, or None if it is not one."""
        return dict(self.keys).get(module_name)


# Known before anything runs: model types whose attention is not Eq. 1 (the probe would refuse them too, later).
_STATE_SPACE = "it is a state-space model: its tokens are mixed by a recurrence, with no attention weights to show"
REFUSED = {
    # no softmax attention at all, or one that is not Eq. 1 over every key: a property of the model
    "mamba": _STATE_SPACE, "mamba2": _STATE_SPACE, "falcon_mamba": _STATE_SPACE,
    "rwkv": "it is a recurrent model: its time mixing keeps a running state, with no attention weights to show",
    "xlstm": "it is a recurrent model (extended LSTM cells), with no attention weights to show",
    "fnet": "it mixes tokens by Fourier transforms, with no attention weights to show",
    "reformer": "its LSH attention lets each query see only the keys hashed into its bucket, chosen anew each pass",
    "nystromformer": "its attention is a Nyström approximation of softmax attention through landmarks, not Eq. 1",
    "yoso": "its attention is approximated by sampling with locality-sensitive hashing, not Eq. 1's softmax",
    "mra": "its attention is a multi-resolution approximation of softmax attention, not Eq. 1",
    # softmax attention, but not over one sequence's every key, or mixed with what is not attention
    "funnel": "it pools its sequence between blocks (queries shorter than their keys) and adds relative-position "
              "terms of its own (Transformer-XL's) to QKᵀ",
    "convbert": "part of each layer's heads are span-based dynamic convolutions, joined with its attention heads "
                "before W_O",
    "prophetnet": "its decoder's n-stream self-attention predicts several future tokens at once, each stream with "
                  "positions of its own",
    "pegasus_x": "its encoder's tokens attend within local blocks of block_size tokens (every other layer's blocks "
                 "staggered by half a block) and to num_global_tokens learned global tokens that are not the text's, "
                 "in attention of its own, so no map of its encoder is a row over the text's tokens",
    "doge": "its dynamic mask attention adds to QKᵀ a weight of each key's content, exp(A·softplus(W_dt·v_j)) per head "
            "(a bias of the key's value states, not of positions), and past keep_window_size keys keeps only the "
            "keys it weighs highest",
    "recurrent_gemma": "most of its layers are recurrent blocks (RG-LRU) with no attention weights, between local "
                       "attention layers",
}

# What a model whose factor on QKᵀ is 1 does instead of 1/√d_k, by model type (T5's kin fold it into W_Q's
# initialisation: T5PreTrainedModel._init_weights draws W_Q with std (d_model·d_k)^-½ and W_K with d_model^-½).
WITHOUT_SCALING = dict.fromkeys(
    ("t5", "mt5", "umt5", "switch_transformers", "longt5"),
    "its 1/√d_k is folded into the initialisation of W_Q (drawn with standard deviation (d_model·d_k)^-½ where W_K "
    "has d_model^-½), so training starts with q·k of the size 1/√d_k would give",
)

# The app's names and one-line descriptions of architectures it has long shown (any other is named by its config).
SHOWN = {
    "marian": ("Marian", "the paper's own architecture: post-norm, sinusoidal positions, h = 8, d_k = 64 in opus-mt"),
    "bart": ("BART", "post-norm, learned positions, a denoising autoencoder"),
    "mbart": ("mBART", "pre-norm, learned positions, many languages"),
    "bert": ("BERT", "encoder only: post-norm, learned positions, every token sees every other"),
    "gpt2": ("GPT-2", "decoder only: pre-norm, learned positions, causal self-attention"),
    "llama": ("Llama-class", "decoder only: pre-norm (RMSNorm), rotary positions, grouped-query attention"),
    "qwen2": ("Llama-class", "decoder only: pre-norm (RMSNorm), rotary positions, grouped-query attention"),
    "mistral": ("Llama-class", "decoder only: pre-norm (RMSNorm), rotary positions, grouped-query attention"),
    "t5": ("T5", "pre-norm (RMSNorm), a learned relative-position bias on QKᵀ shared by a stack's layers, no 1/√d_k"),
    "mt5": ("mT5", "T5's architecture in many languages: a relative-position bias on QKᵀ, no 1/√d_k"),
    "umt5": ("UMT5", "T5's architecture with a relative-position bias of each layer's own, no 1/√d_k"),
}
LAYOUT_ABOUT = {"encoder-decoder": "encoder and decoder", "encoder": "encoder only: every token sees every other",
                "decoder": "decoder only: causal self-attention"}


def family_of(config) -> Family:
    """What the config alone says (name, layout as far as the config knows it); UnsupportedModelError for a model
    known not to work, naming why. The probe (hub.proof) finds the rest."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = getattr(config, "model_type", None)
    if model_type in REFUSED:
        raise UnsupportedModelError(f"{model_type} models are not supported: {REFUSED[model_type]}.")
    if model_type not in CONFIG_MAPPING_NAMES:
        raise UnsupportedModelError(f"{model_type!r} models are not supported: transformers does not know this "
                                    "model type, and attention_viz runs only transformers' own code.")
    layout = "encoder-decoder" if getattr(config, "is_encoder_decoder", False) else (
        "decoder" if getattr(config, "is_decoder", False) else "encoder")  # a guess for one stack: the probe decides
    name, about = SHOWN.get(model_type, (CONFIG_MAPPING_NAMES[model_type].removesuffix("Config"),
                                         LAYOUT_ABOUT[layout]))
    family = Family(name, model_type, layout, about)
    check_config(family, config)
    return family


WHICH_ATTENTION = ("attention_type", "encoder_attention_type")  # config fields naming which attention a model runs
                                                                # (BigBird's, LongT5's), read before any weight


def check_config(family: Family, config) -> None:
    """Refuse configurations whose attention is not Eq. 1 the way we route it."""
    if getattr(config, "add_cross_attention", False) and family.layout != "encoder-decoder":
        raise UnsupportedModelError(f"a {family.name} model with added cross-attention is not supported: its "
                                    "cross-attention reads an encoder it does not have.")
    if getattr(config, "attention_type", None) == "block_sparse":  # BigBird's, BigBird-Pegasus's
        raise UnsupportedModelError(
            f"a {family.name} model with block-sparse attention is not supported: a text of at most (5 + 2 × "
            "num_random_blocks) × block_size tokens switches it to full attention for good (transformers' "
            "set_attention_type('original_full') puts new attention modules in place of the loaded ones), so what a "
            "longer text reads depends on the texts read before; and in eval its random blocks are all the first "
            "block, whose keys each middle block's softmax counts 1 + num_random_blocks times "
            "(attention_type='original_full' reads every key once).")
    if getattr(config, "quant_mode", False):  # I-BERT's integer-only inference
        raise UnsupportedModelError(f"a quantised {family.name} model (quant_mode) is not supported: its q, k and v are "
                                    "rounded to 8-bit integers and its softmax is an integer polynomial approximation "
                                    "(i-exp), not Eq. 1's softmax (quant_mode=False runs it in floating point).")
    if family.model_type == "xlnet" and getattr(config, "attn_type", "bi") != "bi":
        raise UnsupportedModelError(f"an {family.name} model with attn_type={config.attn_type!r} is not supported: its "
                                    "one mask holds its causal rule, its memory's reach and the padding together, "
                                    "which the causal and padding switches cannot take apart (attn_type 'bi', as "
                                    "released, is).")
    if getattr(config, "talking_head", False):  # DeBERTa v1's talking heads
        raise UnsupportedModelError(f"a {family.name} model with talking heads is not supported: each head's logits "
                                    "are mixed with the other heads' before the softmax, and its weights after, so "
                                    "a head's map is not softmax of its own q·k.")
    if family.model_type == "cpmant" and getattr(config, "prompt_length", 0):
        raise UnsupportedModelError(f"a {family.name} model with prompts (prompt_length {config.prompt_length}) is not "
                                    "supported: it puts that many learned prompt tokens before the text in every "
                                    "pass, so each map's queries and keys include them and the text's rows give them "
                                    "weight (transformers' own attentions cut them off, leaving rows that do not sum "
                                    "to 1).")
    if getattr(config, "encoder_attention_type", None) == "transient-global":  # LongT5's TGlobal models
        raise UnsupportedModelError(f"a {family.name} model with transient-global attention is not supported: its "
                                    "encoder's keys include a transient global token per block of global_block_size "
                                    "tokens (their sum, normed), so a map's keys are not the text's tokens "
                                    "(encoder_attention_type='local' is).")
    if getattr(config, "use_prompt", False):  # MVP's prompts
        raise UnsupportedModelError(f"a {family.name} model with prompts (use_prompt) is not supported: learned keys "
                                    "and values go before every attention's own, so a map's keys are not the text's "
                                    "tokens.")
    if family.layout == "encoder-decoder":
        heads = {getattr(config, "encoder_attention_heads", None), getattr(config, "decoder_attention_heads", None)}
        if len(heads) != 1:
            raise UnsupportedModelError("the encoder and decoder have different numbers of heads; the views need one.")


def unscaled_note(family: Family, factor: float | None, d_k: int) -> str:
    """A sentence on the scale switch for a model whose own factor on QKᵀ is 1 (no 1/√d_k): what it does instead
    and what the switch means on it; "" for any other model."""
    if factor != 1.0 or d_k == 1:
        return ""
    instead = WITHOUT_SCALING.get(family.model_type, "what stands in for it, if anything, is in its weights")
    return (f"{family.name} multiplies QKᵀ by 1, not by 1/√d_k: {instead}. Its scaling \"sqrt_dk\" is that factor "
            f"1, the same as \"none\"; the paper's factor on it is a custom factor of 1/√{d_k} = {d_k ** -0.5:.4g}.")


def causal(mask: torch.Tensor | None, Q: int, K: int) -> bool:
    """True when a probe's mask (True = may attend, broadcastable to [B, 1, Q, K]) hides every later key from its
    first row's queries (the probe's first row is never padded)."""
    if mask is None or Q < 2:
        return False
    allowed = torch.broadcast_to(mask, (mask.size(0), 1, Q, K))[0, 0]  # (Q, K)
    return not bool(allowed.triu(K - Q + 1).any())


def discovered(model, calls, family: Family, lengths: tuple[int, int]) -> Family:
    """The family with its layout and map keys found from a probe's calls of the attention function (hub.attention
    Call, in order); lengths = (source, decoder input) of the probe. UnsupportedModelError naming what does not fit."""
    if not calls:
        raise UnsupportedModelError(f"{family.name}'s attention does not go through transformers' attention "
                                    "interface, so our Eq. 1 cannot run inside it.")
    names = {id(module): name for name, module in model.named_modules()}
    heads = {c.query[1] for c in calls}
    if len(heads) != 1:
        raise UnsupportedModelError(f"its attention layers have different numbers of heads ({sorted(heads)}); the "
                                    "views need one.")
    encoder = None
    if family.layout == "encoder-decoder":
        encoder = {id(m) for m in model.get_encoder().modules()}
    places = []
    for call in calls:
        Q, K = call.query[2], call.key[2]
        if encoder is not None:
            stack = "encoder" if id(call.module) in encoder else "decoder"
            name = "cross_attn" if stack == "decoder" and K == lengths[0] != lengths[1] else "self_attn"
            if (name == "self_attn") != (Q == K):
                raise UnsupportedModelError(f"its attention {names[id(call.module)]} reads {K} keys for {Q} queries, "
                                            "which is neither self- nor cross-attention.")
        else:
            if Q != K:
                raise UnsupportedModelError(f"its attention {names[id(call.module)]} reads keys of another length "
                                            "than its queries (cross-attention to an encoder it does not have).")
            stack, name = ("decoder" if causal(call.mask, Q, K) else "encoder"), "self_attn"
        places.append((stack, name))
    if encoder is None and len({stack for stack, _ in places}) > 1:
        raise UnsupportedModelError("some of its attention layers are causal and some are not; attention_viz shows "
                                    "one stack of one kind.")
    seen: Counter = Counter()
    keys = []
    for call, (stack, name) in zip(calls, places):
        keys.append((names[id(call.module)], map_key(stack, seen[stack, name], name)))
        seen[stack, name] += 1
    layout = family.layout if encoder is not None else places[0][0]
    about = family.about if family.model_type in SHOWN else LAYOUT_ABOUT[layout]
    return Family(family.name, family.model_type, layout, about, tuple(keys))


def w_o_of(family: Family, calls, inputs: list[tuple[int, str, torch.nn.Module, torch.Tensor]]) -> Family:
    """The family with each attention's W_O: the first linear layer after it (inputs: (attention calls before it,
    dotted name, module, its input) in the order they ran) that reads the attention function's output: the same
    data, or a tensor equal to it, of the width H·d_v. UnsupportedModelError when one has none (its output is
    changed first, as a gate would)."""
    found = []
    for i, (call, (_, key)) in enumerate(zip(calls, family.keys)):
        out = call.output  # (B, Q, H, d_v)
        width = out.size(-2) * out.size(-1)
        match = None
        for after, name, module, x in inputs:
            channels = 1 if isinstance(module, torch.nn.Conv1d) else -1  # SqueezeBERT's W_O reads [B, H·d_v, Q]
            if after <= i or x.numel() != out.numel() or x.size(channels) != width:
                continue
            if channels == 1:
                x = x.transpose(-1, -2)
            if x.data_ptr() == out.data_ptr() or torch.equal(x.reshape(out.shape), out):
                match = (name, module)
                break
        if match is None:
            raise UnsupportedModelError(f"no linear layer reads the output of its attention {key} unchanged, so its "
                                        "W_O (what heads off, value norms and head importance need) is not known.")
        found.append((key, match[0], type(match[1]).__name__ == "Conv1D"))  # Conv1D keeps [in, out]
    return Family(family.name, family.model_type, family.layout, family.about, family.keys, tuple(found))
