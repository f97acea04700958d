"""What a long pass keeps, and the maps recomputed from it (the pass itself: hub.long, whose docstring says how).

    run.region("decoder.3.self_attn", 2, slice(0, 256), slice(0, 256))   # exact weights of a block of the map
    run.overview("decoder.3.self_attn", 2, size=512)        # the whole map, each cell its block's max (or mean)

Kept holds, per map key, q [H, T, d] after the model's rotary, the keys [H_kv, T, d] (grouped keys not repeated) and
each row's log-sum-exp of its scaled, masked scores [H, T], in a temporary file or in memory; KeptLayer the factor on
QKᵀ and the mask's rule. A weight is then exp(q_i·k_j·factor − lse_i) wherever the mask allows it: LongRun computes
any region or overview of a map from a few rows of q and k. Axes: H query heads, H_kv key/value heads, T positions,
R rows, C keys of a region, d head width.
"""

from __future__ import annotations

import math
import os
import tempfile
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from attention_viz.core.attention import Window

REGION_MAX = 256     # a region's largest side
REDUCTIONS = ("max", "mean")


class LongRunError(ValueError):
    """A long pass or view refused: the message says what is wrong, fit to show a visitor."""


class Kept:
    """Per map key: q [H, T, d], keys [H_kv, T, d], lse [H, T]; in memory or in a temporary file (read back by
    rows)."""

    def __init__(self, keep: str) -> None:
        if keep not in ("disk", "memory"):
            raise LongRunError(f"keep must be 'disk' or 'memory', got {keep!r}")
        self.keep = keep
        self.tensors: dict[tuple[str, str], torch.Tensor] = {}
        self.where: dict[tuple[str, str], tuple[int, tuple[int, ...], torch.dtype]] = {}  # -> (offset, shape, dtype)
        self.file = tempfile.TemporaryFile(prefix="attention_viz-long-") if keep == "disk" else None
        self.size = 0
        if self.file is not None:
            self._closer = weakref.finalize(self, self.file.close)

    @property
    def nbytes(self) -> int:
        return self.size

    def put(self, key: str, name: str, tensor: torch.Tensor) -> None:
        """Keep `tensor` (on any device; kept on the CPU, where regions and overviews are computed)."""
        tensor = tensor.detach()
        if self.file is None:
            tensor = tensor.cpu()
            self.tensors[key, name] = tensor = tensor.contiguous()
            self.size += tensor.numel() * tensor.element_size()
            return
        self.where[key, name] = (self.size, tuple(tensor.shape), tensor.dtype)
        for part in tensor:  # a head at a time: no copy of the whole
            data = part.contiguous().cpu().view(-1).view(torch.uint8).numpy()  # its bytes (numpy has no bfloat16)
            os.pwrite(self.file.fileno(), memoryview(data).cast("B"), self.size)
            self.size += data.nbytes

    def rows(self, key: str, name: str, head: int, rows: slice) -> torch.Tensor:
        """tensor[head, rows] (rows a slice with step 1 inside the positions)."""
        if self.file is None:
            return self.tensors[key, name][head, rows]
        offset, shape, dtype = self.where[key, name]
        T, width = shape[1], math.prod(shape[2:])
        start, stop, _ = rows.indices(T)
        item = torch.empty((), dtype=dtype).element_size()
        count = max(stop - start, 0) * width
        data = os.pread(self.file.fileno(), count * item, offset + (head * T + start) * width * item)
        array = np.frombuffer(data, dtype=np.uint8).copy()
        return torch.from_numpy(array).view(dtype).view(-1, *shape[2:])

    def close(self) -> None:
        if self.file is not None:
            self._closer()


@dataclass
class KeptLayer:
    """What one attention's weights are recomputed from, besides its kept q, k and lse."""

    factor: float                   # the number QKᵀ was multiplied by
    n_rep: int                      # query heads per key/value head
    rule: str                       # "causal", "full", "mask" or "window"
    mask: torch.Tensor | None       # [T, K] bool (True = may attend) for rule "mask"
    window: Window | None = None    # a local attention's rule (core.attention.Window) for rule "window"


class LongRun:
    """One long pass's outputs: logits, per-head summaries, and exact regions and overviews of every map.

    Attributes:
        logits: [1, T, V] (or the last hidden states of a model without a head, and of an encoder-decoder's
            encoder), as forward gives them; [1, 1, V] with last_logits.
        reads: what read the page where it is not the whole model, a sentence (READS_WITH_ENCODER), else "".
        summaries: map key -> {statistic: [H] float64} (STATISTICS, each the mean over query rows).
        keys: the map keys, in the model's order. length: T, the tokens read. n_heads: H. kept_bytes: what the pass
            kept.
        given: the tokens of the text given (more than `length` where the pass read only its first ones).
        note: the sentence saying how many were read of how many and why ("" when every token was read).
    """

    def __init__(self, logits: torch.Tensor, summaries: Mapping[str, dict[str, np.ndarray]],
                 layers: Mapping[str, KeptLayer], kept: Kept, order: list[str], length: int | None = None,
                 reads: str = "", given: int | None = None, note: str = "") -> None:
        self.logits = logits
        self.reads = reads
        self.note = note
        self.summaries = {key: summaries[key] for key in order if key in summaries}
        self.keys = list(self.summaries)
        self._layers = layers
        self._kept = kept
        self.length = int(logits.size(1)) if length is None else int(length)  # T (logits may be the last only)
        self.given = self.length if given is None else int(given)
        self.n_heads = int(self.summaries[self.keys[0]]["entropy"].shape[0]) if self.keys else 0

    @property
    def kept_bytes(self) -> int:
        """Bytes of q, k and lse kept (in memory or in the temporary file)."""
        return self._kept.nbytes

    def close(self) -> None:
        """Drop what was kept (the temporary file is deleted); region and overview fail after."""
        self._kept.close()

    def _check(self, key: str, head: int) -> KeptLayer:
        if key not in self._layers:
            raise LongRunError(f"this run has no map {key!r}; its keys are {', '.join(self.keys)}")
        if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < self.n_heads:
            raise LongRunError(f"head {head!r} does not exist; {key} has heads 0 to {self.n_heads - 1}")
        return self._layers[key]

    def _span(self, name: str, part: slice) -> tuple[int, int]:
        if not isinstance(part, slice) or part.step not in (None, 1):
            raise LongRunError(f"{name} must be a slice of positions with step 1, such as slice(0, 256)")
        start, stop, _ = part.indices(self.length)
        if stop <= start:
            raise LongRunError(f"{name} {part.start}:{part.stop} holds no position of the {self.length}")
        if stop - start > REGION_MAX:
            raise LongRunError(f"{name} spans {stop - start} positions; a region is at most {REGION_MAX} a side")
        return start, stop

    def _weights(self, key: str, head: int, layer: KeptLayer, r0: int, r1: int, c0: int, c1: int) -> torch.Tensor:
        """Weights [r1 - r0, c1 - c0] of rows r0:r1, keys c0:c1: exp(q·k·factor − lse), hidden cells 0."""
        q = self._kept.rows(key, "q", head, slice(r0, r1))  # (R, d)
        k = self._kept.rows(key, "k", head // layer.n_rep, slice(c0, c1))  # (C, d)
        lse = self._kept.rows(key, "lse", head, slice(r0, r1))  # (R,)
        wide = torch.promote_types(q.dtype, torch.float32)  # half-precision q and k: scores in float32, as the pass's
        s = torch.matmul(q.to(wide) * layer.factor, k.to(wide).T)  # (R, C)
        # a weight is at most 1; recomputed in float32 from kept q, k and an lse the pass summed its own way (base 2),
        # a row's one dominant weight comes out up to ~2e-5 above it (1.0000153 seen on MiniLM): clamped to 1
        weights = torch.exp(s - lse[:, None]).clamp_(max=1.0)
        if layer.rule == "causal":
            hidden = torch.arange(c0, c1)[None] > torch.arange(r0, r1)[:, None]
            weights.masked_fill_(hidden, 0.0)
        elif layer.rule == "mask":
            weights.masked_fill_(~layer.mask[r0:r1, c0:c1], 0.0)
        elif layer.rule == "window":
            weights.masked_fill_(~layer.window.allowed(torch.arange(r0, r1), torch.arange(c0, c1))[0], 0.0)
        return weights

    def _rest(self, key: str, head: int, layer: KeptLayer, r0: int, r1: int) -> torch.Tensor:
        """Σ_{j≥1} p_ij of rows r0:r1 [R], float64: each row's weight off the first token, summed term by term (not
        1 − p_i0, which loses every digit when the sink takes nearly all)."""
        end = r1 if layer.rule == "causal" else self.length
        rest = torch.zeros(r1 - r0, dtype=torch.float64)
        for c0 in range(1, end, 1024):
            rest += self._weights(key, head, layer, r0, r1, c0, min(c0 + 1024, end)).sum(-1, dtype=torch.float64)
        return rest

    @staticmethod
    def _sinkless(weights: torch.Tensor, rest: torch.Tensor, c0: int) -> torch.Tensor:
        """weights [R, C] of keys c0.. with the first token left out: its column 0, the others / rest [R] (0 on a row
        with nothing left)."""
        if c0 == 0:
            weights[:, 0] = 0.0
        scale = torch.where(rest > 0, 1.0 / rest.clamp_min(torch.finfo(torch.float64).tiny), 0.0)
        return (weights.double() * scale[:, None]).to(weights.dtype)

    def region(self, key: str, head: int, rows: slice, cols: slice, without_sink: bool = False) -> np.ndarray:
        """Exact weights of one block of head `head`'s map: [rows, cols] float32 (each side at most REGION_MAX).
        without_sink: the first token (the sink) left out of every row and the rest renormalised, p_ij / Σ_{j'≥1}
        p_ij' (its column 0; a row with no other key 0)."""
        layer = self._check(key, head)
        (r0, r1), (c0, c1) = self._span("rows", rows), self._span("cols", cols)
        weights = self._weights(key, int(head), layer, r0, r1, c0, c1)
        if without_sink:
            weights = self._sinkless(weights, self._rest(key, int(head), layer, r0, r1), c0)
        return weights.numpy().astype(np.float32)

    def overview(self, key: str, head: int, size: int = 512, reduce: str = "max", without_sink: bool = False
                 ) -> np.ndarray:
        """The whole map of one head at most size x size: with b = ceil(T / size), cell (a, c) is the max (or mean)
        of weights [a·b : (a+1)·b, c·b : (c+1)·b]; the last blocks are partial. "mean" is the block's mean over its
        cells (those inside the T x T map), hidden cells counted as 0: the block mean of the map. float32 [G, G],
        G = ceil(T / b). without_sink: of the map with the first token left out and each row renormalised (region's)."""
        layer = self._check(key, head)
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise LongRunError(f"size must be a positive whole number, got {size!r}")
        if reduce not in REDUCTIONS:
            raise LongRunError(f"reduce must be one of {list(REDUCTIONS)}, got {reduce!r}")
        T = self.length
        b = -(-T // int(size))
        G = -(-T // b)
        grid = torch.zeros(G, G, dtype=torch.float64 if reduce == "mean" else torch.float32)
        band = max(1, 256 // b) * b  # query rows per step, whole blocks
        for r0 in range(0, T, band):
            r1 = min(r0 + band, T)
            end = r1 if layer.rule == "causal" else T
            weights = self._weights(key, int(head), layer, r0, r1, 0, end)  # (R, end): every key the rows may see
            if without_sink:
                weights = self._sinkless(weights, weights[:, 1:].sum(-1, dtype=torch.float64), 0)
            A, C = -(-(r1 - r0) // b), -(-end // b)
            padded = weights.new_zeros(A * b, C * b)
            padded[: r1 - r0, :end] = weights
            blocks = padded.view(A, b, C, b)
            a0 = r0 // b
            if reduce == "max":
                grid[a0:a0 + A, :C] = blocks.amax(dim=(1, 3)).float()
            else:
                grid[a0:a0 + A, :C] = blocks.sum(dim=(1, 3), dtype=torch.float64)
        if reduce == "mean":
            sides = torch.full((G,), b, dtype=torch.float64)
            sides[-1] = T - (G - 1) * b
            grid /= sides[:, None] * sides[None, :]
        return grid.numpy().astype(np.float32)

    def __repr__(self) -> str:
        return f"LongRun({self.length} tokens, {len(self.keys)} maps x {self.n_heads} heads, kept {self.kept_bytes} B)"
