"""Families whose attention does not go through transformers' attention interface, routed through it: per family,
a forward for its attention module that computes q, k, v and the bias as the model does, hands them to our Eq. 1
(hub.attention.eq1_attention, where the maps are recorded and the switches act) and goes on as the model does.

Only under an implementation registered in transformers' attention interface (ours, hub.long's, a spy's): under
eager, which the proof on load compares with, the module runs its own forward, transformers' code. transformers will not switch such a model's
implementation (`set_attn_implementation` refuses a model outside the interface), so `implement` sets its config's
directly, which its mask function and its routes read. Routed (ROUTES, by the attention module's class and its modeling file):

    BloomAttention   ALiBi: each head h adds m_h·j to the logit of key position j (m_h its slope: 2^(-8h/H) for
                     H a power of two), handed over as the position bias [B, H, 1, K]; the factor 1/√d_k on QKᵀ
    MptAttention     ALiBi as MPT builds it once for max_seq_len positions, m_h·(j − (K − 1)), the last K columns
                     [1, H, 1, K]; its softmax_scale on QKᵀ (and its clip_qkv); its mask is True where hidden, as its
                     model turns the mask function's into booleans (`.to(torch.bool)`: our mask, True = may attend,
                     passes through unchanged, so it must be a tensor: DENSE_MASKS)
    FalconAttention  rotary positions (Falcon-7B/40B: no bias) or ALiBi (Falcon-RW): its eager attention adds the
                     slopes twice, (QKᵀ + A)/√d_k in its logits and A/√d_k folded into its mask by its model, so the
                     bias handed over is 2·A/√d_k [B, H, 1, K], A = m_h·j (j counting a row's real tokens, as Bloom's)
    DisentangledSelfAttention   DeBERTa v2/v3: scores = c2c + c2p + p2c, each over √(d·f) (f = 1 + its position
                     terms): content-to-content QKᵀ (our Eq. 1's, its factor 1/√(d·f)), content-to-position
                     q_i·P_k[δ(i, j)] and position-to-content k_j·P_q[δ(j, i)] (P the relative-position embeddings
                     through W_K and W_Q, or their own projections), handed over as the position bias c2p + p2c
                     [B, H, Q, K] with each term beside it (bias_terms, kept as Pass.terms); its mask is its own
                     padding mask, not the mask function's: handed as such (mask_is_padding), the padding switch
                     lifts it

Axes: B batch, H heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

import math
import types

import torch
import torch.nn.functional as F

from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

ROUTED = "_attention_viz_routed"  # set on a model whose attention modules route() changed


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


def deberta_terms(module, q: torch.Tensor, k: torch.Tensor, relative_pos, rel_embeddings: torch.Tensor,
                  scale: torch.Tensor) -> dict[str, torch.Tensor]:
    """DeBERTa v2's position terms as its disentangled_attention_bias computes them, each kept apart: q, k [B·H, Q or
    K, d] -> {"c2p", "p2c": [B·H, Q, K] over √(d·f)} (those its pos_att_type names)."""
    from transformers.models.deberta_v2.modeling_deberta_v2 import build_relative_position, build_rpos

    if relative_pos is None:
        relative_pos = build_relative_position(q, k, bucket_size=module.position_buckets,
                                               max_position=module.max_relative_positions)
    relative_pos = relative_pos.reshape((1,) * (4 - relative_pos.dim()) + tuple(relative_pos.shape))  # (·, ·, Q, K)
    relative_pos = relative_pos.to(device=q.device, dtype=torch.long)
    span, H, n = module.pos_ebd_size, module.num_attention_heads, q.size(0)
    rel = rel_embeddings[0: span * 2, :].unsqueeze(0)  # (1, 2·span, D)
    terms = {}
    if "c2p" in module.pos_att_type:  # q_i · P_k[i - j]: each query against the key's relative position
        proj = module.key_proj if module.share_att_key else module.pos_key_proj
        pos_key = module.transpose_for_scores(proj(rel), H).repeat(n // H, 1, 1)  # (B·H, 2·span, d)
        index = torch.clamp(relative_pos + span, 0, span * 2 - 1).squeeze(0).expand([n, q.size(1), k.size(1)])
        terms["c2p"] = torch.gather(torch.bmm(q, pos_key.transpose(-1, -2)), -1, index) / scale.to(q.dtype)
    if "p2c" in module.pos_att_type:  # k_j · P_q[j - i]: each key against the query's relative position
        proj = module.query_proj if module.share_att_key else module.pos_query_proj
        pos_query = module.transpose_for_scores(proj(rel), H).repeat(n // H, 1, 1)  # (B·H, 2·span, d)
        r_pos = build_rpos(q, k, relative_pos, module.max_relative_positions, module.position_buckets)  # as it calls
        index = torch.clamp(-r_pos + span, 0, span * 2 - 1).squeeze(0).expand([n, k.size(1), k.size(1)])
        terms["p2c"] = torch.gather(torch.bmm(k, pos_query.transpose(-1, -2)), -1, index).transpose(-1, -2) \
            / scale.to(q.dtype)
    return terms


def deberta_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                      output_attentions: bool = False, query_states=None, relative_pos=None, rel_embeddings=None):
    """DebertaV2's DisentangledSelfAttention.forward with softmax(c2c + c2p + p2c, masked) computed by our Eq. 1:
    hidden_states [B, N, D], attention_mask [B, 1, N, N] (1 = may attend) -> (context [B, N, H·d], weights
    [B, H, N, N])."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, output_attentions, query_states,
                                    relative_pos, rel_embeddings)
    from transformers.models.deberta_v2.modeling_deberta_v2 import scaled_size_sqrt

    H = module.num_attention_heads
    B, N = hidden_states.shape[:2]
    q = module.transpose_for_scores(module.query_proj(hidden_states if query_states is None else query_states), H)
    k = module.transpose_for_scores(module.key_proj(hidden_states), H)  # (B·H, N, d)
    v = module.transpose_for_scores(module.value_proj(hidden_states), H)
    scale = scaled_size_sqrt(q, 1 + sum(t in module.pos_att_type for t in ("c2p", "p2c")))  # √(d·f)
    terms = {}
    if module.relative_attention:
        terms = deberta_terms(module, q, k, relative_pos, module.pos_dropout(rel_embeddings), scale)
    terms = {name: t.view(B, H, *t.shape[-2:]) for name, t in terms.items()}  # each (B, H, Q, K)
    bias = sum(terms.values()) if terms else None
    dropout = module.dropout.p if module.training else 0.0
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    q, k, v = (x.view(B, H, -1, x.size(-1)) for x in (q, k, v))  # (B, H, N, d)
    output, weights = attend(module, q, k, v, attention_mask.bool(), scaling=float(1 / scale), dropout=dropout,
                             mask_is_padding=True,  # (B, 1, N, N), its own: the padding switch lifts it
                             **({} if bias is None else {"position_bias": bias, "bias_terms": terms}))
    return output.reshape(B, output.size(1), -1), (weights if output_attentions else None)  # (B, N, H·d)


# by the attention module's class, named with its modeling file (DeBERTa v1's class has v2's name, not its code)
ROUTES = {"modeling_bloom.BloomAttention": bloom_attention, "modeling_mpt.MptAttention": mpt_attention,
          "modeling_falcon.FalconAttention": falcon_attention,
          "modeling_deberta_v2.DisentangledSelfAttention": deberta_attention}
# the model types whose model code needs its mask as a tensor (MPT's `.to(torch.bool)`): never None, even where it
# hides nothing (hub.attention.mask_under's `dense`)
DENSE_MASKS = frozenset({"mpt"})


# the model types whose layers pick their attention class by the implementation's name (Falcon's
# FALCON_ATTENTION_CLASSES): built under eager, their modules then routed and the implementation set (implement)
BUILT_EAGER = frozenset({"falcon"})


def built_with(config, name: str) -> str:
    """The implementation to build a model of this config under: `name`, or eager for BUILT_EAGER's types."""
    return "eager" if getattr(config, "model_type", None) in BUILT_EAGER else name


def needs_mask(config) -> bool:
    """Whether this model's code reads its mask as a tensor whatever it hides (DENSE_MASKS)."""
    return getattr(config, "model_type", None) in DENSE_MASKS


def route(model) -> int:
    """Give every attention module of a routed family (ROUTES) its forward through our Eq. 1 (on the instance, the
    class untouched); returns how many were routed."""
    config = model.config
    routed = 0
    for module in model.modules():
        forward = ROUTES.get(f"{type(module).__module__.rsplit('.', 1)[-1]}.{type(module).__name__}")
        if forward is not None and "forward" not in vars(module):
            module.forward = types.MethodType(
                lambda self, *args, _forward=forward, **kwargs: _forward(self, config, *args, **kwargs), module)
            routed += 1
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
