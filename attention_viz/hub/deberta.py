"""DeBERTa v2/v3's disentangled attention through our Eq. 1, routed by hub.routes (its attention does not go through
transformers' attention interface): scores = c2c + c2p + p2c, each over √(d·f) (f = 1 + the number of position terms),

    c2c  q_i·k_j                 content to content: Eq. 1's QKᵀ, handed over with the factor 1/√(d·f)
    c2p  q_i·P_k[δ(i, j)]        content to position: the query against the key's relative position
    p2c  k_j·P_q[δ(j, i)]        position to content: the key against the query's relative position

P the relative-position embeddings through W_K and W_Q (v3: shared, share_att_key) or their own projections (v2), δ
the relative position (log buckets past position_buckets / 2 in v3). c2p + p2c is handed over as the position bias and
each term beside it (bias_terms: hub.attention keeps them, with c2c, as a pass's `terms`). Its mask is its own padding
mask, not the mask function's: the pass's padding switch lifts it here.

DeBERTa v1 (deberta_v1_attention) is the same sum by other code: one in_proj for q, k and v with q_bias and v_bias
added after, its relative embeddings within att_span of 0, P through pos_proj (c2p) and pos_q_proj (p2c, with a bias).

Axes: B batch, H heads, N positions (Q queries, K keys), d head width.
"""

from __future__ import annotations

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention_viz.hub.attention import current


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
    variation = getattr(current(), "variation", None)  # its own padding mask (B, 1, N, N), lifted by the switch
    mask = attention_mask.bool() if variation is None or variation.padding_mask else None
    output, weights = attend(module, q, k, v, mask, scaling=float(1 / scale), dropout=dropout,
                             **({} if bias is None else {"position_bias": bias, "bias_terms": terms}))
    return output.reshape(B, output.size(1), -1), (weights if output_attentions else None)  # (B, N, H·d)


def deberta_v1_terms(module, q: torch.Tensor, k: torch.Tensor, relative_pos: torch.Tensor,
                     rel_embeddings: torch.Tensor, scale: torch.Tensor) -> dict[str, torch.Tensor]:
    """DeBERTa v1's position terms as its disentangled_att_bias computes them, each kept apart: q (with its q_bias),
    k [B, H, N, d], relative_pos [(1,) Q, K] (i − j) -> {"c2p", "p2c": [B, H, Q, K] over √(d·f)} (those its
    pos_att_type names). P the relative embeddings within att_span = min(N, max_relative_positions) of 0, through
    pos_proj (c2p: W_K's) and pos_q_proj (p2c: W_Q's, with its bias)."""
    relative_pos = relative_pos.reshape((1,) * (4 - relative_pos.dim()) + tuple(relative_pos.shape)).long()
    span = min(max(q.size(-2), k.size(-2)), module.max_relative_positions)
    rel = rel_embeddings[module.max_relative_positions - span: module.max_relative_positions + span, :].unsqueeze(0)
    B, H, Q, K = q.size(0), q.size(1), q.size(-2), k.size(-2)
    terms = {}
    if "c2p" in module.pos_att_type:  # q_i · P_k[i − j]
        pos_key = module.transpose_for_scores(module.pos_proj(rel))  # (1, H, 2·span, d)
        index = torch.clamp(relative_pos + span, 0, span * 2 - 1).expand([B, H, Q, K])
        terms["c2p"] = torch.gather(q @ pos_key.transpose(-1, -2), -1, index) / scale.to(q.dtype)
    if "p2c" in module.pos_att_type:  # k_j · P_q[j − i]
        pos_query = module.transpose_for_scores(module.pos_q_proj(rel))  # (1, H, 2·span, d)
        index = torch.clamp(-relative_pos + span, 0, span * 2 - 1).expand([B, H, K, K])
        terms["p2c"] = torch.gather(k @ pos_query.transpose(-1, -2).to(k.dtype), -1, index).transpose(-1, -2) \
            / scale.to(q.dtype)
    return terms


def deberta_v1_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor,
                         output_attentions: bool = False, query_states=None, relative_pos=None, rel_embeddings=None):
    """Deberta's (v1) DisentangledSelfAttention.forward with softmax(c2c + c2p + p2c, masked) computed by our Eq. 1,
    as deberta_attention's for v2/v3; v1 projects q, k, v with one in_proj and adds q_bias and v_bias after, and
    takes its relative embeddings within att_span. hidden_states [B, N, D], attention_mask [B, 1, N, N] (1 = may
    attend) -> (context [B, N, H·d], weights [B, H, N, N]). Talking heads are refused on load (hub.families);
    query_states, which no model of transformers hands it, runs its own code."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS or query_states is not None:
        return type(module).forward(module, hidden_states, attention_mask, output_attentions, query_states,
                                    relative_pos, rel_embeddings)
    from transformers.models.deberta.modeling_deberta import scaled_size_sqrt

    q, k, v = module.transpose_for_scores(module.in_proj(hidden_states)).chunk(3, dim=-1)  # (B, H, N, d) each
    q = q + module.transpose_for_scores(module.q_bias[None, None, :])
    v = v + module.transpose_for_scores(module.v_bias[None, None, :])
    scale = scaled_size_sqrt(q, 1 + len(module.pos_att_type))  # √(d·f)
    terms = {}
    if module.relative_attention and rel_embeddings is not None and relative_pos is not None:
        terms = deberta_v1_terms(module, q, k, relative_pos, module.pos_dropout(rel_embeddings), scale)
    bias = sum(terms.values()) if terms else None
    variation = getattr(current(), "variation", None)  # its own padding mask (B, 1, N, N), lifted by the switch
    mask = attention_mask.bool() if variation is None or variation.padding_mask else None
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, mask, scaling=float(1 / scale),
                             dropout=module.dropout.p if module.training else 0.0,
                             **({} if bias is None else {"position_bias": bias, "bias_terms": terms}))
    return output.reshape(*output.shape[:2], -1), (weights if output_attentions else None)  # (B, N, H·d)
