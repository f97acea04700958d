"""Our Eq. 1 inside a Hugging Face model: an attention function and a mask function registered with transformers.

transformers looks up `config._attn_implementation` in two registries: `AttentionInterface` for the function
that turns (query, key, value, mask) into (output, weights), and `AttentionMaskInterface` for the function
that builds each layer's mask. Both are registered under IMPLEMENTATION. The attention function runs
attention_viz.core.attention.scaled_dot_product_attention, the reference the rest of the package proves, so
every attention of a real model goes through the same code as our own Transformer's.

The switches of one forward pass (a core.variation.Variation) and its probes (core.trace: what it records, RECORDED,
and keeps) travel in a context variable set by `switched(...)` for the length of that call: the functions transformers
calls cannot be handed our arguments, and a context variable belongs to the thread (or task) that set it, so two users
of one shared model never see each other's settings. Outside `switched`, the functions behave as the model's own eager
attention: its scaling, its masks, nothing recorded.

Axes: B batch, H query heads, H_kv key/value heads (grouped-query attention), Q queries, K keys, d head width.
Masks are built by transformers' own sdpa_mask (boolean, True = may attend: our convention), materialised unless
they hide nothing (full attention without padding: None), with the switches applied where the model composes them:
the causal mask function is replaced by the bidirectional one when the causal mask is off (a sliding window goes
with it), and the 2D padding mask is dropped when the padding mask is off.

Any model's attention arrives here, so what it is handed besides q, k, v and the mask is sorted in three (HONOURED,
CARRIED, REFUSED below); during the probe on load (hub.proof) an argument we would not honour refuses the model,
naming it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from transformers import AttentionInterface
from transformers.masking_utils import (AttentionMaskInterface, bidirectional_mask_function, causal_mask_function,
                                       sdpa_mask)

from attention_viz.core.attention import Kernel, Scale, scale_factor, scaled_dot_product_attention
from attention_viz.core.trace import Trace, recorded
from attention_viz.core.variation import Variation

IMPLEMENTATION = "attention_viz"  # the name our functions are registered under


# The arguments transformers hands an attention function besides (module, query, key, value, mask, scaling,
# dropout), and what each means for Eq. 1. Honoured: computed as the model's eager attention computes them. Carried:
# what the mask already holds (a sliding window, causality) or what only other kernels read (flash attention's
# packed sequences, a layer's bookkeeping): eager attention ignores them too. Refused: a change to Eq. 1 that we do
# not compute, named in the refusal. Anything else that is not None is refused as unknown, by its name.
HONOURED = ("softcap", "s_aux", "sinks", "position_bias")
CARRIED = frozenset({
    "sliding_window", "is_causal", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "position_ids",
    "seq_idx", "num_items_in_batch", "output_attentions", "output_hidden_states", "output_router_logits", "use_cache",
    "return_dict", "cache_position", "deterministic", "layer_idx",
    "bias_terms",  # the position bias's terms, apart (hub.routes: DeBERTa's c2p, p2c), kept beside it
    "window",  # a local attention's mask as its rule (core.attention.Window, hub.routes_local), joined to the mask
})
REFUSED = {
    "indices": "attention over selected keys only (sparse attention)",
    "block_indices": "attention over selected blocks only (sparse attention)",
}


class UnhonouredArgument(ValueError):
    """An argument the model hands its attention function that our Eq. 1 would not honour (the message names it)."""


@dataclass
class Call:
    """One call of the attention function in a probe pass: who called it, with what, and what it gave back."""

    module: torch.nn.Module
    query: tuple[int, ...]                  # [B, H, Q, d_k]
    key: tuple[int, ...]                    # [B, H_kv, K, d_k]
    d_v: int
    mask: torch.Tensor | None               # as applied: True = may attend
    weights: torch.Tensor                   # [B, H, Q, K]
    output: torch.Tensor                    # [B, Q, H, d_v], as handed back (what the model's W_O reads)
    honoured: tuple[str, ...] = ()          # the HONOURED arguments it was given ("softcap", "s_aux",
                                            # "position_bias" where not all zero)
    scaling: float = 1.0                    # the factor on QKᵀ it was handed
    q: torch.Tensor | None = None           # the query [B, H, Q, d_k] and key [B, H_kv, K, d_k] handed over
    k: torch.Tensor | None = None


# What a recording pass keeps at every attention (core.trace's probes, Probe.records): the weights (its map), and
# what Eq. 1 was given there: the model's own factor on QKᵀ, the mask applied (True = may attend, broadcastable to
# [B, 1, Q, K]; None where nothing is hidden), the position bias B added to the scaled QKᵀ as the model computed it
# (broadcastable to [B, H, Q, K]: T5's [1, H, Q, K], Bloom's ALiBi [B, H, 1, K]; None where it adds none or the
# position_bias switch is off), the soft cap c (Gemma 2) and the sinks' logits [H] (gpt-oss), None where not handed.
# DeBERTa's score terms apart (hub.routes hands them as bias_terms): {"c2c": QKᵀ·s, "c2p", "p2c"}, each [B, H, Q, K].
RECORDED = ("weights", "factor", "mask", "bias", "softcap", "sink", "terms")


@dataclass
class Pass:
    """The switches of one forward pass and its probes (core.trace), which keep what it records: map key -> weights
    [B, H, Q, K] and what its attention was given (RECORDED), read as `maps`, `factors`, `masks`, `biases`, `sinks`
    (the soft cap and the sinks' logits: run.trace[key].kept)."""

    variation: Variation = field(default_factory=Variation)  # scale, masks, heads off
    keys: dict[int, str] = field(default_factory=dict)    # id(attention module) -> map key
    trace: Trace | None = None  # map key -> core.trace.Probe: the heads off (+ means, gates), the points kept
    kernel: Kernel = scaled_dot_product_attention  # Eq. 1: core's reference, or a bit-identical kernel (fast)
    probe: list[Call] | None = None  # when given: every call, in order (hub.proof's probe pass)
    prescaled: dict[int, tuple[float, float]] = field(default_factory=dict)  # id(attention module) -> (c_q, c_k):
    # the factors its module put on q and k before handing them over (OPT's q·scaling), which the scale switch undoes

    maps = property(lambda self: recorded(self.trace, "weights"))
    factors = property(lambda self: recorded(self.trace, "factor"))
    masks = property(lambda self: recorded(self.trace, "mask"))
    biases = property(lambda self: {key: b for key, b in recorded(self.trace, "bias").items() if b is not None})
    terms = property(lambda self: {key: t for key, t in recorded(self.trace, "terms").items() if t is not None})

    attention = mask = None  # another kind of pass's own attention and mask functions (hub.long's), as methods
    # map key -> the weight each row gave its learned sink [B, H, Q] (1 - the row's sum; sink models only)
    sinks = property(lambda self: {key: 1 - self.maps[key].sum(-1) for key, sink in recorded(self.trace, "sink").items()
                                   if sink is not None})


# The pass in flight in this thread or task: a Pass (hub.long's has its own `attention` and `mask`)
_current: contextvars.ContextVar = contextvars.ContextVar("attention_viz_pass", default=None)


@contextlib.contextmanager
def switched(settings) -> Iterator:
    """Run the model's attention under this pass (a Pass, or hub.long's), recording into it, for the `with` block."""
    token = _current.set(settings)
    try:
        yield settings
    finally:
        _current.reset(token)


def current():
    """The pass in flight in this thread or task (a Pass, hub.long's, or None outside one)."""
    return _current.get()


def key_of(run, module: torch.nn.Module) -> str | None:
    """The map key of this call of `module` in a pass (this module's Pass or hub.long's, whose `keys` give id(module)
    -> a key, or a tuple of keys in run order for a module shared by layers, ALBERT's: each run its layer's)."""
    name = run.keys.get(id(module))
    if isinstance(name, tuple):
        runs = run.__dict__.setdefault("_runs", {})  # id(module) -> its runs so far in this pass
        count = runs[id(module)] = runs.get(id(module), -1) + 1
        name = name[count % len(name)]
    return name


def kept(mask: str) -> bool:
    """Whether the pass in flight (ours or hub.long's) keeps this mask ("causal_mask", "padding_mask"); outside a
    pass, the model's own (a routed family's forward asks, hub.routes)."""
    variation = getattr(current(), "variation", None)
    return variation is None or getattr(variation, mask)


def causal_on() -> bool:
    """Whether the pass in flight keeps the causal mask (kept("causal_mask"))."""
    return kept("causal_mask")


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query attention's shared keys or values for every query head: [B, H_kv, K, d] -> [B, H, K, d]."""
    if n_rep == 1:
        return x
    B, H_kv, K, d = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, K, d).reshape(B, H_kv * n_rep, K, d)  # (B, H, K, d)


def as_allowed(mask: torch.Tensor | None) -> torch.Tensor | None:
    """A mask as transformers hands it (boolean True = may attend, or additive float) -> boolean, True = may attend."""
    if mask is None or mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2  # an additive mask: 0 may attend, a large negative number is hidden


def factors(run, module: torch.nn.Module, query: torch.Tensor, scaling: float | None
            ) -> tuple[float, Scale, tuple[float, float]]:
    """(handed, used, (c_q, c_k)) for one call of a pass `run` (this module's Pass or hub.long's, None outside
    one): the factor on QKᵀ the model hands over (scaling; None means 1/√d), the one the pass uses (handed; under the
    scale switch its mode on QKᵀ as the model's projections give them), and the factors the module put on q and k
    itself before handing them over (OPT's q·scaling), which the scale switch undoes."""
    handed = scaling if scaling is not None else query.size(-1) ** -0.5
    c_q, c_k = run.prescaled.get(id(module), (1.0, 1.0)) if run is not None else (1.0, 1.0)
    if run is None or run.variation.scale == "sqrt_dk":
        return handed, handed, (c_q, c_k)
    return handed, scale_factor(run.variation.scale, query.size(-1)) / (c_q * c_k), (c_q, c_k)


def check_arguments(kwargs: dict, mask: torch.Tensor | None) -> None:
    """UnhonouredArgument naming what this call hands the attention function that Eq. 1 would not honour: a refused
    or unknown argument, or an additive mask that holds more than 0 and -inf (a bias on QKᵀ: ALiBi, a relative
    position bias)."""
    for name, value in kwargs.items():
        if value is None or value is False or name in CARRIED or name in HONOURED:
            continue
        why = REFUSED.get(name, "an argument attention_viz does not know")
        raise UnhonouredArgument(f"its attention is handed {name} ({why}), which our Eq. 1 does not compute")
    if mask is not None and mask.is_floating_point():
        hidden = mask <= torch.finfo(mask.dtype).min / 2
        if bool((mask.masked_fill(hidden, 0) != 0).any()):
            raise UnhonouredArgument("its attention mask adds a bias to QKᵀ (ALiBi or a position bias), which our "
                                     "Eq. 1 does not compute")


def position_bias(bias: torch.Tensor | None) -> torch.Tensor | None:
    """The position bias a model hands its attention function (`position_bias`, broadcastable to [B, H, Q, K]), or
    None where it hands none or only zeros: T5 hands a tensor of zeros to the attentions that have no bias of their
    own (its cross-attention), which adds nothing."""
    if bias is None or not bool(bias.any()):
        return None
    return bias


def eq1_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                  **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' attention-function contract, computed by our Eq. 1.

    query [B, H, Q, d], key/value [B, H_kv, K, d], mask broadcastable to [B, 1, Q, K] ->
    (output [B, Q, H, d] as transformers expects it, weights [B, H, Q, K]). A soft cap (`softcap`, Gemma 2) caps
    the scaled logits; learned sinks (`s_aux` [H], gpt-oss; `sinks` [B, H, Q, 1], a logit per query, Inkling 2) join
    each row's softmax, and what they take is recorded beside the map. A position bias (`position_bias` [1 or B, H, Q, K], T5's relative positions) is added to the
    scaled logits, as the model's eager attention adds it, and recorded beside the map (RECORDED), unless the
    pass's position_bias switch is off. Under the scale switch the model's own factor on QKᵀ is replaced, inside the
    cap.
    """
    run = _current.get()
    if run is not None and run.attention is not None:  # another kind of pass (hub.long's): its own attention
        return run.attention(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    if run is not None and run.probe is not None:
        check_arguments(kwargs, attention_mask)
    handed, scale, (c_q, c_k) = factors(run, module, query, scaling)
    own = handed * c_q * c_k  # the model's own factor on QKᵀ, with what its module put on q and k before
    n_rep = query.size(1) // key.size(1)
    k, v = repeat_kv(key, n_rep), repeat_kv(value, n_rep)  # (B, H, K, d)
    mask = as_allowed(attention_mask)
    if mask is not None and mask.size(-1) != k.size(-2):
        mask = mask[..., : k.size(-2)]  # a mask built for a longer key range than this layer holds, as eager slices it
    window = kwargs.get("window")  # a local attention's rule (hub.routes_local): its [Q, K] mask built here
    if window is not None:
        positions = torch.arange(k.size(-2), device=k.device)
        local = window.allowed(positions[k.size(-2) - query.size(2):], positions)[:, None]  # (B or 1, 1, Q, K)
        mask = local if mask is None else mask & local
    softcap = kwargs.get("softcap")
    sink = kwargs.get("s_aux") if kwargs.get("s_aux") is not None else kwargs.get("sinks")  # [H], or [B, H, Q, 1]
    given = position_bias(kwargs.get("position_bias"))  # (1 or B, H, Q, K) or None
    bias = given if run is None or run.variation.position_bias else None
    kernel = run.kernel if run is not None else scaled_dot_product_attention
    output, weights = kernel(query, k, v, mask, scale, dropout, softcap=softcap, sink=sink, bias=bias)
    # (B, H, Q, d), (B, H, Q, K)
    if run is None:
        return output.transpose(1, 2).contiguous(), weights  # (B, Q, H, d)
    probe = run.trace.get(key_of(run, module)) if run.trace else None
    if probe is not None:  # what Eq. 1 was given and its points kept (q, k as the model's projections give them),
        terms = kwargs.get("bias_terms") if bias is not None and "terms" in probe.records | probe.keep else None
        if terms:  # its score terms apart, and the content term they are added to
            terms = {"c2c": query @ k.transpose(-1, -2) * scale, **terms}
        for point, value in (("factor", float(own)), ("mask", mask), ("bias", bias), ("softcap", softcap),
                             ("sink", sink), ("terms", terms or None)):  # bias: (1 or B, H, Q or 1, K), added to the
            probe(point, value)                                        # scaled QKᵀ
        q_kept, k_kept = (query / c_q, k / c_k) if probe.keep & {"q", "k"} else (query, k)
        output = probe.attended(q_kept, k_kept, v, weights, output)  # heads switched off before W_O
    output = output.transpose(1, 2).contiguous()  # (B, Q, H, d)
    if run.probe is not None:
        honoured = tuple(n for n in HONOURED if (given if n == "position_bias" else kwargs.get(n)) is not None)
        run.probe.append(Call(module, tuple(query.shape), tuple(key.shape), value.size(-1), mask, weights, output,
                              honoured, float(handed), query, key))
    return output, weights


def bidirectional(mask_function: Callable | None) -> bool:
    """True for transformers' own mask function of full attention (every position sees every other)."""
    return mask_function is bidirectional_mask_function


def switched_mask(*args, mask_function=None, attention_mask=None, **kwargs) -> torch.Tensor | None:
    """transformers' mask-function contract: its sdpa_mask with this pass's mask switches, materialised unless it
    hides nothing (full attention and no padding: None, which Eq. 1 reads as nothing hidden)."""
    run = _current.get()
    additive = getattr(kwargs.get("config"), "model_type", None) in ADDITIVE_MASKS  # its routes build their masks
    if run is not None and run.mask is not None and not additive:  # another kind of pass (hub.long's): its own
        return run.mask(*args, mask_function=mask_function, attention_mask=attention_mask, **kwargs)
    dtype = kwargs.get("dtype", torch.float32)
    mask = mask_under(run.variation if run is not None else None, args, kwargs, mask_function, attention_mask,
                      dense=additive or needs_mask(kwargs.get("config")))
    return mask.logical_not().to(dtype) * torch.finfo(dtype).min if additive else mask


# the model types whose model code reads the mask function's mask as a tensor whatever it hides (MPT's
# `.to(torch.bool)`, hub.routes): never None for them
DENSE_MASKS = frozenset({"mpt"})
# the model types whose model code reads the values of an additive mask (0 may attend, the dtype's lowest hidden):
# Longformer's takes its row [:, 0, 0, :] and writes its global tokens into it as the dtype's highest
ADDITIVE_MASKS = frozenset({"longformer"})


def needs_mask(config) -> bool:
    """Whether this model's code reads its mask as a tensor whatever it hides (DENSE_MASKS)."""
    return getattr(config, "model_type", None) in DENSE_MASKS


def mask_under(variation: Variation | None, args: tuple, kwargs: dict, mask_function: Callable | None,
               attention_mask: torch.Tensor | None, skips: bool = False, dense: bool = False) -> torch.Tensor | None:
    """sdpa_mask(*args, **kwargs) under a pass's mask switches (None: the model's own masks): the padding mask off
    drops the 2D padding mask, the causal mask off replaces the causal rule by the bidirectional one (a sliding window
    goes with it). skips False: materialised unless it hides nothing (None); True: also None where sdpa_mask leaves a
    plain causal or full mask unbuilt (hub.long's kernel knows them by rule). dense: never None (a model whose code
    reads its mask as a tensor: needs_mask)."""
    if variation is not None and not variation.padding_mask:
        attention_mask = None
    if variation is not None and not variation.causal_mask:
        mask_function = bidirectional_mask_function
    if not skips and not dense and bidirectional(mask_function) and (attention_mask is None or
                                                                     bool(attention_mask.all())):
        return None
    causal = mask_function is None or mask_function is causal_mask_function  # sdpa_mask's default is causal
    kwargs.update(allow_is_causal_skip=skips and causal,
                  allow_is_bidirectional_skip=skips and bidirectional(mask_function))
    if mask_function is not None:
        kwargs["mask_function"] = mask_function
    for unused in ("dtype", "config"):  # eager's and custom functions' extras; sdpa_mask takes **kwargs anyway
        kwargs.pop(unused, None)
    return sdpa_mask(*args, attention_mask=attention_mask, **kwargs)


AttentionInterface.register(IMPLEMENTATION, eq1_attention)
AttentionMaskInterface.register(IMPLEMENTATION, switched_mask)
