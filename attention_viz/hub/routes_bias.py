"""Families that add a position bias to QKᵀ in attention of their own, routed through transformers' attention
interface (hub.routes): per family a forward that computes q, k, v and the bias B as the model does and hands B over
as the position bias (hub.attention.eq1_attention adds it after the factor, keeps it, and takes it out under the
position_bias switch); under eager, the module's own code. Each family's own, by its attention module:

    BloomAttention   ALiBi: each head h adds m_h·j to the logit of key position j (m_h its slope: 2^(-8h/H) for
                     H a power of two), handed over as the position bias [B, H, 1, K]; the factor 1/√d_k on QKᵀ
    MptAttention     ALiBi as MPT builds it once for max_seq_len positions, m_h·(j − (K − 1)), the last K columns
                     [1, H, 1, K]; its softmax_scale on QKᵀ (and its clip_qkv); its mask is True where hidden, as its
                     model turns the mask function's into booleans (`.to(torch.bool)`: our mask, True = may attend,
                     passes through unchanged, so it must be a tensor: hub.attention.DENSE_MASKS)
    FalconAttention  rotary positions (Falcon-7B/40B: no bias) or ALiBi (Falcon-RW): its eager attention adds the
                     slopes twice, (QKᵀ + A)/√d_k in its logits and A/√d_k folded into its mask by its model, so the
                     bias handed over is 2·A/√d_k [B, H, 1, K], A = m_h·j (j counting a row's real tokens, as Bloom's)
    MPNetSelfAttention  a relative-position bias (T5's buckets) on QKᵀ/√d_k, handed over as the position bias
    BeitAttention    in the interface, but its relative position bias (a layer's own, one shared by the stack) comes
                     added into its attention mask: taken out of it and handed over as the position bias
    Data2VecVisionSelfAttention  BEiT's from before the interface: its relative position bias (its own table's and
                     its encoder's shared one) handed over as the position bias

    CpmAntAttention  a segment-and-position bias (T5's buckets within a segment), computed by its model and
                     handed over as the position bias; its own mask of its left padding (CPM-Ant with prompts refused)
    XLNetRelativeAttention  Transformer-XL's relative attention, its content stream: (ac + bd + ef)/√d, ac the
                     content term (QKᵀ with a per-head bias on q), bd the position term and ef the segment term
                     handed over as the position bias, each kept apart; its W_O a parameter (ParameterW_O)

DeBERTa's disentangled attention, a bias of content-position terms, is hub.deberta's.

Axes: B batch, H heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention_viz.hub.attention import as_allowed, kept
from attention_viz.hub.routes_older import projected


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


def mpnet_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                    position_bias: torch.Tensor | None = None, output_attentions: bool = False, **kwargs):
    """MPNetSelfAttention.forward with softmax(QKᵀ/√d + B + mask) computed by our Eq. 1, B its relative-position bias
    (T5's buckets, one table for the stack, computed by its encoder) handed over as the position bias: hidden_states
    [B, Q, D] -> (output [B, Q, D],) (+ (weights [B, H, Q, K],) when asked)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, position_bias, output_attentions, **kwargs)
    B, Q, _ = hidden_states.shape
    d = module.attention_head_size
    q, k, v = projected(hidden_states, None, (module.q, module.k, module.v), d)  # (B, H, Q, d) each
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
    q, k, v = projected(hidden_states, None, (module.query, module.key, module.value), d)  # (B, H, T, d) each
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


def mpt_attention(module, config, hidden_states: torch.Tensor, position_bias: torch.Tensor, cache=None,
                  attention_mask: torch.Tensor | None = None, **kwargs):
    """MptAttention.forward with softmax(QKᵀ·softmax_scale + ALiBi, masked) computed by our Eq. 1: hidden_states
    [B, Q, D], position_bias [H, 1, max_seq_len] -> (output [B, Q, D], weights [B, H, Q, K])."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, position_bias, cache=cache, attention_mask=attention_mask,
                                    **kwargs)
    B, Q, _ = hidden_states.shape
    mixed = module.Wqkv(hidden_states)
    if module.clip_qkv:
        mixed = mixed.clamp(min=-module.clip_qkv, max=module.clip_qkv)
    q, k, v = (x.reshape(B, Q, module.n_heads, module.head_dim).transpose(1, 2) for x in mixed.chunk(3, dim=2))
    if cache is not None:
        k, v = cache.update(k, v, module.layer_idx, kwargs=kwargs)  # (B, H, K, d)
    bias = None
    if position_bias is not None:
        K = k.size(2)
        bias = position_bias[:, max(0, position_bias.size(1) - (Q if cache is None else Q + cache.get_seq_length())):,
                             max(0, position_bias.size(2) - K):][None]  # (1, H, 1, K), as MPT slices it
    dropout = module.attn_dropout_p if module.training else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.softmax_scale, dropout=dropout,
                             position_bias=bias)  # (B, Q, H, d), (B, H, Q, K)
    return module.out_proj(output.reshape(B, Q, -1)), weights  # W_O (out_proj) reads (B, Q, H·d)


def falcon_attention(module, config, hidden_states: torch.Tensor, alibi: torch.Tensor | None,
                     attention_mask: torch.Tensor | None, position_ids=None, layer_past=None, use_cache: bool = False,
                     output_attentions: bool = False, position_embeddings=None, **kwargs):
    """FalconAttention.forward with its softmax computed by our Eq. 1: rotary q and k and no bias, or ALiBi as its
    eager attention adds it (twice: the module docstring): hidden_states [B, Q, D], alibi [B·H, 1, K] or None ->
    (output [B, Q, D], weights [B, H, Q, K])."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, alibi, attention_mask, position_ids, layer_past, use_cache,
                                    output_attentions, position_embeddings, **kwargs)
    from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb

    B, Q, _ = hidden_states.shape
    H, d = module.num_heads, module.head_dim
    H_kv = H if module.new_decoder_architecture else module.num_kv_heads
    q, k, v = module._split_heads(module.query_key_value(hidden_states))  # (B, Q, H or H_kv, d) each
    q = q.transpose(1, 2).reshape(B, H, Q, d)
    k, v = (x.transpose(1, 2).reshape(B, H_kv, Q, d) for x in (k, v))
    if alibi is None:
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
    if layer_past is not None:
        k, v = layer_past.update(k, v, module.layer_idx)  # (B, H_kv, K, d)
    bias = None
    if alibi is not None:
        slopes = alibi.view(B, H, 1, -1)  # A: (B, H, 1, K)
        folded = slopes / math.sqrt(config.hidden_size // H)  # what its model folds into the mask where it may attend
        if attention_mask is not None and attention_mask.is_floating_point():
            hidden = attention_mask <= torch.finfo(attention_mask.dtype).min / 2
            folded = attention_mask.masked_fill(hidden, 0)  # (B, H, Q, K)
            attention_mask = ~hidden[:, :1]  # (B, 1, Q, K): the same cells hidden in every head
        bias = slopes * module.inv_norm_factor + folded  # (QKᵀ + A)·s + A/√d_k, less QKᵀ·s
    dropout = module.attention_dropout.p if module.training and alibi is not None else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, attention_mask, scaling=module.inv_norm_factor, dropout=dropout,
                             **({} if bias is None else {"position_bias": bias}))  # (B, Q, H, d), (B, H, Q, K)
    return module.dense(output.reshape(B, Q, H * d)), weights  # W_O (dense) reads (B, Q, H·d)


class ParameterW_O(torch.nn.Module):
    """W_O that an attention keeps as a parameter [D, H, d] (XLNet's `o`), as a linear layer the proof on load can
    find reading the heads' outputs: `weight` is that parameter as [D, H·d] (a view: what is written to it is
    written to the parameter). It holds no parameter of its own: the model's state dict is unchanged."""

    def __init__(self, owner: torch.nn.Module, name: str):
        super().__init__()
        object.__setattr__(self, "_owner", owner)  # not a submodule: a copy of the model copies it with its own
        self._name = name

    @property
    def weight(self) -> torch.Tensor:
        return getattr(self._owner, self._name).flatten(1)  # (D, H·d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (…, H·d) -> (…, D)
        return F.linear(x, self.weight)


W_O_OF_XLNET = "heads_out"  # the name of the ParameterW_O hub.routes gives each XLNet attention


XLNET_TWO_STREAM = ("XLNet's two-stream attention is not supported: with target_mapping its query stream reads "
                    "positions it must not see the content of, with queries of their own; run it without "
                    "target_mapping (its content stream, what every other use of the model runs)")


def xlnet_attention(module, config, h: torch.Tensor, g: torch.Tensor | None, attn_mask_h: torch.Tensor | None,
                    attn_mask_g, r: torch.Tensor, seg_mat: torch.Tensor | None, mems=None, target_mapping=None,
                    output_attentions: bool = False):
    """XLNetRelativeAttention.forward's content stream with softmax((ac + bd + ef)·s, masked) computed by our Eq. 1
    (Transformer-XL's relative attention): ac = (q + r_w_bias)·k the content term, handed over as QKᵀ; bd = (q +
    r_r_bias)·R_j−i its position term (R the sinusoidal relative encodings through W_R, rel_shift'ed) and ef = (q +
    r_s_bias)·S its segment term (S whether i and j are of one segment) handed over together as the position bias,
    each kept apart (bias_terms "bd", "ef"); s = 1/√d multiplies all three. h [Q, B, D] time first, attn_mask_h
    [Q, K, B, 1] (1 = hidden) -> (output_h [Q, B, D], None) (+ (weights [Q, K, B, H],) when asked: its layout). The
    query stream (g, with target_mapping) is refused with XLNET_TWO_STREAM."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, h, g, attn_mask_h, attn_mask_g, r, seg_mat, mems, target_mapping,
                                    output_attentions)
    if g is not None:
        raise ValueError(XLNET_TWO_STREAM + ".")
    Q, B, _ = h.shape
    cat = torch.cat([mems, h], dim=0) if mems is not None and mems.dim() > 1 else h  # (K, B, D)
    q, k, v = (torch.einsum("ibh,hnd->ibnd", x, w) for x, w in ((h, module.q), (cat, module.k), (cat, module.v)))
    k_r = torch.einsum("ibh,hnd->ibnd", r.type(module.r.dtype), module.r)  # (R, B, H, d): the relative encodings
    bd = module.rel_shift_bnij(torch.einsum("ibnd,jbnd->bnij", q + module.r_r_bias, k_r), klen=k.size(0))
    terms = {"bd": bd * module.scale}  # (B, H, Q, K)
    if seg_mat is not None:
        ef = torch.einsum("ibnd,snd->ibns", q + module.r_s_bias, module.seg_embed)
        terms["ef"] = torch.einsum("ijbs,ibns->bnij", seg_mat, ef) * module.scale
    allowed = None
    if attn_mask_h is not None and kept("padding_mask"):
        allowed = (attn_mask_h[..., 0] == 0).permute(2, 0, 1)[:, None]  # (B, 1, Q, K), True = may attend
    q, k, v = ((q + module.r_w_bias).permute(1, 2, 0, 3), k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3))  # (B, H, ·, d)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, allowed, scaling=module.scale, position_bias=sum(terms.values()),
                             bias_terms=terms, dropout=module.dropout.p if module.training else 0.0)
    attn_out = getattr(module, W_O_OF_XLNET)(output.reshape(B, Q, -1)).transpose(0, 1)  # (Q, B, D): its post_attention
    output_h = module.layer_norm(module.dropout(attn_out) + h)
    return (output_h, None, torch.einsum("bnij->ijbn", weights)) if output_attentions else (output_h, None)


def cpmant_attention(module, config, hidden_q: torch.Tensor, hidden_kv: torch.Tensor, attention_mask: torch.Tensor,
                     position_bias: torch.Tensor, output_attentions: bool = False, cache=None, use_cache=None,
                     **kwargs):
    """CpmAntAttention.forward with softmax(QKᵀ/√d + B, masked) computed by our Eq. 1, B its segment-and-position
    bias (T5's buckets within a segment, a bucket per pair of segments across them; one table for the stack, computed
    by its model) handed over as the position bias: hidden_q [B, Q, D], attention_mask [B, Q, K] (True = may attend:
    its own, of its left padding) -> (output [B, Q, D], weights [B, H, Q, K] or None). Its prompts are refused on
    load (hub.families): only a model without them runs here."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_q, hidden_kv, attention_mask, position_bias, output_attentions,
                                    cache=cache, use_cache=use_cache, **kwargs)
    B, Q, _ = hidden_q.shape
    q = module.project_q(hidden_q).view(B, Q, module.num_heads, module.dim_head).transpose(1, 2)  # (B, H, Q, d)
    k, v = (project(hidden_kv).view(B, -1, module.num_heads, module.dim_head).transpose(1, 2)
            for project in (module.project_k, module.project_v))  # (B, H, K, d)
    if cache is not None:
        k, v = cache.update(k, v, module.layer_idx, kwargs=kwargs)
    allowed = attention_mask.view(B, 1, Q, k.size(2)).bool() if kept("padding_mask") else None  # (B, 1, Q, K)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, allowed, scaling=module.dim_head ** -0.5, position_bias=position_bias,
                             dropout=module.dropout.p if module.dropout is not None and module.training else 0.0)
    return module.attention_out(output.reshape(B, Q, -1)), (weights if output_attentions else None)
