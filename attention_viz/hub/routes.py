"""Families whose attention does not go through transformers' attention interface, routed through it: per family,
a forward for its attention module that computes q, k, v and the bias as the model does, hands them to our Eq. 1
(hub.attention.eq1_attention, where the maps are recorded and the switches act) and goes on as the model does.

Only under an implementation registered in transformers' attention interface (ours, hub.long's, a spy's): under
eager, which the proof on load compares with, the module runs its own forward, transformers' code. transformers will not switch such a model's
implementation (`set_attn_implementation` refuses a model outside the interface), so `implement` sets its config's
directly, which its mask function and its routes read. Routed (ROUTES, by the attention module's class name):

    BloomAttention   ALiBi: each head h adds m_h·j to the logit of key position j (m_h its slope: 2^(-8h/H) for
                     H a power of two), handed over as the position bias [B, H, 1, K]; the factor 1/√d_k on QKᵀ
    GPTNeoSelfAttention  no 1/√d_k (its factor on QKᵀ is 1); local layers see the last window_size positions only
                     (its own causal buffer, kept with the pass's mask; the causal switch off drops both, as it drops
                     a sliding window elsewhere)
    Attention (the original GPT's, `openai-gpt`)  1/√d_k where built with scale (every layer of the model), its
                     causal rule a buffer of ones and zeros (kept with the pass's mask, dropped with the causal switch)
    Attention (FSMT's: fairseq's WMT19 models)  time first; its padding and causal masks its own arguments, each
                     dropped with its switch
    MegatronBertSelfAttention, RemBertSelfAttention, TapasSelfAttention, BigBirdSelfAttention  BERT's
                     self-attention from before the interface, in encoders (BigBird's full attention; its block-sparse
                     one is refused by hub.families)
    XGLMAttention, TrOCRAttention, MvpAttention  BART's attention from before the interface (MVP without prompts)
    MultiHeadAttention (XLM's, Flaubert's)  a mask of the padding, or of a causal model's rule, each with its switch
    MPNetSelfAttention  a relative-position bias (T5's buckets) on QKᵀ/√d_k, handed over as the position bias
    RoFormerSelfAttention  BERT's with rotary positions on q and k (and v where rotary_value), in encoders
    GPTNeoXJapaneseAttention  rotary positions on part of q and k; W_O's bias added by its layer after
    BeitAttention    in the interface, but its relative position bias (a layer's own, one shared by the stack) comes
                     added into its attention mask: taken out of it and handed over as the position bias
    Data2VecVisionSelfAttention  BEiT's from before the interface: its relative position bias (its own table's and
                     its encoder's shared one) handed over as the position bias

Axes: B batch, H heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F

from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention_viz.hub.attention import as_allowed, current

ROUTED = "_attention_viz_routed"  # set on a model whose attention modules route() changed
CAUSAL = "_attention_viz_causal"  # set on an attention module that is causal whatever mask its forward is handed


def bloom_attention(module, config, hidden_states: torch.Tensor, residual: torch.Tensor, alibi: torch.Tensor,
                    attention_mask: torch.Tensor | None, layer_past=None, use_cache: bool = False,
                    output_attentions: bool = False, **kwargs):
    """BloomAttention.forward with its softmax(QKᵀ/√d + ALiBi + mask) computed by our Eq. 1: hidden_states [B, Q, D],
    alibi [B·H, 1, K] (each head's slope times the key's position) -> (output [B, Q, D], weights [B, H, Q, K])."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, residual, alibi, attention_mask, layer_past, use_cache,
                                    output_attentions, **kwargs)
    B, Q, _ = hidden_states.shape
    q, k, v = module._reshape(module.query_key_value(hidden_states))  # (B, H, Q, d), (B, H, K, d) each
    if layer_past is not None:
        k, v = layer_past.update(k, v, module.layer_idx)
    bias = alibi.view(B, module.num_heads, 1, k.size(2)) * module.beta  # (B, H, 1, K): baddbmm's beta·alibi
    dropout = module.attention_dropout.p if module.training else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]  # our Eq. 1 (or hub.long's pass)
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.inv_norm_factor, dropout=dropout,
                             position_bias=bias)  # (B, Q, H, d), (B, H, Q, K)
    context = output.reshape(B, Q, -1)  # (B, Q, H·d): what the model's W_O (dense) reads
    if module.pretraining_tp > 1 and module.slow_but_exact:
        slices = module.hidden_size / module.pretraining_tp
        attended = torch.zeros_like(context)
        for i in range(module.pretraining_tp):
            attended = attended + F.linear(context[:, :, int(i * slices): int((i + 1) * slices)],
                                           module.dense.weight[:, int(i * slices): int((i + 1) * slices)])
    else:
        attended = module.dense(context)
    attended = residual + F.dropout(attended, p=module.hidden_dropout, training=module.training)  # dropout_add
    return attended, weights


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
    q, k, v = (project(hidden_states).view(B, Q, -1, d).transpose(1, 2)  # (B, H, Q, d)
               for project in (module.query, module.key, module.value))
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
    cross = key_value_states is not None
    states = key_value_states if cross else hidden_states  # (B, K, D)

    def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, H·d) -> (B, H, T, d)
        return x.view(B, -1, module.num_heads, module.head_dim).transpose(1, 2)

    q = heads(module.q_proj(hidden_states))
    k, v = cached(cache, module.layer_idx, cross, kwargs, lambda: (heads(module.k_proj(states)),
                                                                     heads(module.v_proj(states))))
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
    q, k, v = (project(hidden_states).view(B, Q, -1, d).transpose(1, 2)  # (B, H, Q, d)
               for project in (module.query, module.key, module.value))
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
    cross = kv is not None
    states = kv if cross else input  # (B, K, D)

    def heads(x: torch.Tensor) -> torch.Tensor:  # (B, T, H·d) -> (B, H, T, d)
        return x.view(B, -1, module.n_heads, module.head_dim).transpose(1, 2)

    q = heads(module.q_lin(input))
    k, v = cached(cache, module.layer_id, cross, kwargs, lambda: (heads(module.k_lin(states)),
                                                                    heads(module.v_lin(states))))
    allowed = None
    if mask is not None and kept("causal_mask" if mask.dim() == 3 else "padding_mask"):
        allowed = (mask != 0).view(B, 1, Q if mask.dim() == 3 else 1, -1)  # (B, 1, Q or 1, K)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, allowed, scaling=module.head_dim ** -0.5,
                             dropout=module.dropout if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    output = module.out_lin(output.reshape(B, Q, -1))
    return (output, weights) if output_attentions else (output,)


def mpnet_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                    position_bias: torch.Tensor | None = None, output_attentions: bool = False, **kwargs):
    """MPNetSelfAttention.forward with softmax(QKᵀ/√d + B + mask) computed by our Eq. 1, B its relative-position bias
    (T5's buckets, one table for the stack, computed by its encoder) handed over as the position bias: hidden_states
    [B, Q, D] -> (output [B, Q, D],) (+ (weights [B, H, Q, K],) when asked)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, position_bias, output_attentions, **kwargs)
    B, Q, _ = hidden_states.shape
    d = module.attention_head_size
    q, k, v = (project(hidden_states).view(B, Q, -1, d).transpose(1, 2)  # (B, H, Q, d)
               for project in (module.q, module.k, module.v))
    mask = as_allowed(attention_mask) if attention_mask is not None and kept("padding_mask") else None
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, mask, scaling=d ** -0.5, position_bias=position_bias,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, Q, H, d), (B, H, Q, K)
    output = module.o(output.reshape(B, Q, -1))
    return (output, weights) if output_attentions else (output,)


def beit_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
    """BeitAttention.forward with softmax(QKᵀ/√d + B + mask) computed by our Eq. 1, B its relative position bias
    (each layer's own table, and one shared by the stack, each [1, H, T, T], added into the attention mask by its
    layer and its model) handed over as the position bias, the mask keeping only what it hides: hidden_states
    [B, T, D] -> (output [B, T, D], weights [B, H, T, T])."""
    if config._attn_implementation in ALL_ATTENTION_FUNCTIONS and attention_mask is not None and \
            attention_mask.is_floating_point():
        allowed = as_allowed(attention_mask)  # (B or 1, 1 or H, T, T), True = may attend
        kwargs["position_bias"] = attention_mask.masked_fill(~allowed, 0)  # B (1, H, T, T): the finite part
        attention_mask = None if bool(allowed.all()) else allowed
    return type(module).forward(module, hidden_states, attention_mask, **kwargs)  # its attention function: ours


def data2vec_vision_attention(module, config, hidden_states: torch.Tensor, output_attentions: bool = False,
                              relative_position_bias: torch.Tensor | None = None,
                              interpolate_pos_encoding: bool = False, resolution: tuple[int, int] | None = None):
    """Data2VecVisionSelfAttention.forward (BEiT's from before the interface) with softmax(QKᵀ/√d + B) computed by
    our Eq. 1, B its relative position bias (its own table's, plus the one its encoder shares, each [1, H, T, T]) handed
    over as the position bias: hidden_states [B, T, D] -> (context [B, T, H·d],) (+ (weights [B, H, T, T],) when
    asked)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, output_attentions, relative_position_bias,
                                    interpolate_pos_encoding, resolution)
    B, T, _ = hidden_states.shape
    d = module.attention_head_size
    q, k, v = (project(hidden_states).view(B, T, -1, d).transpose(1, 2)  # (B, H, T, d)
               for project in (module.query, module.key, module.value))
    bias = relative_position_bias  # the encoder's shared one (1, H, T, T), or None
    if module.has_relative_position_bias:
        window = (resolution[0] // config.patch_size, resolution[1] // config.patch_size)
        own = module.relative_position_bias(window, interpolate_pos_encoding, dim_size=T)  # (1, H, T, T)
        bias = own if bias is None else own + bias
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, None, scaling=d ** -0.5, position_bias=bias,
                             dropout=module.dropout.p if module.training else 0.0)  # (B, T, H, d), (B, H, T, T)
    context = output.reshape(B, T, -1)
    return (context, weights) if output_attentions else (context,)


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


def kept(mask: str) -> bool:
    """Whether the pass in flight (ours or hub.long's) keeps this mask ("causal_mask", "padding_mask"); outside a
    pass, the model's own."""
    variation = getattr(current(), "variation", None)
    return variation is None or getattr(variation, mask)


def causal_on() -> bool:
    """Whether the pass in flight keeps the causal mask (kept("causal_mask"))."""
    return kept("causal_mask")


MODELS = "transformers.models."
ROUTES = {MODELS + "bloom.modeling_bloom.BloomAttention": bloom_attention,  # by class, as transformers names it
          MODELS + "gpt_neo.modeling_gpt_neo.GPTNeoSelfAttention": gpt_neo_attention,
          MODELS + "openai.modeling_openai.Attention": openai_gpt_attention,
          MODELS + "fsmt.modeling_fsmt.Attention": fsmt_attention,
          MODELS + "megatron_bert.modeling_megatron_bert.MegatronBertSelfAttention": bert_self_attention,
          MODELS + "rembert.modeling_rembert.RemBertSelfAttention": bert_self_attention,
          MODELS + "tapas.modeling_tapas.TapasSelfAttention": bert_self_attention,
          MODELS + "big_bird.modeling_big_bird.BigBirdSelfAttention": bert_self_attention,
          MODELS + "xglm.modeling_xglm.XGLMAttention": bart_attention,
          MODELS + "trocr.modeling_trocr.TrOCRAttention": bart_attention,
          MODELS + "mvp.modeling_mvp.MvpAttention": bart_attention,
          MODELS + "xlm.modeling_xlm.MultiHeadAttention": xlm_attention,
          MODELS + "flaubert.modeling_flaubert.MultiHeadAttention": xlm_attention,
          MODELS + "mpnet.modeling_mpnet.MPNetSelfAttention": mpnet_attention,
          MODELS + "roformer.modeling_roformer.RoFormerSelfAttention": roformer_attention,
          MODELS + "gpt_neox_japanese.modeling_gpt_neox_japanese.GPTNeoXJapaneseAttention": gpt_neox_japanese_attention,
          MODELS + "beit.modeling_beit.BeitAttention": beit_attention,
          MODELS + "data2vec.modeling_data2vec_vision.Data2VecVisionSelfAttention": data2vec_vision_attention}
BUILT_EAGER = {"gpt_neo", "data2vec-vision"}  # model types whose modules choose their attention class by the
                                              # implementation when built: built under eager (transformers' own
                                              # classes), then routed


def built_under(config, implementation: str) -> str:
    """The implementation a model of this config is built under: eager for BUILT_EAGER's types, else `implementation`."""
    return "eager" if config.model_type in BUILT_EAGER else implementation


def route(model) -> int:
    """Give every attention module of a routed family (ROUTES) its forward through our Eq. 1 (on the instance, the
    class untouched); returns how many were routed."""
    config = model.config
    routed = 0
    for module in model.modules():
        forward = ROUTES.get(f"{type(module).__module__}.{type(module).__name__}")
        if forward is not None and "forward" not in vars(module):
            module.forward = types.MethodType(
                lambda self, *args, _forward=forward, **kwargs: _forward(self, config, *args, **kwargs), module)
            routed += 1
    for name, module in model.named_modules():  # FSMT's decoder self-attention: causal even where its forward
        if type(module).__name__ == "FSMTDecoder":  # builds no mask (given encoder_outputs, not input_ids)
            for layer in module.layers:
                setattr(layer.self_attn, CAUSAL, True)
    if routed:
        setattr(model, ROUTED, True)
    return routed


def implement(model, name: str) -> None:
    """model.set_attn_implementation(name), or for a routed model (which transformers will not switch) its config's
    implementation set directly."""
    if getattr(model, ROUTED, False):
        model.config._attn_implementation = name
    else:
        model.set_attn_implementation(name)
