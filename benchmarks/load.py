"""Load test: concurrent browser-protocol clients x mixed requests against app.py on loopback.

`python -m benchmarks.load [--clients 20] [--requests 50] [--seed 0] [--budget-s 1500] [--burst 80] [--trace FILE]`

Each client is a thread, one browser page (benchmarks.app.Browser, benchmarks.pagesim.Page) sending one request at
a time of a mix over every endpoint, every answer checked against its own request (a crossed or stale answer is an
error). Reported: latency per interaction, errors, throughput, the app's VmRSS after the 100th and the last request;
`--burst N`: one session joins N events back to back (the "Queue is full" refusal, then a normal request served);
`--trace FILE`: every request, for `python -m benchmarks.replay`. docs/reliability.md says more; JSON in
benchmarks/results/load-<time>.json.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import string
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from attention_viz.data.tokenizer import DEFAULT_MAX_LEN

from .app import Browser, Server
from .common import LOGS, Timing, load, machine, ms, rss_kib, save, table, temp_folder
from .pagesim import ALLOWED_ERRORS, API, HTTP_TIMEOUT_S, Page, Request

# ---------------------------------------------------------------------------- thin wrappers over benchmarks.app


class RecordingClient(httpx.Client):
    """The httpx.Client a `Browser` uses here: it keeps the bytes of the files it fetches (Browser.call drops them),
    so an answer's files are checked without a second request. Loopback only: it refuses others."""

    def __init__(self, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        super().__init__(timeout=timeout_s, event_hooks={"request": [self._local]})
        self.files: dict[str, bytes] = {}

    @staticmethod
    def _local(request: httpx.Request) -> None:
        if request.url.host != "127.0.0.1":
            raise ValueError(f"refusing a request off loopback: {request.url}")

    def get(self, url: str, **kwargs) -> httpx.Response:
        response = super().get(url, **kwargs)
        if "/file=" in url:
            self.files[url] = response.content
        return response


# ---------------------------------------------------------------------------- the run


def send(browser: Browser, request: Request) -> tuple[float, str | None, str | None, dict | None]:
    """(seconds, error kind or None, error detail, completed message) for one event over the browser protocol."""
    dep = browser.dependency(request.api)
    t0 = time.perf_counter()
    try:
        seconds, completed = browser.call(dep, request.values, request.trigger)
        return seconds, None, None, completed
    except httpx.HTTPStatusError as error:
        body = error.response.text[:300]
        kind = "queue_full" if error.response.status_code == 503 and "Queue is full" in body else \
            f"http_{error.response.status_code}"
        return time.perf_counter() - t0, kind, body, None
    except httpx.TimeoutException as error:
        return time.perf_counter() - t0, "timeout", repr(error), None
    except httpx.HTTPError as error:
        return time.perf_counter() - t0, "transport", repr(error), None
    except RuntimeError as error:  # Browser.call: no process_completed, or success false
        text = str(error).removeprefix("event failed: ")
        try:
            message = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            message = None
        if isinstance(message, dict) and message.get("success") is False:
            # None: an exception that was not a gr.Error (its text is hidden from users by show_error=False)
            return time.perf_counter() - t0, "app_error", repr(message.get("output", {}).get("error")), None
        return time.perf_counter() - t0, "no_answer", text[:300], None


@dataclass
class Tally:
    """Everything the clients saw, shared between their threads."""

    pid: int
    total: int
    rss_every: int = 50
    lock: threading.Lock = field(default_factory=threading.Lock)
    timings: dict[str, Timing] = field(default_factory=lambda: defaultdict(Timing))
    errors: Counter = field(default_factory=Counter)
    errors_by_endpoint: Counter = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    done: int = 0
    correct: int = 0
    rss: list[dict] = field(default_factory=list)
    trace: list[dict] | None = None  # with --trace: every request, in the order answered

    def record(self, name: str, seconds: float, error: str | None, detail: str | None,
               values: dict | None = None) -> None:
        with self.lock:
            self.done += 1
            if self.trace is not None:
                try:
                    rss = rss_kib(self.pid)["VmRSS"]
                except OSError:
                    rss = None
                self.trace.append({"n": self.done, "name": name, "values": values, "error": error, "rss_kib": rss})
            self.timings[name].samples.append(seconds)
            if error is None:
                self.correct += 1
            else:
                self.errors[error] += 1
                self.errors_by_endpoint[f"{name}: {error}"] += 1
                if len(self.examples.setdefault(error, [])) < 5:
                    self.examples[error].append(detail or "")
            if self.done % self.rss_every == 0 or self.done in (100, self.total):
                try:
                    self.rss.append({"after": self.done, **rss_kib(self.pid), "t": time.time()})
                except OSError:  # the app is gone: that shows up as transport errors
                    pass


def client_loop(index: int, base: str, tally: Tally, requests: int, seed: int, deadline: float) -> None:
    """One page: `requests` events, one at a time, each checked; stops early at the deadline."""
    rng = random.Random(seed * 1000 + index)
    client = RecordingClient()
    try:
        browser = Browser(client, base)
        page = Page(browser, rng)
        for _ in range(requests):
            if time.monotonic() > deadline:
                with tally.lock:
                    tally.errors["deadline"] += 1
                continue
            request = page.next_request()
            client.files.clear()
            seconds, error, detail, completed = send(browser, request)
            if error == "app_error":
                detail = f"{request.name} {detail}; inputs {page.describe(request)}"
            if error is None:
                try:
                    wrong = page.check(request, completed["output"]["data"], client.files)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # a wrong shape
                    wrong = f"{type(exc).__name__}: {exc}"
                if wrong:
                    error, detail = "wrong_answer", f"{request.name}: {wrong}; inputs {page.describe(request)}"
            elif request.api == "model_controls":  # the browser's chain stops; the sliders keep their old ranges
                page.then_visualize = False
                if page.untrained:
                    page.n_heads = int(page.v("n_heads"))
            tally.record(request.name, seconds, error, detail, page.describe(request))
    finally:
        client.close()


def run_load(base: str, pid: int, clients: int, requests: int, seed: int = 0, budget_s: float = 1500.0,
             trace: list | None = None) -> dict:
    """`clients` threads x `requests` mixed, checked events against the app at `base`; errors, latencies, RSS.
    trace: a list that receives every request in the order answered (values by elem_id, VmRSS after it)."""
    total = clients * requests
    tally = Tally(pid=pid, total=total, trace=trace)
    tally.rss.append({"after": 0, **rss_kib(pid), "t": time.time()})
    deadline = time.monotonic() + budget_s
    threads = [threading.Thread(target=client_loop, args=(i, base, tally, requests, seed, deadline), daemon=True)
               for i in range(clients)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(1.0, deadline - time.monotonic() + 2 * HTTP_TIMEOUT_S))
    wall = time.perf_counter() - t0
    hung = sum(thread.is_alive() for thread in threads)
    if hung:
        tally.errors["hung_client"] += hung
    rss_at = {sample["after"]: sample for sample in tally.rss}
    after_100 = rss_at.get(100) or min(tally.rss, key=lambda s: abs(s["after"] - 100))
    last = max(tally.rss, key=lambda s: s["after"])
    half = min(tally.rss, key=lambda s: abs(s["after"] - total // 2))
    unexpected = {k: n for k, n in tally.errors.items() if k not in ALLOWED_ERRORS}
    return {
        "clients": clients, "requests_per_client": requests, "requests": total, "answered": tally.done,
        "correct": tally.correct, "wall_s": wall, "throughput_per_s": tally.done / wall if wall else 0.0,
        "errors": dict(tally.errors), "unexpected_errors": unexpected,
        "errors_by_endpoint": dict(tally.errors_by_endpoint), "error_examples": tally.examples,
        "timings": {name: t.to_dict() | {"max_s": max(t.samples)} for name, t in sorted(tally.timings.items())},
        "all": Timing([s for t in tally.timings.values() for s in t.samples]).to_dict() if tally.done else {},
        "rss_kib": {"start": tally.rss[0]["VmRSS"], "after_100": after_100["VmRSS"], "after_100_n": after_100["after"],
                    "after_half": half["VmRSS"], "after_half_n": half["after"],
                    "after_last": last["VmRSS"], "after_last_n": last["after"], "peak": last.get("VmHWM"),
                    "growth_100_to_last": last["VmRSS"] - after_100["VmRSS"]},
        "rss_timeline": [{k: s[k] for k in ("after", "VmRSS")} for s in tally.rss],
    }


def burst(base: str, n: int, timeout_s: float = 180.0) -> dict:
    """One session joins `n` events back to back: how many hear "Queue is full", then whether all others answer.

    The event is `visualize` with the page's opening values and a new text each time, so every event reruns
    the model (tens of ms) while a join costs a few ms; past admission.PER_PAGE of them the page is refused.
    Bounded: n joins, then the stream is read until every accepted event completed or `timeout_s` passed.
    """
    client = RecordingClient()
    try:
        browser = Browser(client, base)
        dep = browser.dependency("visualize")
        values = browser.initial_inputs(dep)
        session = uuid.uuid4().hex[:11]
        accepted, refused, other, messages, statuses = 0, 0, 0, set(), Counter()
        text_id, rng = browser.by_elem_id["text"], random.Random(n)
        for _ in range(n):
            values[text_id] = "".join(rng.choice(string.ascii_lowercase) for _ in range(DEFAULT_MAX_LEN))
            body = {"data": [values[i] for i in dep["inputs"]], "event_data": None, "fn_index": dep["id"],
                    "trigger_id": None, "session_hash": session}
            response = client.post(base + API + "/queue/join", json=body)
            statuses[response.status_code] += 1
            if response.status_code == 200:
                accepted += 1
            elif response.status_code == 503 and "Queue is full" in response.text:
                refused += 1
                messages.add(response.json().get("detail", response.text)[:120])
            else:
                other += 1
        completed = failed = 0
        deadline = time.monotonic() + timeout_s
        while completed + failed < accepted and time.monotonic() < deadline:
            with client.stream("GET", base + API + "/queue/data", params={"session_hash": session}) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data:"):
                        message = json.loads(line[5:])
                        if message.get("msg") == "process_completed":
                            completed += bool(message.get("success"))
                            failed += not message.get("success")
                        if message.get("msg") == "close_stream":
                            break
        after = Page(browser, random.Random(0))
        request = after._dk_lab()
        client.files.clear()
        _, error, _, done = send(browser, request)
        serves_after = error is None and after.check(request, done["output"]["data"], client.files) is None
        return {"event": dep.get("api_name"), "joined": n, "accepted": accepted, "queue_full": refused,
                "other_refusals": other, "statuses": dict(statuses), "messages": sorted(messages),
                "completed": completed, "failed": failed,
                "serves_after": serves_after}
    finally:
        client.close()


# ---------------------------------------------------------------------------- report


LABELS = {
    "visualize:rerun": "visualize, new text or computation control (model reruns)",
    "model_controls": "model_controls (new model: slider ranges)",
    "steps": "steps (Figure 2)", "compare": "compare (difference heatmap)", "export": "export (PNG, .npz, CSV)",
    "dk_lab": "dk_lab (√d_k lab)",
}


def report(result: dict) -> str:
    """Markdown tables: latency per interaction, errors, memory, the burst."""
    load_ = result["load"]
    rows = [[LABELS.get(name, name), t["n"], ms(t["median_s"]), ms(t["p95_s"]), ms(t["max_s"])]
            for name, t in load_["timings"].items()]
    if load_["all"]:
        rows.append(["all requests", load_["all"]["n"], ms(load_["all"]["median_s"]), ms(load_["all"]["p95_s"]), ""])
    rss = load_["rss_kib"]
    head = (f"{load_['clients']} clients x {load_['requests_per_client']} requests = {load_['requests']}, "
            f"{load_['answered']} answered, {load_['correct']} correct, in {load_['wall_s']:.0f} s "
            f"({load_['throughput_per_s']:.1f} requests/s); latency = join the queue .. last image fetched, "
            f"queueing included (the app serves one event at a time)")
    errors = ", ".join(f"{k}: {n}" for k, n in load_["errors"].items()) or "none"
    lines = [head, "", table(["interaction", "n", "p50 ms", "p95 ms", "max ms"], rows), "",
             f"errors: {errors}"]
    for kind, examples in load_["error_examples"].items():
        for example in examples:
            lines.append(f"  {kind}: {example[:400]}")
    lines += ["", table(["app resident memory (VmRSS)", "MiB"], [
        ["at start (warmed up)", f"{rss['start'] / 1024:.1f}"],
        [f"after {rss['after_100_n']} requests", f"{rss['after_100'] / 1024:.1f}"],
        *([[f"after {rss['after_half_n']} requests", f"{rss['after_half'] / 1024:.1f}"]]
          if rss.get("after_half_n", 0) > rss["after_100_n"] else []),
        [f"after {rss['after_last_n']} requests", f"{rss['after_last'] / 1024:.1f}"],
        [f"growth {rss['after_100_n']} -> {rss['after_last_n']}", f"{rss['growth_100_to_last'] / 1024:+.1f}"],
        ["peak (VmHWM)", f"{(rss['peak'] or 0) / 1024:.1f}"],
    ])]
    cache = result.get("gradio_cache")
    if cache:
        lines.append(f"\nGradio's file cache: {cache['files']} files, {cache['bytes'] / 2**20:.1f} MiB after the run")
    b = result.get("burst")
    if b:
        lines.append(f"\nburst: {b['joined']} `{b['event']}` joins from one session: {b['accepted']} queued, "
                     f"{b['queue_full']} refused with HTTP 503 {b['messages']}; {b['completed']} completed, "
                     f"{b['failed']} failed; a normal request right after: "
                     f"{'answered' if b['serves_after'] else 'FAILED'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks load", description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=50, help="per client")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=1500.0, help="stop sending new requests after this long")
    parser.add_argument("--burst", type=int, default=80, help="joins for the queue-full check (0: skip)")
    parser.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    parser.add_argument("--trace", default=None, help="write every request (values, VmRSS after) to this JSON file")
    args = parser.parse_args(argv)
    if not (1 <= args.clients <= 200 and 1 <= args.requests <= 10_000 and 0 <= args.burst <= 1000):
        parser.error("clients 1..200, requests 1..10000, burst 0..1000")

    info = machine(threads=1)
    print(f"# load test: {args.clients} clients x {args.requests} requests (seed {args.seed}); "
          f"{info['cpu']}, {info['cores']} cores; load average {info['load_at_start']}", flush=True)
    result: dict = {"args": vars(args), "machine": info}
    with temp_folder("attention_viz-load-") as temp_dir, httpx.Client(timeout=30) as http, \
            Server([sys.executable, "app.py"], LOGS / f"load-{time.strftime('%Y%m%d-%H%M%S')}.log",
                   env={"GRADIO_TEMP_DIR": str(temp_dir)}) as server:
        result["startup_s"] = server.wait_http(http, timeout_s=300)
        pid = server.process.pid
        trace = [] if args.trace else None
        result["load"] = run_load(server.base, pid, args.clients, args.requests, args.seed, args.budget_s, trace)
        if args.trace:
            Path(args.trace).write_text(json.dumps({"args": vars(args), "requests": trace}))
        cached = [path.stat().st_size for path in temp_dir.rglob("*") if path.is_file()]
        result["gradio_cache"] = {"files": len(cached), "bytes": sum(cached)}
        if args.burst:
            result["burst"] = burst(server.base, args.burst)
        result["rss_after_burst_kib"] = rss_kib(pid)["VmRSS"]
        result["app_alive"] = server.process.poll() is None
    result["load_at_end"] = load()
    print(report(result), flush=True)
    save("load", result, args.out)
    ok = not result["load"]["unexpected_errors"] and result["load"]["correct"] == result["load"]["requests"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
