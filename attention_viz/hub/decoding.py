"""The rules a model's generation config sets on greedy decoding, as transformers' own logits processors.

`generate(num_beams=1, do_sample=False)` applies these before its argmax; greedy_decode applies the same ones so
that both write the same tokens: banned tokens (Marian bans <pad>), forced first and last tokens (mBART's target
language, the end at max_length), a minimum length, repetition rules and suppressed tokens.
"""

from __future__ import annotations

from transformers.generation.logits_process import (
    ForcedBOSTokenLogitsProcessor,
    ForcedEOSTokenLogitsProcessor,
    LogitsProcessorList,
    MinLengthLogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
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
    return processors
