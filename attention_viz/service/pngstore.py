"""A folder of PNG files named by their content: each image encoded once, written atomically, served in place.

The app's caches keep the names of these files (a few bytes each), not pixels; the folder keeps the last
KEPT_PNGS files and holds nothing else, so the app may serve it as it is.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np

from attention_viz.draw import png
from attention_viz.draw.figures import figure_to_array
from attention_viz.service.limits import KEPT_PNGS


class PngStore:
    """Content-named PNG files in `folder` (created), the least recently used deleted past `kept`."""

    def __init__(self, folder: Path, kept: int = KEPT_PNGS) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.kept = kept
        self._pngs: OrderedDict[str, Path] = OrderedDict()  # content hash -> file, least recently used first
        self._lock = threading.Lock()

    def png_file(self, image: np.ndarray, palette: np.ndarray | None = None) -> str:
        """The image (RGB, or indices into `palette`) as a PNG file named by its content, written once and
        atomically; its path, for the app.

        Gradio writes a returned array to its cache under a content hash each time, truncating the file in
        place, so two users shown the same image can race and one download finds it empty. A path is copied
        once (written aside, then renamed) and never rewritten; it also saves re-encoding cached images.
        """
        pixels = np.ascontiguousarray(image)
        digest = hashlib.blake2b(pixels.tobytes(), digest_size=16)
        digest.update(repr((pixels.shape, pixels.dtype.str)).encode())
        if palette is not None:
            digest.update(np.ascontiguousarray(palette).tobytes())
        name = digest.hexdigest()
        if self.touch(name):
            return str(self._pngs[name])
        path = self.folder / f"{name}.png"
        staging = path.with_name(f".{name}.{threading.get_ident()}.tmp")
        staging.write_bytes(png.array_to_png(pixels, palette=palette))
        os.replace(staging, path)  # atomic: a reader sees the whole file or none
        with self._lock:
            self._pngs[name] = path
            while len(self._pngs) > self.kept:
                self._pngs.popitem(last=False)[1].unlink(missing_ok=True)
        return str(path)

    def figure_file(self, fig) -> str:
        """A matplotlib figure drawn and written as a PNG file (png_file); its path."""
        return self.png_file(figure_to_array(fig))

    def touch(self, name: str) -> bool:
        """Mark a PNG (by content name) as just used; False when it has left the store (deleted)."""
        with self._lock:
            if name not in self._pngs:
                return False
            self._pngs.move_to_end(name)
            return True

    def kept_file(self, cache, *key) -> str:
        """cache(*key), the path of a PNG file, drawn again in the rare case its file was deleted meanwhile."""
        path = cache(*key)
        if not self.touch(Path(path).stem):
            cache.cache_clear()
            path = cache(*key)
        return path
