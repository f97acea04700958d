"""Checks of the /steps and /compare answers for benchmarks/load.py: each is for the requested head, its
panels fit its tokens, masked scores are −∞ (null) exactly where the mask forbids, softmax rows sum to 1, and a
comparison's difference is a − b. Each returns None (or falsy items) when the answer is right, else what is wrong.
"""

from __future__ import annotations

import string

from attention_viz.service.requests import known_case


def head_problems(answer: dict, values: dict, ids: dict) -> list:
    """What is wrong with the head a /steps or /compare answer is for (kind, layer, head as requested)."""
    if not isinstance(answer, dict):
        return ["the answer is not a dict"]
    asked = (values.get(ids["kind"]), int(values.get(ids["layer"])), int(values.get(ids["head"])))
    given = (answer.get("kind"), answer.get("layer"), answer.get("head"))
    return [given != asked and f"an answer for {given}, asked for {asked}"]


def source_tokens(e: dict) -> list[str]:
    """The source a request runs: a trained model (all of them know a-z) lower-cases capitals; the untrained one
    ("d_k" in e) runs the text as typed."""
    text = e["text"] if "d_k" in e else known_case(e["text"], string.ascii_lowercase)[0]
    return [*text, "<eos>", *["<pad>"] * e["pads"]]


def steps_sizes(steps: dict, e: dict) -> str | None:
    """None when a steps payload's five panels fit its tokens, the masked scores are null (−∞) exactly where
    the mask forbids, and each softmax row with a key to attend to sums to 1."""
    q, k, mask = len(steps["queries"]), len(steps["keys"]), steps["mask"]
    if steps["kind"] != "decoder.self_attn" and steps["keys"] != source_tokens(e):
        return "the steps' keys are not this request's source"
    panels = {panel["key"]: panel["values"] for panel in steps["panels"]}
    widths = {key: k for key in ("scores", "scaled", "masked", "weights")} | {"output": steps["d_v"]}
    if set(panels) != set(widths) or any(len(rows) != q or {len(r) for r in rows} != {widths[key]}
                                         for key, rows in panels.items()):
        return f"steps panels {sorted(panels)} do not fit {q} x {k} (d_v {steps['d_v']})"
    if any((value is None) == ok for row, oks in zip(panels["masked"], mask) for value, ok in zip(row, oks)):
        return "the masked scores are not −∞ exactly where the mask forbids"
    sums = [sum(row) for row, oks in zip(panels["weights"], mask) if any(oks)]
    return next((f"a softmax row sums to {total}" for total in sums if abs(total - 1) > 1e-4), None)


def compare_sizes(comparison: dict) -> str | None:
    """None when a comparison's maps fit its tokens and its difference is a − b (of two runs, another text or model:
    b fits its own tokens, and the difference a's where the tokens align, null elsewhere)."""
    q, k = len(comparison["queries"]), len(comparison["keys"])
    if comparison.get("pair"):
        shapes = {"a": (q, k), "difference": (q, k), "b": (len(comparison["queries_b"]), len(comparison["keys_b"]))}
        if any(len(comparison[name]) != rows or {len(r) for r in comparison[name]} - {cols}
               for name, (rows, cols) in shapes.items()):
            return f"comparison maps do not fit {q} x {k} and b's {shapes['b'][0]} x {shapes['b'][1]}"
        if all(d is None for row in comparison["difference"] for d in row) and "unaligned" not in comparison:
            return "a comparison of two runs aligns nothing and says nothing of it"
        return None
    if any(len(comparison[name]) != q or {len(r) for r in comparison[name]} != {k} for name in ("a", "b", "difference")):
        return f"comparison maps do not fit {q} x {k}"
    rows = zip(comparison["a"], comparison["b"], comparison["difference"])
    if any(abs(x - y - d) > 1e-6 for a, b, diff in rows for x, y, d in zip(a, b, diff)):
        return "the difference is not a − b"
    return None
