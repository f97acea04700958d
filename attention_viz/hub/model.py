"""A Hugging Face model run through our Eq. 1, with the same forward-argument switches as our Transformer.

    model = PretrainedTransformer(hf_model, tokenizer)        # or hub.load_pretrained("Helsinki-NLP/opus-mt-en-de")
    src = model.encode("Attention is all you need.")
    out, maps = model.greedy_decode(src.ids[None], max_new_tokens=20, scale="none")
    maps["decoder.5.cross_attn"]                              # [B, H, Q, K], as for our own models

Axes: B batch, S source positions, T decoder positions, V vocabulary, H heads, Q queries, K keys.
Layouts: an encoder-decoder model (Marian, BART) has all three kinds of map; an encoder-only model (BERT) only
`encoder.{i}.self_attn`; a decoder-only model (GPT-2, Llama) only `decoder.{i}.self_attn`, over the prompt and
what it wrote. Switches, as in core.model (one core.variation.Variation, variation=..., or its fields as keywords in
the public calls: forward, greedy_decode, head_outputs, value_flows, value_norms; the passes under them take the
Variation only, and build the heads' switches from it in one place, probes):
    scale         "sqrt_dk" (the model's own factor on QKᵀ, 1/√d_k in most models) | "none" | positive float
    causal_mask   the decoder's mask of future positions (off: every position sees every other)
    padding_mask  hide padded keys (the tokenizer's <pad>; the attention mask given)
    heads_off     {map key: [heads]} switched off before the model's W_O ("zero" or "mean"; core.ablation)
    position_bias the bias a model adds to its scaled QKᵀ (T5's relative positions; abilities.position_bias): off
                  takes it out, as transformers computes the model with that bias zeroed. What it adds is kept per
                  map key beside the maps (Recorded.biases)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from attention_viz.core.attention import Kernel, Scale
from attention_viz.core.maps import KINDS, AttentionMaps, InputAxis, MapKey, axis_of, in_order, kind_of
from attention_viz.core.protocol import Abilities, Passes
from attention_viz.core.trace import Traced
from attention_viz.core.trace import kept as trace_kept
from attention_viz.core.variation import PAPER, Variation, variation_of
from attention_viz.fast.attention import scaled_dot_product_attention as fast_attention
from attention_viz.hub.attention import IMPLEMENTATION, RECORDED, Pass, switched
from attention_viz.hub.decoding import greedy
from attention_viz.hub.families import Family, UnsupportedModelError, family_of, unscaled_note
from attention_viz.hub.placement import input_device, weight_of
from attention_viz.hub import positions as rules
from attention_viz.hub.proof import Fidelity, decoder_start, prove
from attention_viz.hub.routes import implement, route

KIND_OF_LAYOUT = {
    "encoder-decoder": tuple(KINDS),
    "encoder": ("encoder.self_attn",),
    "decoder": ("decoder.self_attn",),
}


@dataclass(frozen=True)
class Recorded(Traced):
    """One traced pass (core.trace.Traced) and its Pass, whose probes recorded the masks it applied, its factors on
    QKᵀ, the sinks' shares and (`biases`) the position bias each attention added (hub.attention.RECORDED)."""

    run: Pass
    biases = property(lambda self: self.run.biases)  # map key -> B [1 or B, H, Q or 1, K], where one was added
    # map key -> the score terms its attention sums before the mask and the softmax, each [B, H, Q, K]: DeBERTa's
    # {"c2c": QKᵀ·s, "c2p": content-to-position, "p2c": position-to-content} (c2p + p2c its `biases`)
    terms = property(lambda self: self.run.terms)

    @classmethod
    def of(cls, logits: torch.Tensor, run: Pass) -> Recorded:
        """A pass's logits and its Pass: its maps in our key order (every encoder layer, then each decoder layer's
        self and cross)."""
        maps = run.maps
        return cls(logits, AttentionMaps({key: maps[key] for key in in_order(maps)}),
                   trace_kept(run.trace), run)


@dataclass(frozen=True)
class Encoding:
    """A text as the model's tokenizer cuts it: ids (special tokens included) and the model's own pieces (a picture:
    its pixels and its tokens' labels)."""

    ids: torch.Tensor           # [S] long (a picture's pixel values [C, H, W], a recording's features [mels, frames])
    tokens: list[str]
    note: str = ""              # what reading it changed: a picture resized, a recording cut to the model's window


class PretrainedTransformer(Passes):
    """A transformers model whose every attention runs our Eq. 1 and records its map under our keys.

    Wrapping sets the model's attention implementation to ours (`config._attn_implementation`) and puts it in
    eval mode; without our switches it computes what its eager attention does. Never mutate a wrapped model that
    other users share.

    Args:
        model: a transformers PreTrainedModel whose attention goes through transformers' attention interface.
        tokenizer: its tokenizer (a transformers tokenizer); None for an image model.
        name: what the app calls it (default: the model's name_or_path).
        kernel: Eq. 1's implementation: attention_viz.fast's kernel, bit-identical to core's reference and no slower
            than transformers' eager attention (docs/real_models.md); use_kernel(core's) runs the reference itself.
        modality: an image model's hub.images.Patches (its image processor and patch grid): it reads pixel_values
            [B, C, H, W] where a text model reads ids, and its maps are over its special tokens and patches.

    Wrapping proves the model (hub.proof): a probe through our Eq. 1 and through its own eager attention, every map
    and the output compared; `fidelity` keeps the figures, and a model beyond float tolerance is refused
    (UnsupportedModelError, with them). The probe also finds its layout, map keys and each attention's W_O.

    `abilities` (Abilities) says what it can do: write text, fill masks, whether the causal mask applies, whether it
    adds a position bias (T5). `factor` is its own factor on QKᵀ (1/√d_k in most models, 1 in T5's) and
    `scaling_note` a sentence on the scale switch where that factor is 1 ("" otherwise).
    """

    pretrained = True  # read from a checkpoint with its own tokenizer (core.protocol)

    def __init__(self, model, tokenizer, name: str | None = None, kernel: Kernel = fast_attention, *,
                 modality=None) -> None:
        family = family_of(model.config)  # refusals known from the config alone
        self.model = model
        self.tokenizer = tokenizer
        self.modality = modality  # how a picture or a recording becomes tokens (hub.images.Patches, hub.speech.Frames); None: text
        self.kernel = kernel
        route(model)  # a family outside transformers' attention interface (Bloom's ALiBi) brought through it
        implement(model, IMPLEMENTATION)
        model.eval()
        try:
            proof = prove(model, family, kernel, modality)
        except UnsupportedModelError:
            raise
        except Exception as error:  # noqa: BLE001 - whatever its own code raises on the probe: refused, naming it
            first = (str(error).splitlines() or ["no message"])[0][:160]
            raise UnsupportedModelError(f"{family.name} could not be probed: its forward pass raised "
                                        f"{type(error).__name__} ({first}).") from error
        self.family: Family = proof.family
        self.fidelity: Fidelity = proof.fidelity
        self.linear_head = proof.linear_head  # buffers added to lm_head(h) when the logits are exactly that, or None
        self.name = name or getattr(model.config, "name_or_path", "") or self.family.name
        modules = dict(model.named_modules())
        runs: dict[int, list[str]] = {}  # a module shared by layers (ALBERT) runs once per layer: a key per run
        for module_name, key in self.family.keys:
            runs.setdefault(id(modules[module_name]), []).append(key)
        self._keys = {module: keys[0] if len(keys) == 1 else tuple(keys) for module, keys in runs.items()}
        self._all_keys = [key for _, key in self.family.keys]  # every map key, in call order
        self._prescaled = {id(modules[module_name]): c for module_name, c in proof.prescaled.items()}
        self._w_o = {key: (modules[name], transposed) for key, name, transposed in self.family.w_o}
        self.kinds = KIND_OF_LAYOUT[self.family.layout]
        self.layers = {kind: sum(1 for key in self._all_keys if kind_of(key) == kind) for kind in self.kinds}
        if not all(self.layers.values()):
            absent = [kind for kind, n in self.layers.items() if not n]
            raise UnsupportedModelError(f"{self.family.name} is an encoder-decoder model without {absent[0]} "
                                        "attention; the views need every kind.")
        config = model.config
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        first = proof.calls[0]
        self.n_heads = int(first.query[1])
        self.d_model = int(getattr(text_config, "hidden_size", 0) or getattr(text_config, "d_model", 0)
                           or first.output.size(-2) * first.output.size(-1))
        self.d_k = int(first.query[-1])
        self.vocab_size = int(text_config.vocab_size) if getattr(text_config, "vocab_size", None) else None  # images: none
        head = model.get_output_embeddings() is not None  # the language-model or masked-LM head: logits over V
        writes = head and self.layout != "encoder"
        self.abilities = Abilities(writes_text=writes, fills_masks=head and self.layout == "encoder",
                                   causal=self.layout != "encoder", d_k_fixed=True,
                                   scored_on="text" if writes else None,
                                   position_bias="position_bias" in self.fidelity.honoured)
        self.factor = proof.factor  # the model's own factor on QKᵀ: 1/√d_k in most models, 1 in T5
        self.scaling_note = unscaled_note(self.family, self.factor, self.d_k)

    def use_kernel(self, kernel: Kernel) -> PretrainedTransformer:
        """Run Eq. 1 with this kernel (attention_viz.fast's, the default, or core's reference); returns self."""
        self.kernel = kernel
        return self

    # -- facts

    @property
    def layout(self) -> str:
        return self.family.layout

    @property
    def map_keys(self) -> list[str]:
        """Every attention's map key, in our order (encoder layers, then each decoder layer's self, cross)."""
        return in_order(self._all_keys)

    def input_axis(self, tokens: Sequence[str] = ()) -> InputAxis:
        """What it reads, as an axis (core.protocol): its modality's patches or frames, else a text's `tokens`."""
        return self.modality.axis() if self.modality is not None else axis_of(tokens)

    @property
    def device(self) -> torch.device:
        """Where inputs go: the device of the input embedding (layers placed by a device map may be elsewhere)."""
        return input_device(self.model)

    @property
    def pad_id(self) -> int | None:
        return self.tokenizer.pad_token_id if self.tokenizer is not None else None

    def n_layers(self, kind: str) -> int:
        """Layers with attention of this kind (0 for a kind the model does not have)."""
        MapKey.of(kind, 0)  # KeyError for an unknown kind
        return self.layers.get(kind, 0)

    positions = property(rules.positions)  # the most tokens it reads at once, None where its config names none
    room = rules.room  # the most tokens a greedy decode can write after an input of `tokens`
    check_positions = rules.check  # TextTooLongError unless `tokens` fit its positions

    @property
    def start_id(self) -> int:
        """The decoder's first input token (encoder-decoder models; a model of one stack has none: its decoder
        input, if any, is the text itself)."""
        if self.layout != "encoder-decoder":
            raise ValueError(f"{self.name} is {'an encoder' if self.layout == 'encoder' else 'a decoder'}-only model: "
                             "it has no decoder start token (give its text as input_ids alone).")
        start = decoder_start(self.model)
        if start is None:
            raise UnsupportedModelError(f"{self.name} has no decoder_start_token_id.")
        return int(start)

    @property
    def eos_ids(self) -> set[int]:
        """Tokens that end a greedy decode."""
        generation = getattr(self.model, "generation_config", None)  # a model without a head has none
        eos = generation.eos_token_id if generation is not None else None
        if eos is None and self.tokenizer is not None:  # a picture's model has no tokenizer
            eos = self.tokenizer.eos_token_id
        return set(eos if isinstance(eos, list) else [] if eos is None else [eos])

    # -- text

    def encode(self, text) -> Encoding:
        """The text's ids as the model takes them (special tokens added as the tokenizer adds them) and its pieces;
        an image model's: a picture's pixels [C, H, W] as its image processor gives them (hub.images.read_image reads
        it: a PIL image, an array, a path or a file's bytes) and its tokens' labels (specials, then the patches); a
        speech model's: a recording's log-mel features [mels, frames] (hub.speech.read_audio: a path, a file's bytes,
        or (samples, rate)) and the encoder positions' times; `note` says what reading it changed."""
        if self.modality is not None:
            values, note = self.modality.read(text)
            return Encoding(values[0], self.modality.tokens(), note)
        ids = self.tokenizer(text, return_tensors="pt")["input_ids"][0]  # (S,)
        return Encoding(ids, self.pieces(ids.tolist()))

    def pieces(self, ids: list[int]) -> list[str]:
        """The model's own tokens of ids (subword pieces, special tokens by name)."""
        return [str(t) for t in self.tokenizer.convert_ids_to_tokens(ids)]

    def decode(self, ids: list[int]) -> str:
        """Ids as text, special tokens left out."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    # -- passes

    @staticmethod
    def encoder_output(states: torch.Tensor):
        """Encoder states [B, S, D] as the encoder's output the decoder reads (encoder_outputs=): a mixture of
        experts' (NLLB-MoE) reads its router logits off it by name, so a plain tuple will not do; the others take it
        whole or by its first field."""
        from transformers.modeling_outputs import MoEModelOutput

        return MoEModelOutput(last_hidden_state=states)

    def padding_of(self, ids: torch.Tensor) -> torch.Tensor:
        """The 2D attention mask [B, S] of ids: 1 where a token is not the tokenizer's <pad>."""
        if self.pad_id is None:
            return torch.ones_like(ids)
        return (ids != self.pad_id).long()

    def switched(self, variation: Variation = PAPER, *, head_means=None, gates=None, record: bool = False,
                 keep: Collection[str] = (), at: Collection[str] | None = None):
        """A `with` block in which the transformers model's own calls run our Eq. 1 under these switches, its probes
        recording the maps (hub.attention.RECORDED) into the Pass it yields when record=True and keeping core.trace's
        points `keep` at the keys `at`: every pass of the model, or of a part of it, runs in one."""
        probes = self.probes(variation, head_means, gates, keep, at, RECORDED if record else ())
        return switched(Pass(variation, self._keys, probes, self.kernel, prescaled=self._prescaled))

    def traced(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor | None = None, *,
               variation: Variation = PAPER, keep: Collection[str] = (), at: Collection[str] | None = None,
               head_means=None, gates=None, attention_mask: torch.Tensor | None = None) -> Recorded:
        """forward under `variation` (its heads off with head_means, or per-row gates), keeping core.trace's points
        `keep` at the map keys `at` (None: every key), with the masks it applied, its factors on QKᵀ and the sinks'
        shares (core.protocol)."""
        context = self.switched(variation_of(variation), head_means=head_means, gates=gates, record=True, keep=keep,
                                at=at)
        kwargs = self.model_inputs(input_ids, decoder_input_ids, attention_mask)
        with context as run:
            outputs = self.model(**kwargs)
        logits = outputs.logits if getattr(outputs, "logits", None) is not None else outputs.last_hidden_state
        return Recorded.of(logits, run)

    def step_maps(self, input_ids: torch.Tensor | None, decoder_input_ids: torch.Tensor, *, variation: Variation = PAPER,
                  head_means: dict[str, torch.Tensor] | None = None) -> list[dict[str, np.ndarray]]:
        """The decoder's maps at every step of a decode (a batch of one) whose decoder input ended as
        decoder_input_ids [1, T]: step t is a pass on its first t + 1 tokens (after input_ids [1, S] for an
        encoder-decoder; None for a decoder alone), key -> [H, t + 1, K] for each decoder.* key (core's
        Transformer.step_maps gives the same steps as AttentionMaps with a batch axis). Without the causal mask,
        every earlier row changes as each new token arrives."""
        steps = []
        for t in range(decoder_input_ids.size(1)):
            prefix = decoder_input_ids[:, : t + 1]  # (1, t + 1)
            args = (input_ids, prefix) if self.layout == "encoder-decoder" else (prefix,)
            maps = self.traced(*args, variation=variation, head_means=head_means).maps.to_numpy()
            steps.append({key: value[0] for key, value in maps.items() if MapKey.parse(key).stack == "decoder"})
        return steps

    def model_inputs(self, input_ids, decoder_input_ids, attention_mask) -> dict:
        """The keyword arguments of one full pass of the model (attention_mask defaults to padding_of); a model of
        another modality takes what its modality reads in place of ids: an image model its pixel_values
        [B, C, H, W], a speech model its input_features [B, mels, frames] (model.encode(...).ids[None])."""
        if self.modality is not None:
            self.modality.check(input_ids)
            if attention_mask is not None:
                raise ValueError(f"{self.family.name} reads {self.modality.input_name} whole: give no attention_mask.")
            kwargs = {self.modality.input_name: input_ids}
        else:
            self.check_positions(input_ids.size(-1))
            attention_mask = self.padding_of(input_ids) if attention_mask is None else attention_mask
            kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.layout == "encoder-decoder":
            if decoder_input_ids is None:
                raise ValueError(f"{self.family.name} is an encoder-decoder model: give decoder_input_ids.")
            self.check_positions(decoder_input_ids.size(-1), "The decoder's input")
            kwargs["decoder_input_ids"] = decoder_input_ids
        elif decoder_input_ids is not None:
            raise ValueError(f"{self.family.name} has no decoder input: give input_ids only.")
        if self.layout != "encoder":
            kwargs["use_cache"] = False
        return kwargs

    def w_o(self, key: str) -> torch.Tensor:
        """The W_O of the attention with this map key, as [D, H·d] (the columns that head h's output meets): the
        linear layer the probe found reading its output."""
        module, transposed = self._w_o[key]
        weight = weight_of(module)  # an offloaded layer's read where it is kept
        if weight.dim() == 3:  # a kernel-1 Conv1d over channels (SqueezeBERT's), [D, H·d/g, 1]: g blocks on the diagonal
            weight = torch.block_diag(*weight.squeeze(-1).chunk(module.groups, dim=0))
        return weight.T if transposed else weight

    @torch.no_grad()
    def greedy_decode(self, input_ids: torch.Tensor, max_new_tokens: int, *, attention_mask: torch.Tensor | None = None,
                      scale: Scale = "sqrt_dk", causal_mask: bool = True, padding_mask: bool = True,
                      reuse_keys: bool = True, heads_off: dict[str, list[int]] | None = None, ablation: str = "zero",
                      head_means: dict[str, torch.Tensor] | None = None, variation: Variation | None = None,
                      position_bias: bool = True) -> tuple[torch.Tensor, AttentionMaps]:
        """core.protocol's greedy decoding -> (tokens [B, n], maps of the last step), as `generate(num_beams=1,
        do_sample=False)` with the model's generation config (its banned tokens, forced first and last tokens, minimum
        length and repetition rules); a finished row is padded with <pad> (else its end token). A decoder-only model's
        decoder row t is the step that wrote token t - len(prompt) + 1.
        reuse_keys: under the causal mask, each step runs the newest position only, keeping the earlier ones' keys and
        values (transformers' cache); without the causal mask every step reruns the whole decoder.
        A decoder-only model's positions come from the attention mask, as generate's (a left-padded row starts at 0;
        forward keeps the model's own default, 0 at the first column). A model that writes no text (an encoder, a
        checkpoint without its output head: abilities.writes_text) is refused: use forward.
        """
        variation = variation_of(variation, scale, causal_mask, padding_mask, heads_off, ablation, position_bias)
        written, recorded = self.greedy_pass(input_ids, max_new_tokens, variation=variation,
                                             attention_mask=attention_mask, reuse_keys=reuse_keys,
                                             head_means=head_means)
        return written, recorded.maps

    @torch.no_grad()
    def greedy_pass(self, input_ids: torch.Tensor, max_new_tokens: int, *, variation: Variation = PAPER,
                    attention_mask: torch.Tensor | None = None, reuse_keys: bool = True,
                    head_means: dict[str, torch.Tensor] | None = None, values: bool = False,
                    encoder_maps: bool = True) -> tuple[torch.Tensor, Recorded]:
        """greedy_decode under `variation` (its heads off, with head_means for mean ablation, at every step), with
        everything its last full pass recorded (the encoder's maps and masks included, and with values=True every
        attention's values, for norms_of); encoder_maps=False: the decoder's maps only (the encoder's, of a
        recording, by regions from long_run)."""
        if not self.abilities.writes_text:
            what = "an encoder only" if self.layout == "encoder" else "saved without its output head"
            raise ValueError(f"{self.family.name} is {what}: it does not write text; use forward.")
        if self.modality is not None:
            self.modality.check(input_ids)
        else:
            self.check_positions(input_ids.size(-1))
        rules.check_room(self, input_ids.size(-1), max_new_tokens)
        written, final, logits = greedy(self, input_ids, max_new_tokens, attention_mask=attention_mask,
                                        variation=variation, reuse_keys=reuse_keys, head_means=head_means,
                                        values=values, encoder_maps=encoder_maps)
        return written, Recorded.of(logits, final)

    def __repr__(self) -> str:
        layers = ", ".join(f"{kind}: {n}" for kind, n in self.layers.items())
        return f"PretrainedTransformer({self.name!r}, {self.family.name}, h={self.n_heads}, d_k={self.d_k}, {layers})"

    def long_run(self, ids_or_text, variation: Variation | None = None, *, head_means=None, rows: int | None = None,
                 keep: str = "disk", last_logits: bool = False, most: int | None = None, warn: bool = True,
                 **switches):
        """One pass at length (hub.long): per-head summaries, and any map's region or overview recomputed exactly
        from the q and k it kept; the switches as forward's (keywords or variation). A text, or ids [T] / [1, T]; a
        speech (image) model's recording (picture) or its features (pixels), read whole: Whisper's by its encoder.
        last_logits: logits of the last position only (where the model takes logits_to_keep).

        A text longer than the model's positions (or than `most` tokens) is read up to them: the run's `length` is
        the tokens read, `given` the text's, and `note` the sentence that says so ("Read the first 512 of the
        text's 1,122 tokens: ..."; "" when every token was read), also warned (hub.long.TextCutWarning) unless
        warn=False."""
        from attention_viz.hub import long

        variation = variation_of(variation, **switches)
        if self.abilities.position_bias:  # before any pass: MPT's model code would fail on the long pass's masks
            raise long.LongRunError(long.BIAS_REFUSED)
        return long.long_run(self, self._keys, ids_or_text, variation, self.probes(variation, head_means,
                                                                                   records=long.RECORDS),
                             rows or long.ROWS, keep, last_logits, self._prescaled, most=most, warn=warn)

