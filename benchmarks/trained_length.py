"""The real models of a class (benchmarks.classroom --real): their folders, their first run, and
the app as `python app.py` serves it with a real model's decoding budget at a trained translation model's length.

`python -m benchmarks.trained_length` (benchmarks.classroom starts it with `--real`, unless `--full-budget`).

The class's opus-mt has random weights: it never ends by itself, so each run would write the app's whole budget
(1.5 x the source's pieces + 10: service.limits.real_new_tokens), where a trained opus-mt-en-de writes about 1.2
tokens per piece. Here a model with a source gets ceil(RATIO x its pieces), at most REAL_NEW_TOKENS, its last token
forced to </s>, so its runs cost what a trained model's would; nothing else of the app changes.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from .students import REAL_MODELS

RATIO = 1.2  # target tokens a trained opus-mt-en-de writes per source piece (its end token included)
CALLERS = ("hub_model",)  # every module of attention_viz.service that asks limits.real_new_tokens for a budget


def callers() -> list:
    """The modules named in CALLERS (imported when asked: a class's process needs none of the app)."""
    import importlib

    return [importlib.import_module(f"attention_viz.service.{name}") for name in CALLERS]


def budget(source_tokens: int, has_source: bool) -> int:
    """A trained translation model's length for a source of this many pieces; a continuation's as the app has it."""
    from attention_viz.service import limits

    if not has_source:
        return limits.real_new_tokens(source_tokens, has_source)
    return min(limits.REAL_NEW_TOKENS, math.ceil(RATIO * source_tokens))


def install() -> None:
    """Every caller of limits.real_new_tokens asks `budget` instead; RuntimeError if one no longer takes it by that
    name (this module must follow it)."""
    from attention_viz.service import limits

    for module in callers():
        if getattr(module, "real_new_tokens", None) not in (limits.real_new_tokens, budget):
            raise RuntimeError(f"{module.__name__} no longer takes real_new_tokens from {limits.__name__}: "
                               f"{__name__} must follow it")
        module.real_new_tokens = budget


def real_model_folder(temp: Path, real_model: str = "opus-mt-random") -> Path:
    """The opus-mt-en-de configuration with random weights and a small real tokenizer, saved offline; or, for
    "minilm", the trained all-MiniLM-L6-v2's folder (devtools.trained_models)."""
    if real_model == "minilm":
        from devtools.trained_models import minilm_folder

        return minilm_folder()
    from devtools.hub_models import save_opus_mt_en_de_random

    return save_opus_mt_en_de_random(temp / REAL_MODELS[real_model].name)


def load_real_model(base: str, name: str = REAL_MODELS["opus-mt-random"].name) -> float:
    """One run of the real model before the class arrives (it loads once per process); its seconds."""
    from gradio_client import Client

    t0 = time.perf_counter()
    Client(base + "/", verbose=False).predict("Attention is all you need.", "hub:" + name, 64, "sqrt_dk", 1.0,
                                              True, True, 0, 64, 4, api_name="/visualize")
    return time.perf_counter() - t0


if __name__ == "__main__":
    from attention_viz.webui.page import main

    install()
    main()
