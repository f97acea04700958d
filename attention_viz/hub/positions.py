"""How many positions a real model reads, each rule once: its config's (`positions`), the room a greedy decode has
after a prompt (`room`), a pass's checks (`check`, `check_room`) and how much of a text a long pass reads
(`reading`). PretrainedTransformer answers the first three as its own (model.positions, model.room(tokens),
model.check_positions(tokens)); `model` below is one.
"""

from __future__ import annotations

from attention_viz.hub.long_kept import LongRunError


class TextTooLongError(ValueError):
    """More tokens than the model's positions: the message names the limit and what to do instead."""


def positions(model) -> int | None:
    """The positions the model has (its config's max_position_embeddings or n_positions): the most tokens it reads at
    once; None where its config names none."""
    config = model.model.config
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def room(model, tokens: int) -> int | None:
    """The most tokens a greedy decode can write after an input of `tokens` within the model's positions (the
    decoder's input at the last step is the prompt, or the start token, and every written token but the last); None
    where the config names no positions."""
    if model.positions is None:
        return None
    return model.positions - (1 if model.layout == "encoder-decoder" else tokens) + 1


def check(model, tokens: int, what: str = "The input", text: bool = False) -> None:
    """TextTooLongError unless `tokens` positions fit the model's (a model whose config names none is not checked):
    what a pass of more would meet is the model's own IndexError or a size mismatch; ValueError for no tokens at all
    (a reshape error inside the model). text: a text's tokens (hub.text_run's, the app's), the advice for a text and
    no tokens left to the pass."""
    if tokens < 1 and not text:
        raise ValueError(f"{what} has no tokens: give at least one (model.encode(text).ids[None]).")
    most = model.positions
    if most is not None and tokens > most:
        advice = (f"Shorten it, or read it at length: show(model, text, long=True), or model.long_run(text), which "
                  f"reads the first {most:,}." if text else f"Give at most {most:,} (input_ids[:, :{most}]), or read "
                  f"a text at length: model.long_run(text) reads its first {most:,} tokens and says so.")
        raise TextTooLongError(f"{what} has {tokens:,} tokens; {model.name} reads at most {most:,} positions at "
                               f"once. {advice}")


def check_room(model, tokens: int, max_new_tokens: int) -> None:
    """TextTooLongError unless a greedy decode of max_new_tokens after an input of `tokens` fits the positions."""
    most = room(model, tokens)
    if most is not None and max_new_tokens > most:
        prompt = 1 if model.layout == "encoder-decoder" else tokens
        raise TextTooLongError(f"{model.name}'s decoder reads at most {model.positions:,} positions at once"
                               + (f" and the prompt has {prompt:,} tokens" if prompt > 1 else "")
                               + f": it can write at most {most:,} tokens; ask for max_new_tokens={most}"
                               + (", or shorten the prompt." if prompt > 1 else "."))


def reading(model, count: int, most: int | None = None) -> tuple[int, str]:
    """The one rule of how many of a text's `count` tokens a long pass of `model` reads (the package's long_run, the
    app's Long text tab and show(model, long_text) all ask it): its positions, and `most` where fewer; with the
    sentence that says so when some are left out ("" when it reads them all), naming the model by model.name."""
    if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
        raise LongRunError(f"most must be a positive whole number of tokens or None, got {most!r}")
    ends = model.positions
    read = min([count] + [cap for cap in (ends, most) if cap])
    if read == count:
        return read, ""
    why = (f"{model.name}'s positions end at {ends:,}." if ends and (most is None or ends <= most)
           else f"a page is at most {most:,} tokens.")
    return read, f"Read the first {read:,} of the text's {count:,} tokens: {why}"
