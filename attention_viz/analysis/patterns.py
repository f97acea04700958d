"""Pattern scores of every head (core.patterns' definitions): of given maps and tokens, or of a model run on a
sequence of n random tokens from its vocabulary repeated twice (Olsson et al. 2022), where an induction head looks
from each token of the second half at the token after that token's first occurrence.

The random tokens are distinct (drawn without replacement, seeded), so the induction targets are exactly i − n + 1 for
a query i of the second half, whatever special token starts the sequence. How the sequence enters a model:
    ours (encoder-decoder)   source = r r <eos>, decoder input = <bos> r r (one teacher-forced pass)
    real encoder-decoder     source = the tokenizer's leading specials, r r, its trailing ones; decoder input =
                             the decoder's start token, r r
    real encoder / decoder   the tokenizer's leading specials, r r, its trailing ones (as it encodes a text)
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import torch

from attention_viz.core.maps import TextMaps
from attention_viz.core.protocol import AttentionModel
from attention_viz.core.patterns import PATTERNS, PatternScores, pattern_scores_of_maps
from attention_viz.data.tokenizer import SPECIAL_TOKENS, CharTokenizer

DEFAULT_REPEAT = 16  # n: the random sequence's length before it repeats
MAX_REPEAT = 256


def random_tokens(vocabulary: Sequence[int], n: int, seed: int) -> list[int]:
    """n distinct ids from the vocabulary, seeded."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 2 <= n <= MAX_REPEAT:
        raise ValueError(f"n (the random sequence's length) must be an integer in [2, {MAX_REPEAT}], got {n!r}")
    if n > len(vocabulary):
        raise ValueError(f"n = {n} distinct tokens asked of a vocabulary of {len(vocabulary)}")
    rng = np.random.default_rng(seed)
    return [int(i) for i in rng.choice(np.asarray(vocabulary), size=n, replace=False)]


def repeated_pass(model, n: int, seed: int) -> tuple[TextMaps, list[int], list[int]]:
    """The model's maps on a random sequence of n tokens repeated twice: (maps with their tokens, source ids, target
    ids) as the module docstring says."""
    if not model.pretrained:
        tok = CharTokenizer()
        r = random_tokens(range(len(SPECIAL_TOKENS), model.config.vocab_size), n, seed)
        src_ids, tgt_ids = r + r + [tok.eos_id], [tok.bos_id] + r + r
        device = next(model.parameters()).device
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                _, maps = model(torch.tensor([src_ids], device=device), torch.tensor([tgt_ids], device=device))
        finally:
            model.train(was_training)
        return TextMaps(maps, model.input_axis(tok.tokens(src_ids)), tok.tokens(tgt_ids)), src_ids, tgt_ids
    tokenizer = model.tokenizer
    special = set(tokenizer.all_special_ids)
    size = min(model.vocab_size, len(tokenizer))
    r = random_tokens([i for i in range(size) if i not in special], n, seed)
    specials = model.encode("").ids.tolist()  # what the tokenizer puts around a text
    leading = {tokenizer.bos_token_id, tokenizer.cls_token_id} - {None}
    lead = [i for i in specials[:1] if i in leading]
    ids = lead + r + r + specials[len(lead):]
    device = model.device
    with torch.inference_mode():
        if model.layout == "encoder-decoder":
            src_ids, tgt_ids = ids, [model.start_id] + r + r
            _, maps = model.forward(torch.tensor([src_ids], device=device), torch.tensor([tgt_ids], device=device))
        else:
            _, maps = model.forward(torch.tensor([ids], device=device))
            src_ids, tgt_ids = (ids, []) if model.layout == "encoder" else ([], ids)
    return TextMaps(maps, model.input_axis(model.pieces(src_ids)), model.pieces(tgt_ids)), src_ids, tgt_ids


def pattern_scores(model_or_maps, source: Sequence[Hashable] = (), target: Sequence[Hashable] = (), *,
                   n: int = DEFAULT_REPEAT, seed: int = 0, masks: Mapping[str, np.ndarray] | None = None,
                   patterns: Sequence[str] = tuple(PATTERNS)) -> PatternScores:
    """Every head's previous-token, first-token, duplicate-token and induction scores (core.patterns).

    pattern_scores(model)                       a model (ours or a real one) on n random tokens repeated twice
    pattern_scores(maps, source, target)        maps (AttentionMaps of one example, or key -> [H, Q, K]) and the
                                                tokens they were made from: source = the encoder's, target = the
                                                decoder's input (a decoder-only model's text); ids or strings
    pattern_scores(text_maps)                   a TextMaps (maps_of(model, text)): its own tokens and masks; a
                                                picture's or a recording's (maps_of(model, picture)): previous
                                                patch in reading order or previous 20 ms, the first token ([CLS], 0 s)

    Returns PatternScores: scores[kind][pattern] is [L, H]; chance, the evenly spread head's; .table(), .best().
    """
    if isinstance(model_or_maps, AttentionModel) and getattr(model_or_maps, "modality", None) is not None:
        what = model_or_maps.modality.probed[:-1]  # "picture", "recording"
        raise ValueError(f"{model_or_maps.name} reads {what}s, not random tokens of a vocabulary: score its maps of "
                         f"a {what}, pattern_scores(maps_of(model, {what})) (duplicate and induction count only where "
                         "tokens repeat, as in a transcript)")
    if isinstance(model_or_maps, AttentionModel):
        text_maps, src_ids, tgt_ids = repeated_pass(model_or_maps, n, seed)
        scored = pattern_scores_of_maps(text_maps, src_ids, tgt_ids, masks, patterns)
        shown = {kind: text_maps.tokens(kind) for kind in scored.tokens}
        return replace(scored, tokens=shown, repeated=n)
    if not isinstance(model_or_maps, Mapping):
        raise ValueError(f"pattern_scores takes a model, or maps with their tokens; got {type(model_or_maps).__name__}")
    if isinstance(model_or_maps, TextMaps) and not source and not target:
        source, target = model_or_maps.source_tokens, model_or_maps.target_tokens
        masks = masks if masks is not None else (model_or_maps.masks or None)
    return pattern_scores_of_maps(model_or_maps, source, target, masks, patterns)
