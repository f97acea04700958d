"""One text through a real model, as the views need it: tokens, output, every map and the masks it applied (a
picture or a recording through a model of that modality: run_media).

The same shape as the app's runs of our own models (service.runs.Run): the source is what the encoder reads,
the target is the decoder's input of the last step (its start token, or the prompt, then every written token
but the last), and each map is [H, Q, K] for batch element 0.
    encoder-decoder  source = the text's tokens (+ pads); target = start + written[:-1]
    encoder only     source = the text's tokens (+ pads); no target; the output fills the text's mask tokens
    decoder only     no source; target = the prompt + written[:-1]
A checkpoint saved without its output head writes nothing: one pass, the text as its source (an encoder-decoder's
target its start token alone) or, for a decoder only, as its target.

Axes: H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attention_viz.core.maps import AttentionMaps, kind_of
from attention_viz.core.model import PAPER
from attention_viz.core.variation import Variation
from attention_viz.hub.model import PretrainedTransformer


@dataclass(frozen=True)
class TextRun:
    """What one run of a real model gives the views."""

    src_ids: tuple[int, ...]
    tgt_ids: tuple[int, ...]
    src_tokens: tuple[str, ...]
    tgt_tokens: tuple[str, ...]
    written: tuple[str, ...]            # the tokens written, the end token included when emitted
    written_ids: tuple[int, ...]
    output: str                         # the written text, special tokens left out
    finished: bool                      # an end token was written (always True for an encoder)
    maps: dict[str, np.ndarray] = field(repr=False)   # key -> [H, Q, K] float32
    masks: dict[str, np.ndarray] = field(repr=False)  # kind -> [Q, K] bool, True = may attend, as applied
    notes: tuple[str, ...] = ()
    norms: dict[str, np.ndarray] | None = field(default=None, repr=False)  # with values=True: key -> ‖v W_O‖ [H, K]
    biases: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # key -> the position bias B [H, Q, K]
                                        # float32 it added to its scaled QKᵀ (T5, ALiBi; where it adds one)


def dense_masks(maps: AttentionMaps, masks: dict[str, torch.Tensor | None]) -> dict[str, np.ndarray]:
    """Kind -> [Q, K] bool of batch element 0: the mask layer 0 of each kind applied (all True where None)."""
    dense = {}
    for key, weights in maps.items():
        kind = kind_of(key)
        if kind in dense:
            continue
        Q, K = weights.shape[-2:]
        mask = masks.get(key)
        full = torch.ones(Q, K, dtype=torch.bool) if mask is None else torch.broadcast_to(
            mask.detach().cpu(), (weights.size(0), 1, Q, K))[0, 0]
        dense[kind] = full.numpy().copy()
    return dense


def numpy_biases(maps: AttentionMaps, biases: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Key -> the position bias [H, Q, K] float32 of batch element 0, as wide as its map (ALiBi's one row, the same
    for every query, repeated)."""
    out = {}
    for key, bias in biases.items():
        H, Q, K = maps[key].shape[1:]
        row = bias[0].detach().float().cpu()  # (H, Q or 1, K)
        out[key] = torch.broadcast_to(row, (H, Q, K)).numpy().copy()
    return out


def numpy_maps(maps: AttentionMaps) -> dict[str, np.ndarray]:
    """Key -> [H, Q, K] float32 of batch element 0."""
    return {key: value[0] for key, value in maps.to_numpy().items()}


def source_ids(model: PretrainedTransformer, text: str, pad_tokens: int) -> tuple[torch.Tensor, list[str]]:
    """The text's ids [1, S] with pad_tokens <pad> appended (when the tokenizer has one), and notes."""
    ids = model.encode(text).ids
    notes = []
    if pad_tokens:
        if model.pad_id is None:
            notes.append(f"{model.family.name}'s tokenizer has no <pad> token: no pad tokens were appended.")
        else:
            ids = torch.cat([ids, torch.full((pad_tokens,), model.pad_id, dtype=ids.dtype)])
    return ids[None].to(model.device), notes  # (1, S)


@torch.inference_mode()
def run_text(model: PretrainedTransformer, text: str, *, max_new_tokens: int, pad_tokens: int = 0,
             variation: Variation = PAPER, head_means: dict | None = None, values: bool = False) -> TextRun:
    """Greedy-decode `text` (or, for a model that writes no text, one pass) under `variation` (its heads off at every
    step, with head_means for mean ablation) and keep every map of the last step; values: also the value norms of
    that pass (what run_value_norms gives, without a pass of its own)."""
    src, notes = source_ids(model, text, pad_tokens)
    model.check_positions(src.size(1), "The text", text=True)
    if not model.abilities.writes_text:
        return one_pass(model, src, variation, head_means, notes, values)
    room = model.room(src.size(1))
    if room is not None and max_new_tokens > room:  # the decode stops where the model's positions end, and says so
        notes.append(f"{model.name}'s positions end at {model.positions:,}: it writes at most {room:,} tokens here")
        max_new_tokens = room
    written, recorded = model.greedy_pass(src, max_new_tokens, variation=variation, head_means=head_means,
                                          values=values)
    maps = recorded.maps
    out_ids = written[0].tolist()
    if model.layout == "encoder-decoder":
        src_ids = src[0].tolist()
        tgt_ids = [model.start_id] + out_ids[:-1]
    else:
        src_ids, tgt_ids = [], src[0].tolist() + out_ids[:-1]
    finished = any(i in model.eos_ids for i in out_ids)
    if not finished:
        notes.append(f"no end token within {max_new_tokens} tokens: the output is unfinished")
    return TextRun(tuple(src_ids), tuple(tgt_ids), tuple(model.pieces(src_ids)), tuple(model.pieces(tgt_ids)),
                   tuple(model.pieces(out_ids)), tuple(out_ids), model.decode(out_ids), finished,
                   numpy_maps(maps), dense_masks(maps, recorded.run.masks), tuple(notes), norms_of(model, recorded),
                   numpy_biases(maps, recorded.run.biases))


@torch.inference_mode()
def run_media(model: PretrainedTransformer, source, *, max_new_tokens: int, variation: Variation = PAPER,
              encoder_maps: bool = True) -> TextRun:
    """A picture through an image model, or a recording through Whisper (model.modality: what it reads, its refusals),
    as run_text runs a text: the source is the encoder's tokens (its special tokens and patches, or its positions'
    times; no ids); an image model runs one pass; Whisper writes greedily, its target the prompt its generate writes
    (hub.speech) and every written token but the last. The note of what reading changed (a picture resized, a
    recording cut to the model's window) is the run's first note. encoder_maps=False: Whisper's run holds its
    decoder's and cross maps only (its encoder's, 1,500 x 1,500 a head, by regions from model.long_run)."""
    encoding = model.encode(source)
    inputs = encoding.ids[None].to(model.device, model.model.dtype)  # (1, C, H, W) or (1, mels, frames)
    notes = [encoding.note] if encoding.note else []
    if not model.abilities.writes_text:
        recorded = model.traced(inputs, variation=variation)
        return TextRun((), (), tuple(encoding.tokens), (), (), (), "", True, numpy_maps(recorded.maps),
                       dense_masks(recorded.maps, recorded.run.masks), tuple(notes))
    written, recorded = model.greedy_pass(inputs, max_new_tokens, variation=variation, encoder_maps=encoder_maps)
    out_ids = written[0].tolist()
    rows = recorded.maps[model.map_keys[-1]].size(-2)  # the decoder's input: its prompt and all but the last
    encoded = model.model.get_encoder()(**{model.modality.input_name: inputs})
    prompt = model.modality.prompt(model.model, encoded, torch.tensor([[model.start_id]], device=model.device))
    tgt_ids = (prompt[0].tolist() + out_ids)[:rows]
    finished = any(i in model.eos_ids for i in out_ids)
    if not finished:
        notes.append(f"no end token within {max_new_tokens} tokens: the output is unfinished")
    return TextRun((), tuple(tgt_ids), tuple(encoding.tokens), tuple(model.pieces(tgt_ids)),
                   tuple(model.pieces(out_ids)), tuple(out_ids), model.decode(out_ids), finished,
                   numpy_maps(recorded.maps), dense_masks(recorded.maps, recorded.run.masks), tuple(notes))


def norms_of(model: PretrainedTransformer, recorded) -> dict[str, np.ndarray] | None:
    """The value norms [H, K] per key of a recorded pass that kept its values, else None."""
    if not recorded.kept:
        return None
    return {key: value[0].float().cpu().numpy() for key, value in model.norms_of(recorded.kept).items()}


def one_pass(model: PretrainedTransformer, src: torch.Tensor, variation: Variation, head_means: dict | None,
             notes: list[str], values: bool = False) -> TextRun:
    """A model that writes no text (an encoder, or a checkpoint saved without its output head): one pass over the
    text (an encoder-decoder's decoder reads its start token alone), and what its masked-LM head fills in."""
    ids = src[0].tolist()
    if model.layout == "encoder-decoder":
        src_ids, tgt_ids = ids, [model.start_id]
        recorded = model.traced(src, torch.tensor([tgt_ids], device=src.device), variation=variation,
                                head_means=head_means, keep=("v",) if values else ())
    else:
        src_ids, tgt_ids = (ids, []) if model.layout == "encoder" else ([], ids)
        recorded = model.traced(src, variation=variation, head_means=head_means, keep=("v",) if values else ())
    output, filled = fill_masks(model, ids, recorded.logits) if model.abilities.fills_masks else ("", [])
    if not model.abilities.fills_masks:
        notes.append(f"This {model.family.name} checkpoint has no output head: it writes no text and fills no "
                     "mask; its maps are shown.")
    elif not filled:
        notes.append(f"{model.family.name} is an encoder: it writes no text. Put its mask token "
                     f"{model.tokenizer.mask_token or ''} in the text to see what it fills in.".replace("  ", " "))
    return TextRun(tuple(src_ids), tuple(tgt_ids), tuple(model.pieces(src_ids)), tuple(model.pieces(tgt_ids)),
                   tuple(filled), (), output, True, numpy_maps(recorded.maps),
                   dense_masks(recorded.maps, recorded.run.masks), tuple(notes), norms_of(model, recorded),
                   numpy_biases(recorded.maps, recorded.run.biases))


def run_value_norms(model: PretrainedTransformer, src_ids, tgt_ids, *, variation: Variation = PAPER,
                    head_means: dict | None = None) -> dict[str, np.ndarray]:
    """‖v_j^h W_O^h‖ [H, K] per map key of one pass on a run's ids (TextRun's: an encoder's source alone, a
    decoder-only model's sequence alone), under the same switches: with the run's maps, what flows."""
    src = torch.tensor([list(src_ids)], device=model.device) if src_ids else None  # (1, S)
    tgt = torch.tensor([list(tgt_ids)], device=model.device) if tgt_ids else None  # (1, T)
    ids, decoder = (src, tgt) if src is not None and tgt is not None else (src if src is not None else tgt, None)
    with torch.inference_mode():
        norms = model.value_norms(ids, decoder, variation=variation, head_means=head_means)
    return {key: value[0].float().cpu().numpy() for key, value in norms.items()}


def fill_masks(model: PretrainedTransformer, ids: list[int], logits: torch.Tensor) -> tuple[str, list[str]]:
    """An encoder's masked-language-model answer: the text with each mask token replaced by its most likely piece.

    Returns ("", []) when the model has no such head or the text has no mask token."""
    mask_id = getattr(model.tokenizer, "mask_token_id", None)
    if mask_id is None or logits.size(-1) != model.vocab_size or mask_id not in ids:
        return "", []
    best = logits[0].argmax(-1).tolist()  # (S,)
    filled = [best[i] if token == mask_id else token for i, token in enumerate(ids)]
    return model.decode(filled), [model.pieces([best[i]])[0] for i, token in enumerate(ids) if token == mask_id]
