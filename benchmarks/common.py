"""What every benchmark shares: interleaved rounds, medians, p95, CPU-time rounds, the machine, a process's CPU and
memory, the queue's event stream, tables, JSON, logs, temporary folders, a ref's tree, the app's environment and its
settling time, the cores a served app and its load take, an event loop of its own, Chromium.

The machine is shared and noisy, so candidates are never timed one after the other: each round
runs every candidate once (in a rotating order), and the report is the median over rounds.
Ratios are taken between medians measured in the same interleaved run.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPOSITORY = Path(__file__).resolve().parents[1]  # the checkout the benchmarks run from
LOGS = RESULTS_DIR / "logs"  # the servers' logs
SETTLE_S = 8.0  # seconds after an app's first HTTP 200 before it is measured: its warm-up thread done


@dataclass
class Timing:
    """Per-call seconds of one candidate, and the summaries the tables print."""

    samples: list[float] = field(default_factory=list)
    calls: int = 1  # back-to-back calls averaged into each sample

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p95(self) -> float:
        return percentile(self.samples, 95)

    def to_dict(self) -> dict:
        return {"median_s": self.median, "p95_s": self.p95, "n": len(self.samples), "calls_per_sample": self.calls}


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's default)."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def interleaved(
    candidates: dict[str, Callable[[], object]],
    rounds: int,
    sample_s: float = 0.01,
    warmup: int = 2,
    sync: Callable[[], None] | None = None,
    budget_s: float | None = None,
) -> dict[str, Timing]:
    """Time every candidate in interleaved rounds, rotating who goes first.

    Each sample is the mean of as many back-to-back calls of one candidate as fill about `sample_s`
    (sized from one timed call after `warmup` untimed ones), so fast and slow candidates get equally long samples.
    `sync` (e.g. torch.cuda.synchronize) is called before starting and before stopping each clock.
    `budget_s` stops early (after at least 3 rounds) once that much wall time has been spent.
    """
    sync = sync or (lambda: None)
    names = list(candidates)
    calls = {}
    for name in names:
        for _ in range(warmup):
            candidates[name]()
        sync()
        t0 = time.perf_counter()
        candidates[name]()
        sync()
        calls[name] = calls_for(time.perf_counter() - t0, sample_s)
    timings = {name: Timing(calls=calls[name]) for name in names}
    start = time.perf_counter()
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            fn, n = candidates[name], calls[name]
            sync()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            timings[name].samples.append((time.perf_counter() - t0) / n)
        if budget_s is not None and r >= 2 and time.perf_counter() - start > budget_s:
            break
    return timings


def cpu_medians(candidates: dict[str, Callable[[], object]], rounds: int, warmup: int = 0) -> dict[str, float]:
    """The median CPU seconds (time.process_time: what a shared machine's load stretches least) of one call of each
    candidate, over `rounds` rounds alternating who goes first, after `warmup` untimed calls of each."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    for r in range(rounds):
        for name in (list(candidates) if r % 2 else list(candidates)[::-1]):
            t0 = time.process_time()
            candidates[name]()
            samples[name].append(time.process_time() - t0)
    return {name: statistics.median(v) for name, v in samples.items()}


def parts_of(parser, only: str, allowed: Sequence[str]) -> tuple[str, ...]:
    """The comma-separated names of `--only`, each one of `allowed` (else parser.error)."""
    parts = tuple(p.strip() for p in only.split(",") if p.strip())
    if set(parts) - set(allowed):
        parser.error(f"unknown parts {sorted(set(parts) - set(allowed))}; choose from {', '.join(allowed)}")
    return parts


def calls_for(seconds_per_call: float, target_s: float = 0.01) -> int:
    """How many back-to-back calls make one sample last about `target_s` (1 to 1000)."""
    return max(1, min(1000, int(target_s / max(seconds_per_call, 1e-7))))


def load() -> list[float]:
    """The 1, 5 and 15 minute load averages (2.0 means both of 2 cores busy on average)."""
    return [round(x, 2) for x in os.getloadavg()]


def machine(threads: int | None = None) -> dict:
    """What the numbers were measured on."""
    import torch

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": threads if threads is not None else torch.get_num_threads(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "load_at_start": load(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:  # the version without importing gradio (seconds)
        info["gradio"] = importlib.metadata.version("gradio")
    except importlib.metadata.PackageNotFoundError:
        info["gradio"] = None
    return info


def cpu_s(pid: int | None) -> float:
    """A process's CPU time so far (user + system, s), from /proc; 0 where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def wait_idle(pid: int | None, timeout_s: float = 600.0, window_s: float = 1.0, busy_s: float = 0.1) -> float:
    """Wait until a process spends under `busy_s` of CPU in each of two `window_s` windows in a row (its start-up's
    background work done: the lesson's warm-up); the seconds waited (`timeout_s` at most)."""
    t0, quiet = time.monotonic(), 0
    while quiet < 2 and time.monotonic() - t0 < timeout_s:
        before = cpu_s(pid)
        time.sleep(window_s)
        quiet = quiet + 1 if cpu_s(pid) - before < busy_s else 0
    return time.monotonic() - t0


def rss_kib(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process (default this one) in KiB, from /proc/<pid>/status."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def status(field: str) -> int:
    """A field of this process's /proc/self/status in bytes (VmRSS, VmHWM)."""
    return int(next(line for line in open("/proc/self/status") if line.startswith(field)).split()[1]) * 1024


def reset_peak() -> bool:
    """VmHWM (the peak resident set) back to the resident set now; False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_bytes(reset: bool) -> int:
    """The peak resident set since reset_peak() (or, where it could not reset, since the process started)."""
    return status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def watch_rss(pid: int, stop: threading.Event, samples: list[tuple[float, float]], every_s: float = 1.0) -> None:
    """(seconds since the start, the process's VmRSS in MiB) every `every_s` until `stop` (a thread's target)."""
    t0 = time.monotonic()
    while True:
        try:
            samples.append((time.monotonic() - t0, rss_kib(pid)["VmRSS"] / 1024))
        except (OSError, KeyError):
            return
        if stop.wait(every_s):
            return


class EventStream:
    """The queue's event stream (GET /queue/data) read for one event, as the browser's client reads it: its place in
    the line as told (estimations), and its answer (the process_completed message)."""

    def __init__(self, event_id: str | None, t0: float, patience_s: float | None = None) -> None:
        self.event_id, self.t0, self.patience_s = event_id, t0, patience_s
        self.estimations: list[dict] = []  # (rank, queue_size, rank_eta), what the page shows as "queue: 2/9 | 1.1s"
        self.completed: dict | None = None
        self.last: dict | None = None

    def read(self, line: str | bytes) -> bool:
        """One line of the stream; True at its end. RuntimeError for another event's answer (the browser's client
        reads only its own), an unexpected error (it gives up), or no answer `patience_s` after joining."""
        if line[:5] not in ("data:", b"data:"):
            return False
        message = self.last = json.loads(line[5:])
        kind = message.get("msg")
        if kind == "estimation" and message.get("event_id") == self.event_id:
            self.estimations.append(message)
        if kind == "process_completed":
            if message.get("event_id") != self.event_id:
                raise RuntimeError(f"the stream answered another event ({message.get('event_id')}, "
                                   f"not {self.event_id})")
            self.completed = message
        if kind == "close_stream":
            return True
        if kind == "unexpected_error":
            raise RuntimeError(f"unexpected_error: {message.get('message')!r}"
                               + (", session not found" if message.get("session_not_found") else ""))
        if self.patience_s is not None and time.perf_counter() - self.t0 > self.patience_s:
            raise RuntimeError(f"no answer in {self.patience_s:.0f} s: the stream stays open, its last message {kind!r}")
        return False

    def answer(self) -> dict:
        """The event's completed message; RuntimeError where it failed or never came."""
        if self.completed is None or not self.completed.get("success"):
            raise RuntimeError(f"event failed: {self.completed or self.last}")
        return self.completed


def ms(seconds: float) -> str:
    """Seconds as milliseconds with about three significant figures."""
    value = seconds * 1e3
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def mib(nbytes: float) -> str:
    """Bytes as MiB."""
    value = nbytes / 2**20
    return f"{value:.1f}" if value >= 1 else f"{value:.3f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table, right-aligned numbers, that also reads well in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def write_json(name: str, payload: dict, directory: Path = RESULTS_DIR) -> Path:
    """Write `payload` to results/<name>.json and return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return path


def command(name: str, doc: str) -> argparse.ArgumentParser:
    """The parser of `python -m benchmarks NAME`: its module's first docstring line, and --out (the JSON's folder)."""
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {name}", description=doc.splitlines()[0])
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    return parser


def save(name: str, result: dict, out: str | Path | None = None, started: float | None = None, report=None) -> Path:
    """Print report(result) where given, write `result` as <out (default benchmarks/results)>/<name>-<time>.json and
    print where (with the seconds since `started`, a time.perf_counter(), when given): the end of a benchmark's main."""
    if report is not None:
        print(report(result), flush=True)
    path = write_json(f"{name}-{time.strftime('%Y%m%d-%H%M%S')}", result, Path(out) if out else RESULTS_DIR)
    took = f"{time.perf_counter() - started:.0f} s; " if started is not None else ""
    print(f"\n{took}results in {path}", flush=True)
    return path


def export_ref(ref: str, folder: Path) -> str:
    """`git archive ref` unpacked into folder (the repository is only read); the commit's hash."""
    commit = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "--verify", f"{ref}^{{commit}}"],
                            capture_output=True, text=True, check=True).stdout.strip()
    archive = folder.parent / f"{folder.name}.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(REPOSITORY), "archive", "--format=tar", commit], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    archive.unlink()
    return commit


def head() -> str:
    """This checkout's commit, short ("unknown" outside git)."""
    return subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "unknown"


@contextmanager
def temp_folder(prefix: str) -> Iterator[Path]:
    """A fresh temporary folder, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def chromium() -> Iterator:
    """Debian's headless Chromium through Playwright's sync API (devtools.browser), closed afterwards."""
    from playwright.sync_api import sync_playwright

    from devtools.browser import CHROMIUM, CHROMIUM_ARGS

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def app_env(tree: Path, temp: Path | str) -> dict[str, str]:
    """The environment of `tree`'s `python app.py`: its own package first, Gradio's file cache in `temp`."""
    return {"PYTHONPATH": str(tree), "GRADIO_TEMP_DIR": str(temp), "PYTHONDONTWRITEBYTECODE": "1"}

def own_loop(coroutine):
    """asyncio.run on a thread of its own: a benchmark's one event loop (a class's), out of reach of any loop the calling thread
    runs (Playwright's sync API leaves one running in a test process)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def cores() -> tuple[list[str], set[int] | None, str]:
    """Where the server and the class run: the prefix that pins the server to one core, the core this process takes,
    and a sentence saying so (on one core, or with no taskset: shared, and the figures are the class's too)."""
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        return [], None, f"not pinned: one core ({mine[0]}) for the server and the class"
    if shutil.which("taskset") is None:
        return [], None, "not pinned: no taskset; the server and the class share the cores"
    server, client = mine[0], mine[1]
    return (["taskset", "-c", str(server)], {client},
            f"the server pinned to core {server} (taskset), the class to core {client}")


CGROUPS = Path("/sys/fs/cgroup")


def capped(prefix: list[str], percent: int, name: str) -> tuple[list[str], str]:
    """`prefix` (cores') with the server's process capped at `percent` % of one core's time by a CPU cgroup of its own
    (`name`: cgroup v2's cpu.max, else v1's cpu.cfs_quota_us), a slower core than this one; and a sentence saying so.
    Where no cgroup can be made (no cpu controller, not root), the prefix unchanged and a sentence saying why."""
    period = 100_000  # µs
    quota = period * percent // 100
    try:
        controllers = CGROUPS / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():  # v2: a group under the root
            group = CGROUPS / name
            group.mkdir(exist_ok=True)
            (group / "cpu.max").write_text(f"{quota} {period}")
        else:  # v1: the cpu hierarchy
            group = CGROUPS / "cpu" / name
            group.mkdir(exist_ok=True)
            (group / "cpu.cfs_period_us").write_text(str(period))
            (group / "cpu.cfs_quota_us").write_text(str(quota))
    except OSError as error:
        return prefix, f"not capped: no CPU cgroup could be made here ({type(error).__name__}: {error})"
    join = f'echo $$ > {group / "cgroup.procs"} && exec "$@"'  # the shell joins the group, then becomes the server
    return (["sh", "-c", join, "sh", *prefix],
            f"its core capped at {percent} % of its time (cgroup {group}: a core {100 / percent:.1f}x slower)")
