"""The encoder-decoder Transformer (§3.1, Figure 1): one forward pass returns the logits and every attention map,
recorded by its probes (core.trace, RECORDS) as a real model's are.

Axes: B batch, S source positions, T target positions, D d_model, V vocabulary.
Inference-time switches are arguments of the forward pass, never state on the modules: one core.variation.Variation
(variation=...), or its fields as keywords (a thin front that builds it):
    scale         "sqrt_dk" | "none" | positive float, for every attention (see attention.scale_factor)
    causal_mask   the decoder self-attention's mask of future positions (§3.2.3)
    padding_mask  hide <pad> keys in every attention
    heads_off     {map key: [heads]} switched off before W_O, by `ablation` "zero" or "mean" (with `head_means`);
                  see core.ablation
"""

from __future__ import annotations

import contextlib
import functools
import numbers
from collections.abc import Collection, Sequence

import torch
from torch import nn

from attention_viz.core.attention import (SCALE_MODES, Kernel, MultiHeadAttention, Scale, attention_masks, source_mask,
                                          target_mask)
from attention_viz.core.attention import padding_mask as make_padding_mask
from attention_viz.core.config import TransformerConfig
from attention_viz.core.layers import DecoderLayer, Embeddings, EncoderLayer, positional_encoding
from attention_viz.core.maps import AttentionMaps, InputAxis, MapKey, axis_of, keys_of, kind_key, map_key
from attention_viz.core.protocol import Abilities, Passes
from attention_viz.core.trace import Probe, Stop, Trace, Traced, recorded
from attention_viz.core.trace import kept as trace_kept
from attention_viz.core.variation import PAPER, Variation, variation_of

RECORDS = ("weights",)  # what our model's pass records for itself at every attention (core.trace): its map


class Encoder(nn.Module):
    """A stack of N encoder layers (and an optional final LayerNorm, which nn.Transformer has)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.layers = nn.ModuleList(
            EncoderLayer(c.d_model, c.n_heads, c.d_k, c.d_v, c.d_ff, c.dropout, c.layer_norm_eps, c.compatibility)
            for _ in range(c.n_encoder_layers)
        )
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.encoder_norm else None

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, variation: Variation = PAPER,
        probes: Trace | None = None,
    ) -> torch.Tensor:
        """x [B, S, D] -> memory [B, S, D]; each layer's weights [B, H, S, S] recorded by its probe."""
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, variation, encoder_probe(probes, i))
        return self.norm(x) if self.norm is not None else x


class Decoder(nn.Module):
    """A stack of N decoder layers (and an optional final LayerNorm)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        c = config
        self.layers = nn.ModuleList(
            DecoderLayer(c.d_model, c.n_heads, c.d_k, c.d_v, c.d_ff, c.dropout, c.layer_norm_eps, c.compatibility)
            for _ in range(c.n_decoder_layers)
        )
        self.norm = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps) if c.decoder_norm else None

    def forward(
        self,
        y: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        cross_mask: torch.Tensor | None = None,
        variation: Variation = PAPER,
        probes: Trace | None = None,
    ) -> torch.Tensor:
        """y [B, T, D], memory [B, S, D] -> y [B, T, D]; each layer's self [B, H, T, T] and cross weights
        [B, H, T, S] recorded by its probes."""
        for i, layer in enumerate(self.layers):
            y = layer(y, memory, self_mask, cross_mask, variation, *decoder_probes(probes, i))
        return self.norm(y) if self.norm is not None else y


class Transformer(Passes, nn.Module):
    """The paper's encoder-decoder model; `forward` returns (logits, AttentionMaps) (core.protocol.Passes: forward,
    head_outputs, value_norms, value_flows over its traced pass)."""

    pretrained = False  # ours: our characters, no checkpoint of the Hub (core.protocol)

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embed = Embeddings(config.vocab_size, config.d_model)
        self.tgt_embed = self.src_embed if config.share_embeddings else Embeddings(config.vocab_size, config.d_model)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        self.generator = nn.Linear(config.d_model, config.vocab_size)  # the pre-softmax projection
        if config.share_embeddings:
            self.generator.weight = self.src_embed.lookup.weight
        self.dropout = nn.Dropout(config.dropout)
        self._keys = keys_of(config.n_encoder_layers, config.n_decoder_layers)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        if config.init == "unit_qk":
            for module in self.modules():
                if isinstance(module, MultiHeadAttention):
                    module.init_unit_qk()

    def use_kernel(self, kernel: Kernel) -> "Transformer":
        """Run Eq. 1 in every attention with `kernel` (e.g. attention_viz.fast's, bit-identical); returns self."""
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.kernel = kernel
        return self

    def _embed(self, embed: Embeddings, ids: torch.Tensor) -> torch.Tensor:
        """ids [B, T] -> embeddings + positional encoding, with dropout (§5.4) [B, T, D]."""
        x = embed(ids)
        return self.dropout(x + positional_encoding(ids.size(1), self.config.d_model, ids.device))

    @property
    def map_keys(self) -> list[str]:
        """Every attention's map key, in our order (encoder layers, then each decoder layer's self, cross)."""
        return list(self._keys)

    def input_axis(self, tokens: Sequence[str] = ()) -> InputAxis:
        """What it reads, as an axis (core.protocol): a text's tokens, our characters."""
        return axis_of(tokens)

    @property
    def start_id(self) -> int:
        """The decoder's first input token (<bos>): greedy decoding starts from it (core.protocol)."""
        return self.config.bos_id

    @property
    def eos_ids(self) -> set[int]:
        """Tokens that end a greedy decode (<eos>)."""
        return {self.config.eos_id}

    @property
    def abilities(self) -> Abilities:
        """It writes text, has a causal mask, and scales QKᵀ unless its attention is additive."""
        additive = self.config.compatibility == "additive"
        return Abilities(writes_text=True, fills_masks=False, causal=True, compatibility=self.config.compatibility,
                         scalings=() if additive else SCALE_MODES)

    n_heads = property(lambda self: self.config.n_heads)

    def w_o(self, key: str) -> torch.Tensor:
        """W_O [D, H·d_v] of the attention with this map key (the columns that head h's output meets)."""
        key = MapKey.parse(key)
        return self.attention_module(key.kind, key.layer).out_proj.weight

    def traced(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
               variation: Variation = PAPER, keep: Collection[str] = (), at: Collection[str] | None = None,
               head_means=None, gates=None) -> Traced:
        """One pass of src [B, S] and tgt [B, T] under `variation` (core.protocol): logits [B, T, V], every map (its
        probes record the weights) and what the probes kept (core.trace's points `keep` at the map keys `at`, None:
        every key)."""
        if decoder_input_ids is None:
            raise ValueError("our Transformer is an encoder-decoder model: give decoder_input_ids (tgt)")
        variation = variation_of(variation)
        probes = self.probes(variation, head_means, gates, keep, at, RECORDS)
        logits = self._pass(input_ids, decoder_input_ids, variation, probes)
        return Traced(logits, AttentionMaps(recorded(probes, "weights")), trace_kept(probes))

    def _pass(self, src: torch.Tensor, tgt: torch.Tensor, variation: Variation, probes: Trace | None) -> torch.Tensor:
        """One pass of src [B, S] and tgt [B, T] under `variation` with its probes -> logits [B, T, V]."""
        masks = attention_masks(src, tgt, self.config.pad_id, variation.causal_mask, variation.padding_mask)
        memory = self.encoder(self._embed(self.src_embed, src), masks["encoder.self_attn"], variation, probes)
        y = self.decoder(self._embed(self.tgt_embed, tgt), memory, masks["decoder.self_attn"],
                         masks["decoder.cross_attn"], variation, probes)
        return self.generator(y)  # (B, T, V)

    def encode(self, src: torch.Tensor, variation: Variation = PAPER, probes: Trace | None = None
               ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src [B, S] -> (memory [B, S, D], source mask [B, 1, 1, S] or None); each layer's weights recorded by the
        probes of the pass (core.trace), built once by the caller (probes(variation, ...))."""
        src_mask = source_mask(src, self.config.pad_id, variation.padding_mask)  # (B, 1, 1, S) or None
        return self.encoder(self._embed(self.src_embed, src), src_mask, variation, probes), src_mask

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor | None,
               variation: Variation = PAPER, probes: Trace | None = None) -> torch.Tensor:
        """tgt [B, T] -> logits [B, T, V]; the decoder's self and cross weights recorded by the probes."""
        tgt_mask = target_mask(tgt, self.config.pad_id, variation.causal_mask, variation.padding_mask)
        # (T, T), (B, 1, [1|T], T) or None
        return self.generator(self.decoder(self._embed(self.tgt_embed, tgt), memory, tgt_mask, src_mask, variation,
                                           probes))

    def attention_module(self, kind: str, layer: int) -> MultiHeadAttention:
        """The MultiHeadAttention behind kind ("encoder.self_attn", ...) and layer, i.e. behind map kind_key(kind, layer)."""
        key = MapKey.of(kind, layer)
        layers = self.encoder.layers if key.stack == "encoder" else self.decoder.layers
        if not 0 <= layer < len(layers):
            raise IndexError(f"{key.stack} layer {layer} does not exist; the model has {len(layers)}")
        return getattr(layers[layer], key.name)

    def attention_inputs(
        self, src: torch.Tensor, tgt: torch.Tensor, kind: str, layer: int, *, scale: Scale = "sqrt_dk",
        causal_mask: bool = True, padding_mask: bool = True, heads_off: dict[str, list[int]] | None = None,
        ablation: str = "zero", head_means: dict[str, torch.Tensor] | None = None, variation: Variation | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(query [B, Q, D], key [B, K, D], value [B, K, D], mask) that attention_module(kind, layer) receives in
        forward(src, tgt, ...) with the same switches (heads off in the layers below included); mask is forward's
        (broadcastable to [B, H, Q, K], or None).

        The "inputs" point of one traced pass (core.trace), which stops there. With the module's `project` and `attention_steps`
        this recomputes Eq. 1's intermediates of one head (the weights are forward's map; eval mode, no dropout).
        """
        self.attention_module(kind, layer)  # checks kind and layer
        variation = variation_of(variation, scale, causal_mask, padding_mask, heads_off, ablation)
        key = kind_key(kind, layer)
        probes = self.probes(variation, head_means, keep=("inputs",), at=(key,))
        probes[key].stop = True
        with contextlib.suppress(Stop):  # the pass ends at those inputs: nothing after them is run
            self._pass(src, tgt, variation, probes)
        return probes[key].kept["inputs"]

    @torch.no_grad()
    def greedy_decode(
        self,
        src: torch.Tensor,
        max_new_tokens: int,
        *,
        scale: Scale = "sqrt_dk",
        causal_mask: bool = True,
        padding_mask: bool = True,
        reuse_keys: bool = True,
        heads_off: dict[str, list[int]] | None = None,
        ablation: str = "zero",
        head_means: dict[str, torch.Tensor] | None = None,
        gates: dict[str, torch.Tensor] | None = None,
        variation: Variation | None = None,
        value_norms: dict[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, AttentionMaps]:
        """core.protocol's greedy decoding, from <bos> to <eos> (start_id, eos_ids): (tokens [B, n], maps of the last
        step); a row that has emitted <eos> is padded with pad_id after it. value_norms: a dict to fill with
        ‖v_j^h W_O^h‖ per map key [B, H, K] of the pass the maps come from (value_norms of <bos> + tokens but the last,
        without a second pass). heads_off or gates (with ablation and head_means) switch heads off at every step, as
        in forward; gates of shape [B, H] give each row its own heads.

        reuse_keys: under the causal mask, each step runs the decoder on the new position only, keeping every
        layer's self-attention keys and values and the memory's cross-attention ones (O(n) instead of O(n²));
        the maps then come from one full pass over the decoder input, as the last step of the plain loop
        computes them. Without the causal mask earlier positions see later ones, so every step reruns them all.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a whole number of at least 1, got {max_new_tokens!r}")
        variation = variation_of(variation, scale, causal_mask, padding_mask, heads_off, ablation)
        probes = self.probes(variation, head_means, gates)  # the steps': they record nothing
        kept = self.probes(variation, head_means, gates, ("v",) if value_norms is not None else (), records=RECORDS)
        memory, src_mask = self.encode(src, variation, kept)
        B = src.size(0)
        tgt = torch.full((B, 1), self.start_id, dtype=torch.long, device=src.device)  # (B, 1)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)

        def append(logits: torch.Tensor) -> bool:
            """Append each row's most likely next token (pad once the row is done); True when every row is done."""
            nonlocal tgt, done
            next_token = logits.argmax(-1).masked_fill(done, self.config.pad_id)  # (B,)
            tgt = torch.cat([tgt, next_token[:, None]], dim=1)  # (B, t + 1)
            done = done | (next_token == self.config.eos_id)
            return bool(done.all())

        if reuse_keys and variation.causal_mask:
            memory_kv = [layer.cross_attn.project_keys_values(memory, memory) for layer in self.decoder.layers]
            past: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.decoder.layers)
            pe = positional_encoding(max_new_tokens, self.config.d_model, src.device)  # (max_new_tokens, D)
            for t in range(max_new_tokens):
                y = self.dropout(self.tgt_embed(tgt[:, -1:]) + pe[t])  # (B, 1, D): the newest position only
                # the last query row of decode's self mask: <pad> keys hidden (an untrained model may emit <pad>)
                self_mask = make_padding_mask(tgt, self.config.pad_id) if variation.padding_mask else None
                # (B, 1, 1, t + 1)
                for i, layer in enumerate(self.decoder.layers):
                    y, past[i] = layer.step(y, memory_kv[i], past[i], src_mask, variation, self_mask,
                                            *decoder_probes(probes, i))
                if self.decoder.norm is not None:
                    y = self.decoder.norm(y)
                if append(self.generator(y[:, -1])):
                    break
            self.decode(tgt[:, :-1], memory, src_mask, variation, kept)
            return tgt[:, 1:], self.recorded_maps(kept, value_norms)

        for _ in range(max_new_tokens):  # the last pass's records are the maps' (its decoder input is tgt but the last)
            if append(self.decode(tgt, memory, src_mask, variation, kept)[:, -1]):
                break
        return tgt[:, 1:], self.recorded_maps(kept, value_norms)

    def recorded_maps(self, probes: Trace, value_norms: dict[str, torch.Tensor] | None = None) -> AttentionMaps:
        """The maps the probes of a pass recorded (RECORDS), in our key order; value_norms filled (when a dict) from
        the values they kept ("v")."""
        if value_norms is not None:
            value_norms.update(self.norms_of(trace_kept(probes)))
        return AttentionMaps(recorded(probes, "weights"))

    @torch.no_grad()
    def step_maps(
        self, src: torch.Tensor, tgt: torch.Tensor, scale: Scale = "sqrt_dk", causal_mask: bool = True,
        padding_mask: bool = True, heads_off: dict[str, list[int]] | None = None, ablation: str = "zero",
        head_means: dict[str, torch.Tensor] | None = None, *, variation: Variation | None = None,
    ) -> list[AttentionMaps]:
        """The decoder's maps at every step of a greedy decode whose decoder input ended as tgt [B, T] (<bos> + output
        but its last token): step t runs the decoder on tgt[:, :t + 1] and writes token t, so its maps have t + 1
        query rows, decoder.{i}.self_attn [B, H, t + 1, t + 1] and decoder.{i}.cross_attn [B, H, t + 1, S].

        Under the causal mask, step t's rows are rows 0..t of the last step's maps (a row sees only earlier
        positions, so later ones never change it); without it, every earlier row changes as each new token arrives.
        """
        variation = variation_of(variation, scale, causal_mask, padding_mask, heads_off, ablation)
        probes = self.probes(variation, head_means, records=RECORDS)
        memory, src_mask = self.encode(src, variation, probes)
        steps = []
        for t in range(tgt.size(1)):
            self.decode(tgt[:, : t + 1], memory, src_mask, variation, probes)
            steps.append(AttentionMaps({key: w for key, w in recorded(probes, "weights").items()
                                        if MapKey.parse(key).stack == "decoder"}))
        return steps


@functools.cache
def layer_keys(stack: str, layer: int) -> tuple[str, ...]:
    """The map keys of one layer's attentions, made once: an encoder layer's (self), a decoder layer's (self, cross)."""
    return tuple(map_key(stack, layer, name) for name in ("self_attn", "cross_attn")[:1 if stack == "encoder" else 2])


def encoder_probe(probes: Trace | None, layer: int) -> Probe | None:
    """The self-attention's probe of one encoder layer."""
    return probes.get(layer_keys("encoder", layer)[0]) if probes else None


def decoder_probes(probes: Trace | None, layer: int) -> tuple[Probe | None, Probe | None]:
    """(self-attention's, cross-attention's) probe of one decoder layer."""
    if not probes:
        return None, None
    self_key, cross_key = layer_keys("decoder", layer)
    return probes.get(self_key), probes.get(cross_key)

