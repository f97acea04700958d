"""Two runs side by side for the Compare tab: another text through the same model (a minimal pair), or the same text
through another model; one head of each and their difference where the tokens align (analysis.compare, the package's
one definition: SequenceMatcher over the token lists, NaN where a token does not align), and what did not align.

Axes: Q query positions, K key positions (a's and b's own).
"""

from __future__ import annotations

from attention_viz.analysis.compare import compare
from attention_viz.core.alignment import Comparison
from attention_viz.core.maps import KINDS, TextMaps, kind_key
from attention_viz.service.models import Run
from attention_viz.service.runs import Runs
from attention_viz.service.requests import Settings

PAIRS = {"text": "another text", "model": "another model"}  # the Compare tab's modes beside the switches
# The minimal pair a real model opens on (Linzen et al.'s agreement across an attractor), and one for ours.
PAIR_TEXTS = {"real": ("The keys to the cabinet are", "The key to the cabinets is"), "ours": ("attention", "attentive")}


def text_maps(run: Run) -> TextMaps:
    """A cached run as the package's TextMaps: its maps, tokens and the masks its model applied."""
    return TextMaps(run.maps, run.src_tokens, run.tgt_tokens, {kind: run.mask(kind) for kind in run.kinds},
                    run.output, {"text": run.settings.text, "model": run.settings.model})


def _quoted(tokens: list[str], positions: list[int]) -> str:
    return ", ".join(f"“{tokens[i]}”" for i in positions)


def unaligned_sentence(comparison: Comparison) -> str:
    """Which tokens of a and of b did not align (their cells have no difference), or that every token did."""
    parts = []
    (qa, ka), (qb, kb) = comparison.tokens_a, comparison.tokens_b
    axes = [("queries", comparison.queries, qa, qb)]
    if (qa, qb) != (ka, kb):
        axes.append(("keys", comparison.keys, ka, kb))
    for name, alignment, a_tokens, b_tokens in axes:
        a_only, b_only = alignment.a_only, alignment.b_only
        if not a_only and not b_only:
            continue
        where = "" if len(axes) == 1 else f" ({name})"
        parts.append(f"not aligned{where}: in a {_quoted(a_tokens, a_only) or 'none'}; in b "
                     f"{_quoted(b_tokens, b_only) or 'none'}")
    if not parts:
        return "Every token aligns: the difference is defined in every cell."
    return ("Tokens are aligned by identity and order; " + "; ".join(parts) +
            ". Their cells have no difference (grey).")


def compare_runs(runs: Runs, a: Settings, b: Settings, what: str, kind: object, layer: object,
                 head: object) -> tuple[Comparison, tuple[str, str], tuple[str, int, int]]:
    """One head of run a and of run b (the same kind, layer and head; refused where b's model has no such head),
    analysis.compare's Comparison of them, the two labels and the head (kind, layer, head)."""
    run_a, run_b = runs.run(a), runs.run(b)
    request = run_a.head_request(kind, layer, head)
    try:
        run_b.head_request(request.kind, request.layer, request.head)
    except ValueError as error:
        raise ValueError(f"The other model has no {KINDS[request.kind]} layer {request.layer} head {request.head} "
                         f"to compare with ({error})") from None
    labels = (a.text, b.text) if what == "text" else (a.name, b.name)  # the models as the picker names them
    comparison = compare(text_maps(run_a), text_maps(run_b), kind_key(request.kind, request.layer), request.head,
                         labels=labels)
    return comparison, labels, (request.kind, request.layer, request.head)
