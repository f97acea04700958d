"""A real model proven where it is loaded: our Eq. 1 inside it against transformers' own eager attention.

One probe, two passes over the same few tokens (two rows, the second padded at its end): one through our Eq. 1,
which also finds the model's attention modules, its layout, our map keys and each W_O (hub.families), and one
through transformers' eager attention with output_attentions=True. Every map and the output (logits, or the last
hidden states of a model without a head) are compared at every position that is text: a padded query's row is left
out (where a sliding window leaves it no key, eager spreads it evenly over all keys and ours, by this package's mask
convention, gives it all zeros). The figures travel with the model as its Fidelity, and a model that disagrees
beyond float tolerance is refused with them.

A module that puts its own `scaling` on q (and k) before handing them over (OPT; openai_privacy_filter scales
both by d_k^-1/4) hands the function a factor of 1: it is run again on its probe input with that attribute set to 1,
transformers' own way to take the scaling out, and the ratios of the q and k handed over (c_q, c_k) let the scale
switch act on QKᵀ as the model's projections give it.

The same pass proves whether the model's logits are exactly its output head on the base model's last hidden states
(lm_head(h) plus a bias buffer such as Marian's final_logits_bias): what head importance computes its scores from
(importance.real.output_head); a soft cap or a scale on the logits leaves it unproven, and the logits are used.

Axes: B probe rows, S source tokens, T decoder tokens, H heads, Q queries, K keys, V vocabulary.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from attention_viz.core.attention import Kernel
from attention_viz.core.maps import MapKey, kind_key, kind_of
from attention_viz.core.variation import Variation
from attention_viz.hub.attention import IMPLEMENTATION, Call, Pass, UnhonouredArgument, switched
from attention_viz.hub.families import Family, UnsupportedModelError, discovered, w_o_of
from attention_viz.hub.placement import input_device, weight_of
from attention_viz.hub.routes import SCORES_AS_ATTENTIONS, implement
from attention_viz.hub.routes_local import eager_weights

LENGTHS = (8, 5)  # the probe's source (or text) tokens, and its decoder's input (an encoder-decoder model's)
PADDED = 3        # the second row's last tokens that are padding
# The largest difference allowed, by the weights' dtype: on the maps as they are, on the outputs relative to the
# largest of eager's (at least 1). Measured differences are far below (docs/real_models.md). float64 is held to
# float32's rounding: many eager functions (Llama's, Qwen's, Granite-SWA's) take the softmax in float32 whatever the
# weights' dtype, and logits of tens round there to a few 1e-6 (Granite-SWA and EmbeddingGemma measured 2e-6).
TOLERANCE = {torch.float64: 1e-5, torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 5e-2}


@dataclass(frozen=True)
class Fidelity:
    """How closely a model with our Eq. 1 inside reproduced its own eager attention on the probe."""

    maps: float                 # largest |ours - eager| over every weight of every map
    outputs: float              # largest |ours - eager| over the outputs, over max(1, largest |eager|)
    output: str                 # what was compared: "logits" or "hidden states"
    dtype: str                  # the weights' dtype ("float32")
    tokens: int                 # the probe's length (its source's, for an encoder-decoder model)
    rows: int                   # rows of the probe (the last padded)
    kinds: tuple[str, ...]      # the kinds of map compared ("encoder.self_attn", ...)
    tolerance: float            # what both figures must stay within
    honoured: tuple[str, ...] = ()  # what the model's attention adds to Eq. 1 and ours computed ("softcap", "s_aux",
                                    # "position_bias")
    source: str = ""            # what the probe's rows were where not text: "pictures", "recordings" (seeded, random)

    @property
    def proven(self) -> bool:
        return self.maps <= self.tolerance and self.outputs <= self.tolerance

    def __str__(self) -> str:
        """One line: "proven on load: maps within 3e-07, logits within 1e-06 of transformers' eager attention
        (float32, 2 rows of 8 tokens, one padded)"."""
        return f"proven on load: {self.figures()}" if self.proven else f"refused on load: {self.figures()}"

    def figures(self) -> str:
        """The measured differences and what was probed, as a phrase."""
        added = f", with its {' and '.join(NAMED[h] for h in self.honoured)}" if self.honoured else ""
        bits = SIGNIFICANT_BITS.get(self.dtype)
        half = (f"; both in {self.dtype}, which rounds each weight to {bits} significant bits (within "
                f"{2.0 ** -bits:.2%} of exact arithmetic): the figures say how closely ours follows eager in that dtype"
                if bits else "")
        return (f"maps within {_figure(self.maps)}, {self.output} within {_figure(self.outputs)} of transformers' "
                f"eager attention{added} ({self.dtype}, {self.probed}{half})")

    @property
    def probed(self) -> str:
        """What the probe was, as a phrase."""
        if self.source:
            return f"{self.rows} random {self.source} of {self.tokens} tokens"
        return f"{self.rows} rows of {self.tokens} tokens, one padded"


def _figure(x: float) -> str:
    """A difference as the line shows it: 0, or one significant digit."""
    return "0" if x == 0 else f"{x:.0e}"


NAMED = {"softcap": "logit soft cap", "s_aux": "attention sinks", "sinks": "attention sinks (a logit per query)",
         "position_bias": "position bias"}
# A half-precision dtype's significant bits (its unit roundoff is 2^-bits): what the fidelity line says of it.
SIGNIFICANT_BITS = {"bfloat16": 8, "float16": 11}
# Config fields by which a model changes its logits after lm_head (Gemma 2's cap, Cohere's and Granite's scales).
LOGIT_CHANGES = ("final_logit_softcapping", "logit_scale", "logits_scaling")


@dataclass(frozen=True)
class Proof:
    """What the probe found and how closely it matched."""

    family: Family                          # with its layout, map keys and W_O
    fidelity: Fidelity
    linear_head: tuple[str, ...] | None     # the buffers added to lm_head(h) when the logits are exactly that
    calls: tuple[Call, ...]                 # the probe's calls of the attention function, in order
    prescaled: dict[str, tuple[float, float]]  # attention module's name -> the factors (c_q, c_k) it put on q and k
                                               # before handing them over (OPT's q·scaling), where not (1, 1)
    factor: float | None = None             # the model's own factor on QKᵀ where every attention has the same (1/√d_k
                                            # in most models, 1 in T5's), None where they differ


def probe_inputs(model, encoder_decoder: bool) -> dict:
    """The probe's keyword arguments: two rows of LENGTHS[0] ids (the second padded at its end) and, for an
    encoder-decoder model, LENGTHS[1] decoder ids starting with its decoder start."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    V = vocabulary_size(model)
    S, T = LENGTHS
    pad = getattr(config, "pad_token_id", None)
    pad = pad if isinstance(pad, int) and 0 <= pad < V else 0
    ids = (3 + torch.arange(2 * S) * 7) % V
    ids = ids.view(2, S).to(input_device(model))  # (2, S)
    mask = torch.ones_like(ids)
    mask[1, S - PADDED:] = 0
    ids[1, S - PADDED:] = pad
    kwargs = {"input_ids": ids, "attention_mask": mask}
    if encoder_decoder:
        start = decoder_start(model)
        start = start if isinstance(start, int) and 0 <= start < V else 0
        decoder = (5 + torch.arange(2 * T) * 11) % V
        decoder = decoder.view(2, T).to(input_device(model))  # (2, T)
        decoder[:, 0] = start
        kwargs["decoder_input_ids"] = decoder
    if "use_cache" in inspect.signature(model.forward).parameters or encoder_decoder:
        kwargs["use_cache"] = False
    return kwargs


def decoder_start(model) -> int | None:
    """An encoder-decoder model's first decoder token: its generation config's decoder_start_token_id, else its
    config's, else its decoder config's bos_token_id (T5Gemma's, which its own _shift_right reads); None if none."""
    generation = getattr(model, "generation_config", None)  # a base model without its head has none
    decoder = getattr(model.config, "decoder", None)
    for start in (getattr(generation, "decoder_start_token_id", None),
                  getattr(model.config, "decoder_start_token_id", None), getattr(decoder, "bos_token_id", None)):
        start = start[0] if isinstance(start, list) and start else start
        if isinstance(start, int):
            return start
    return None


def vocabulary_size(model) -> int:
    """The rows of the model's input embedding (its config's vocab_size where the embedding does not say);
    UnsupportedModelError when neither is known."""
    try:
        embedding = model.get_input_embeddings()
    except NotImplementedError:
        embedding = None
    rows = getattr(embedding, "num_embeddings", None)
    if not isinstance(rows, int):
        weight = getattr(embedding, "weight", None)
        rows = weight.size(0) if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None
    if not isinstance(rows, int):
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        rows = getattr(config, "vocab_size", None)
    if not isinstance(rows, int) or rows <= 0:
        raise UnsupportedModelError("its input embedding is not found, so which ids it reads is not known.")
    return rows


def prove(model, family: Family, kernel: Kernel, modality=None) -> Proof:
    """Probe a transformers model (set to our implementation, in eval mode) -> its Proof; UnsupportedModelError
    naming what our Eq. 1 would not honour, or the figures where it disagrees with eager attention. modality
    (hub.images.Patches, hub.speech.Frames): a model that reads pictures or sound, probed on two seeded inputs of
    its kind in place of the source's ids."""
    encoder_decoder = family.layout == "encoder-decoder"
    kwargs = probe_inputs(model, encoder_decoder) if modality is None or encoder_decoder else {}
    lengths = LENGTHS
    if modality is not None:  # its own kind of input in place of the source's ids (a decoder's ids stay)
        kwargs.pop("input_ids", None), kwargs.pop("attention_mask", None)
        kwargs[modality.input_name] = modality.probe(2, input_device(model), next(model.parameters()).dtype)
        lengths = (modality.length, LENGTHS[1])
    run = Pass(Variation(), kernel=kernel, probe=[])
    linears: list = []
    head_input: list = []
    base_output: list = []
    names = {id(m): n for n, m in model.named_modules()}
    hooks = [m.register_forward_pre_hook(lambda m, args: linears.append((len(run.probe), names[id(m)], m, args[0])))
             for m in model.modules() if _linear(m) and m is not model.get_output_embeddings()]
    scaled: dict[int, tuple] = {}  # id(module with a `scaling` attribute) -> its (args, kwargs) in the probe pass
    hooks += [m.register_forward_pre_hook(lambda m, args, kw: scaled.setdefault(id(m), (args, kw)) and None,
                                          with_kwargs=True)  # None: a pre-hook's answer would replace the inputs
              for m in model.modules() if isinstance(getattr(m, "scaling", None), float)]
    head = model.get_output_embeddings()
    if head is not None:
        hooks.append(head.register_forward_pre_hook(lambda m, args: head_input.append(args[0])))
    if model.base_model is not model:
        hooks.append(model.base_model.register_forward_hook(lambda m, args, out: base_output.append(out[0])))
    try:
        with torch.no_grad(), switched(run):
            ours = model(**kwargs)
    except UnhonouredArgument as error:
        raise UnsupportedModelError(f"{family.name} is not supported: {error}.") from None
    finally:
        for hook in hooks:
            hook.remove()
    calls = tuple(run.probe)
    found = w_o_of(discovered(model, calls, family, lengths), calls, linears)
    output, name = _output(ours)
    eager_maps, eager = _eager(model, found, calls, kwargs)
    reference, _ = _output(eager)
    tolerance = TOLERANCE.get(output.dtype, 1e-4)
    real = kwargs["attention_mask"].bool() if modality is None else None  # (B, S): the probe's tokens not padding
    source = found.layout != "encoder-decoder"  # whether the output's positions are the source's
    worst = 0.0
    for call, (_, key) in zip(calls, found.keys):  # in call order: a shared module's runs each their own key
        theirs = eager_maps.get(key)
        if theirs is None or theirs.shape != call.weights.shape:
            raise UnsupportedModelError(f"transformers' eager attention gave no map of the shape ours has for {key}.")
        rows = real[:, None, :, None] if real is not None and (source or MapKey.parse(key).stack == "encoder") else True
        worst = max(worst, min(_largest(ours - theirs, rows)
                               for ours in sink_conventions(call.weights, bool({"s_aux", "sinks"} & set(call.honoured)))))
    rows = real[:, :, None] if real is not None and source else True  # (B, S, 1)
    outputs = _largest(output - reference, rows) / max(1.0, _largest(reference, rows))
    honoured = tuple(sorted({h for call in calls for h in call.honoured}))
    kinds = tuple(dict.fromkeys(kind_of(k) for _, k in found.keys))
    fidelity = Fidelity(worst, outputs, name, str(output.dtype).removeprefix("torch."), lengths[0], 2, kinds,
                        tolerance, honoured, getattr(modality, "probed", ""))
    if not fidelity.proven:
        raise UnsupportedModelError(f"{found.name} with our Eq. 1 inside does not reproduce its own eager attention: "
                                    f"{fidelity.figures()}, beyond the tolerance {tolerance:.0e}.")
    with torch.no_grad():
        linear = _linear_head(model, output if name == "logits" else None, head_input, base_output, tolerance)
    prescaled = _prescaled(scaled, kernel, calls, names)
    own = {call.scaling * math.prod(prescaled.get(names[id(call.module)], (1.0, 1.0))) for call in calls}
    return Proof(found, fidelity, linear, calls, prescaled, own.pop() if len(own) == 1 else None)


def _prescaled(inputs: dict[int, tuple], kernel: Kernel, calls, names: dict[int, str]
               ) -> dict[str, tuple[float, float]]:
    """Module name -> (c_q, c_k), for each attention module whose own `scaling` attribute is not the factor it
    hands the attention function (OPT multiplies q by it and hands 1.0; a model may scale both q and k): found by
    running that module again on its probe input (inputs: id -> (args, kwargs)) with the attribute set to 1
    (transformers' own way to take the scaling out), as the ratios of the q and k handed over in the two runs.
    UnsupportedModelError when q or k is not one factor times the other run's: the scale switch could not undo it."""
    found = {}
    for call in calls:
        module = call.module
        own = getattr(module, "scaling", None)
        handed_the_same = not isinstance(own, float) or abs(own - call.scaling) <= 1e-6 * abs(call.scaling)
        if handed_the_same or id(module) not in inputs:
            continue
        run = Pass(Variation(), kernel=kernel, probe=[])
        args, kwargs = inputs[id(module)]
        try:
            module.scaling = 1.0
            with torch.no_grad(), switched(run):
                module(*args, **kwargs)
        finally:
            module.scaling = own
        again = run.probe[0] if len(run.probe) == 1 else None
        factors = (None, None) if again is None else (_ratio(call.q, again.q), _ratio(call.k, again.k))
        if None in factors:
            raise UnsupportedModelError(f"its attention {names[id(module)]} changes q or k by its scaling in a way "
                                        "that is not one factor, so the scale switch cannot undo it.")
        if factors != (1.0, 1.0):
            found[names[id(module)]] = factors
    return found


def _ratio(a: torch.Tensor, b: torch.Tensor) -> float | None:
    """c with a == c·b (to float tolerance), 1.0 when a equals b, None when there is no such c."""
    if a.shape != b.shape:
        return None
    if torch.equal(a, b):
        return 1.0
    a, b = a.double(), b.double()
    c = float((a * b).sum() / (b * b).sum().clamp_min(1e-300))
    return c if torch.allclose(a, c * b, rtol=1e-4, atol=1e-6 * float(b.abs().max())) else None


LINEAR_NAMES = ("Conv1D", "QuantLinear", "ParameterW_O")  # linear layers by their class's name


def _linear(module: torch.nn.Module) -> bool:
    """A linear layer: torch's Linear, transformers' Conv1D (GPT-2's, weight [in, out]), I-BERT's QuantLinear
    (unquantised: a Linear), a kernel-1 Conv1d over channels (SqueezeBERT's: a linear map at each position), or
    hub.routes_bias.ParameterW_O (XLNet's W_O, a parameter)."""
    return isinstance(module, torch.nn.Linear) or type(module).__name__ in LINEAR_NAMES or (
        isinstance(module, torch.nn.Conv1d) and module.kernel_size == (1,))


def _largest(difference: torch.Tensor, rows) -> float:
    """The largest |difference| where `rows` (a boolean mask broadcast over it, or True) says the probe has text: a
    padded row is left out even where one side made it NaN (ModernBERT's and T5Gemma's padded positions)."""
    if rows is True:
        return float(difference.abs().max())
    return float(torch.where(rows, difference.abs(), 0).max())


def sink_conventions(weights: torch.Tensor, sinks: bool) -> tuple[torch.Tensor, ...]:
    """Our weights [B, H, Q, K] as a model's eager map may give them. With learned sinks each row gives its sink a
    share: gpt-oss's eager map keeps the rows as they are (they sum to 1 - sink); Granite-SWA's gives the softmax
    before the sink and scales the output by sigmoid(lse - sink) instead, the same output, its rows renormalised.
    A map is compared with both, the output (checked apart) the same either way."""
    if not sinks:
        return (weights,)
    return weights, weights / weights.sum(-1, keepdim=True).clamp_min(torch.finfo(weights.dtype).tiny)


def _output(outputs) -> tuple[torch.Tensor, str]:
    """A pass's logits, or the last hidden states of a model without a head."""
    logits = getattr(outputs, "logits", None)
    if logits is not None:
        return logits, "logits"
    states = getattr(outputs, "last_hidden_state", None)
    if not isinstance(states, torch.Tensor):
        raise UnsupportedModelError(f"its output ({type(outputs).__name__}) has neither logits nor last hidden "
                                    "states to show.")
    return states, "hidden states"


def _eager(model, family: Family, calls, kwargs) -> tuple[dict[str, torch.Tensor], object]:
    """One pass in transformers' eager attention with output_attentions=True -> (map key -> weights, its outputs)."""
    modules = {name: module for name, module in model.named_modules()}
    weights: dict[str, torch.Tensor] = {}

    def keep(runs):
        """runs: (key, shape) of each of the module's runs in a pass (a module shared by layers runs more than once)"""
        count = [0]

        def hook(module, args, kwargs, out):  # its weights: the last of what it gives back beside its output of
            key, shape = runs[min(count[0], len(runs) - 1)]  # their shape (or rebuilt from a layout of its own)
            count[0] += 1
            rebuilt = eager_weights(module, kwargs, out, shape)
            found = [rebuilt] if rebuilt is not None else [
                x for x in out[1:] if isinstance(x, torch.Tensor) and x.shape == shape] if isinstance(
                out, tuple) else []  # T5's gives (output, position bias, weights)
            if found:
                weights[key] = found[-1]
        return hook

    runs: dict[str, list] = {}
    for (name, key), call in zip(family.keys, calls):
        runs.setdefault(name, []).append((key, call.weights.shape))
    hooks = [modules[name].register_forward_hook(keep(each), with_kwargs=True) for name, each in runs.items()]
    implement(model, "eager")
    try:
        with torch.no_grad():
            eager = model(**kwargs, output_attentions=True)
    finally:
        for hook in hooks:
            hook.remove()
        implement(model, IMPLEMENTATION)
    ours = Counter(kind_of(key) for _, key in family.keys)
    for attribute, kind in (("attentions", None), ("encoder_attentions", "encoder.self_attn"),
                            ("decoder_attentions", "decoder.self_attn"), ("cross_attentions", "decoder.cross_attn")):
        kind = kind or f"{family.layout}.self_attn"
        found = getattr(eager, attribute, None) or ()
        given = sum(isinstance(w, torch.Tensor) for w in found)
        if given > ours[kind]:
            raise UnsupportedModelError(f"its eager attention gives {given} maps of {kind.replace('.', ' ')}, but "
                                        f"{ours[kind]} of its layers go through transformers' attention interface "
                                        "(the others, linear attention or a recurrence, cannot run our Eq. 1).")
        for layer, weights_of_layer in enumerate(found):  # what hooks could not see
            if family.model_type in SCORES_AS_ATTENTIONS and isinstance(weights_of_layer, torch.Tensor):
                weights_of_layer = weights_of_layer.softmax(-1)  # its scores, to the weights its code takes from them
            weights.setdefault(kind_key(kind, layer), weights_of_layer)
    return weights, eager


def _linear_head(model, logits, head_input: list, base_output: list, tolerance: float) -> tuple[str, ...] | None:
    """The buffers b_i with logits == lm_head(h) + Σ b_i, h the base model's last hidden states (as the probe's
    pass computed them), or None when the logits are not exactly that (a soft cap, a scale, a head that is more
    than one linear layer). Those of the buffers of the whole model's own (not its base model's, not lm_head's)
    holding one number per vocabulary entry are all added (Marian's final_logits_bias, all 0 until trained)."""
    head = model.get_output_embeddings()
    if logits is None or type(head) is not torch.nn.Linear or len(head_input) != 1 or len(base_output) != 1:
        return None
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if any(getattr(config, field, None) not in (None, 1, 1.0) for field in LOGIT_CHANGES):
        return None  # a cap or a scale that the probe's small logits may not show
    h, states = head_input[0], base_output[0]
    if h.shape != states.shape or not (h.data_ptr() == states.data_ptr() or torch.equal(h, states)):
        return None
    V = head.out_features
    inside = {name for name, _ in model.base_model.named_buffers(prefix="")} if model.base_model is not model else ()
    buffers = tuple(name for name, b in model.named_buffers()
                    if b.numel() == V and b.dim() <= 2 and name.split(".")[-1] not in inside
                    and not name.startswith(("lm_head.", model.base_model_prefix + ".")))
    bias = weight_of(head, "bias")  # an offloaded head's weights read where they are kept
    computed = F.linear(h, weight_of(head).to(h.device), None if bias is None else bias.to(h.device))  # (B, T, V)
    for name in buffers:
        computed = computed + model.get_buffer(name).reshape(-1)
    if computed.shape != logits.shape:
        return None
    scale = max(1.0, float(logits.abs().max()))
    return buffers if float((computed - logits).abs().max()) / scale <= tolerance else None
