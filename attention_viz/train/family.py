"""The √d_k experiment in training: a family of models that differ only in d_k and in scaling, their curves drawn.

Members are named TASK_dkD_scaled / TASK_dkD_unscaled and were trained with equal seeds, data and
steps. `python -m attention_viz.train.family` reads their cards, prints a summary table and draws
assets/dk_family.png: loss and exact match against step, scaled against unscaled, for each d_k.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from attention_viz.data.checkpoints import list_models, shipped_models_dir
from attention_viz.draw.figures import family_figure

FAMILY_TASK = "reverse"
FAMILY_D_K = (4, 16, 64, 128)  # spans 32x; d_model, d_v and everything else stay fixed
SCALES = ("sqrt_dk", "none")
_MEMBER = re.compile(r"(?P<task>[a-z]+)_dk(?P<d_k>\d+)_(?P<label>scaled|unscaled)")


def member_name(d_k: int, scale: str, task: str = FAMILY_TASK) -> str:
    """The registry name of one family member, e.g. member_name(64, "none") == "reverse_dk64_unscaled"."""
    return f"{task}_dk{d_k}_{'scaled' if scale == 'sqrt_dk' else 'unscaled'}"


def family_cards(directory: str | Path | None = None, task: str = FAMILY_TASK) -> dict[tuple[int, str], dict]:
    """The family's cards keyed by (d_k, scale), e.g. cards[(64, "none")]; names must agree with the cards."""
    cards = {}
    for card in list_models(directory):
        match = _MEMBER.fullmatch(card["name"])
        if not match or match["task"] != task:
            continue
        d_k, scale = card["config"]["d_k"], card["scale"]
        if card["name"] != member_name(d_k, scale, task) or card["task"] != task:
            raise ValueError(f"card {card['name']!r} says task={card['task']} d_k={d_k} scale={scale}")
        cards[(d_k, scale)] = card
    return dict(sorted(cards.items()))


def steps_to(curve: dict, key: str, threshold: float) -> int | None:
    """The first logged step at which curve[key] reaches `threshold` (None if it never does)."""
    return next((step for step, value in zip(curve["step"], curve[key]) if value >= threshold), None)


def summarize(cards: dict[tuple[int, str], dict]) -> list[dict]:
    """One row per member: losses at ¼ of the steps and at the end, steps to 50% / 90% exact match, held-out score."""
    rows = []
    for (d_k, scale), card in cards.items():
        curve = card["curve"]
        tail = max(1, len(curve["loss"]) // 10)  # the mean of the last tenth of the curve
        quarter = next(i for i, step in enumerate(curve["step"]) if step >= card["steps"] / 4)
        rows.append({
            "d_k": d_k,
            "scale": scale,
            "quarter_step": curve["step"][quarter],
            "quarter_loss": curve["loss"][quarter],
            "final_loss": sum(curve["loss"][-tail:]) / tail,
            "steps_to_50": steps_to(curve, "exact_match", 0.5),
            "steps_to_90": steps_to(curve, "exact_match", 0.9),
            "heldout_exact_match": card["heldout_exact_match"],
            "train_seconds": card["train_seconds"],
        })
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The summary as a Markdown table, for the terminal and the README."""
    lines = [
        "| d_k | scaling | loss at ¼ of the steps | final loss | steps to 50% exact | steps to 90% exact "
        "| held-out exact match | train s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        scale = "÷√d_k" if r["scale"] == "sqrt_dk" else "none"
        reached = [str(r[k]) if r[k] is not None else "never" for k in ("steps_to_50", "steps_to_90")]
        lines.append(
            f"| {r['d_k']} | {scale} | {r['quarter_loss']:.3f} (step {r['quarter_step']}) | {r['final_loss']:.4f} "
            f"| {reached[0]} | {reached[1]} | {100 * r['heldout_exact_match']:.1f}% | {r['train_seconds']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Read the family's cards, print the summary table, write the PNG."""
    parser = argparse.ArgumentParser(prog="python -m attention_viz.train.family", description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=shipped_models_dir(), help="folder of checkpoints and cards")
    parser.add_argument("--task", default=FAMILY_TASK)
    parser.add_argument("--out", type=Path, default=Path("assets/dk_family.png"))
    args = parser.parse_args(argv)
    cards = family_cards(args.models, args.task)
    if not cards:
        raise SystemExit(f"no {args.task}_dk*_scaled/unscaled cards in {args.models}; run scripts/train_all.sh")
    print(markdown_table(summarize(cards)))
    family_figure(cards).savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
