"""Two texts through one model (a minimal pair), or one text through two models, compared head by head where their
tokens align (core.alignment: SequenceMatcher over the token lists; the difference NaN where a token does not align).
"""

from __future__ import annotations

from collections.abc import Mapping

from attention_viz.analysis.runs import maps_of
from attention_viz.core.alignment import Comparison, align, aligned_difference
from attention_viz.core.maps import TextMaps, head_grid
from attention_viz.core.protocol import AttentionModel


def _side(value, model, text, switches: dict) -> tuple[TextMaps, str]:
    """One side of a comparison as TextMaps and its label: given maps, a text (through `model`) or a model (on `text`)."""
    if isinstance(value, TextMaps):
        return value, value.settings.get("text", "a")
    if isinstance(value, str):
        if model is None:
            raise ValueError("comparing two texts needs the model to run them: compare(text_a, text_b, key, "
                             "model=...)")
        return maps_of(model, value, **switches), value
    if isinstance(value, AttentionModel):
        if not isinstance(text, str) or not text:
            raise ValueError("comparing two models needs the text to run them on: compare(model_a, model_b, key, "
                             "text=...)")
        return maps_of(value, text, **switches), getattr(value, "name", None) or type(value).__name__
    if isinstance(value, Mapping):
        raise ValueError("maps without their tokens cannot be aligned: pass TextMaps(maps, source_tokens, "
                         "target_tokens) or maps_of(model, text)")
    raise ValueError(f"each side is a text, a model or a TextMaps; got {type(value).__name__}")


def compare(a, b, key: str, head: int | None = None, *, model=None, text: str | None = None,
            labels: tuple[str, str] | None = None, **switches) -> Comparison:
    """Two runs' heads side by side and their difference where the tokens align.

    compare("The keys to the cabinet are", "The key to the cabinets is", "decoder.self_attn", model=gpt2)
    compare(model_a, model_b, "encoder.0.self_attn", 3, text="hello")
    compare(maps_of(m, t1), maps_of(m, t2), key, head)        runs made already (TextMaps)

    key, head: as save_figure's (core.maps.head_grid: a kind or a map key; a head, or None for every head).
    switches: maps_of's (scale, causal_mask, padding_mask, max_new_tokens) for the sides it runs.
    Returns core.alignment.Comparison: a, b, difference (a − b where query and key align, NaN elsewhere), the
    alignments, and summary().
    """
    side_a, label_a = _side(a, model, text, switches)
    side_b, label_b = _side(b, model, text, switches)
    grid_a, grid_b = head_grid(side_a, key, head), head_grid(side_b, key, head)
    if grid_a.weights.shape[:2] != grid_b.weights.shape[:2]:
        raise ValueError(f"the two sides have different heads under {key!r}: {list(grid_a.weights.shape[:2])} "
                         f"(layers × heads) against {list(grid_b.weights.shape[:2])}; compare one head that both have")
    tokens_a, tokens_b = side_a.tokens(grid_a.kind), side_b.tokens(grid_b.kind)
    queries, keys = align(tokens_a[0], tokens_b[0]), align(tokens_a[1], tokens_b[1])
    difference = aligned_difference(grid_a.weights, grid_b.weights, queries, keys)
    masks = (side_a.masks.get(grid_a.kind), side_b.masks.get(grid_b.kind))
    return Comparison(grid_a.kind, grid_a.layers, grid_a.heads, labels or (label_a, label_b), grid_a.weights,
                      grid_b.weights, difference, tokens_a, tokens_b, queries, keys, masks)
