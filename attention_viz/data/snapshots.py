"""Training snapshots: every attention map of a few fixed probe inputs at log-spaced steps, beside a checkpoint.

A checkpoint NAME trained with snapshots on has two more files beside NAME.safetensors and NAME.json:
    NAME.snapshots.json   {"format", "model", "task", "scale", "compatibility", "d_k", "steps", "probes",
                           "src_tokens", "tgt_tokens", "keys", "quantisation", "train", "probe", "arrays"}
    NAME.snapshots.npz    per map key, uint8 [steps, P, H, Q, K]: round(weight · 255) of the probe batch
                          (P probes, padded to the longest); and "final.KEY", float32 [P, H, Q, K]: the same
                          maps at the last step from the full-precision model, before the weights were saved
The maps are teacher-forced (decoder input <bos> + the right answer), in eval mode, with padding and causal
masks on: a masked weight is exactly 0, and every row sums to 1 within the quantisation (≤ K / 510).
"train" holds the loss, token accuracy and exact match of the training batch of the update that led to each
step, as the trainer measured them while training on it (null at step 0); "probe" the same on the probe inputs,
at the snapshot itself. The .npz is read with allow_pickle=False: like safetensors, it cannot run code.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_viz.core.maps import kind_of
from attention_viz.data.checkpoints import shipped_models_dir

FORMAT = "attention_viz.snapshots/1"
JSON_SUFFIX, ARRAYS_SUFFIX = ".snapshots.json", ".snapshots.npz"
LEVELS = 255  # uint8: weight = value / 255; the app's colour scale has 252 steps, so nothing visible is lost
FINAL_PREFIX = "final."
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


def quantise(weights: np.ndarray) -> np.ndarray:
    """Weights in [0, 1] -> uint8 round(w · 255); 0 stays exactly 0."""
    return np.rint(np.clip(np.asarray(weights, dtype=np.float64), 0.0, 1.0) * LEVELS).astype(np.uint8)


def dequantise(values: np.ndarray) -> np.ndarray:
    """uint8 -> float32 weights value / 255."""
    return np.asarray(values, dtype=np.float32) / LEVELS


@dataclass(frozen=True)
class Snapshots:
    """The snapshots of one checkpoint, as load_snapshots reads them.

    quantised[key] is uint8 [n_steps, P, H, Q, K] (padded); maps(key) dequantises it; map_at(key, s, p) crops one
    probe's [H, Q, K] at the s-th snapshot; final[key] is float32 [P, H, Q, K] at the last step, full precision.
    """

    meta: dict                         # the JSON file, as written
    quantised: dict[str, np.ndarray]   # key -> uint8 [n_steps, P, H, Q, K]
    final: dict[str, np.ndarray]       # key -> float32 [P, H, Q, K]

    @property
    def steps(self) -> list[int]:
        return list(self.meta["steps"])

    @property
    def probes(self) -> list[str]:
        return list(self.meta["probes"])

    @property
    def keys(self) -> list[str]:
        return list(self.meta["keys"])

    def maps(self, key: str) -> np.ndarray:
        """float32 [n_steps, P, H, Q, K] weights of one map key (padded positions included)."""
        return dequantise(self.quantised[key])

    def lengths(self, key: str, probe: int) -> tuple[int, int]:
        """(queries, keys) of one probe's map under `key`, without padding."""
        src, tgt = len(self.meta["src_tokens"][probe]), len(self.meta["tgt_tokens"][probe])
        kind = kind_of(key)
        return (src, src) if kind == "encoder.self_attn" else (tgt, src) if kind == "decoder.cross_attn" else (tgt, tgt)

    def allowed(self, key: str) -> np.ndarray:
        """bool [P, 1, Q, K]: the entries the masks let a query attend to (the rest are exactly 0 at every step).

        Keys are real tokens (padding mask); in the decoder's self-attention, also not after the query (causal)."""
        _, n_probes, _, n_q, n_k = self.quantised[key].shape
        decoder_self = kind_of(key) == "decoder.self_attn"
        q, k = np.arange(n_q)[:, None], np.arange(n_k)[None, :]
        rows = []
        for probe in range(n_probes):
            keys = self.lengths(key, probe)[1]
            rows.append((k < keys) & ((k <= q) if decoder_self else True))
        return np.stack(rows)[:, None]

    def map_at(self, key: str, step_index: int, probe: int) -> np.ndarray:
        """float32 [H, Q, K]: one probe's map at the step_index-th snapshot, cropped to its own length."""
        n_q, n_k = self.lengths(key, probe)
        return dequantise(self.quantised[key][step_index, probe, :, :n_q, :n_k])


def snapshot_paths(stem: str | Path) -> tuple[Path, Path]:
    """(NAME.snapshots.json, NAME.snapshots.npz) for a checkpoint stem NAME (a path without suffix)."""
    stem = Path(stem)
    return stem.parent / (stem.name + JSON_SUFFIX), stem.parent / (stem.name + ARRAYS_SUFFIX)


def save_snapshots(stem: str | Path, meta: dict, quantised: dict[str, np.ndarray], final: dict[str, np.ndarray]) -> Path:
    """Write NAME.snapshots.npz (compressed) and NAME.snapshots.json beside checkpoint NAME; returns the JSON path.

    meta must hold "steps", "probes", "src_tokens", "tgt_tokens"; "keys", "format", "quantisation" and "arrays"
    are filled in. Each file is written whole and renamed, so a reader never sees half of one.
    """
    json_path, npz_path = snapshot_paths(stem)
    keys = list(quantised)
    arrays = {key: np.ascontiguousarray(quantised[key], dtype=np.uint8) for key in keys}
    arrays.update({FINAL_PREFIX + key: np.ascontiguousarray(final[key], dtype=np.float32) for key in keys})
    meta = {**meta, "format": FORMAT, "keys": keys, "arrays": npz_path.name,
            "quantisation": {"dtype": "uint8", "weight": f"value / {LEVELS}"}}
    _check(meta, arrays)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for path, data in ((npz_path, buffer.getvalue()), (json_path, (json.dumps(meta, indent=None) + "\n").encode())):
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        os.replace(partial, path)
    return json_path


def load_snapshots(name: str | Path, directory: str | Path | None = None) -> Snapshots:
    """Read the snapshots of checkpoint `name`: a registered name (looked up in `directory`, default the shipped
    models' study folder) or a path to NAME, NAME.safetensors, NAME.json or NAME.snapshots.json.

    Raises:
        FileNotFoundError: the checkpoint has no snapshots.
        ValueError: an invalid name, or files that do not describe each other.
    """
    if isinstance(name, str) and _NAME.fullmatch(name) and "/" not in name:
        folder = Path(directory) if directory is not None else shipped_models_dir() / "study"
        stem = folder / name
    else:
        path = Path(name)
        text = path.name
        for suffix in (JSON_SUFFIX, ARRAYS_SUFFIX, ".safetensors", ".json"):
            if text.endswith(suffix):
                text = text[: -len(suffix)]
                break
        stem = path.with_name(text)
    json_path, npz_path = snapshot_paths(stem)
    if not json_path.is_file() or not npz_path.is_file():
        raise FileNotFoundError(f"no snapshots for {stem} ({json_path.name} and {npz_path.name} are needed)")
    meta = json.loads(json_path.read_text())
    with np.load(npz_path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    _check(meta, arrays)
    keys = meta["keys"]
    return Snapshots(meta, {k: arrays[k] for k in keys}, {k: arrays[FINAL_PREFIX + k] for k in keys})


def list_snapshots(directory: str | Path | None = None) -> list[str]:
    """Names of the checkpoints in `directory` (default: the shipped study folder) that have snapshots."""
    folder = Path(directory) if directory is not None else shipped_models_dir() / "study"
    names = sorted(p.name[: -len(JSON_SUFFIX)] for p in folder.glob("*" + JSON_SUFFIX))
    return [n for n in names if snapshot_paths(folder / n)[1].is_file()]


def load_study_summary(directory: str | Path | None = None) -> dict | None:
    """The compatibility study's summary beside its shipped members ({"setup", "summary", "initialisation"}: mean ±
    std over seeds per init, compatibility and d_k, and the step-0 mechanism), or None when none ships."""
    folder = Path(directory) if directory is not None else shipped_models_dir() / "study"
    path = folder / "summary.json"
    if not path.is_file():
        return None
    summary = json.loads(path.read_text())
    if not isinstance(summary, dict) or not {"setup", "summary", "initialisation"} <= summary.keys():
        raise ValueError(f"{path} is not the study's summary (it needs setup, summary and initialisation)")
    return summary


def _check(meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """ValueError unless the metadata and the arrays describe each other."""
    if meta.get("format", FORMAT) != FORMAT:
        raise ValueError(f"unknown snapshot format {meta.get('format')!r}; expected {FORMAT!r}")
    steps, probes = meta["steps"], meta["probes"]
    if steps != sorted(set(steps)) or not steps:
        raise ValueError("snapshot steps must be distinct and increasing")
    if not (len(probes) == len(meta["src_tokens"]) == len(meta["tgt_tokens"])):
        raise ValueError("probes, src_tokens and tgt_tokens differ in length")
    keys = meta.get("keys") or [k for k in arrays if not k.startswith(FINAL_PREFIX)]
    expected = set(keys) | {FINAL_PREFIX + k for k in keys}
    if set(arrays) != expected:
        raise ValueError(f"snapshot arrays {sorted(arrays)} do not match the keys {keys}")
    for part in ("train", "probe"):
        for column, values in meta.get(part, {}).items():
            if len(values) != len(steps):
                raise ValueError(f"{part}.{column} has {len(values)} values for {len(steps)} steps")
    for key in keys:
        q, f = arrays[key], arrays[FINAL_PREFIX + key]
        if q.dtype != np.uint8 or q.ndim != 5 or q.shape[:2] != (len(steps), len(probes)):
            raise ValueError(f"{key}: expected uint8 [{len(steps)}, {len(probes)}, H, Q, K], got {q.dtype} {q.shape}")
        if f.dtype != np.float32 or f.shape != q.shape[1:]:
            raise ValueError(f"{FINAL_PREFIX}{key}: expected float32 {q.shape[1:]}, got {f.dtype} {f.shape}")
