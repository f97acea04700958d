"""One head's Figure 2 steps and one head's comparison, packed as the JSON-able numbers static/steps.js draws.

Input is plain arrays (no service, no model); output is a dict that `json.dumps(..., allow_nan=False)` takes
as it is. Every number is a float32 the server computed, written as the shortest decimal that reads back as
that float32 (so 0.1 travels as 0.1, and `np.float32(value)` gives the server's number exactly). −∞ is not
JSON: it travels as null, only in the "masked" panel, only where the mask says "may not attend".

Steps payload, format "attention_viz.steps/1":

    {
      "format": "attention_viz.steps/1",
      "kind": "decoder.self_attn", "label": "decoder self-attention", "layer": 1, "head": 0,
      "title": str,                          # "decoder self-attention, layer 1, head 0"
      "queries": [str, ...], "keys": [str, ...],   # the tokens of the rows (Q) and of the columns (K)
      "d_k": int, "d_v": int,
      "factor": float,                       # what QKᵀ was multiplied by (1/√d_k, 1 or the custom factor)
      "scaling": str,                        # the factor in words: "×1/√16 = 0.25", "unscaled", "×0.1 (custom)"
      "mask": [[bool] * K] * Q,              # True = may attend (the package's convention)
      "panels": [                            # in Figure 2's order
        {"key": "scores",  "name": "QKᵀ",      "values": [[float] * K] * Q},
        {"key": "scaled",  "name": "scaled",   "values": ...},   # scores × factor
        {"key": "masked",  "name": "masked",   "values": ...},   # null (−∞) where mask is False
        {"key": "weights", "name": "softmax",  "values": ...},   # rows sum to 1; exactly 0 where masked
        {"key": "output",  "name": "weights·V", "values": [[float] * d_v] * Q},
      ],
      "text": str,                           # Markdown: what each panel is
      "settings": {...}                      # the settings as used (optional; the service adds them)
    }

Compare payload, format "attention_viz.compare/1": kind, label, layer, head, title, queries, keys as above, and

      "comparison": "scaling" | "causal_mask" | "padding_mask",
      "labels": [on, off],                   # e.g. ["causal mask on", "causal mask off"]
      "a": [[float] * K] * Q,                # the weights with the switch on ...
      "b": [[float] * K] * Q,                # ... and off, on the same source and decoder input
      "difference": [[float] * K] * Q,       # a − b, computed in float32
      "masks": [mask_a, mask_b],             # [[bool] * K] * Q each, True = may attend
      "largest": {"query": i, "key": j, "value": float} | null,   # the largest |a − b| (null when all 0)
      "mean_abs": float,                     # mean |a − b|
      "outputs": [str, str],                 # the free-running greedy outputs with the switch on and off
      "text": str

A comparison of two runs (another text, or another model; service.pairs) has the same fields with a's tokens in
"queries" and "keys", and

      "comparison": "text" | "model",
      "pair": true,
      "queries_b": [str, ...], "keys_b": [str, ...],   # b's own tokens: "b" and masks[1] are [Qb, Kb]
      "difference": [[float | null] * K] * Q,  # a − b in a's positions where query and key both align, else null
      "unaligned": str                       # which tokens of a and b did not align

`steps_arrays` and `compare_arrays` turn a payload back into float32 arrays (−∞ restored).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attention_viz.core.maps import KINDS

STEPS_FORMAT = "attention_viz.steps/1"
COMPARE_FORMAT = "attention_viz.compare/1"
# (key of core.attention.attention_steps, panel name), in the order of Figure 2 (left)
PANELS = (("scores", "QKᵀ"), ("scaled", "scaled"), ("masked", "masked"), ("weights", "softmax"),
          ("output", "weights·V"))


def numbers(array: np.ndarray, masked: np.ndarray | None = None) -> list[list[float | None]]:
    """A 2-d array as rows of shortest float32 decimals; null where `masked` (bool, same shape) is True.

    Raises ValueError on a non-finite value anywhere else (NaN or ±∞ have no JSON number).
    """
    values = np.asarray(array, dtype=np.float32)
    if values.ndim != 2:
        raise ValueError(f"expected a 2-d array, got shape {list(values.shape)}")
    hidden = np.zeros(values.shape, dtype=bool) if masked is None else np.asarray(masked, dtype=bool)
    if not np.isfinite(values[~hidden]).all():
        raise ValueError("values must be finite outside the masked cells")
    # str of a float32 is its shortest round-trip decimal; parsed as float64 it prints the same digits
    decimals = np.where(hidden, np.float32(0), values).astype(str).astype(np.float64)
    rows = decimals.tolist()
    if hidden.any():
        for i, j in zip(*np.nonzero(hidden)):
            rows[i][j] = None
    return rows


def _identity(kind: str, layer: int, head: int, query_tokens: Sequence[str], key_tokens: Sequence[str]) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown attention kind {kind!r}; one of {list(KINDS)}")
    return {"kind": kind, "label": KINDS[kind], "layer": int(layer), "head": int(head),
            "title": f"{KINDS[kind]}, layer {int(layer)}, head {int(head)}",
            "queries": [str(t) for t in query_tokens], "keys": [str(t) for t in key_tokens]}


def _mask(mask: np.ndarray | None, shape: tuple[int, int], name: str = "mask") -> np.ndarray:
    allowed = np.ones(shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    if allowed.shape != shape:
        raise ValueError(f"{name} has shape {list(allowed.shape)}, expected {list(shape)}")
    return allowed


def pack_steps(arrays: Mapping[str, np.ndarray], query_tokens: Sequence[str], key_tokens: Sequence[str],
               mask: np.ndarray | None, d_k: int, factor: float, scaling: str, kind: str, layer: int, head: int,
               text: str = "") -> dict:
    """The steps payload (module docstring) of one head.

    Args:
        arrays: attention_steps of one head: "scores", "scaled", "masked" ([Q, K], −∞ where masked),
            "weights" ([Q, K]) and "output" ([Q, d_v]).
        mask: [Q, K] bool, True = may attend (None: nothing masked); "masked" must be −∞ exactly there.
        d_k: the query/key width (the scores do not show it).
        factor, scaling: what QKᵀ was multiplied by, as a number and in words.
    """
    payload = _identity(kind, layer, head, query_tokens, key_tokens)
    shape = (len(payload["queries"]), len(payload["keys"]))
    allowed = _mask(mask, shape)
    missing = [key for key, _ in PANELS if key not in arrays]
    if missing:
        raise ValueError(f"steps lack {missing}")
    panels = []
    for key, name in PANELS:
        values = np.asarray(arrays[key], dtype=np.float32)
        if values.ndim != 2 or values.shape[0] != shape[0] or (key != "output" and values.shape != shape):
            raise ValueError(f"{key} has shape {list(values.shape)} for {shape[0]} queries and {shape[1]} keys")
        if key == "masked" and not (np.isneginf(values) == ~allowed).all():
            raise ValueError("the masked scores must be −∞ exactly where the mask forbids attending")
        panels.append({"key": key, "name": name, "values": numbers(values, ~allowed if key == "masked" else None)})
    return {"format": STEPS_FORMAT, **payload, "d_k": int(d_k), "d_v": int(np.shape(arrays["output"])[1]),
            "factor": float(factor), "scaling": str(scaling),
            "mask": allowed.tolist(), "panels": panels, "text": str(text)}


def pack_compare(a: np.ndarray, b: np.ndarray, query_tokens: Sequence[str], key_tokens: Sequence[str],
                 comparison: str, labels: Sequence[str], outputs: Sequence[str], kind: str, layer: int, head: int,
                 masks: Sequence[np.ndarray | None] = (None, None), text: str = "") -> dict:
    """The compare payload (module docstring): one head's weights with a switch on (a) and off (b)."""
    payload = _identity(kind, layer, head, query_tokens, key_tokens)
    shape = (len(payload["queries"]), len(payload["keys"]))
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    if a.shape != shape or b.shape != shape:
        raise ValueError(f"a and b have shapes {list(a.shape)} and {list(b.shape)}, expected {list(shape)}")
    difference = a - b  # float32, as the payload says
    size = np.abs(difference)
    largest = None
    if size.size and size.max() > 0:
        i, j = np.unravel_index(int(size.argmax()), size.shape)
        largest = {"query": int(i), "key": int(j), "value": numbers(difference[i:i + 1, j:j + 1])[0][0]}
    return {"format": COMPARE_FORMAT, **payload, "comparison": str(comparison), "labels": [str(x) for x in labels],
            "a": numbers(a), "b": numbers(b), "difference": numbers(difference),
            "masks": [_mask(m, shape, "masks").tolist() for m in masks],
            "largest": largest, "mean_abs": float(str(size.mean(dtype=np.float32))) if size.size else 0.0,
            "outputs": [str(x) for x in outputs], "text": str(text)}


def pack_pair(a: np.ndarray, b: np.ndarray, difference: np.ndarray, tokens_a: Sequence[Sequence[str]],
              tokens_b: Sequence[Sequence[str]], comparison: str, labels: Sequence[str], outputs: Sequence[str],
              kind: str, layer: int, head: int, masks: Sequence[np.ndarray | None] = (None, None), unaligned: str = "",
              text: str = "") -> dict:
    """The compare payload of two runs (module docstring): a [Qa, Ka], b [Qb, Kb], and difference [Qa, Ka] (NaN where
    a token does not align: core.alignment.aligned_difference)."""
    payload = _identity(kind, layer, head, *tokens_a)
    queries_b, keys_b = [str(t) for t in tokens_b[0]], [str(t) for t in tokens_b[1]]
    shape_a, shape_b = (len(payload["queries"]), len(payload["keys"])), (len(queries_b), len(keys_b))
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    difference = np.asarray(difference, dtype=np.float32)
    if a.shape != shape_a or difference.shape != shape_a or b.shape != shape_b:
        raise ValueError(f"a, b and the difference have shapes {list(a.shape)}, {list(b.shape)} and "
                         f"{list(difference.shape)}, expected {list(shape_a)}, {list(shape_b)} and {list(shape_a)}")
    missing = np.isnan(difference)
    size = np.where(missing, 0, np.abs(difference))
    largest = None
    if size.size and size.max() > 0:
        i, j = np.unravel_index(int(size.argmax()), size.shape)
        largest = {"query": int(i), "key": int(j), "value": numbers(difference[i:i + 1, j:j + 1])[0][0]}
    return {"format": COMPARE_FORMAT, **payload, "comparison": str(comparison), "pair": True,
            "queries_b": queries_b, "keys_b": keys_b, "labels": [str(x) for x in labels],
            "a": numbers(a), "b": numbers(b), "difference": numbers(difference, missing),
            "masks": [_mask(masks[0], shape_a, "masks").tolist(), _mask(masks[1], shape_b, "masks").tolist()],
            "largest": largest, "mean_abs": float(size[~missing].mean()) if (~missing).any() else 0.0,
            "outputs": [str(x) for x in outputs], "unaligned": str(unaligned), "text": str(text)}


def _array(rows: list, masked_value: float = -np.inf) -> np.ndarray:
    return np.array([[masked_value if v is None else v for v in row] for row in rows], dtype=np.float32)


def steps_arrays(payload: Mapping) -> dict[str, np.ndarray]:
    """A steps payload's panels as float32 arrays by key (−∞ where "masked" holds null), and "mask" (bool [Q, K])."""
    if payload.get("format") != STEPS_FORMAT:
        raise ValueError(f"not a steps payload of format {STEPS_FORMAT!r}")
    out = {panel["key"]: _array(panel["values"]) for panel in payload["panels"]}
    out["mask"] = np.array(payload["mask"], dtype=bool).reshape(len(payload["queries"]), len(payload["keys"]))
    return out


def compare_arrays(payload: Mapping) -> dict[str, np.ndarray]:
    """A compare payload's "a", "b" and "difference" (NaN where two runs' tokens do not align) as float32 arrays, and
    "mask_a", "mask_b" (bool)."""
    if payload.get("format") != COMPARE_FORMAT:
        raise ValueError(f"not a compare payload of format {COMPARE_FORMAT!r}")
    out = {name: _array(payload[name]) for name in ("a", "b")}
    out["difference"] = _array(payload["difference"], np.nan if payload.get("pair") else -np.inf)
    out["mask_a"], out["mask_b"] = (np.array(m, dtype=bool) for m in payload["masks"])
    return out
