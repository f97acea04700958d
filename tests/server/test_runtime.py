"""The process tuning: the free heap trimmed at most once per interval, however many events ask."""

from __future__ import annotations

import time

from attention_viz.server import runtime


def test_the_heap_is_trimmed_at_most_once_per_interval(monkeypatch):
    trims = []
    monkeypatch.setattr(runtime, "_LIBC", type("Libc", (), {"malloc_trim": staticmethod(trims.append)})())
    monkeypatch.setattr(runtime, "_last_trim", [0.0])
    asked = [runtime.release_free_memory(every_s=60.0) for _ in range(50)]
    assert asked == [True] + [False] * 49 and trims == [0]  # the first trims, the next 49 within the minute do not
    runtime._last_trim[0] = time.monotonic() - 61.0
    assert runtime.release_free_memory(every_s=60.0) and trims == [0, 0]  # a minute later: trimmed again
