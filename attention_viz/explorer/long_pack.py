"""A long run (hub.long_kept.LongRun) packed for the browser's long view (static/long.js): every head's summaries, the
text's pieces and words, one head's overview, and regions as they are asked for.

    payload = pack_long(run, words, read=4096, of=5210, title="...")    # summaries and labels
    payload["overview"] = pack_overview(run, key, head, size=512)         # one head's whole map
    pack_region(run, key, head, (r0, r1), (c0, c1))                       # exact weights, float32

An overview's cells go as uint16 of cell / the overview's top (the colour's 0 -> top, said in its legend); a region's
weights as float32 (its hover shows them as they are). The notebook has no server: pack_offline embeds every head's
overview at the side a byte budget allows, and the view draws a zoom from those blocks (saying so).
"""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the hub extra (transformers) is imported only where a real model runs
    from attention_viz.hub.words import Words

QUANT = 65535  # an overview cell's uint16 for the overview's top


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()).decode("ascii")


def pack_long(run, words: Words, *, read: int, of: int, title: str = "", note: str = "") -> dict:
    """Summaries [map key][statistic] -> [H] floats, labels, lengths: what the view draws before any head is chosen.
    read: the tokens the pass read; of: the text's tokens (more where the model's positions ended first); note:
    what the page says of them, followed by what read the page where not the whole model (run.reads)."""
    from attention_viz.fast.blockwise import STATISTICS

    note = " ".join(part for part in (note, run.reads and run.reads + ".") if part)
    return {
        "kind": "long", "title": title, "note": note, "length": run.length, "read": int(read), "of": int(of),
        "keys": list(run.keys), "heads": run.n_heads,
        "stats": {name: [[round(float(v), 6) for v in run.summaries[key][name]] for key in run.keys]
                  for name in STATISTICS},
        "pieces": words.pieces, "wordOf": words.word_of, "words": words.words,
    }


def block_of(length: int, size: int) -> tuple[int, int]:
    """An overview's block b (positions a cell covers a side) and side G for a run of `length` and at most `size`."""
    b = -(-length // size)
    return b, -(-length // b)


def pack_overview(run, key: str, head: int, size: int, reduce: str = "max", without_sink: bool = False) -> dict:
    """One head's overview (LongRun.overview) as uint16 of cell / top, with what the cells are."""
    grid = run.overview(key, head, size=size, reduce=reduce, without_sink=without_sink)
    block, side = block_of(run.length, size)
    return _overview(grid, key, head, block, reduce, without_sink)


def _overview(grid: np.ndarray, key: str, head: int, block: int, reduce: str, without_sink: bool) -> dict:
    top = float(grid.max()) if grid.size else 0.0
    cells = np.zeros(grid.shape, np.uint16) if top <= 0 else np.rint(grid / top * QUANT).astype(np.uint16)
    return {"key": key, "head": int(head), "reduce": reduce, "sink": not without_sink, "side": int(grid.shape[0]),
            "block": int(block), "top": top, "data": _b64(cells)}


def pack_region(run, key: str, head: int, rows: tuple[int, int], cols: tuple[int, int],
                without_sink: bool = False) -> dict:
    """Exact weights of rows r0:r1 and keys c0:c1 (LongRun.region), float32."""
    weights = run.region(key, head, slice(*rows), slice(*cols), without_sink=without_sink)
    return {"key": key, "head": int(head), "sink": not without_sink, "rows": [int(rows[0]), int(rows[1])],
            "cols": [int(cols[0]), int(cols[1])], "data": _b64(weights.astype(np.float32))}


def offline_side(length: int, n_maps: int, budget: int, largest: int = 512) -> int:
    """The overview side every one of n_maps heads can have within `budget` bytes (2 bytes a cell, base64's 4/3),
    at most `largest` and at least 16."""
    side = int(math.sqrt(budget / max(n_maps, 1) / (2 * 4 / 3)))
    return max(16, min(largest, side, length))


def pack_offline(run, budget: int, largest: int = 512) -> dict:
    """Every head's overview (block max, sink kept) at the side `budget` bytes allow: [map key] -> [head] -> packed."""
    side = offline_side(run.length, len(run.keys) * run.n_heads, budget, largest)
    block, cells = block_of(run.length, side)
    return {"side": cells, "block": block, "reduce": "max",
            "maps": {key: [_overview(run.overview(key, h, size=side), key, h, block, "max", False)
                           for h in range(run.n_heads)] for key in run.keys}}
