"""A run packed once into the compact, JSON-able numbers the browser-side explorer draws.

Input is plain arrays (no service, no model): a dict map key -> [H, Q, K] weights, the source and
target tokens, optional masks per kind, the output text and notes. Output is a dict that
`json.dumps` takes as it is; `explorer.js` decodes it and draws every view from it without asking
the server again.

Payload format, version "attention_viz.explorer/1":

    {
      "format": "attention_viz.explorer/1",
      "title":  str,                       # what the explorer's heading says
      "output": str,                       # the model's output text ("" when there is none)
      "notes":  [str, ...],                # short lines shown under the output
      "tokens": {"source": [str, ...], "target": [str, ...]},
      "source_axis": {"name": "patches", "grid": [rows, columns]} | {"name": "frames", "seconds": float},
                                           # only when the source is not a text's tokens (core.maps.InputAxis): a
                                           # picture's patch grid (after its special tokens), a recording's seconds
                                           # per position
      "n_heads": H,
      "quant": 65535,                      # weight w travels as the integer round(w * quant)
      "opening": {"kind": str, "layer": int, "head": 0},   # the view the explorer opens on (see OPENING)
      "kinds": [                           # in KINDS order, only the kinds the maps have
        {
          "kind":    "encoder.self_attn",  # a key of attention_viz.core.maps.KINDS
          "label":   "encoder self-attention",
          "queries": "source" | "target",  # which token list labels the rows (Q) ...
          "keys":    "source" | "target",  # ... and the columns (K)
          "layers":  L,
          "maps":    [b64, ...],           # one per layer i (key kind_key(kind, i)): base64 of
                                           # uint16 little-endian values, [H, Q, K] row-major
          "mask":    ["1110", ...],        # Q strings of K characters: "1" may attend, "0" masked
          "stats":   {"entropy": [[H floats] x L], "max_weight": ..., "mean_distance": ...,
                      "diagonal": ...},    # core.maps.head_statistics, 4 decimals
          "norms":   [[[K floats] x H] x L],   # only when given: ‖v_j^h W_O^h‖ of each key's value, 4 significant
                                           # digits; what flows into query i from key j is weight_ij x norm_j
                                           # (Kobayashi et al. 2020), which the explorer can show as each
                                           # row's share
          "scores":  {                     # only when given (service.scores): each head's weight on a pattern
                      "values": {"alignment" | "previous" | "first" | "eos": [[H floats or null] x L]},
                      "labels": {name: str}, "chance": {name: float}, "look_for": str}
          "bias":    {                     # only where given: the position bias B the kind's attentions add to the
                      "maps": [b64 | i | null, ...],  # scaled QKᵀ (T5's relative positions, ALiBi), per layer:
                                           # base64 of float32 little-endian [H, Q, K], i: the same as layer i's,
                                           # null: that layer adds none (B = 0)
                      "range": float}      # the largest |B| over the kind's cells that may attend (its colour scale)
          "stack":   {                     # only when given, self-attention kinds (service.stacks): the whole stack
                      "rollout": b64,      # read as one mixing: rollout [Q, K] (Q = K = T), uint16 as the maps
                      "flow": b64 | null,  # attention flow [T, T] (rows normalised), null where not computed ...
                      "flow_note": str,    # ... and why
                      "note": str}         # what the stack's rollout covers
        }, ...
      ],
      "heads_off": {key: [h, ...]},        # only when given: heads switched off before W_O (their maps are
      "ablation": "zero" | "mean",         # still computed), and what they pass on instead
      "position_bias": false,              # only when given false: the model's position bias was taken out of this run
      "decode": {                          # only when given: the greedy decode, one step per target token
        "written":  [str, ...],            # step t reads target token t and writes written[t]
        "per_step": bool,                  # false: step t's rows are rows 0..t of the maps above (the causal
                                           # mask keeps earlier rows as they were); true: each step's own maps
        "steps":    [{kind: [b64, ...]}]   # per_step only, for the decoder kinds: step t's [H, t + 1, K] per
      }                                    # layer (K = t + 1 in decoder self-attention)
    }

Quantisation: weights are clipped to [0, 1] and sent as uint16 steps of 1/65535, so a decoded
weight is within 0.5/65535 (< 7.7e-6) of the original: finer than the 4 decimals shown on hover,
and exact at 0 (masked cells) and 1. Two bytes a weight, base64 makes it 8/3: the widest untrained
config (2 + 2 layers, 16 heads, 49 source and 33 target tokens) is ~472 KB of JSON (~27 KB of it the value
norms), a shipped model on 20 characters ~35 KB (`payload_bytes`; measured in tests/explorer/test_pack.py).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence

import numpy as np

from attention_viz.core.maps import AXES, KINDS, InputAxis, axis_of, head_statistics, kind_key, layers_of, token_masks

FORMAT = "attention_viz.explorer/1"
# The view a run opens on: the last layer of encoder-decoder attention, where a trained model's alignment
# (reverse's anti-diagonal, copy's diagonal) is plainest; a run without it opens on its first kind's last layer.
OPENING = "decoder.cross_attn"
QUANT = 65535  # uint16 steps per unit weight
STAT_NAMES = ("entropy", "max_weight", "mean_distance", "diagonal")
STAT_DECIMALS = 4
NORM_DIGITS = 4  # significant digits of a value's norm ‖v_j^h W_O^h‖ (any size: a real model's can be in the 100s)


def default_masks(source: Sequence[str], target: Sequence[str], causal_mask: bool = True,
                  padding_mask: bool = True, pad_token: str = "<pad>") -> dict[str, np.ndarray]:
    """[Q, K] bool masks per kind (True = may attend), as the model applies them (core.maps.token_masks)."""
    return token_masks(source, target, causal_mask, padding_mask, pad_token)


def decode_written(generated: Sequence[str], target: Sequence[str], decoder_only: bool) -> list[str] | None:
    """What each decode step writes, as the explorer steps through it (step t reads target token t and writes
    written[t]): a decoder-only model's target starts with the prompt, whose steps "write" the prompt's next token.
    None when the model wrote nothing (an encoder, or a checkpoint without its output head: nothing to step through)."""
    if not target or not generated:
        return None
    written = list(generated)
    if decoder_only:
        prompt = len(target) - max(len(written) - 1, 0)
        written = list(target[1:prompt]) + written
    return written[:len(target)]


def quantise(weights: np.ndarray) -> np.ndarray:
    """Weights in [0, 1] -> uint16 steps of 1/QUANT (values outside are clipped; NaN refused)."""
    weights = np.asarray(weights, dtype=np.float64)
    if not np.isfinite(weights).all():
        raise ValueError("attention weights must be finite to be packed")
    return np.rint(np.clip(weights, 0.0, 1.0) * QUANT).astype("<u2")


def _b64(weights: np.ndarray) -> str:
    return base64.b64encode(quantise(weights).tobytes()).decode("ascii")


def pack(
    maps: Mapping[str, np.ndarray],
    source_tokens: InputAxis | Sequence[str],
    target_tokens: InputAxis | Sequence[str] = (),
    masks: Mapping[str, np.ndarray] | None = None,
    output: str = "",
    notes: Sequence[str] = (),
    title: str = "",
    scores: Mapping[str, Mapping] | None = None,
    decode: Mapping | None = None,
    heads_off: Mapping[str, Sequence[int]] | None = None,
    ablation: str = "zero",
    value_norms: Mapping[str, np.ndarray] | None = None,
    stacks: Mapping[str, Mapping] | None = None,
    biases: Mapping[str, np.ndarray] | None = None,
    position_bias: bool | None = None,
) -> dict:
    """Pack every map of a run into the explorer's payload (the format in this module's docstring).

    Args:
        maps: map key ("encoder.0.self_attn", ...) -> [H, Q, K] weights (numpy or anything np.asarray takes).
            A kind is included when layer 0 of it is present; layers must run 0, 1, ... without gaps.
        source_tokens, target_tokens: the axes (core.maps.InputAxis) or a text's tokens; each map's Q and K must
            match their labels (see AXES).
        masks: kind -> [Q, K] bool, True = may attend; a kind left out has no masked cell.
        output, notes, title: text shown with the views.
        scores: kind -> {"values": {name: [L, H]}, "labels": {name: str}, "chance": {name: float}, "look_for": str}
            (service.scores.score_kind's result).
        decode: {"written": the token each step writes, "steps": None, or per step a map key -> [H, t + 1, K]
            (Transformer.step_maps without the causal mask)}; its steps are as many as the target tokens.
        heads_off: map key -> heads switched off (drawn marked off), with `ablation` ("zero" or "mean").
        value_norms: map key -> [H, K] ‖v_j^h W_O^h‖ of the same pass (Transformer.value_norms), for every map or
            none: the explorer's "what flows" view.
        stacks: self-attention kind -> {"rollout": [T, T], "flow": [T, T] or None, "note": str, "flow_note": str}
            (service.stacks.stack_views): the explorer's rollout and attention flow views.
        biases: map key -> [H, Q, K] the position bias B that attention added to its scaled QKᵀ (a key left out
            added none): the explorer's "position bias" view. position_bias False: a model's bias switched off.

    Raises:
        ValueError: on a shape that disagrees with the tokens or between heads, or non-finite weights.
    """
    source, target = axis_of(source_tokens), axis_of(target_tokens)
    tokens = {"source": list(source.labels), "target": list(target.labels)}
    masks = masks or {}
    known = {kind_key(kind, i) for kind in KINDS for i in range(layers_of(maps, kind))}  # layers 0, 1, ... of a kind
    unknown = [key for key in maps if key not in known]
    if unknown:
        raise ValueError(f"unknown map keys {unknown}; keys look like {kind_key('encoder.self_attn', 0)!r}, "
                         "each kind's layers 0, 1, ... without a gap")
    kinds, n_heads = [], None
    for kind, label in KINDS.items():
        n_layers = layers_of(maps, kind)
        if n_layers == 0:
            continue
        q_axis, k_axis = AXES[kind]
        shape = (len(tokens[q_axis]), len(tokens[k_axis]))
        layers = [np.asarray(maps[kind_key(kind, i)]) for i in range(n_layers)]
        for i, weights in enumerate(layers):
            if weights.ndim != 3 or weights.shape[1:] != shape:
                raise ValueError(f"{kind_key(kind, i)} has shape {list(weights.shape)}, expected "
                                 f"[heads, {shape[0]}, {shape[1]}] ({q_axis} x {k_axis} tokens)")
            if n_heads is None:
                n_heads = weights.shape[0]
            elif weights.shape[0] != n_heads:
                raise ValueError(f"{kind_key(kind, i)} has {weights.shape[0]} heads, the others {n_heads}")
        allowed = np.ones(shape, dtype=bool) if masks.get(kind) is None else np.asarray(masks[kind], dtype=bool)
        if allowed.shape != shape:
            raise ValueError(f"mask of {kind} has shape {list(allowed.shape)}, expected {list(shape)}")
        stats = head_statistics(np.stack(layers))  # each [L, H]
        entry = {
            "kind": kind, "label": label, "queries": q_axis, "keys": k_axis, "layers": n_layers,
            "maps": [_b64(weights) for weights in layers],
            "mask": _mask_rows(allowed),
            "stats": {stat: np.round(stats[stat], STAT_DECIMALS).tolist() for stat in STAT_NAMES},
        }
        if scores and kind in scores:
            entry["scores"] = _scores(kind, scores[kind], (n_layers, n_heads))
        if stacks and kind in stacks:
            entry["stack"] = _stack(kind, stacks[kind], shape)
        if biases and any(kind_key(kind, i) in biases for i in range(n_layers)):
            entry["bias"] = _biases(biases, [kind_key(kind, i) for i in range(n_layers)], (n_heads, *shape),
                                    allowed)
        if value_norms is not None:
            entry["norms"] = [_norms(value_norms, kind_key(kind, i), (n_heads, shape[1]))
                              for i in range(n_layers)]
        kinds.append(entry)
    if not kinds:
        raise ValueError("no attention maps to pack")
    opening = next((k for k in kinds if k["kind"] == OPENING), kinds[0])
    payload = {
        "format": FORMAT, "title": str(title), "output": str(output), "notes": [str(n) for n in notes],
        "tokens": tokens, "n_heads": n_heads, "quant": QUANT, "kinds": kinds,
        "opening": {"kind": opening["kind"], "layer": opening["layers"] - 1, "head": 0},
    }
    if source.name != "tokens":
        payload["source_axis"] = {"name": source.name, **({"grid": list(source.grid)} if source.grid else {}),
                                  **({"seconds": source.seconds} if source.seconds is not None else {})}
    if decode is not None:
        payload["decode"] = _decode(decode, kinds, tokens, n_heads)
    if heads_off:
        for key, heads in heads_off.items():
            if key not in maps or any(not 0 <= int(h) < n_heads for h in heads):
                raise ValueError(f"heads_off names {key} heads {list(heads)}, which the maps do not have")
        payload["heads_off"] = {key: sorted(int(h) for h in heads) for key, heads in heads_off.items() if heads}
        payload["ablation"] = str(ablation)
    if position_bias is False:
        payload["position_bias"] = False
    return payload


def _mask_rows(allowed: np.ndarray) -> list[str]:
    """A [Q, K] bool mask as Q strings of K characters, "1" where a query may attend, "0" where it is masked."""
    width = allowed.shape[1]
    text = (np.ascontiguousarray(allowed, dtype=bool).view(np.uint8) + ord("0")).tobytes().decode("ascii")
    return [text[i:i + width] for i in range(0, len(text), width)] if width else ["" for _ in allowed]


def _norms(value_norms: Mapping[str, np.ndarray], key: str, shape: tuple[int, int]) -> list[list[float]]:
    """One map's value norms [H, K] as JSON, to NORM_DIGITS significant digits."""
    if key not in value_norms:
        raise ValueError(f"value_norms has no {key}: give them for every map or none")
    norms = np.asarray(value_norms[key], dtype=np.float64)
    if norms.shape != shape:
        raise ValueError(f"value_norms of {key} have shape {list(norms.shape)}, expected [heads, keys] = {list(shape)}")
    if not np.isfinite(norms).all() or (norms < 0).any():
        raise ValueError(f"value_norms of {key} must be finite and not negative")
    flat = norms.ravel().tolist()  # one %-format of them all, then split: f"{v:.4g}" read back, at half the cost
    numbers = list(map(float, ((f"%.{NORM_DIGITS}g " * len(flat)) % tuple(flat)).split()))
    return [numbers[i:i + shape[1]] for i in range(0, len(numbers), shape[1])] if shape[1] else [[] for _ in norms]


def _biases(biases: Mapping[str, np.ndarray], keys: list[str], shape: tuple[int, int, int],
            allowed: np.ndarray) -> dict:
    """One kind's position biases as JSON: per layer float32 base64, a layer equal to an earlier one by its index
    (T5's stack shares one B), null where it adds none; range: the largest |B| where a query may attend."""
    maps: list[str | int | None] = []
    seen: dict[bytes, int] = {}
    largest = 0.0
    for i, key in enumerate(keys):
        if key not in biases:
            maps.append(None)
            continue
        bias = np.asarray(biases[key], dtype="<f4")
        if bias.shape != shape:
            raise ValueError(f"the position bias of {key} has shape {list(bias.shape)}, expected {list(shape)}")
        if not np.isfinite(bias).all():
            raise ValueError(f"the position bias of {key} must be finite to be packed")
        data = np.ascontiguousarray(bias).tobytes()
        if data in seen:
            maps.append(seen[data])
            continue
        seen[data] = i
        maps.append(base64.b64encode(data).decode("ascii"))
        shown = np.abs(bias[:, allowed]) if allowed.any() else np.abs(bias)
        largest = max(largest, float(shown.max(initial=0.0)))
    return {"maps": maps, "range": largest}


def unpack_biases(payload: Mapping) -> dict[str, np.ndarray]:
    """The payload's position biases: key -> float32 [H, Q, K] (a layer that adds none left out)."""
    out = {}
    n_heads = payload["n_heads"]
    for entry in payload["kinds"]:
        q, k = len(payload["tokens"][entry["queries"]]), len(payload["tokens"][entry["keys"]])
        layers = entry.get("bias", {}).get("maps", [])
        for i, data in enumerate(layers):
            data = layers[data] if isinstance(data, int) else data
            if data is not None:
                out[kind_key(entry["kind"], i)] = np.frombuffer(base64.b64decode(data), dtype="<f4").reshape(n_heads, q, k)
    return out


def _stack(kind: str, stack: Mapping, shape: tuple[int, int]) -> dict:
    """One stack's rollout (and flow, where given) as JSON: [T, T] each, uint16 base64 as the maps."""
    out = {"note": str(stack.get("note", "")), "flow_note": str(stack.get("flow_note", "")), "flow": None}
    for name in ("rollout", "flow"):
        values = stack.get(name)
        if values is None:
            continue
        values = np.asarray(values, dtype=np.float64)
        if values.shape != shape:
            raise ValueError(f"{name} of {kind} has shape {list(values.shape)}, expected {list(shape)}")
        out[name] = _b64(values)
    if "rollout" not in out:
        raise ValueError(f"the stack of {kind} has no rollout")
    return out


def _scores(kind: str, scores: Mapping, shape: tuple[int, int]) -> dict:
    """One kind's head scores as JSON: [L, H] values to STAT_DECIMALS (NaN -> null), labels, chance, sentence."""
    values = {}
    for name, array in scores["values"].items():
        array = np.asarray(array, dtype=np.float64)
        if array.shape != shape:
            raise ValueError(f"scores {name!r} of {kind} have shape {list(array.shape)}, expected [layers, heads] "
                             f"= {list(shape)}")
        values[name] = [[None if v != v else round(v, STAT_DECIMALS) for v in row]  # v != v: NaN
                        for row in array.tolist()]
    return {"values": values, "labels": {name: str(scores.get("labels", {}).get(name, name)) for name in values},
            "chance": {name: round(float(v), STAT_DECIMALS) for name, v in scores.get("chance", {}).items()},
            "look_for": str(scores.get("look_for", ""))}


def _decode(decode: Mapping, kinds: list[dict], tokens: Mapping[str, list[str]], n_heads: int) -> dict:
    """The decode's steps as JSON: the tokens written and, without the causal mask, each step's own maps."""
    written = [str(t) for t in decode["written"]]
    n_steps = len(tokens["target"])
    if len(written) != n_steps:
        raise ValueError(f"decode writes {len(written)} tokens but the run has {n_steps} target tokens")
    out = {"written": written, "per_step": decode.get("steps") is not None}
    if not out["per_step"]:
        return out
    steps = list(decode["steps"])
    if len(steps) != n_steps:
        raise ValueError(f"decode has maps of {len(steps)} steps, the run {n_steps}")
    n_source = len(tokens["source"])
    packed = []
    for t, maps in enumerate(steps):
        step = {}
        for entry in kinds:
            if entry["queries"] != "target":
                continue
            width = t + 1 if entry["keys"] == "target" else n_source
            layers = []
            for i in range(entry["layers"]):
                weights = np.asarray(maps[kind_key(entry["kind"], i)])
                if weights.shape != (n_heads, t + 1, width):
                    raise ValueError(f"step {t}'s {kind_key(entry['kind'], i)} has shape {list(weights.shape)}, "
                                     f"expected {[n_heads, t + 1, width]}")
                layers.append(_b64(weights))
            step[entry["kind"]] = layers
        packed.append(step)
    out["steps"] = packed
    return out


def unpack(payload: Mapping) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The payload's (maps: key -> float32 [H, Q, K], masks: kind -> bool [Q, K]): what the browser decodes."""
    if payload.get("format") != FORMAT:
        raise ValueError(f"not an explorer payload of format {FORMAT!r}")
    maps, masks = {}, {}
    n_heads, quant = payload["n_heads"], payload["quant"]
    for entry in payload["kinds"]:
        q = len(payload["tokens"][entry["queries"]])
        k = len(payload["tokens"][entry["keys"]])
        for i, data in enumerate(entry["maps"]):
            steps = np.frombuffer(base64.b64decode(data), dtype="<u2").reshape(n_heads, q, k)
            maps[kind_key(entry["kind"], i)] = (steps / quant).astype(np.float32)
        masks[entry["kind"]] = np.array([[c == "1" for c in row] for row in entry["mask"]], dtype=bool).reshape(q, k)
    return maps, masks


def to_json(payload: Mapping) -> str:
    """Compact JSON of a payload, safe to put inside an HTML <script> element (no '<', '>' or '&' as such)."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def payload_bytes(payload: Mapping) -> int:
    """Bytes of the payload as compact UTF-8 JSON: what travels to the browser (before any gzip)."""
    return len(to_json(payload).encode("utf-8"))
