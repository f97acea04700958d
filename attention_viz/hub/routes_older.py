"""Families whose attention was written before transformers' attention interface, routed through it (hub.routes):
per family a forward for its attention module that computes q, k, v as the model does, hands them to the attention
function the pass runs (our Eq. 1, hub.long's, a spy's) and goes on as the model does; under eager, the module's own
code. Each family's own, by its attention module:

    GPTNeoSelfAttention  no 1/√d_k (its factor on QKᵀ is 1); local layers see the last window_size positions only
                     (its own causal buffer, kept with the pass's mask; the causal switch off drops both, as it drops
                     a sliding window elsewhere)
    Attention (the original GPT's, `openai-gpt`)  1/√d_k where built with scale (every layer of the model), its
                     causal rule a buffer of ones and zeros (kept with the pass's mask, dropped with the causal switch)
    Attention (FSMT's: fairseq's WMT19 models)  time first; its padding and causal masks its own arguments, each
                     dropped with its switch; its decoder's self-attention causal also where its forward built no
                     mask (mark_causal)
    MegatronBertSelfAttention, RemBertSelfAttention, TapasSelfAttention, BigBirdSelfAttention  BERT's
                     self-attention from before the interface, in encoders (BigBird's full attention; its block-sparse
                     one is refused by hub.families)
    XGLMAttention, TrOCRAttention, MvpAttention  BART's attention from before the interface (MVP without prompts)
    MultiHeadAttention (XLM's, Flaubert's)  a mask of the padding, or of a causal model's rule, each with its switch
    RoFormerSelfAttention  BERT's with rotary positions on q and k (and v where rotary_value), in encoders
    GPTNeoXJapaneseAttention  rotary positions on part of q and k; W_O's bias added by its layer after
    IBertSelfAttention  BERT's, unquantised (quant_mode False); a quantised I-BERT is refused by hub.families
    SqueezeBertSelfAttention  channels first, q, k, v by grouped kernel-1 convolutions; its W_O a convolution too
    LukeSelfAttention  BERT's over word tokens; entity inputs refused (LUKE_ENTITIES)

Axes: B batch, H heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention_viz.hub.attention import as_allowed, causal_on, kept

CAUSAL = "_attention_viz_causal"  # set on an attention module that is causal whatever mask its forward is handed


def gpt_neo_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      layer_past=None, use_cache: bool = False, output_attentions: bool = False, **kwargs):
    """GPTNeoSelfAttention.forward with its softmax(QKᵀ + mask) computed by our Eq. 1: hidden_states [B, Q, D] ->
    (output [B, Q, D], weights [B, H, Q, K]). Its QKᵀ has no factor (handed over as 1); its buffer `bias` [1, 1, P, P]
    is the causal rule, within window_size positions on a local layer."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, layer_past, use_cache, output_attentions,
                                    **kwargs)
    B, Q, _ = hidden_states.shape
    q, k, v = (module._split_heads(project(hidden_states), module.num_heads, module.head_dim)  # (B, H, Q, d)
               for project in (module.q_proj, module.k_proj, module.v_proj))
    if layer_past is not None:
        k, v = layer_past.update(k, v, module.layer_id)
    K = k.size(2)
    if causal_on():  # the model's own rule (within its window on a local layer), with the pass's mask (padding)
        rule = module.bias[:, :, K - Q: K, :K]  # (1, 1, Q, K), True = may attend
        attention_mask = rule if attention_mask is None else as_allowed(attention_mask) & rule
    dropout = module.attn_dropout.p if module.training else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]  # our Eq. 1 (or hub.long's pass)
    output, weights = attend(module, q, k, v, attention_mask, scaling=1.0, dropout=dropout)  # (B, Q, H, d), ...
    return module.resid_dropout(module.out_proj(output.reshape(B, Q, -1))), weights


def openai_gpt_attention(module, config, x: torch.Tensor, attention_mask: torch.Tensor | None = None,
                         output_attentions: bool = False):
    """The original GPT's Attention.forward with its softmax(QKᵀ/√d + mask) computed by our Eq. 1: x [B, Q, D] ->
    [output [B, Q, D]] (+ [weights [B, H, Q, K]] when asked, as its own). It hides a cell by adding −10⁴, whose
    exponential is 0 in float32 and float64 as our −∞'s is."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, x, attention_mask, output_attentions)
    B, Q, _ = x.shape
    q, k, v = (module.split_heads(part) for part in module.c_attn(x).split(module.split_size, dim=2))  # (B, H, Q, d)
    attention_mask = as_allowed(attention_mask) if kept("padding_mask") else None  # its own 2D mask, extended
    if causal_on():
        rule = module.bias[:, :, :Q, :Q] > 0  # (1, 1, Q, Q), True = may attend
        attention_mask = rule if attention_mask is None else attention_mask & rule
    dropout = module.attn_dropout.p if module.training else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=v.size(-1) ** -0.5 if module.scale else 1.0,
                             dropout=dropout)  # (B, Q, H, d), (B, H, Q, K)
    output = module.resid_dropout(module.c_proj(output.reshape(B, Q, -1)))
    return [output, weights] if output_attentions else [output]


def fsmt_attention(module, config, query: torch.Tensor, key: torch.Tensor | None,
                   key_padding_mask: torch.Tensor | None = None, layer_state=None, attn_mask: torch.Tensor | None = None,
                   output_attentions: bool = False, **kwargs):
    """FSMT's Attention.forward (fairseq's WMT19 translation models: time first) with softmax(QKᵀ/√d + masks) computed
    by our Eq. 1: query [Q, B, D], key [K, B, D] (cross-attention; self-attention reads query) -> (output [Q, B, D],
    weights [B, H, Q, K] or None). Its masks: key_padding_mask [B, K] (True = padding), attn_mask [Q, K] (additive:
    the decoder's causal mask). Keys and values are kept in its cache as its own forward keeps them."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, query, key, key_padding_mask, layer_state, attn_mask, output_attentions,
                                    **kwargs)
    Q, B, D = query.shape
    H, d, cross = module.num_heads, module.head_dim, module.encoder_decoder_attention
    states = key if cross else query  # (K, B, D)
    k, v = cached(layer_state, module.layer_idx, cross, kwargs, lambda: tuple(
        project(states).view(-1, B, H, d).permute(1, 2, 0, 3) for project in (module.k_proj, module.v_proj)))
    q = module.q_proj(query).view(Q, B, H, d).permute(1, 2, 0, 3)  # (B, H, Q, d)
    mask = None
    if key_padding_mask is not None and key_padding_mask.dim() > 0 and kept("padding_mask"):
        mask = ~key_padding_mask.bool()[:, None, None, :]  # (B, 1, 1, K), True = may attend
    if kept("causal_mask") and (attn_mask is not None or getattr(module, CAUSAL, False)):
        K = k.size(2)  # its own causal mask, or where its forward built none (a pass given encoder_outputs) the rule
        causal = as_allowed(attn_mask) if attn_mask is not None else (  # (Q, K)
            torch.ones(Q, K, dtype=torch.bool, device=q.device).tril(K - Q))
        mask = causal if mask is None else mask & causal
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, mask, scaling=module.scaling,
                             dropout=module.dropout if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    output = module.out_proj(output.reshape(B, Q, D).transpose(0, 1))  # (Q, B, D)
    return output, weights if output_attentions else None


def bert_self_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                        *args, **kwargs):
    """The self-attention BERT had before the interface (MegatronBERT's, RemBERT's, TAPAS's, BigBird's full one) with
    softmax(QKᵀ/√d + mask) computed by our Eq. 1, in encoders: hidden_states [B, Q, D] -> (context [B, Q, H·d],
    weights [B, H, Q, K]); its mask is the padding. A decoder's (is_decoder) holds padding and the causal rule in one
    additive mask that the switches could not take apart: it runs its own code, outside the interface, and the probe
    refuses it so (an encoder has no cache and no cross-attention)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS or module.is_decoder:
        return type(module).forward(module, hidden_states, attention_mask, *args, **kwargs)
    B, Q, _ = hidden_states.shape
    d = module.attention_head_size
    q, k, v = projected(hidden_states, None, (module.query, module.key, module.value), d)  # (B, H, Q, d) each
    mask = as_allowed(attention_mask) if attention_mask is not None and kept("padding_mask") else None
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, mask, scaling=d ** -0.5,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    return output.reshape(B, Q, -1), weights


def bart_attention(module, config, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None = None,
                   cache=None, attention_mask: torch.Tensor | None = None, attn_prompt: torch.Tensor | None = None,
                   output_attentions: bool = False, **kwargs):
    """BART's attention from before the interface (XGLM's, TrOCR's, MVP's) with softmax(QKᵀ/√d + mask) computed by
    our Eq. 1: hidden_states [B, Q, D] (key_value_states [B, S, D] for cross-attention) -> (output [B, Q, D], weights
    [B, H, Q, K]). Its mask comes from transformers' mask functions (the pass's switches on it where that is ours).
    MVP's prompts (attn_prompt) are refused on load (hub.families): only its eager code takes them."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        extra = {"output_attentions": output_attentions}
        if attn_prompt is not None:
            extra["attn_prompt"] = attn_prompt
        return type(module).forward(module, hidden_states, key_value_states, cache, attention_mask, **extra, **kwargs)
    B, Q, _ = hidden_states.shape
    q, k, v = projected(hidden_states, key_value_states, (module.q_proj, module.k_proj, module.v_proj),
                        module.head_dim, cache, module.layer_idx, kwargs)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.scaling,
                             dropout=module.dropout if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    return module.out_proj(output.reshape(B, Q, -1)), weights


def gpt_neox_japanese_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None,
                                position_ids=None, layer_past=None, use_cache: bool = False,
                                output_attentions: bool = False, position_embeddings=None, **kwargs):
    """GPTNeoXJapaneseAttention.forward with softmax(QKᵀ/√d + mask) computed by our Eq. 1: hidden_states [B, Q, D] ->
    (output [B, Q, D] before its bias, weights [B, H, Q, K], the bias its layer adds after). Rotary positions on the
    first rotary_ndims of q and k; its mask from transformers' mask interface."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, position_ids, layer_past, use_cache,
                                    output_attentions, position_embeddings, **kwargs)
    from transformers.models.gpt_neox_japanese.modeling_gpt_neox_japanese import apply_rotary_pos_emb

    B, Q, _ = hidden_states.shape
    d, r = module.head_size, module.rotary_ndims
    qkv = module.query_key_value(hidden_states).view(B, Q, module.num_attention_heads, 3 * d)
    q, k, v = (qkv[..., i * d: (i + 1) * d].permute(0, 2, 1, 3) for i in range(3))  # (B, H, Q, d)
    cos, sin = position_embeddings
    q_rot, k_rot = apply_rotary_pos_emb(q[..., :r], k[..., :r], cos, sin)
    q, k = torch.cat((q_rot, q[..., r:]), dim=-1), torch.cat((k_rot, k[..., r:]), dim=-1)
    if layer_past is not None:
        k, v = layer_past.update(k, v, module.layer_idx)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=1.0 / module.norm_factor,
                             dropout=module.attention_dropout.p if module.training else 0.0)  # (B, Q, H, d), ...
    return module.dense(output.reshape(B, Q, -1)), weights, module.dense_bias


def roformer_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                       sinusoidal_pos: torch.Tensor | None = None, *args, **kwargs):
    """RoFormerSelfAttention.forward (BERT's, with rotary positions applied to q and k, and v where rotary_value)
    with softmax(QKᵀ/√d + mask) computed by our Eq. 1, in encoders: hidden_states [B, Q, D] -> (context [B, Q, H·d],
    weights [B, H, Q, K]). A decoder (is_decoder) runs its own code, as bert_self_attention's."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS or module.is_decoder:
        return type(module).forward(module, hidden_states, attention_mask, sinusoidal_pos, *args, **kwargs)
    B, Q, _ = hidden_states.shape
    d = module.attention_head_size
    q, k, v = projected(hidden_states, None, (module.query, module.key, module.value), d)  # (B, H, Q, d) each
    if sinusoidal_pos is not None:
        q, k, *rotated = module.apply_rotary_position_embeddings(sinusoidal_pos, q, k, *([v] if module.rotary_value
                                                                                           else []))
        v = rotated[0] if rotated else v
    mask = as_allowed(attention_mask) if attention_mask is not None and kept("padding_mask") else None
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, mask, scaling=d ** -0.5,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    return output.reshape(B, Q, -1), weights


def xlm_attention(module, config, input: torch.Tensor, mask: torch.Tensor, kv: torch.Tensor | None = None,
                  cache=None, output_attentions: bool = False, **kwargs):
    """XLM's and Flaubert's MultiHeadAttention.forward with softmax(QKᵀ/√d + mask) computed by our Eq. 1: input
    [B, Q, D] (kv [B, S, D] for cross-attention) -> (output [B, Q, D],) (+ (weights [B, H, Q, K],) when asked). Its
    mask, 1 = may attend: [B, K] (the padding) or [B, Q, K] (a causal model's causal rule), each dropped with its
    switch."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, input, mask, kv, cache, output_attentions, **kwargs)
    B, Q, _ = input.shape
    q, k, v = projected(input, kv, (module.q_lin, module.k_lin, module.v_lin), module.head_dim, cache,
                        module.layer_id, kwargs)
    allowed = None
    if mask is not None and kept("causal_mask" if mask.dim() == 3 else "padding_mask"):
        allowed = (mask != 0).view(B, 1, Q if mask.dim() == 3 else 1, -1)  # (B, 1, Q or 1, K)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, allowed, scaling=module.head_dim ** -0.5,
                             dropout=module.dropout if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    output = module.out_lin(output.reshape(B, Q, -1))
    return (output, weights) if output_attentions else (output,)


def ibert_attention(module, config, hidden_states: torch.Tensor, hidden_states_scaling_factor=None,
                    attention_mask: torch.Tensor | None = None, output_attentions: bool = False):
    """I-BERT's IBertSelfAttention.forward, unquantised (quant_mode False: its QuantLinear is a Linear, its QuantAct
    the identity, its IntSoftmax a softmax; a quantised model is refused on load, hub.families), with softmax(QKᵀ/√d
    + mask) computed by our Eq. 1: hidden_states [B, Q, D] -> ((context [B, Q, H·d],) (+ (weights [B, H, Q, K],)
    when asked), their scaling factors: None)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS or module.quant_mode:  # eager: its own code
        return type(module).forward(module, hidden_states, hidden_states_scaling_factor, attention_mask,
                                    output_attentions)
    B, Q, _ = hidden_states.shape
    q, k, v = projected(hidden_states, None, tuple(
        lambda x, w=w, a=a: a(w(x)[0])[0] for w, a in ((module.query, module.query_activation),
                                                       (module.key, module.key_activation),
                                                       (module.value, module.value_activation))),
        module.attention_head_size)  # (B, H, Q, d) each
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.attention_head_size ** -0.5,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    context, _ = module.output_activation(output.reshape(B, Q, -1), None)
    return ((context, weights), (None, None)) if output_attentions else ((context,), (None,))


def squeezebert_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None,
                          output_attentions: bool = False):
    """SqueezeBertSelfAttention.forward (channels first: q, k, v by kernel-1 grouped convolutions over the
    channels, each a linear map per position) with softmax(QKᵀ/√d + mask) computed by our Eq. 1: hidden_states
    [B, D, N] -> {"context_layer": [B, H·d, N]} (+ "attention_score": weights [B, H, N, N] when asked; its own eager
    code gives the scores before the softmax there: hub.routes.SCORES_AS_ATTENTIONS)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, output_attentions)
    B, _, N = hidden_states.shape
    q, k, v = (project(hidden_states).view(B, module.num_attention_heads, module.attention_head_size, N)
               .transpose(-1, -2) for project in (module.query, module.key, module.value))  # (B, H, N, d) each
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.attention_head_size ** -0.5,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, N, H, d), (B, H, N, N)
    result = {"context_layer": output.reshape(B, N, -1).transpose(1, 2)}  # (B, H·d, N): its W_O reads channels
    if output_attentions:
        result["attention_score"] = weights
    return result


LUKE_ENTITIES = ("LUKE's entity inputs are not supported: its entity tokens attend with queries of their own (and "
                 "its words to them with others: entity-aware attention), so a map over words and entities is not "
                 "one Eq. 1; give it words only (no entity_ids)")


def luke_attention(module, config, word_hidden_states: torch.Tensor, entity_hidden_states: torch.Tensor | None,
                   attention_mask: torch.Tensor | None = None, output_attentions: bool = False):
    """LukeSelfAttention.forward over word tokens only (BERT's attention) with softmax(QKᵀ/√d + mask) computed by
    our Eq. 1: word_hidden_states [B, Q, D] -> (context [B, Q, H·d], None) (+ (weights [B, H, Q, K],) when asked).
    Entity inputs (entity_hidden_states) are refused with LUKE_ENTITIES."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, word_hidden_states, entity_hidden_states, attention_mask,
                                    output_attentions)
    if entity_hidden_states is not None:
        raise ValueError(LUKE_ENTITIES + ".")
    B, Q, _ = word_hidden_states.shape
    d = module.attention_head_size
    q, k, v = projected(word_hidden_states, None, (module.query, module.key, module.value), d)  # (B, H, Q, d)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=d ** -0.5,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    context = output.reshape(B, Q, -1)
    return (context, None, weights) if output_attentions else (context, None)


def projected(hidden_states: torch.Tensor, states: torch.Tensor | None, projections, d: int, cache=None,
              layer: int | None = None, kwargs: dict | None = None) -> tuple[torch.Tensor, ...]:
    """q from hidden_states [B, Q, D] and k, v from states [B, K, D] (a cross-attention's source; None: hidden_states)
    through the module's projections (W_Q, W_K, W_V), each [B, H, T, d]; k and v kept in and read back from
    transformers' cache as the model's own forward does (cached)."""
    B = hidden_states.size(0)
    w_q, w_k, w_v = projections
    cross, states = states is not None, hidden_states if states is None else states

    def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, H·d) -> (B, H, T, d)
        return x.view(B, x.size(1), -1, d).transpose(1, 2)

    k, v = cached(cache, layer, cross, kwargs or {}, lambda: (heads(w_k(states)), heads(w_v(states))))
    return heads(w_q(hidden_states)), k, v


def cached(cache, layer: int, cross: bool, kwargs: dict, computed) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values [B, H, K, d] as the model's own forward keeps them in transformers' cache: a cross-attention's
    read back once kept (its source's, from the first step on), else computed (`computed()`) and added to it."""
    own, updated = cache, False
    if isinstance(cache, EncoderDecoderCache):
        own = cache.cross_attention_cache if cross else cache.self_attention_cache
        updated = bool(cache.is_updated.get(layer))
    if cross and updated:
        return own.layers[layer].keys, own.layers[layer].values
    k, v = computed()
    if cache is not None:
        k, v = own.update(k, v, layer, kwargs=kwargs)
        if cross and isinstance(cache, EncoderDecoderCache):
            cache.is_updated[layer] = True
    return k, v


def mark_causal(model) -> None:
    """FSMT's decoder self-attention: causal even where its forward builds no mask (a pass given encoder_outputs, not
    input_ids, as greedy decoding's last pass is): each such module marked CAUSAL."""
    for module in model.modules():
        if type(module).__name__ == "FSMTDecoder":
            for layer in module.layers:
                setattr(layer.self_attn, CAUSAL, True)
