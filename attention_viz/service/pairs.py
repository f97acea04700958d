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


def missing_head(runs: Runs, a: Settings, b: Settings, run_b: Run, kind: str, layer: int, head: int) -> str:
    """Why side b (another model) has no such head, and what to pick instead: a model b that has the kind (those of
    a's sort first: real models for a real model a), or a layer and head inside model b's."""
    catalog, config = runs.catalog, run_b.config
    name = dict((key, label) for label, key in catalog.model_choices).get(b.model, b.model)  # as the picker names it
    kinds = getattr(config, "kinds", tuple(KINDS))
    if kind not in kinds:
        real = a.model in catalog.real
        having = [label for label, key in sorted(catalog.model_choices, key=lambda c: (c[1] in catalog.real) != real)
                  if key not in (a.model, b.model) and _has_kind(catalog, key, kind)]
        some = ", ".join(having[:4]) + (" …" if len(having) > 4 else "")
        return (f"Model b, {name}, has no {KINDS[kind]}: it has " + ", ".join(KINDS[k] for k in kinds) + ". "
                f"Pick as model b one with {KINDS[kind]}" + (f" ({some})" if having else "") +
                ", or open in Heatmaps a head of a kind both models have.")
    n_layers = config.n_encoder_layers if kind.startswith("encoder") else config.n_decoder_layers
    span = lambda what, n: f"{what} 0" if n == 1 else f"{what}s 0–{n - 1}"  # noqa: E731
    return (f"Model b, {name}, has no {KINDS[kind]} layer {layer} head {head}: its {KINDS[kind]} has "
            f"{span('layer', n_layers)} and {span('head', config.n_heads)}. Open a head inside those in Heatmaps, or "
            "pick another model b.")


def _has_kind(catalog, key: str, kind: str) -> bool:
    """Whether the picker's entry `key` has attention `kind`, as far as is known without loading a model: ours have
    every kind; a real model, by its shape once loaded, else (encoder-decoder attention) by its config's stacks."""
    real = catalog.real
    if key not in real:
        return True
    if real.loaded(key):
        return kind in real.shape(key).kinds
    return kind == "decoder.cross_attn" and real.stacks(key) == 2


def compare_runs(runs: Runs, a: Settings, b: Settings, what: str, kind: object, layer: object,
                 head: object) -> tuple[Comparison, tuple[str, str], tuple[str, int, int]]:
    """One head of run a and of run b (the same kind, layer and head; refused where b's model has no such head),
    analysis.compare's Comparison of them, the two labels and the head (kind, layer, head)."""
    run_a, run_b = runs.run(a), runs.run(b)
    request = run_a.head_request(kind, layer, head)
    try:
        run_b.head_request(request.kind, request.layer, request.head)
    except ValueError:
        raise ValueError(missing_head(runs, a, b, run_b, request.kind, request.layer, request.head)) from None
    labels = (a.text, b.text) if what == "text" else (a.name, b.name)  # the models as the picker names them
    comparison = compare(text_maps(run_a), text_maps(run_b), kind_key(request.kind, request.layer), request.head,
                         labels=labels)
    return comparison, labels, (request.kind, request.layer, request.head)
