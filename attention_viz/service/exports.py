"""Exports: every map of a run as .npz, one head as CSV, and the bounded folder of export files the app serves.

Each file carries the settings it was made with (the .npz as JSON, the CSV in its comment lines).
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import tempfile
import threading
from collections import OrderedDict, deque
from pathlib import Path

import numpy as np

from attention_viz.service.limits import EXPORT_BYTES, EXPORTS_PER_CLIENT, KEPT_EXPORTS
from attention_viz.service.runs import Run

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


def maps_npz(run: Run) -> bytes:
    """Every map of a run as .npz: one [H, Q, K] float32 array per key, the tokens, and the settings as JSON."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        **{key: np.asarray(value) for key, value in run.maps.items()},
        src_tokens=np.array(run.src_tokens, dtype=str),
        tgt_tokens=np.array(run.tgt_tokens, dtype=str),
        settings=np.array(json.dumps(run.settings.as_record(), ensure_ascii=False)),
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
    """A temporary folder of export folders, one per export, that cannot grow without bound: each client (a page's
    session) keeps its last `per_client` exports, and all clients together at most `kept` folders and `max_bytes`
    bytes, the oldest deleted first (the newest export is always kept, whatever its size).

    The app serves these files from where they are (webui/page.py), so nothing else copies them. The folder goes
    with close() (the server calls it as it stops), else when this object is collected or the interpreter exits; a
    folder that a killed server left behind is removed by the next ExportFolder made in the same parent: while a
    server runs, it holds a lock on its folder's LOCK_NAME (flock), and a folder whose lock nobody holds is a leftover.
    """

    def __init__(self, kept: int = KEPT_EXPORTS, max_bytes: int = EXPORT_BYTES, per_client: int = EXPORTS_PER_CLIENT,
                 parent: Path | None = None) -> None:
        parent = Path(parent or tempfile.gettempdir())
        remove_leftovers(parent)
        self._root = tempfile.TemporaryDirectory(prefix=PREFIX, dir=parent)
        self._held = hold(self.root)
        # folder -> (client, bytes), oldest first
        self._folders: OrderedDict[Path, tuple[str | None, int]] = OrderedDict()
        self._by_client: dict[str, deque[Path]] = {}
        self._lock = threading.Lock()
        self.kept, self.max_bytes, self.per_client = kept, max_bytes, per_client
        self.bytes = 0

    @property
    def root(self) -> Path:
        """The temporary folder (removed by close(), or when this object is collected)."""
        return Path(self._root.name)

    def write(self, files: dict[str, bytes], client: str | None = None) -> list[Path]:
        """Write name -> bytes into a new folder, counted against `client` (None: the overall caps only); the paths,
        in order."""
        folder = Path(tempfile.mkdtemp(dir=self.root))
        paths = []
        for name, data in files.items():
            path = folder / name
            path.write_bytes(data)
            paths.append(path)
        with self._lock:
            self._folders[folder] = (client, sum(len(data) for data in files.values()))
            self.bytes += self._folders[folder][1]
            if client is not None:
                mine = self._by_client.setdefault(client, deque())
                mine.append(folder)
                while len(mine) > self.per_client:
                    self._remove(mine[0])
            while len(self._folders) > 1 and (len(self._folders) > self.kept or self.bytes > self.max_bytes):
                self._remove(next(iter(self._folders)))
        return paths

    def _remove(self, folder: Path) -> None:
        client, size = self._folders.pop(folder)
        self.bytes -= size
        if client is not None:
            mine = self._by_client[client]
            mine.remove(folder)
            if not mine:
                del self._by_client[client]
        shutil.rmtree(folder, ignore_errors=True)

    def folders(self) -> int:
        """How many export folders are kept."""
        return len(self._folders)

    def close(self) -> None:
        """Remove the whole folder (exports and everything else in it) and let go of its lock."""
        if self._held is not None:
            os.close(self._held)
            self._held = None
        self._root.cleanup()


PREFIX = "attention_viz-exports-"  # every ExportFolder's folder is named so, in its parent
LOCK_NAME = ".lock"


def hold(root: Path) -> int | None:
    """Lock root/LOCK_NAME for as long as the returned descriptor stays open (None where there is no flock). The lock
    is taken on a file of another name, then renamed into place: no other server ever sees the lock file unheld."""
    if fcntl is None:  # pragma: no cover - not POSIX: leftovers are not recognised
        return None
    staging = root / f"{LOCK_NAME}.{os.getpid()}"
    fd = os.open(staging, os.O_CREAT | os.O_WRONLY, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.replace(staging, root / LOCK_NAME)
    return fd


def remove_leftovers(parent: Path) -> int:
    """Remove the export folders under `parent` that no running server holds (each ExportFolder's PREFIX folder with
    a LOCK_NAME nobody has locked); how many. Any other folder, and a folder in use, is left alone."""
    if fcntl is None:  # pragma: no cover
        return 0
    removed = 0
    for folder in parent.glob(f"{PREFIX}*"):
        lock = folder / LOCK_NAME
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:  # no lock file: not ours, or not yet set up
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a running server's
            os.close(fd)
            continue
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
        removed += 1
    return removed
