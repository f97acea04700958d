"""The app as `python app.py` serves it, with a real model's decoding budget at a trained translation model's length.

`python -m benchmarks.trained_length` (benchmarks.classroom starts it with `--real`, unless `--full-budget`).

The classroom's translation model has random weights (devtools.hub_models.save_opus_mt_en_de_random): it never writes
its end token by itself, so each of its runs writes the app's whole budget, 1.5 x the source's pieces + 10
(service.limits.real_new_tokens), where a trained opus-mt-en-de stops after about 1.2 target tokens per source piece.
Here the budget of a model with a source is ceil(RATIO x the source's pieces), at most REAL_NEW_TOKENS: the random
model writes that many tokens, the last its end token (its generation config forces </s> at the budget's end, as a
trained model ends its own output), so its runs and its heads' scores cost what a trained model's would. Nothing else
changes: a decoder-only model's continuation keeps its budget, and the app's code is the tree's own.
"""

from __future__ import annotations

import math

from attention_viz.service import hub_model, limits

RATIO = 1.2  # target tokens a trained opus-mt-en-de writes per source piece (its end token included)
CALLERS = (hub_model,)  # every module of the app that asks limits.real_new_tokens for a budget


def budget(source_tokens: int, has_source: bool) -> int:
    """A trained translation model's length for a source of this many pieces; a continuation's as the app has it."""
    if not has_source:
        return limits.real_new_tokens(source_tokens, has_source)
    return min(limits.REAL_NEW_TOKENS, math.ceil(RATIO * source_tokens))


def install() -> None:
    """Every caller of limits.real_new_tokens asks `budget` instead; RuntimeError if one no longer takes it by that
    name (this module must follow it)."""
    for module in CALLERS:
        if getattr(module, "real_new_tokens", None) not in (limits.real_new_tokens, budget):
            raise RuntimeError(f"{module.__name__} no longer takes real_new_tokens from {limits.__name__}: "
                               f"{__name__} must follow it")
        module.real_new_tokens = budget


if __name__ == "__main__":
    from attention_viz.webui.page import main

    install()
    main()
