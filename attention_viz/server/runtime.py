"""Process tuning for the server, in one place: torch threads, glibc malloc, the garbage collector, SIGTERM.

None of this changes a number the app shows; it keeps a small machine (a free Space: 2 vCPUs) answering
quickly and its memory flat under load. Measurements: docs/benchmarks.md and docs/reliability.md.
"""

from __future__ import annotations

import ctypes
import gc
import signal
import threading
import time

import torch

# glibc malloc (mallopt parameters, from malloc.h), see tune_malloc
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MALLOC_ARENAS = 2
MMAP_THRESHOLD = 1 << 20   # bytes: blocks this large get their own mapping
TRIM_EVERY_S = 0.5         # the free heap is trimmed at most this often (a trim walks it: ~1 ms)


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
    """Keep glibc from holding on to freed memory: few malloc arenas, and a fixed mmap threshold so that every
    block of a MiB or more gets its own mapping, unmapped when freed. Why: see docs/reliability.md."""
    try:
        _LIBC.mallopt(M_ARENA_MAX, arenas)
        _LIBC.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    except AttributeError:
        pass  # not glibc (macOS, musl): nothing to tune


_last_trim = [0.0]  # time.monotonic() of the last trim
_trim_lock = threading.Lock()


def release_free_memory(every_s: float = TRIM_EVERY_S) -> bool:
    """Give the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing) unless that was done
    less than `every_s` ago; the app asks after every event, so a busy server trims twice a second, not after each
    of its ~100 answers a second (a trim walks the heap: ~1 ms). Whether it trimmed. Why: see docs/reliability.md."""
    now = time.monotonic()
    with _trim_lock:
        if now - _last_trim[0] < every_s:
            return False
        _last_trim[0] = now
    try:
        _LIBC.malloc_trim(0)
    except AttributeError:
        pass
    return True


def freeze_start_up_objects() -> None:
    """Collect once, then leave everything built so far (Gradio, torch, matplotlib, warm caches) out of every collection.

    Matplotlib figures are reference cycles that only a full collection frees; with the start-up objects frozen,
    full collections come often and cost little, so figures go within a few requests. Why: see docs/reliability.md.
    """
    gc.collect()
    gc.freeze()
    gc.collect()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_on_sigterm():
    """Let SIGTERM (docker stop, Kubernetes ending a pod) stop the server as Ctrl+C does: Gradio's block_thread
    closes the server and returns, and the caller cleans up (Python's default ends the process at once, with no
    clean-up at all). The handler it replaces, for restore_sigterm."""
    return signal.signal(signal.SIGTERM, _interrupt)


def restore_sigterm(previous) -> None:
    signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
