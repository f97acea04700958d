"""Huge-page backed tensors: the advice covers whole 2 MiB pages inside the tensor and changes nothing else."""

import sys

import pytest
import torch

from attention_viz.fast import hugepages


@pytest.fixture
def advice(monkeypatch):
    """Record every madvise call instead of making it."""
    calls = []
    monkeypatch.setattr(hugepages, "_madvise", lambda: lambda addr, length, flag: calls.append((addr, length, flag)) or 0)
    return calls


def test_large_tensor_is_advised_on_whole_huge_pages_inside_it(advice):
    like = torch.zeros(1, dtype=torch.float64)
    t = hugepages.empty((3, 1000, 1000), like)  # 24 MB
    assert t.shape == (3, 1000, 1000) and t.dtype == torch.float64 and t.is_contiguous()
    ((addr, length, flag),) = advice
    start, end = t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()
    assert flag == hugepages.MADV_HUGEPAGE
    assert addr % hugepages.HUGE_PAGE_BYTES == 0 and length % hugepages.HUGE_PAGE_BYTES == 0
    assert start <= addr and addr + length <= end
    assert addr - start < hugepages.HUGE_PAGE_BYTES and end - (addr + length) < hugepages.HUGE_PAGE_BYTES


def test_small_tensor_is_not_advised(advice):
    t = hugepages.empty((2, 100), torch.zeros(1))
    assert t.shape == (2, 100) and not advice


def test_without_madvise_it_is_a_plain_empty_tensor(monkeypatch):
    monkeypatch.setattr(hugepages, "_madvise", lambda: None)
    t = hugepages.empty((2**20 + 1,), torch.zeros(1, dtype=torch.float32))
    assert t.shape == (2**20 + 1,) and t.dtype == torch.float32


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise is Linux's")
def test_real_madvise_is_found_and_the_tensor_is_usable():
    assert hugepages._madvise() is not None
    t = hugepages.empty((4, 2**20), torch.zeros(1))
    t.fill_(2.0)
    assert float(t.sum()) == 2.0 * 4 * 2**20
