"""PNG bytes: lossless encoding of the raster images (RGB, or indices into a palette), and text metadata chunks."""

from __future__ import annotations

import io
import zlib

import numpy as np
from PIL import Image


def png_with_text(png: bytes, text: dict[str, str]) -> bytes:
    """The PNG with a text chunk per (keyword, text) inserted after its header (tEXt for Latin-1 text, iTXt in
    UTF-8 otherwise): metadata image viewers show (e.g. `identify -verbose`), the pixels untouched."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    header_end = 8 + 12 + int.from_bytes(png[8:12], "big")  # signature, then IHDR's length, type, data and CRC
    chunks = []
    for keyword, value in text.items():
        try:
            data, kind = keyword.encode("latin-1") + b"\0" + value.encode("latin-1"), b"tEXt"
        except UnicodeEncodeError:  # iTXt: keyword, no compression, no language, no translated keyword, UTF-8
            data, kind = keyword.encode("latin-1") + b"\0\0\0\0\0" + value.encode("utf-8"), b"iTXt"
        chunk = kind + data
        chunks.append(len(data).to_bytes(4, "big") + chunk + zlib.crc32(chunk).to_bytes(4, "big"))
    return png[:header_end] + b"".join(chunks) + png[header_end:]


def array_to_png(image: np.ndarray, compress_level: int = 1, palette: np.ndarray | None = None) -> bytes:
    """PNG bytes of a uint8 [height, width, 3] image, or of [height, width] indices into palette [256, 3]
    (lossless: heatmap edges stay sharp)."""
    picture = Image.fromarray(np.ascontiguousarray(image))  # mode "L" for indices, "RGB" for colours
    if palette is not None:
        picture.putpalette(np.ascontiguousarray(palette, dtype=np.uint8).tobytes())  # "L" becomes "P"
    buffer = io.BytesIO()
    picture.save(buffer, format="png", compress_level=compress_level)
    return buffer.getvalue()
