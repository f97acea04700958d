"""The references of devtools.coverage: transformers' eager attention, and each switch made by transformers' own means.

A spy registered in transformers' attention interface (SPY) finds the attention modules and their order: it records
each module it is handed, with its heads, its value width and the keyword arguments beyond q, k, v (sliding_window,
softcap, s_aux, position_bias, ...), in call order, which is the order of eager's `attentions` tuples. From them:
`unscaled` sets every attention module's `scaling` to 1.0 (the factor its forward hands the attention function),
`bias_zeroed` zeroes every relative-position bias table (T5's `relative_attention_bias`), ALiBi (Bloom's, MPT's),
DeBERTa's position terms and XLNet's position and segment terms,
`heads_zeroed` zeroes a head's columns of W_O (found by name: HEAD_OUTPUTS, the hand table), `causal_lifted` lets a
module's own causal buffer (GPT-Neo's) see everything, and `eager_pass` runs
the eager model with output_attentions=True.

Axes: B batch, H query heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch

from attention_viz.hub.proof import sink_conventions
from attention_viz.hub.attention import ADDITIVE_MASKS, needs_mask
from attention_viz.hub.routes import SCORES_AS_ATTENTIONS, implement, route
from attention_viz.hub.routes_local import dense_blocks, dense_windows

SPY = "coverage_spy"  # the name the spy is registered under
# W_O by its name in the attention module (or in its parent, for BERT's attention.output.dense): the hand table.
HEAD_OUTPUTS = ("o_proj", "out_proj", "c_proj", "dense", "o", "out_lin", "wo", "Wo", "out", "output.dense", "o_dense",
                "proj", "attn_out", "post_attention.conv1d", "attention_out", "output")
# The attribute an attention module keeps its factor on QKᵀ in, and hands the attention function as `scaling`.
SCALINGS = ("scaling", "scale", "inv_norm_factor", "softmax_scale", "norm_factor")  # CLIP's attention keeps
# `scale`, Bloom's `inv_norm_factor`, MPT's `softmax_scale`; GPT-NeoX-Japanese's `norm_factor` it divides by (1 is no
# factor either way)
# attention modules whose factor on QKᵀ alone no attribute sets: no eager reference for the scale switch
SCALED_IN_CODE = {"FalconAttention": "Falcon's eager attention scales QKᵀ in its code (by √d_k where rotary; with "
                                     "ALiBi its inv_norm_factor scales QKᵀ + A together): no attribute sets the factor "
                                     "on QKᵀ alone",
                  "DisentangledSelfAttention": "DeBERTa's attention divides QKᵀ and its position terms by √(d·f) "
                                               "in its code: no attribute sets the factor on QKᵀ alone",
                  "XLNetRelativeAttention": "XLNet's scale multiplies its content, position and segment terms "
                                            "together: no attribute sets the factor on QKᵀ alone",
                  **dict.fromkeys(("LongformerSelfAttention", "LEDEncoderSelfAttention"),
                                  "Longformer's attention divides q by √d_k in its code (math.sqrt(head_dim), the "
                                  "head width its views need): no attribute sets the factor on QKᵀ alone")}
STANDARD_KWARGS = {"dropout", "scaling", "position_ids", "cache_position", "output_attentions", "use_cache",
                   "is_causal", "past_key_values", "past_key_value", "layer_idx", "cu_seq_lens_q", "cu_seq_lens_k",
                   "max_length_q", "max_length_k"}


class NotApplicable(Exception):
    """A check that does not apply to this model, or whose reference transformers cannot make (the reason)."""


_spied: list | None = None


def _spy_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention contract; records the module, its heads and its extra arguments, then attends plainly
    (softmax(q·kᵀ·scaling + mask)·v: only the calls matter, not the numbers)."""
    if _spied is not None:
        _spied.append((module, query.size(1), value.size(-1), scaling, {k: _shown(v) for k, v in kwargs.items()
                                                                          if k not in STANDARD_KWARGS}))
    B, H, Q, _ = query.shape
    try:
        n_rep = H // key.size(1)
        key, value = key.repeat_interleave(n_rep, 1), value.repeat_interleave(n_rep, 1)  # (B, H, K, d)
        scores = query @ key.transpose(-1, -2) * (scaling if scaling is not None else query.size(-1) ** -0.5)
        if attention_mask is not None:
            mask = attention_mask[..., : key.size(-2)]
            scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
        weights = scores.softmax(-1).nan_to_num(0.0)  # (B, H, Q, K)
        return (weights @ value).transpose(1, 2).contiguous(), weights  # (B, Q, H, d)
    except RuntimeError:  # shapes this plain attention does not take (more key heads than query heads, ...)
        return query.new_zeros(B, Q, H, value.size(-1)), None


def _shown(value) -> str:
    """An argument as the table names it (a tensor by its shape)."""
    if isinstance(value, torch.Tensor):
        return f"tensor{list(value.shape)}"
    if isinstance(value, dict):  # DeBERTa's bias_terms: by their names
        return "{" + ", ".join(map(str, value)) + "}"
    return repr(value)[:40]


def _register_spy() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    AttentionInterface.register(SPY, _spy_attention)
    def spy_mask(*args, **kwargs):  # boolean masks, True = may attend; a tensor where the model reads one (MPT)
        if getattr(kwargs.get("config"), "model_type", None) in ADDITIVE_MASKS:  # a model that reads its values
            return eager_mask(*args, **kwargs)
        if needs_mask(kwargs.get("config")):
            kwargs.update(allow_is_causal_skip=False, allow_is_bidirectional_skip=False)
        return sdpa_mask(*args, **kwargs)

    AttentionMaskInterface.register(SPY, spy_mask)


def spied(model, inputs: dict) -> list:
    """[(module name, query heads, value width, scaling, extra kwargs)] of each attention call of one pass."""
    global _spied
    _register_spy()
    spy = copy.deepcopy(model)
    route(spy)  # a family outside the interface (Bloom) brought through it, as the wrapper brings it
    implement(spy, SPY)
    names = {id(m): n for n, m in spy.named_modules()}
    _spied = []
    try:
        with torch.no_grad():
            spy(**inputs)
        return [(names[id(m)], h, d, s, k) for m, h, d, s, k in _spied]
    finally:
        _spied = None




def w_o(model, name: str, width: int) -> tuple[torch.nn.Module, bool] | None:
    """The attention module `name`'s W_O: the Linear (or GPT-2's Conv1D, transposed) among HEAD_OUTPUTS, in the
    module or its parent, whose input is the heads' outputs (`width` = H·d_v); (module, transposed) or None."""
    from transformers.pytorch_utils import Conv1D

    attention = model.get_submodule(name)
    parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
    own = getattr(attention, "o", None)  # XLNet's W_O: a parameter [D, H, d], its columns a view of it
    if isinstance(own, torch.nn.Parameter) and own.dim() == 3 and own[0].numel() == width:
        return SimpleNamespace(weight=own.data.flatten(1)), False
    for owner in (attention, parent):
        for child in HEAD_OUTPUTS:
            try:
                found = owner.get_submodule(child)
            except AttributeError:
                continue
            if isinstance(found, torch.nn.Linear) and found.in_features == width:
                return found, False
            if isinstance(found, Conv1D) and found.weight.size(0) == width:
                return found, True
            if type(found).__name__ == "QuantLinear" and found.in_features == width:  # I-BERT's, [out, in]
                return found, False
            if isinstance(found, torch.nn.Conv1d) and found.in_channels == width and found.groups == 1:
                return found, False  # SqueezeBERT's post_attention.conv1d: [out, in, 1], columns as a Linear's
    return None


def heads_zeroed(model, calls: list, heads: list[int]):
    """A copy of the model with head heads[i]'s columns of W_O zeroed in the i-th attention call's module."""
    changed = copy.deepcopy(model)
    with torch.no_grad():
        for (name, H, d, _, _), h in zip(calls, heads):
            found = w_o(changed, name, H * d)
            if found is None:
                raise LookupError(f"no W_O found for {name} (none of {HEAD_OUTPUTS} takes {H}·{d} inputs)")
            module, transposed = found
            if transposed:
                module.weight[h * d:(h + 1) * d, :] = 0
            else:
                module.weight[:, h * d:(h + 1) * d] = 0
    return changed


def unscaled(model, calls: list):
    """A copy of the model with every attention module's factor on QKᵀ (SCALINGS: `scaling`, or CLIP's `scale`) 1.0
    (where it hands the attention function 1 and keeps no factor, it has none to take out)."""
    changed = copy.deepcopy(model)
    for name, _, _, scaling, _ in calls:
        module = changed.get_submodule(name)
        if type(module).__name__ in SCALED_IN_CODE:
            raise NotApplicable(SCALED_IN_CODE[type(module).__name__])
        found = [attribute for attribute in SCALINGS if isinstance(getattr(module, attribute, None), (int, float))]
        if not found and scaling == 1.0:  # no factor to take out (GPT-Neo's QKᵀ has none): the model as it is
            continue
        if not found:
            raise LookupError(f"{type(module).__name__} keeps no {' or '.join(SCALINGS)} attribute")
        # a flag (the original GPT's `scale`: divide by √d or not) off; a factor 1
        setattr(module, found[0], False if isinstance(getattr(module, found[0]), bool) else 1.0)
    return changed


def causal_lifted(model):
    """The model, or where its attention modules keep a causal rule of their own (a buffer `bias` [1, 1, P, P]: GPT-Neo's
    boolean one, within a window on its local layers; the original GPT's of ones and zeros), a copy with that rule
    letting every position see every other: what a 4D mask of zeros cannot lift; and where an encoder-decoder's
    encoder has sliding-window layers (T5Gemma's, by its layer_types), a copy whose encoder layers are all full:
    the decoder's mask of zeros does not reach the encoder, and the causal switch off lifts a window everywhere."""
    owned = [(name, buffer) for name, buffer in model.named_buffers() if name.endswith(".bias")
             and buffer.dim() == 4 and buffer.shape[:2] == (1, 1)]
    encoder = model.get_encoder() if getattr(model.config, "is_encoder_decoder", False) else None
    windowed = "sliding_attention" in (getattr(getattr(encoder, "config", None), "layer_types", None) or ())
    if not owned and not windowed:
        return model
    changed = copy.deepcopy(model)
    for name, _ in owned:
        changed.get_buffer(name).fill_(1)
    if windowed:
        config = changed.get_encoder().config
        config.layer_types = ["full_attention" if t == "sliding_attention" else t for t in config.layer_types]
    return changed


def bias_zeroed(model):
    """A copy of the model with every learned relative-position bias table (T5's `relative_attention_bias`, the
    embedding its position_bias is read from) zeroed, and ALiBi's (Bloom's build_alibi_tensor, given a 2D attention
    mask) all 0: the bias it adds to QKᵀ is then all 0."""
    changed = copy.deepcopy(model)
    tables = [module for name, module in changed.named_modules() if name.endswith("relative_attention_bias")]
    tables += [SimpleNamespace(weight=table) for name, table in changed.named_parameters()  # CPM-Ant's: a parameter
               if name.endswith("relative_attention_bias")]
    alibi = [module for module in changed.modules() if hasattr(type(module), "build_alibi_tensor")]
    mpt = [module for module in changed.modules() if hasattr(type(module), "build_mpt_alibi_tensor")]
    deberta = [module for module in changed.modules() if hasattr(type(module), "disentangled_attention_bias")]
    deberta_v1 = [module for module in changed.modules() if hasattr(type(module), "disentangled_att_bias")]
    xlnet = [module for module in changed.modules() if hasattr(type(module), "rel_attn_core")]
    if not tables and not alibi and not mpt and not deberta and not deberta_v1 and not xlnet:
        raise NotApplicable("its position bias is not read from a relative_attention_bias table or ALiBi's")
    with torch.no_grad():
        for table in tables:
            table.weight.zero_()
    for module in alibi:  # Bloom's: each head's slope times the key's position, from the 2D attention mask
        module.build_alibi_tensor = lambda mask, heads, dtype: torch.zeros(mask.size(0) * heads, 1, mask.size(1),
                                                                           dtype=dtype, device=mask.device)
    for module in deberta:  # DeBERTa's position terms (c2p + p2c): none, c2c alone over √(d·f) still
        module.disentangled_attention_bias = lambda *args, **kwargs: 0
    for module in deberta_v1:  # v1's (its disentangled_att_bias)
        module.disentangled_att_bias = lambda *args, **kwargs: 0
    for module in xlnet:  # XLNet's position term bd (rel_shift'ed) and segment term ef (its seg_embed): all 0
        module.rel_shift_bnij = lambda x, klen=-1: x.new_zeros(*x.shape[:3], klen)
        with torch.no_grad():
            module.seg_embed.zero_()
    for module in mpt:  # MPT's: built once for max_seq_len positions, [H, 1, max_seq_len]
        module.build_mpt_alibi_tensor = lambda heads, length, *args, device=None, **kwargs: torch.zeros(
            heads, 1, length, device=device)
    return changed


def eager_pass(model, inputs: dict) -> tuple[torch.Tensor, dict[str, list[torch.Tensor]]]:
    """The eager model's output and its attentions by kind: encoder.self_attn, decoder.self_attn, decoder.cross_attn."""
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    logits = next(getattr(out, name) for name in ("logits", "last_hidden_state", "pooler_output")
                  if getattr(out, name, None) is not None)
    if getattr(model.config, "is_encoder_decoder", False):
        kinds = {"encoder.self_attn": out.encoder_attentions, "decoder.self_attn": out.decoder_attentions,
                 "decoder.cross_attn": out.cross_attentions}
    else:
        kinds = {"self_attn": out.attentions}
    kinds = {kind: [a for a in (maps or ()) if a is not None] for kind, maps in kinds.items()}
    if model.config.model_type == "longt5":  # its encoder's local blocks: [B, n, H, L, 3L]
        T = inputs["input_ids"].size(1)
        kinds = {kind: [dense_blocks(a, T) if a.dim() == 5 else a for a in maps] for kind, maps in kinds.items()}
    windows = getattr(model.config, "attention_window", None)  # Longformer's, LED's encoder's: their own layout
    if isinstance(windows, (list, tuple)):
        kind = "encoder.self_attn" if "encoder.self_attn" in kinds else "self_attn"
        overall = inputs.get("global_attention_mask")
        rows = getattr(out, "encoder_global_attentions", None) or getattr(out, "global_attentions", None) or ()
        kinds[kind] = [dense_windows(a, windows[i] // 2, a.size(-2), None if overall is None else overall.bool(),
                                     rows[i].transpose(2, 3) if overall is not None else None)
                       for i, a in enumerate(kinds[kind])]
    if not all(isinstance(a, torch.Tensor) for maps in kinds.values() for a in maps):
        raise NotApplicable("the eager model returns its attentions as other than one tensor a layer")
    if model.config.model_type in SCORES_AS_ATTENTIONS:  # its scores before the softmax: the weights taken from them
        kinds = {kind: [a.softmax(-1) for a in maps] for kind, maps in kinds.items()}
    return logits, kinds


def by_kind(maps, layout: str) -> dict[str, list[torch.Tensor]]:
    """attention_viz's maps grouped as eager_pass groups them, each kind in layer order."""
    keys = list(maps.keys()) if hasattr(maps, "keys") else list(maps)
    if layout == "encoder-decoder":
        kinds = {"encoder.self_attn": [], "decoder.self_attn": [], "decoder.cross_attn": []}
        for key in keys:
            stack, _, name = key.split(".")
            kinds[f"{stack}.{name}"].append(maps[key])
        return kinds
    return {"self_attn": [maps[key] for key in keys]}


def difference(ours_logits, ours_maps, layout, reference: tuple, sinks: bool = False) -> float:
    """The largest difference, relative to max(1, |reference|), between ours and a reference pass (inf: a map is
    missing or of another shape). sinks: the model has learned sinks, and its eager maps may give the rows before
    the sink (hub.proof.sink_conventions)."""
    logits, kinds = reference
    ours = by_kind(ours_maps, layout)
    worst = _diff(ours_logits, logits)
    for kind, expected in kinds.items():
        got = ours.get(kind, [])
        if len(got) != len(expected):
            raise AssertionError(f"{len(got)} maps of {kind} recorded, eager returns {len(expected)}")
        for a, b in zip(got, expected):
            worst = max(worst, min(_diff(ours, b) for ours in sink_conventions(a, sinks)))
    return worst


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    if a.shape != b.shape:
        raise AssertionError(f"shape {list(a.shape)} against eager's {list(b.shape)}")
    b = b.to(a.dtype)
    return float((a - b).abs().max() / max(1.0, float(b.abs().max())))
