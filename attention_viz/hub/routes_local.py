"""Families that read long texts with local attention, routed through transformers' attention interface (hub.routes):
their attention computed as Eq. 1 over every key with the model's own mask, so a map is [B, H, T, T] whose weights
outside the window are exactly 0. Each family's own, by its attention module:

    LongformerSelfAttention, LEDEncoderSelfAttention  a sliding window: query i sees key j where |i − j| ≤ w
                     (attention_window / 2), and every global token (global_attention_mask); a global token's row sees
                     every key through projections of its own (query_global, key_global, value_global). Its model pads
                     the text to a multiple of attention_window before the first layer and cuts it after the last;
                     the maps are the text's T positions (the pads' rows, hidden, are 0 as eager's are)
    LEDDecoderAttention  BART's attention from before the interface, returning its cache as LED's layers read it

A global row's q, k and v differ from the local rows' (the global projections): they go to Eq. 1 side by side along
the head width, q = [q_local·(row local), q_global·(row global)], k = [k_local, k_global], v = [v_local, v_global],
so a local row's scores are q·k and a global row's q_global·k_global, exactly, in one softmax of one [T, T] map; each
row's output is the half of its kind. eager gives its weights in its own layout (each row's 2w + 1 window cells
after the global keys'); `dense_windows` rebuilds them [B, H, T, T] (what the proof on load compares).

Axes: B batch, H heads, T text positions, P padded positions, G global tokens, d head width.
"""

from __future__ import annotations

import contextvars

import torch
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from attention_viz.core.attention import Window
from attention_viz.hub.attention import kept
from attention_viz.hub.routes_older import bart_attention, projected

# The text's length in the pass in flight, before its model padded it to a multiple of attention_window (set by a
# pre-hook on the module that pads: LongformerModel, LEDEncoder)
_LENGTH: contextvars.ContextVar = contextvars.ContextVar("attention_viz_text_length", default=None)
HOOKED = "_attention_viz_length_hook"


def longformer_attention(module, config, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                         is_index_masked: torch.Tensor | None = None, is_index_global_attn: torch.Tensor | None = None,
                         is_global_attn: bool | None = None, output_attentions: bool = False):
    """LongformerSelfAttention.forward (LED's encoder's too) with its windowed softmax computed by our Eq. 1 over every
    key: hidden_states [B, P, D] -> (output [B, P, D],) (+ weights [B, P, H, P] when asked, 0 past the text, which
    its encoder turns [B, H, P, P]; + the global rows [B, H, G, P]). is_index_masked [B, P]: padding; is_index_global_attn [B, P]: the
    global tokens."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, attention_mask, is_index_masked, is_index_global_attn,
                                    is_global_attn, output_attentions)
    B, P, D = hidden_states.shape
    T = min(_LENGTH.get() or P, P)  # the text's positions; P − T pads its model added
    H, d, w = module.num_heads, module.head_dim, module.one_sided_attn_window_size
    x = hidden_states[:, :T]
    q, k, v = projected(x, None, (module.query, module.key, module.value), d)  # (B, H, T, d) each
    overall = is_index_global_attn[:, :T]  # (B, T): the global tokens
    if is_global_attn:  # a global row sees every key, through the global projections, beside the local rows' q, k, v
        q_g, k_g, v_g = projected(x, None, (module.query_global, module.key_global, module.value_global), d)
        row = overall[:, None, :, None]  # (B, 1, T, 1)
        q = torch.cat((q * ~row, q_g * row), -1)  # (B, H, T, 2d)
        k, v = torch.cat((k, k_g), -1), torch.cat((v, v_g), -1)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, padded(is_index_masked[:, :T]), scaling=d ** -0.5,
                             window=Window(w, overall if is_global_attn else None),
                             dropout=module.dropout if module.training else 0.0)  # (B, T, H, d or 2d), (B, H, T, T)
    if is_global_attn:  # each row's half: local rows' Σ p·v, global rows' Σ p·v_global
        output = torch.where(overall[:, :, None, None], output[..., d:], output[..., :d])
    out = hidden_states.new_zeros(B, P, D)
    out[:, :T] = output.reshape(B, T, D)
    if not output_attentions:
        return (out,)
    weights = torch.nn.functional.pad(weights, (0, P - T, 0, P - T))  # (B, H, P, P): its model cuts the pads' rows
    outputs = (out, weights.transpose(1, 2))  # (B, P, H, P): its encoder transposes it back
    if is_global_attn:
        G = int(overall.sum(-1).max())
        rows = torch.stack([torch.nn.functional.pad(weights[b][:, :T][:, overall[b]],
                                                    (0, 0, 0, G - int(overall[b].sum()))) for b in range(B)])
        outputs += (rows,)  # (B, H, G, P) as eager's: its encoder gives them [B, H, P, G]
    return outputs


def padded(padding: torch.Tensor) -> torch.Tensor | None:
    """The padding [B, T] (True = a pad) as a mask [B, 1, T, T] in which a pad sees nothing and is seen by none (as
    eager's rows of pads are 0); None where there is none, or the pass's padding switch is off."""
    if not kept("padding_mask") or not bool(padding.any()):
        return None
    return ~padding[:, None, None, :] & ~padding[:, None, :, None]


def led_decoder_attention(module, config, hidden_states: torch.Tensor, key_value_states: torch.Tensor | None = None,
                          cache=None, attention_mask: torch.Tensor | None = None, output_attentions: bool = False,
                          **kwargs):
    """LEDDecoderAttention.forward: BART's attention by our Eq. 1 (hub.routes_older.bart_attention) -> (output
    [B, Q, D], weights [B, H, Q, K], its cache)."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:
        return type(module).forward(module, hidden_states, key_value_states, cache, attention_mask,
                                    output_attentions, **kwargs)
    output, weights = bart_attention(module, config, hidden_states, key_value_states, cache, attention_mask,
                                     **kwargs)
    return output, weights, cache


def longt5_local_attention(module, config, hidden_states: torch.Tensor, mask: torch.Tensor | None = None,
                           position_bias: torch.Tensor | None = None, output_attentions: bool = False):
    """LongT5LocalAttention.forward (its encoder's) with softmax(QKᵀ + B) within its radius computed by our Eq. 1 over
    every key: hidden_states [B, T, D] -> (output [B, T, D], the position bias [1, H, T, T] its later layers reuse)
    (+ weights [B, H, T, T] when asked). Query i sees key j where |i − j| ≤ local_radius; B is T5's bucketed
    relative-position bias (its first layer's table, bidirectional), the factor on QKᵀ 1. mask [B, 1, blocks,
    block_len, 3·block_len] is its own (True = may attend): the padding is read off its diagonal."""
    if config._attn_implementation not in ALL_ATTENTION_FUNCTIONS:  # eager: transformers' own code
        return type(module).forward(module, hidden_states, mask, position_bias, output_attentions)
    B, T, _ = hidden_states.shape
    L = module.block_len
    q, k, v = projected(hidden_states, None, (module.q, module.k, module.v), module.key_value_proj_dim)  # (B, H, T, d)
    i = torch.arange(T, device=q.device)
    text = None if mask is None else mask[:, 0, :, :, L:2 * L].diagonal(dim1=-2, dim2=-1).reshape(B, -1)[:, :T]
    if position_bias is None:  # the first layer's: B[i, j] from the bucket of j − i, shared by the later layers
        if module.has_relative_attention_bias:
            buckets = module._relative_position_bucket(i[None] - i[:, None], bidirectional=not module.is_decoder,
                                                       num_buckets=module.relative_attention_num_buckets,
                                                       max_distance=module.relative_attention_max_distance)
            position_bias = module.relative_attention_bias(buckets).permute(2, 0, 1)[None]  # (1, H, T, T)
        else:
            position_bias = q.new_zeros(1, module.n_heads, T, T)
    attend = ALL_ATTENTION_FUNCTIONS[config._attn_implementation]
    output, weights = attend(module, q, k, v, None if text is None else padded(~text.bool()), scaling=1.0,
                             window=Window(L - 1), position_bias=position_bias,
                             dropout=module.dropout if module.training else 0.0)  # (B, T, H, d), (B, H, T, T)
    outputs = (module.o(output.reshape(B, T, -1)), position_bias)
    return outputs + (weights,) if output_attentions else outputs


def mark_lengths(model) -> None:
    """A pre-hook on each module that pads its text to a multiple of its window (LongformerModel, LEDEncoder): the
    text's length T, before padding, for the routed attentions of its pass (_LENGTH)."""
    for module in model.modules():
        if hasattr(module, "_pad_to_window_size") and not getattr(module, HOOKED, False):
            module.register_forward_pre_hook(_note_length, with_kwargs=True)
            module.register_forward_hook(lambda *_: _LENGTH.set(None) and None)  # after its pass: none (a hook's
            # answer would replace the output)
            setattr(module, HOOKED, True)


def _note_length(module, args: tuple, kwargs: dict) -> None:
    """The text's length from its ids or embeddings [B, T(, D)] (None: no change to the inputs)."""
    given = kwargs.get("input_ids", args[0] if args else None)
    if given is None:
        given = kwargs.get("inputs_embeds")
    _LENGTH.set(None if given is None else given.size(1))


def dense_windows(local: torch.Tensor, w: int, T: int, overall: torch.Tensor | None = None,
                  global_rows: torch.Tensor | None = None) -> torch.Tensor:
    """Longformer's eager weights in its own layout -> [B, H, T, T]: local [B, H, P, G + 2w + 1] (each row's weights
    on the G global keys, then on keys i − w ... i + w; a global row's all 0), overall [B, P] the global tokens,
    global_rows [B, H, G, P] (the global rows' weights)."""
    B, H, P, width = local.shape
    G = width - (2 * w + 1)
    dense = local.new_zeros(B, H, P, P + 2 * w)  # key j at column j + w
    columns = (torch.arange(P, device=local.device)[:, None] + torch.arange(2 * w + 1, device=local.device))
    dense.scatter_(-1, columns.expand(B, H, P, 2 * w + 1), local[..., G:])
    dense = dense[..., w:w + P].contiguous()
    if G and overall is not None:
        for b in range(B):
            where = overall[b].nonzero()[:, 0]  # (G_b,) the global tokens of this row
            dense[b][:, :, where] += local[b][..., :where.numel()]
            dense[b][:, where] = global_rows[b][:, :where.numel(), :P]
    return dense[:, :, :T, :T]


def dense_blocks(blocked: torch.Tensor, T: int) -> torch.Tensor:
    """LongT5's local eager weights [B, blocks, H, L, 3L] (block n's queries on blocks n − 1, n, n + 1) -> [B, H, T, T]."""
    B, n, H, L, _ = blocked.shape
    dense = blocked.new_zeros(B, H, n, L, (n + 2) * L)  # key j at column j + L
    for block in range(n):
        dense[:, :, block, :, block * L:(block + 3) * L] = blocked[:, block]
    return dense.reshape(B, H, n * L, (n + 2) * L)[:, :, :T, L:L + T]


def eager_weights(module, kwargs: dict, out, shape: torch.Size) -> torch.Tensor | None:
    """The weights [B, H, T, T] (shape: ours) a routed module's eager forward gave in a layout of its own
    (Longformer's: dense_windows; LongT5's local blocks: dense_blocks), or None for a module whose weights are in
    ours."""
    if type(module).__name__ == "LongT5LocalAttention" and isinstance(out, tuple) and len(out) > 2:
        return dense_blocks(out[2], shape[-1])
    if type(module).__name__ not in WINDOWED or not isinstance(out, tuple) or len(out) < 2:
        return None
    overall = kwargs.get("is_index_global_attn")
    return dense_windows(out[1].transpose(1, 2), module.one_sided_attn_window_size, shape[-1], overall,
                         out[2] if len(out) > 2 else None)


WINDOWED = ("LongformerSelfAttention", "LEDEncoderSelfAttention")  # eager weights in their own layout
