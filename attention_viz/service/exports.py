"""Exports: every map of a run as .npz, one head as CSV, and the folder of export files the app serves.

Each file carries the settings it was made with (the .npz as JSON, the CSV in its comment lines).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
from collections import deque
from pathlib import Path

import numpy as np

from attention_viz.service.limits import KEPT_EXPORTS
from attention_viz.service.runs import Run


def maps_npz(run: Run) -> bytes:
    """Every map of a run as .npz: one [H, Q, K] float32 array per key, the tokens, and the settings as JSON."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        **{key: np.asarray(value) for key, value in run.maps.items()},
        src_tokens=np.array(run.src_tokens, dtype=str),
        tgt_tokens=np.array(run.tgt_tokens, dtype=str),
        settings=np.array(json.dumps(dict(run.settings.__dict__), ensure_ascii=False)),
    )
    return buffer.getvalue()


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # every character str.splitlines breaks a line at


def one_line(value: object) -> str:
    """str(value) on one line: each line-breaking character written as its escape (a real model's text may hold
    U+2028, which would end a CSV's "# name: value" line early for readers that honour it)."""
    return "".join(c.encode("unicode_escape").decode("ascii") if c in LINE_BREAKS else c for c in str(value))


def head_csv(run: Run, kind: object, layer: object, head: object, record: dict[str, str] | None = None) -> str:
    """One head as CSV: "# name: value" lines for `record` (the settings), a header of keys, then one row per
    query; labels are "position:token". Readers skip the record with e.g. pandas.read_csv(comment="#")."""
    weights = run.head(kind, layer, head)  # (Q, K), kind, layer and head checked
    queries, keys = run.tokens(str(kind))
    out = io.StringIO()
    for name, value in (record or {}).items():
        out.write(f"# {name}: {one_line(value)}\n")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query \\ key"] + [f"{j}:{token}" for j, token in enumerate(keys)])
    for i, (token, row) in enumerate(zip(queries, weights, strict=True)):
        writer.writerow([f"{i}:{token}"] + [f"{w:.6f}" for w in row])
    return out.getvalue()


class ExportFolder:
    """A temporary folder of export folders, one per export, the oldest deleted past `kept`."""

    def __init__(self, kept: int = KEPT_EXPORTS) -> None:
        self._root = tempfile.TemporaryDirectory(prefix="attention_viz-exports-")
        self._folders: deque[Path] = deque()
        self.kept = kept

    @property
    def root(self) -> Path:
        """The temporary folder (removed when this object is collected)."""
        return Path(self._root.name)

    def write(self, files: dict[str, bytes]) -> list[Path]:
        """Write name -> bytes into a new folder; the paths, in order."""
        folder = Path(tempfile.mkdtemp(dir=self.root))
        self._folders.append(folder)
        while len(self._folders) > self.kept:
            shutil.rmtree(self._folders.popleft(), ignore_errors=True)
        paths = []
        for name, data in files.items():
            path = folder / name
            path.write_bytes(data)
            paths.append(path)
        return paths
