"""Footnote 4 on the shipped models' own q and k: the table of docs/footnote4.md.

    python -m devtools.footnote4             # ~10 s on two cores
    python -m devtools.footnote4 --texts 50  # more held-out strings per model
    python -m devtools.footnote4 --heads reverse   # and every head of one model

For every shipped model, on its task's held-out strings (attention_viz.data.tasks.heldout_strings, the same draw for
every model of a task) run as the model was trained (its card's scale), attention_viz.qk_statistics per map key;
then per model and kind of attention, the median over its heads (every layer) of: Var q·k / d_k (footnote 4
predicts 1 for unit-variance components), Var q·k / (d_k·Var q·Var k) (footnote 4's ratio on the head's own
component variances), the variance within a query's row / d_k (what the softmax sees: a row's common shift
does not change it), Var q and Var k, and the mean softmax entropy (nats) with 1/√d_k and without it, beside
log n, the uniform softmax's entropy over the average number of keys per query. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import attention_viz as av
from attention_viz.data.tasks import heldout_strings
from attention_viz.data.tokenizer import CharTokenizer

KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")
SHORT = {"encoder.self_attn": "enc self", "decoder.self_attn": "dec self", "decoder.cross_attn": "cross"}


def rows(n_texts: int) -> list[list[str]]:
    """One row per (model, kind): the medians over its heads."""
    out = []
    for card in av.list_models():
        model, card = av.load_model(card["name"])
        texts = heldout_strings(card["max_len"], n_texts, task=card["task"])
        stats = av.qk_statistics(model, texts, tokenizer=CharTokenizer(max_len=card["max_len"]), scale=card["scale"])
        for kind in KINDS:
            stack, name = kind.split(".")
            heads = [s for key, s in stats.items() if key.startswith(stack + ".") and key.endswith(name)]
            pick = lambda f: np.concatenate([f(s) for s in heads])  # noqa: E731  (every head of every layer)
            median = lambda f: float(np.median(pick(f)))  # noqa: E731
            keys_per_query = np.mean([s.n_pairs / s.n_queries for s in heads])
            out.append([card["name"], card["scale"], str(heads[0].d_k), SHORT[kind],
                        f"{median(lambda s: s.logit_var / s.d_k):.3g}",
                        f"{median(lambda s: s.ratio):.3g}",
                        f"{float(pick(lambda s: s.ratio).min()):.2g}-{float(pick(lambda s: s.ratio).max()):.2g}",
                        f"{median(lambda s: s.row_var / s.d_k):.3g}",
                        f"{median(lambda s: s.q_var):.3g}", f"{median(lambda s: s.k_var):.3g}",
                        f"{median(lambda s: s.entropy_scaled):.2f}", f"{median(lambda s: s.entropy_unscaled):.2f}",
                        f"{np.log(keys_per_query):.2f}"])
    return out


def head_rows(name: str, n_texts: int) -> list[list[str]]:
    """One row per head of one shipped model, on the same texts as rows()."""
    model, card = av.load_model(name)
    texts = heldout_strings(card["max_len"], n_texts, task=card["task"])
    stats = av.qk_statistics(model, texts, tokenizer=CharTokenizer(max_len=card["max_len"]), scale=card["scale"])
    return [[key, str(h), f"{s.logit_var[h] / s.d_k:.3g}", f"{s.ratio[h]:.3g}", f"{s.row_var[h] / s.d_k:.3g}",
             f"{s.q_var[h]:.3g}", f"{s.k_var[h]:.3g}", f"{s.entropy_scaled[h]:.2f}", f"{s.entropy_unscaled[h]:.2f}"]
            for key, s in stats.items() for h in range(s.n_heads)]


HEAD_HEADERS = ["attention", "head", "Var q·k / d_k", "ratio to d_k·Var q·Var k", "within rows / d_k", "Var q",
                "Var k", "entropy 1/√d_k", "entropy 1"]
HEADERS = ["model", "trained", "d_k", "kind", "Var q·k / d_k", "ratio to d_k·Var q·Var k", "ratio, all heads",
           "within rows / d_k", "Var q", "Var k", "entropy 1/√d_k", "entropy 1", "log n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=20, help="held-out strings per model (default 20)")
    parser.add_argument("--heads", metavar="MODEL", help="also print every head of this shipped model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    tables = [(HEADERS, rows(args.texts))] + ([(HEAD_HEADERS, head_rows(args.heads, args.texts))] if args.heads else [])
    for headers, table in tables:
        print("| " + " | ".join(headers) + " |")
        print("|" + "---|" * len(headers))
        for row in table:
            print("| " + " | ".join(row) + " |")
        print()
    print(f"{args.texts} held-out strings per model; medians over every head of every layer of a kind; "
          f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
