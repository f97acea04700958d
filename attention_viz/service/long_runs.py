"""A real model reading a page: long passes on a line of their own, kept within one budget for the whole server.

    runs = LongRuns(real_models)
    payload = runs.read("hub:HuggingFaceTB/SmolLM2-135M", text)      # summaries, labels, one head's overview
    run_id = runs.keep(long_run, "hub:openai/whisper-tiny")           # a run made elsewhere (a recording's encoder)
    runs.view({"run": payload["run"], "what": "region", "key": ..., "head": 2, "rows": [0, 256], "cols": [0, 256]})

- **The line**: one long pass at a time on the whole server (`_line`), waited for at most LONG_WAIT_S. It does not
  take the model's own run line (service.real_models): a page takes a core for seconds to minutes, and short
  answers of the same model go on beside it (hub.long switches the model's attention for the pass's thread only).
- **The budget**: what every kept run holds (its q, k and lse, on the temporary disk: LongRun.kept_bytes) counts
  against LONG_KEPT_BYTES for all visitors together; a new run drops the least recently used ones until it fits. A
  view of a dropped run is told so ("dropped to make room"), and the visitor reads the text again.
- **Positions**: a model reads at most LONG_TOKENS on the CPU, LONG_TOKENS_GPU on a GPU (fewer where the device's free
  memory holds fewer: `page_tokens`), and fewer where its positions end (BERT's and opus-mt's 512): the rest of the
  text is left, and the payload says how many tokens were read of how many. A GPU server's kept runs get half the
  temporary disk's free space (at least LONG_KEPT_BYTES): a page of 32k tokens keeps eight times a 4k one's. An encoder-decoder model
  reads the page with its encoder (hub.long), and the payload's note says so.
- **Shared reads** (`shared`): a page every visitor asks for alike (the guided lesson's) is read once and its kept run
  answered to all of them while it is kept; dropped, the next asker reads it again.
- Views (an overview, a region) run LONG_VIEWS_AT_ONCE at a time; every refusal is a LongRefusal (a ValueError) with
  a sentence for the visitor; `view` answers {"error": ...} instead of raising, for the browser's call.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass

from attention_viz.core.maps import MapKey
from attention_viz.explorer.long_pack import pack_long, pack_overview, pack_region
from attention_viz.service.checks import shown
from attention_viz.service.limits import (LONG_DEVICE_SHARE, LONG_KEPT_BYTES, LONG_KEPT_ENV, LONG_OVERVIEW,
                                          LONG_TEXT_CHARS, LONG_TOKENS, LONG_TOKENS_GPU, LONG_VIEWS_AT_ONCE,
                                          LONG_WAIT_S)
from attention_viz.service.real_models import RealModels, RunLine, display_name

logger = logging.getLogger(__name__)
REGION_MAX = 256   # hub.long_kept.REGION_MAX: a region's side at most
DROPPED_KEPT = 4096  # ids of dropped runs remembered, to tell their visitors why


def on_gpu(device) -> bool:
    """Whether the server's real models run on a GPU (their device, as RealModels holds it)."""
    return str(device).startswith("cuda")


def kept_budget(device="cpu") -> int:
    """The kept runs' budget: the operator's LONG_KEPT_ENV (MiB) where set; else LONG_KEPT_BYTES, or on a GPU server
    half the temporary disk's free space where that is more (its pages are up to LONG_TOKENS_GPU tokens)."""
    value = os.environ.get(LONG_KEPT_ENV, "").strip()
    default = LONG_KEPT_BYTES
    if on_gpu(device):
        default = max(default, shutil.disk_usage(tempfile.gettempdir()).free // 2)
    try:
        return int(float(value) * 2**20) if value else default
    except ValueError:
        logger.warning("%s=%r is not a number of MiB; the kept long runs get %d MiB", LONG_KEPT_ENV, value,
                       default // 2**20)
        return default


def page_limit(device="cpu") -> int:
    """The most tokens a page may have on this server, any model: LONG_TOKENS on the CPU, LONG_TOKENS_GPU on a GPU."""
    return LONG_TOKENS_GPU if on_gpu(device) else LONG_TOKENS


def text_limit(device="cpu") -> int:
    """The most characters a page may have: LONG_TEXT_CHARS for LONG_TOKENS tokens, as many more for more."""
    return LONG_TEXT_CHARS * page_limit(device) // LONG_TOKENS


def pass_bytes_per_token(model) -> int:
    """The device memory a long pass of `model` takes per token it reads, about (hub.long keeps q, k and lse off the
    device; what stays is one layer's working set): the residual stream and its norms (4 x d_model), q, k, v
    ((H + 2 H_kv) d_k), the feed-forward's inner states (3 x d_ff), in the weights' dtype; and a block of query rows'
    scores and exponentials against every key (2 x H x ROWS, float32)."""
    from attention_viz.fast.blockwise import ROWS

    config = model.model.config
    config = getattr(config, "text_config", None) or config
    d_model = model.d_model
    d_ff = next((getattr(config, name) for name in ("intermediate_size", "ffn_dim", "d_ff", "n_inner")
                 if isinstance(getattr(config, name, None), int)), 4 * d_model)
    kv = getattr(config, "num_key_value_heads", None) or model.n_heads
    item = next(model.model.parameters()).element_size()
    return item * (4 * d_model + (model.n_heads + 2 * kv) * model.d_k + 3 * d_ff) + 4 * 2 * model.n_heads * ROWS


def page_tokens(model, free_bytes: int | None = None) -> int:
    """The most tokens `model` reads of a page on this server (its positions aside: hub.long's `reading` takes them
    out): page_limit of its device; on a GPU, fewer where LONG_DEVICE_SHARE of the device's free memory
    (`free_bytes`, else torch's reading of it) holds fewer (pass_bytes_per_token)."""
    most = page_limit(model.device)
    if not on_gpu(model.device):
        return most
    if free_bytes is None:
        import torch

        free_bytes, _ = torch.cuda.mem_get_info(model.device)
    fits = int(free_bytes * LONG_DEVICE_SHARE) // pass_bytes_per_token(model)
    return max(1, min(most, fits))


class LongRefusal(ValueError):
    """A page or a view refused: the message is for the visitor."""


@dataclass
class _Kept:
    run: object          # hub.long_kept.LongRun
    model: str           # its picker value
    bytes: int
    again: str = "read the text again"  # what its visitor does once it is dropped
    users: int = 0       # views computing from it now: a dropped run is closed when the last one ends
    dropped: bool = False


def maps_of(n: int) -> str:
    return f"{n} map" + ("" if n == 1 else "s")


def kept_estimate(model, length: int) -> int:
    """The bytes a long pass of `length` tokens keeps (hub.long: q [H, T, d], k [H_kv, T, d], lse [H, T] per map it
    reads: an encoder-decoder's encoder.* maps)."""
    config = model.model.config
    kv = getattr(config, "num_key_value_heads", None) or model.n_heads
    item = next(model.model.parameters()).element_size()
    read = [key for key in model.map_keys if model.layout != "encoder-decoder" or MapKey.parse(key).stack == "encoder"]
    return len(read) * ((model.n_heads + kv) * model.d_k + model.n_heads) * length * item


class LongRuns:
    """One server's long runs: read a page, answer its views, within one budget (thread-safe)."""

    def __init__(self, real: RealModels, budget: int | None = None, wait_s: float = LONG_WAIT_S) -> None:
        self.real = real
        self.budget = budget if budget is not None else kept_budget(real.device)
        self.tokens, self.chars = page_limit(real.device), text_limit(real.device)  # a page at most, any model
        self._line = RunLine(wait_s)  # one long pass at a time, the whole server
        self._views = threading.BoundedSemaphore(LONG_VIEWS_AT_ONCE)
        self._lock = threading.Lock()  # guards _kept and _dropped only (never held across a pass or a view)
        self._kept: OrderedDict[str, _Kept] = OrderedDict()  # run id -> kept, least recently used first
        self._dropped: deque[tuple[str, str]] = deque(maxlen=DROPPED_KEPT)  # (run id, what its visitor does)
        self._shared: dict[tuple[str, str], dict] = {}  # (model, text) -> the payload of its shared read
        self._reading: dict[tuple[str, str], threading.Event] = {}  # shared reads in flight, set when they end

    @property
    def kept_bytes(self) -> int:
        with self._lock:
            return sum(kept.bytes for kept in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, run_id: object) -> bool:
        """Whether the run `run_id` is kept (not dropped to make room, nor closed)."""
        with self._lock:
            return run_id in self._kept

    @property
    def dropped_count(self) -> int:
        """Runs dropped to make room (the last DROPPED_KEPT remembered)."""
        return len(self._dropped)

    def read(self, model_key: str, text: str) -> dict:
        """One long pass of `text` through the real model `model_key`: the payload of static/long.js (summaries,
        labels, the middle layer's first head's overview), with its run's id ("run") for later views."""
        if not isinstance(text, str) or not text.strip():
            raise LongRefusal("Paste a text to read (up to a few pages).")
        if len(text) > self.chars:
            raise LongRefusal(f"The text has {len(text):,} characters; a page read at once is at most "
                              f"{self.chars:,}. Shorten it.")
        model = self.real.get(model_key)
        name = display_name(model_key)
        from attention_viz.hub.positions import reading  # the hub extra, as below
        from attention_viz.hub.words import words_of

        ids = model.encode(text).ids  # (S,)
        with self._line:
            most = page_tokens(model)  # what the device holds now, the one pass on it
            read, _ = reading(model, int(ids.numel()), most=most)  # the pass's own rule, for its room
            self._make_room(kept_estimate(model, read))  # the pass writes its numbers as it goes: room first
            # the views need no logits (not T x V of them); the page says what was read (run.note), not a warning
            run = model.long_run(ids, last_logits=True, most=most, warn=False)
            run.logits = None
        try:
            words = words_of(model.tokenizer, ids[:run.length].tolist())
            key = run.keys[len(run.keys) // 2]
            payload = pack_long(run, words, read=run.length, of=run.given, note=run.note,
                                title=f"{name}: {run.length:,} tokens, {maps_of(len(run.keys))} x {run.n_heads} heads")
            payload["overview"] = pack_overview(run, key, 0, LONG_OVERVIEW)
        except Exception:
            run.close()
            raise
        payload["run"] = self.keep(run, model_key)
        payload["model"] = model_key
        return payload

    def shared(self, model_key: str, text: str) -> dict:
        """read(), once for every visitor asking the same page of the same model (the guided lesson's): the payload
        of its kept run (now the most recently used), or, never read or dropped since, a new read. One asker reads;
        the others wait for it (at most the line's wait each), never holding a lock meanwhile."""
        asked = (model_key, text)
        while True:
            with self._lock:
                payload = self._shared.get(asked)
                if payload is not None and payload["run"] in self._kept:
                    self._kept.move_to_end(payload["run"])
                    return payload
                self._shared.pop(asked, None)
                reading = self._reading.get(asked)
                if reading is None:
                    reading = self._reading[asked] = threading.Event()
                    break
            if not reading.wait(self._line.wait_s):
                raise LongRefusal("The server is busy reading another page: try again in a moment.")
        try:
            payload = self.read(model_key, text)
            with self._lock:
                self._shared[asked] = payload
            return payload
        finally:
            with self._lock:
                del self._reading[asked]
            reading.set()

    def _make_room(self, size: int) -> None:
        """Drop the least recently used runs until `size` more bytes fit the budget (a refusal if they never can)."""
        if size > self.budget:
            raise LongRefusal(f"This text's run would keep {size / 2**20:.0f} MiB, more than this server keeps for "
                              f"every visitor together ({self.budget / 2**20:.0f} MiB): read a shorter text.")
        dropped = []
        with self._lock:
            total = sum(kept.bytes for kept in self._kept.values())
            while self._kept and total + size > self.budget:
                old_id, old = self._kept.popitem(last=False)
                total -= old.bytes
                self._dropped.append((old_id, old.again))
                old.dropped = True
                if old.users == 0:
                    dropped.append(old)  # else the last view of it closes it
        for old in dropped:
            old.run.close()

    def keep(self, run, model_key: str, again: str = "read the text again") -> str:
        """File a long run (hub.long_kept.LongRun; this page's, or a recording's encoder read by service.media_view)
        under a new id, within the budget (room made for its actual size; a refusal, the run closed, if it never
        fits): its views are then asked of `view` as a page's are; `again`: what its visitor does once it is dropped,
        as the refusal says it."""
        size = int(run.kept_bytes)
        try:
            self._make_room(size)
        except LongRefusal:
            run.close()
            raise
        run_id = secrets.token_urlsafe(12)
        with self._lock:
            self._kept[run_id] = _Kept(run, model_key, size, again)
        return run_id

    def _get(self, run_id: object) -> _Kept:
        """The kept run (now the most recently used, one more user), or a refusal saying why it is not here."""
        with self._lock:
            kept = self._kept.get(run_id) if isinstance(run_id, str) else None
            if kept is not None:
                self._kept.move_to_end(run_id)
                kept.users += 1
                return kept
            again = next((again for dropped, again in self._dropped if dropped == run_id), None)
        if again:
            raise LongRefusal("This run was dropped to make room for other visitors' texts (the server keeps "
                              f"{self.budget / 2**20:.0f} MiB of long runs for everyone): {again}.")
        raise LongRefusal("This run is no longer on the server (it may have restarted): read the text again.")

    def view(self, asked: object) -> dict:
        """The browser's call: {"run", "what": "overview" | "region", "key", "head", "reduce", "sink", "rows",
        "cols"} -> the packed overview or region, or {"error": a sentence}."""
        try:
            return self._view(asked)
        except LongRefusal as refusal:
            return {"error": str(refusal)}

    def _view(self, asked: object) -> dict:
        if not isinstance(asked, dict):
            raise LongRefusal("A view asks for a run's overview or region.")
        kept = self._get(asked.get("run"))
        try:
            return self._answer(kept.run, asked)
        finally:
            with self._lock:
                kept.users -= 1
                close = kept.dropped and kept.users == 0
            if close:
                kept.run.close()

    def _answer(self, run, asked: dict) -> dict:
        key, head = asked.get("key"), asked.get("head")
        if key not in run.keys:
            raise LongRefusal(f"This run has no map {shown(key)}.")
        if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < run.n_heads:
            raise LongRefusal(f"Head {shown(head)} does not exist: heads are 0 to {run.n_heads - 1}.")
        without_sink = asked.get("sink") is False
        what = asked.get("what")
        if not self._views.acquire(timeout=LONG_WAIT_S):
            raise LongRefusal("The server is busy drawing other views: try again in a moment.")
        try:
            if what == "overview":
                reduce = asked.get("reduce", "max")
                if reduce not in ("max", "mean"):
                    raise LongRefusal(f"An overview's cells are each block's max or mean, not {shown(reduce)}.")
                return pack_overview(run, key, head, LONG_OVERVIEW, reduce, without_sink)
            if what == "region":
                rows, cols = _span("rows", asked.get("rows"), run.length), _span("keys", asked.get("cols"), run.length)
                return pack_region(run, key, head, rows, cols, without_sink)
            raise LongRefusal(f"A view is an overview or a region, not {shown(what)}.")
        finally:
            self._views.release()


def _span(name: str, span: object, length: int) -> tuple[int, int]:
    """[start, stop] positions inside the run, at most REGION_MAX apart, or a refusal."""
    if (not isinstance(span, (list, tuple)) or len(span) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in span)):
        raise LongRefusal(f"A region's {name} are [first, last + 1] positions.")
    start, stop = span
    if not 0 <= start < stop <= length:
        raise LongRefusal(f"A region's {name} {start}:{stop} are not inside the run's {length} positions.")
    if stop - start > REGION_MAX:
        raise LongRefusal(f"A region spans at most {REGION_MAX} {name} a side, not {stop - start}.")
    return start, stop
