"""The compatibility study's summary as plain, JSON-able numbers the browser draws (labview/static/lab.js).

Input is the summary shipped beside the study's members (data.snapshots.load_study_summary); no model
runs and nothing is drawn here. The page shows two charts from it (AttentionLab.mountStudy):

    {
      "format": "attention_viz.study/1",
      "setup":  str,                        # one line: task, model, budget, seeds
      "d_k":    [8, 32, ...],               # the trained sizes (the x axis of both charts)
      "accuracy": [                         # after training, per (compatibility, init)
        {"arm": "scaled_dot", "init": "unit_qk", "label": "scaled dot ÷√d_k (unit q, k)",
         "d_k": [...], "mean": [%...], "std": [%...], "seeds": 3}, ...],
      "logit_std": [                        # at step 0, per (compatibility, init): over the seeds at each d_k
        {"arm": ..., "init": ..., "label": ..., "d_k": [...], "mean": [...], "min": [...], "max": [...]}, ...]
    }
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

FORMAT = "attention_viz.study/1"
ARMS = {"scaled_dot": "scaled dot ÷√d_k", "dot": "plain dot", "additive": "additive"}
INITS = {"unit_qk": "unit q, k", "xavier": "Xavier"}
DIGITS = 4


def _label(arm: str, init: str) -> str:
    return f"{ARMS.get(arm, arm)} ({INITS.get(init, init)})"


def _ordered(keys) -> list[tuple[str, str]]:
    """(arm, init) pairs: unit q, k first, then the arms in ARMS order."""
    rank = lambda pair: (list(INITS).index(pair[1]) if pair[1] in INITS else 9,  # noqa: E731
                         list(ARMS).index(pair[0]) if pair[0] in ARMS else 9, pair)
    return sorted(keys, key=rank)


def study_data(summary: Mapping) -> dict:
    """The charts' numbers from the shipped summary ({"setup", "summary", "initialisation"}).

    Raises:
        ValueError: when a row lacks what the charts need (the summary is not the study's).
    """
    try:
        setup = summary["setup"]
        accuracy = defaultdict(list)
        for row in summary["summary"]:
            accuracy[(row["compatibility"], row["init"])].append(row)
        spread = defaultdict(lambda: defaultdict(list))
        for row in summary["initialisation"]:
            spread[(row["compatibility"], row["init"])][int(row["d_k"])].append(float(row["logit_std"]))
        d_ks = sorted({int(row["d_k"]) for row in summary["summary"]})
        series = []
        for arm, init in _ordered(accuracy):
            rows = sorted(accuracy[(arm, init)], key=lambda r: r["d_k"])
            match = [r["heldout_exact_match"] for r in rows]
            series.append({"arm": arm, "init": init, "label": _label(arm, init), "d_k": [int(r["d_k"]) for r in rows],
                           "mean": [round(100 * m["mean"], 2) for m in match],
                           "std": [round(100 * m["std"], 2) for m in match],
                           "seeds": max(int(m["n"]) for m in match)})
        initial = []
        for arm, init in _ordered(spread):
            by_d_k = spread[(arm, init)]
            xs = sorted(by_d_k)
            initial.append({"arm": arm, "init": init, "label": _label(arm, init), "d_k": xs,
                            "mean": [round(sum(by_d_k[d]) / len(by_d_k[d]), DIGITS) for d in xs],
                            "min": [round(min(by_d_k[d]), DIGITS) for d in xs],
                            "max": [round(max(by_d_k[d]), DIGITS) for d in xs]})
        line = (f"{setup['task']}, {setup['n_layers']}+{setup['n_layers']} layers, d_model {setup['d_model']}, "
                f"{setup['n_heads']} head, {setup['steps']} steps, seeds {', '.join(str(s) for s in setup['seeds'])}")
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not the study's summary: {type(error).__name__} {error}") from None
    if not series or not d_ks:
        raise ValueError("not the study's summary: no rows")
    return {"format": FORMAT, "setup": line, "d_k": d_ks, "accuracy": series, "logit_std": initial}
