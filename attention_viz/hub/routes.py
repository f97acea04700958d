"""Families whose attention does not go through transformers' attention interface, routed through it: per family,
a forward for its attention module that computes q, k, v and the bias as the model does, hands them to our Eq. 1
(hub.attention.eq1_attention, where the maps are recorded and the switches act) and goes on as the model does.

Only under an implementation registered in transformers' attention interface (ours, hub.long's, a spy's): under
eager, which the proof on load compares with, the module runs its own forward, transformers' code. transformers will not switch such a model's
implementation (`set_attn_implementation` refuses a model outside the interface), so `implement` sets its config's
directly, which its mask function and its routes read. Routed (ROUTES, by the attention module's class name):

    BloomAttention   ALiBi: each head h adds m_h·j to the logit of key position j (m_h its slope: 2^(-8h/H) for
                     H a power of two), handed over as the position bias [B, H, 1, K]; the factor 1/√d_k on QKᵀ

Axes: B batch, H heads, Q queries, K keys, d head width.
"""

from __future__ import annotations

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


ROUTES = {"BloomAttention": bloom_attention}


def route(model) -> int:
    """Give every attention module of a routed family (ROUTES) its forward through our Eq. 1 (on the instance, the
    class untouched); returns how many were routed."""
    config = model.config
    routed = 0
    for module in model.modules():
        forward = ROUTES.get(type(module).__name__)
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
