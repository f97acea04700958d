"""Process tuning for the server, in one place: torch threads, glibc malloc, the garbage collector.

None of this changes a number the app shows; it keeps a small machine (a free Space: 2 vCPUs) answering
quickly and its memory flat under load. Measurements: docs/benchmarks.md and docs/reliability.md.
"""

from __future__ import annotations

import ctypes
import gc

import torch

# glibc malloc (mallopt parameters, from malloc.h), see tune_malloc
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 1 << 20   # bytes: blocks this large get their own mapping


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC = _libc()


def tune_process() -> None:
    """Everything below, for the server process: one torch thread and tune_malloc."""
    torch.set_num_threads(1)  # the event loop and PNG encoding share the cores; one thread answers fastest
    tune_malloc()


def tune_malloc(arenas: int = MALLOC_ARENAS, mmap_threshold: int = MMAP_THRESHOLD) -> None:
    """Keep glibc from holding on to memory the app has freed.

    Arenas: each Gradio worker thread would otherwise keep its own (~100 MB under load). mmap threshold:
    glibc raises it after every freed large block (up to 32 MB), so images, Agg canvases and model weights
    of a few MB end up inside the heap, and the holes they leave are never returned (~100 MB after 1,000
    requests). A fixed threshold keeps every block of a MiB or more in its own mapping, unmapped when freed.
    """
    try:
        _LIBC.mallopt(M_ARENA_MAX, arenas)
        _LIBC.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    except AttributeError:
        pass  # not glibc (macOS, musl): nothing to tune


def release_free_memory() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing).

    Renders free many blocks under the mmap threshold between live ones, so the heap keeps whole free pages
    that glibc only returns from its top (~100 MB after 1,000 requests). Trimming walks the free lists (about
    a millisecond); the app does it after every event.
    """
    try:
        _LIBC.malloc_trim(0)
    except AttributeError:
        pass


def freeze_start_up_objects() -> None:
    """Collect once, then leave everything built so far (Gradio, torch, matplotlib, warm caches) out of every collection.

    A matplotlib Figure is a reference cycle of ~8,000 objects holding its Agg canvas (MBs), so it is freed
    only by a full collection, which Python runs once the objects promoted since the last one reach 25% of
    those that survived it. Counting the ~400,000 start-up objects, that took 10 to 20 figures (~30 MB held,
    and a full collection walking them all took seconds). Frozen, they neither count nor get walked: the
    second collect sets the survivors' count to what was created since, so figures go within a few requests.
    """
    gc.collect()
    gc.freeze()
    gc.collect()
