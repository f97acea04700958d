"""Training, step by step: the study's shipped members at one d_k, their snapshots as numbers the browser draws.

The compatibility study (docs/study.md) trained the reverse task with scaled dot product, plain dot product and
additive attention at each d_k, and kept every attention map of five probe inputs at 24 log-spaced steps
(data.snapshots). For one d_k this packs the three side by side (explorer/static/training.js draws them):

    {
      "format": "attention_viz.training/1",
      "d_k": 128, "d_ks": [8, 32, 128, 512, 1024],      # this view's and every trained size
      "task": "reverse",
      "steps": [0, 1, 2, ..., 1000],                     # the snapshots' training steps (n_steps)
      "total_steps": 1000,                               # the training's budget (a live run's steps so far are fewer)
      "probes": ["rfsvmubm", ...],                       # P probe texts (teacher-forced: <bos> + the answer)
      "tokens": {"source": [[str] x P], "target": [[str] x P]},
      "kinds": [{"key": "decoder.0.cross_attn", "kind": "decoder.cross_attn", "label": ..., "queries": "target",
                 "keys": "source"}, ...],
      "quant": 255,                                      # weight = byte / 255
      "arms": [{
          "arm": "scaled_dot" | "dot" | "additive", "label": str, "model": checkpoint name,
          "heads": H, "heldout_exact_match": float,      # after the last step, 1,000 held-out strings
          "train": {"loss": [...], "token_acc": [...], "exact_match": [...]},   # per step (null at step 0)
          "probe": {"loss": [...], "token_acc": [...], "exact_match": [...]},   # on the probes, per step
          "alignment": [...],                            # per step: cross-attention's weight on reverse's
                                                         # anti-diagonal, mean over probes and heads
          "maps": {key: b64 of uint8 [n_steps, P, H, Qmax, Kmax]},          # padded; crop with the tokens
          "status": str                                  # a live run that ended early only: how it ended
      }, ...]
    }
"""

from __future__ import annotations

import base64

import numpy as np

from attention_viz.core.maps import KINDS, MapKey, kind_of, weight_on
from attention_viz.data.snapshots import LEVELS
from attention_viz.data.tasks import alignment
from attention_viz.explorer.pack import AXES
from attention_viz.service.catalog import Catalog
from attention_viz.service.scores import pattern_targets
from attention_viz.service.limits import STUDY_ARMS, STUDY_PREFIX

FORMAT = "attention_viz.training/1"
ROUND = 4


def trained_sizes(catalog: Catalog) -> list[int]:
    """The d_k at which every arm of the study has a member with snapshots (the view's d_k stops)."""
    sizes = None
    for arm in STUDY_ARMS:
        family = catalog.families.get(STUDY_PREFIX + arm)
        have = set(family.d_ks) if family is not None else set()
        sizes = have if sizes is None else sizes & have
    return sorted(sizes or [])


def _rounded(values) -> list:
    return [None if v is None else round(float(v), ROUND) for v in values]


def arm_data(arm: str, label: str, model: str, meta: dict, quantised: dict[str, np.ndarray],
             heldout_exact_match: float | None) -> dict:
    """One arm of the view from snapshots: meta as data.snapshots' JSON (steps, probes, task, train, probe),
    quantised[key] uint8 [n_steps, P, H, Q, K]. Alignment: cross-attention's weight on the task's alignment per
    step, the mean over probes (each probe's row t holds the weight on the source positions it is written from)."""
    cross = [key for key in quantised if kind_of(key) == "decoder.cross_attn"]
    score = []
    for s in range(len(meta["steps"])):
        per_probe = []
        for p, text in enumerate(meta["probes"]):
            n_q, n_k = len(meta["tgt_tokens"][p]), len(meta["src_tokens"][p])
            targets = pattern_targets("decoder.cross_attn", meta["tgt_tokens"][p], meta["src_tokens"][p],
                                      alignment(meta["task"], text))["alignment"]
            for key in cross:
                weights = quantised[key][s, p, :, :n_q, :n_k] / LEVELS  # (H, Q, K)
                per_probe.append(np.nanmean(weight_on(weights, targets)))
        score.append(float(np.mean(per_probe)) if per_probe else None)
    first = next(iter(quantised.values()))
    return {
        "arm": arm, "label": label, "model": model, "heads": int(first.shape[2]),
        "heldout_exact_match": heldout_exact_match,
        "train": {k: _rounded(v) for k, v in meta["train"].items()},
        "probe": {k: _rounded(v) for k, v in meta["probe"].items()},
        "alignment": _rounded(score),
        "maps": {key: base64.b64encode(np.ascontiguousarray(q, dtype=np.uint8).tobytes()).decode("ascii")
                 for key, q in quantised.items()},
        "shape": {key: list(q.shape) for key, q in quantised.items()},
    }


def view_data(meta: dict, keys: list[str], arms: list[dict], d_k: int, d_ks: list[int],
              total_steps: int | None = None) -> dict:
    """The whole view (this module's format) from the first arm's snapshot meta and the packed arms."""
    kinds = []
    for key in keys:
        where = MapKey.parse(key)
        queries, key_axis = AXES[where.kind]
        kinds.append({"key": key, "kind": where.kind, "label": f"{KINDS[where.kind]}, layer {where.layer}",
                      "queries": queries, "keys": key_axis})
    kinds.sort(key=lambda k: (k["kind"] != "decoder.cross_attn", k["key"]))  # the telling one first
    steps = list(meta["steps"])
    return {
        "format": FORMAT, "d_k": d_k, "d_ks": list(d_ks), "task": meta["task"], "steps": steps,
        "total_steps": int(total_steps if total_steps is not None else steps[-1]),
        "probes": list(meta["probes"]), "tokens": {"source": meta["src_tokens"], "target": meta["tgt_tokens"]},
        "kinds": kinds, "quant": LEVELS, "arms": arms,
    }


def training_data(catalog: Catalog, d_k: object) -> dict:
    """The three arms' snapshots at `d_k` (one of trained_sizes; anything else is refused with the sizes named)."""
    sizes = trained_sizes(catalog)
    if not sizes:
        raise ValueError("No training snapshots ship with this app.")
    named = str(d_k).strip() if isinstance(d_k, (str, int)) and not isinstance(d_k, bool) else None
    if named not in {str(size) for size in sizes}:
        raise ValueError(f"d_k must be one of the trained sizes {', '.join(map(str, sizes))}.")
    d_k = int(named)
    arms, meta0 = [], None
    for arm, label in STUDY_ARMS.items():
        name = dict(catalog.families[STUDY_PREFIX + arm].members)[d_k]
        snaps = catalog.snapshots(name)
        if meta0 is None:
            meta0 = snaps.meta
        elif snaps.meta["probes"] != meta0["probes"] or snaps.meta["steps"] != meta0["steps"]:
            raise ValueError(f"{name}'s snapshots have other probes or steps than {meta0['model']}'s")
        arms.append(arm_data(arm, label, name, snaps.meta, snaps.quantised,
                             catalog.cards[name].get("heldout_exact_match")))
    return view_data(meta0, list(meta0["keys"]), arms, d_k, sizes)
