"""Greedy decoding of a wrapped model (hub.model.PretrainedTransformer.greedy_pass), as `generate` decodes.

`generate(num_beams=1, do_sample=False)` applies the rules a model's generation config sets before its argmax, as
transformers' own logits processors; greedy applies the same ones so that both write the same tokens: banned tokens
(Marian bans <pad>), forced first and last tokens (mBART's target language, the end at max_length), a minimum
length, repetition rules and suppressed tokens. A decoder-only model's positions count its prompt's real tokens only
(a left-padded row starts at 0, as `generate` gives it): position_ids from the attention mask.

Axes: B batch, S source (or prompt) positions, t decoder positions so far, V vocabulary.
"""

from __future__ import annotations

import inspect

import torch
from transformers.generation.logits_process import (
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    LogitsProcessorList,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SuppressTokensAtBeginLogitsProcessor,
    SuppressTokensLogitsProcessor,
)


def greedy_processors(config, max_length: int, eos_ids: set[int], prompt_length: int) -> LogitsProcessorList:
    """The processors `generate` builds from a GenerationConfig for greedy decoding, in its order.

    max_length: the decoder sequence's length at the end (start token or prompt + the tokens to write);
    prompt_length: the decoder sequence's length before the first written token.
    """
    eos = sorted(eos_ids)
    processors = LogitsProcessorList()
    if config.repetition_penalty is not None and config.repetition_penalty != 1.0:
        processors.append(RepetitionPenaltyLogitsProcessor(config.repetition_penalty))
    if config.no_repeat_ngram_size:
        processors.append(NoRepeatNGramLogitsProcessor(config.no_repeat_ngram_size))
    if config.bad_words_ids is not None:
        processors.append(NoBadWordsLogitsProcessor(config.bad_words_ids, eos or None))
    if config.min_length and eos:
        processors.append(MinLengthLogitsProcessor(config.min_length, eos))
    if config.min_new_tokens and eos:
        processors.append(MinNewTokensLengthLogitsProcessor(prompt_length, config.min_new_tokens, eos))
    if config.forced_bos_token_id is not None:
        processors.append(ForcedBOSTokenLogitsProcessor(config.forced_bos_token_id))
    if config.forced_eos_token_id is not None:
        processors.append(ForcedEOSTokenLogitsProcessor(max_length, config.forced_eos_token_id))
    if config.suppress_tokens is not None:
        processors.append(SuppressTokensLogitsProcessor(config.suppress_tokens))
    if config.begin_suppress_tokens is not None:  # tokens never written first (Whisper's end and blank)
        begin = prompt_length if prompt_length > 1 or config.forced_bos_token_id is None else prompt_length + 1
        processors.append(SuppressTokensAtBeginLogitsProcessor(config.begin_suppress_tokens, begin))
    return processors


def positions(mask: torch.Tensor) -> torch.Tensor:
    """position_ids [B, t] of a decoder-only model's input from its attention mask [B, t], as `generate` makes them:
    each row counts its real tokens from 0 (cumsum of the mask - 1); padding positions get 1."""
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)


def greedy(model, input_ids: torch.Tensor, max_new_tokens: int, *, attention_mask: torch.Tensor | None, variation,
           reuse_keys: bool, head_means: dict | None, values: bool = False, encoder_maps: bool = True):
    """The loop of model.greedy_pass (a PretrainedTransformer that writes text) -> (written [B, n], the Pass of the
    last full pass (the encoder's maps, masks, factors and biases included), that pass's logits). Every pass runs
    under `variation`, its heads off with head_means (mean ablation); values: the maps' passes keep their values
    "v"; encoder_maps=False: an encoder-decoder's encoder pass records nothing (a recording's 1,500 x 1,500 maps a
    head are not held: its long pass gives them by regions), the Pass holding the decoder's maps only."""
    keep = ("v",) if values else ()
    B, device = input_ids.size(0), input_ids.device
    if model.modality is not None:  # a recording's features: read whole, no mask
        encoder_inputs = {model.modality.input_name: input_ids}
    else:
        attention_mask = model.padding_of(input_ids) if attention_mask is None else attention_mask
        encoder_inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if model.layout == "encoder-decoder":
        with model.switched(variation, head_means=head_means, record=encoder_maps, keep=keep) as encoder_run:
            encoder_outputs = model.model.get_encoder()(**encoder_inputs)
        seq = torch.full((B, 1), model.start_id, dtype=torch.long, device=device)  # (B, 1)
        if model.modality is not None and hasattr(model.modality, "prompt"):  # Whisper: language, task, no times
            with model.switched(variation, head_means=head_means):
                seq = model.modality.prompt(model.model, encoder_outputs, seq)  # (B, P)
    else:
        seq = input_ids  # (B, S): the prompt
    prompt_length = seq.size(1)
    processors = greedy_processors(model.model.generation_config, prompt_length + max_new_tokens, model.eos_ids,
                                   prompt_length)
    eos = torch.tensor(sorted(model.eos_ids), dtype=torch.long, device=device)
    done = torch.zeros(B, dtype=torch.bool, device=device)
    fill = model.pad_id if model.pad_id is not None else min(model.eos_ids, default=0)
    takes = inspect.signature(model.model.forward).parameters
    keeps_logits = "logits_to_keep" in takes

    def decoder_pass(ids: torch.Tensor, cache=None, new: int | None = None, last_logits: bool = False):
        """The model's outputs on the decoder input ids [B, t] (the prompt's padding kept for a decoder); with a
        key cache, only the last `new` positions are run and the cache holds the earlier ones' keys and values;
        last_logits: the vocabulary's logits of the last position only (the maps' pass needs none)."""
        options = {"use_cache": False} if new is None else {"use_cache": True, "cache": cache}
        if last_logits and keeps_logits:
            options["logits_to_keep"] = 1
        run_ids = ids if new is None else ids[:, -new:]
        if model.layout == "encoder-decoder":
            return model.model(encoder_outputs=encoder_outputs, attention_mask=attention_mask,
                               decoder_input_ids=run_ids, **options)
        written = attention_mask.new_ones(B, max(ids.size(1) - prompt_length, 0))  # (B, t - P)
        mask = torch.cat([attention_mask, written], 1)[:, : ids.size(1)]  # (B, t)
        return model.model(input_ids=run_ids, attention_mask=mask,
                           position_ids=positions(mask)[:, -run_ids.size(1):], **options)

    # Under the causal mask an earlier position never sees a later one, so each step runs the newest position
    # only against the kept keys and values (transformers' cache); without it, or in a model that keeps none (the
    # original GPT), every step reruns them all.
    cache, new = None, (seq.size(1) if reuse_keys and variation.causal_mask and "cache" in takes else None)
    for _ in range(int(max_new_tokens)):
        with model.switched(variation, head_means=head_means):
            outputs = decoder_pass(seq, cache, new)
        logits = outputs.logits[:, -1]  # (B, V)
        if new is not None:
            cache, new = outputs.cache, 1
        scores = processors(seq, logits.float())
        next_token = scores.argmax(-1).masked_fill(done, fill)  # (B,)
        seq = torch.cat([seq, next_token[:, None]], dim=1)
        done = done | torch.isin(next_token, eos)
        if bool(done.all()):
            break
    written = seq[:, prompt_length:]  # (B, n)
    with model.switched(variation, head_means=head_means, record=True, keep=keep) as final:
        outputs = decoder_pass(seq[:, :-1] if written.size(1) else seq, last_logits=True)
    if model.layout == "encoder-decoder" and encoder_maps:  # the encoder's probes, from its own pass, after the decoder's
        final.trace = {key: probe for run in (final, encoder_run) for key, probe in run.trace.items() if probe.kept}
    return written, final, outputs.logits
