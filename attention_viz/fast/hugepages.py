"""Fresh CPU tensors backed by transparent huge pages, for the attention weights that every call returns.

Why: the first write to each 4 KiB page of a fresh [..., Q, K] tensor is a page fault; 2 MiB pages (madvise
MADV_HUGEPAGE, what PyTorch does for large tensors when THP_MEM_ALLOC_ENABLE=1) take 512 times fewer faults.
What that saves: see docs/benchmarks.md.

Only the tensors of this one call are advised: no process-wide setting changes. Where the advice is
impossible (not Linux, not the CPU, too small to hold an aligned huge page, no libc) the tensor is
an ordinary `torch.empty`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch

HUGE_PAGE_BYTES = 2**21  # x86-64 and arm64 (4 KiB base pages) transparent huge pages
MADV_HUGEPAGE = 14  # <asm-generic/mman-common.h>
# Tensors smaller than this are left alone: they hold at most one aligned huge page, and below
# ~2 MiB glibc serves them from its heap, where freed memory is reused without page faults.
MIN_BYTES = 2 * HUGE_PAGE_BYTES


@functools.cache
def _madvise():
    """libc's madvise(addr, length, advice), or None where there is none to call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


def empty(shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of `shape` with `like`'s dtype and device; huge-page backed where it can be.

    The advice covers the whole 2 MiB pages inside the tensor, before anything is written to it (a page
    already touched stays small). It is only advice: the contents and the result are those of torch.empty.
    """
    tensor = like.new_empty(shape)
    nbytes = tensor.numel() * tensor.element_size()
    if tensor.device.type != "cpu" or nbytes < MIN_BYTES:
        return tensor
    madvise = _madvise()
    if madvise is not None:
        start = -(-tensor.data_ptr() // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES  # the first 2 MiB boundary inside
        end = (tensor.data_ptr() + nbytes) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
        if end > start:
            madvise(start, end - start, MADV_HUGEPAGE)  # a refusal (e.g. THP disabled) leaves 4 KiB pages
    return tensor
