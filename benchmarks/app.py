"""App benchmark: latency as a browser sees it, over raw HTTP and Gradio 6's queue protocol, and cold start.

One interaction, as the browser's JavaScript client does it:
    POST /gradio_api/queue/join   {data, fn_index, trigger_id, session_hash}  -> {event_id}
    GET  /gradio_api/queue/data?session_hash=...   server-sent events, until process_completed
    GET  /gradio_api/file=...     every image the answer names (PNG)
`gradio_client` polls every 50 ms, which adds its own delay (see docs/benchmarks.md), so it is not used here.

Candidates, interleaved in rounds against one server (the app, launched as a subprocess):
    floor    a trivial endpoint (api_name "ping") of the same app: the protocol's own cost
    rerun    `visualize` after a new text: the model reruns (greedy decode, every map) and the run is packed
             for the browser (every kind, layer and head)
A new attention kind, layer, head or colour scale is no request: the browser draws it from the run it holds
(`python -m benchmarks.explorer` measures that in Chromium). Texts are fresh random strings of the app's
maximum length (tokenizer.DEFAULT_MAX_LEN).
"""

from __future__ import annotations

import random
import string
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from devtools.launcher import ROOT, Server

from .common import LOGS, SETTLE_S, EventStream, Timing, load, ms, table
from .model import app_default_config

API = "/gradio_api"


class Browser:
    """What the browser's client does for one event: join the queue, read the stream, fetch the files.

    patience_s: give up on an event whose answer has not come this long after joining (checked at each message of
    the stream, and Gradio sends a heartbeat every 15 s); None waits as long as the stream stays open."""

    def __init__(self, client, base: str, patience_s: float | None = None) -> None:
        self.client, self.base, self.patience_s = client, base, patience_s
        self.session_hash = uuid.uuid4().hex[:11]
        self.config = client.get(base + "/config").json()
        self.components = {c["id"]: c for c in self.config["components"]}
        self.by_elem_id = {c.get("props", {}).get("elem_id"): c["id"] for c in self.config["components"]}
        self.dependencies = self.config["dependencies"]
        self.estimations: list[dict] = []  # the last call's queue estimations (rank, queue_size, rank_eta), in order

    def dependency(self, api_name: str) -> dict | None:
        return next((d for d in self.dependencies if d.get("api_name") == api_name), None)

    def initial_inputs(self, dependency: dict) -> dict[int, object]:
        """Component id -> the value the page starts with, for every input of `dependency`."""
        return {i: self.components[i].get("props", {}).get("value") for i in dependency["inputs"]}

    def call(self, dependency: dict, values: dict[int, object], trigger_id: int | None) -> tuple[float, dict]:
        """Seconds from joining the queue to the last image fetched, and the completed message."""
        data = [values[i] for i in dependency["inputs"]]
        body = {"data": data, "event_data": None, "fn_index": dependency["id"], "trigger_id": trigger_id,
                "session_hash": self.session_hash}
        t0 = time.perf_counter()
        joined = self.client.post(self.base + API + "/queue/join", json=body)
        joined.raise_for_status()
        reader = EventStream(joined.json().get("event_id"), t0, self.patience_s)
        self.estimations = reader.estimations
        with self.client.stream("GET", self.base + API + "/queue/data", params={"session_hash": self.session_hash}) as stream:
            for line in stream.iter_lines():
                if reader.read(line):
                    break
        completed = reader.answer()
        for item in completed["output"]["data"]:
            if isinstance(item, dict) and item.get("url"):
                self.client.get(item["url"]).raise_for_status()
        return time.perf_counter() - t0, completed


def random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


def cold_start(client, log_dir: Path) -> dict:
    """Launch app.py and time the first HTTP 200 and the first answer of `visualize` (default controls)."""
    with Server([sys.executable, "app.py"], log_dir / "cold_start.log") as server:
        http_s = server.wait_http(client)
        browser = Browser(client, server.base)
        visualize = browser.dependency("visualize")
        seconds, _ = browser.call(visualize, browser.initial_inputs(visualize), trigger_id=None)
        return {"first_http_s": http_s, "first_answer_s": time.perf_counter() - server.started, "first_call_s": seconds}


def start_up_floor(client, log_dir: Path) -> dict:
    """What any such app pays before its own code runs: `import torch, gradio` in a fresh interpreter, and the
    first HTTP 200 of a one-endpoint Gradio app (benchmarks.floors ping, no torch)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, gradio"], cwd=ROOT, check=True)
    imports_s = time.perf_counter() - t0
    with Server([sys.executable, "-m", "benchmarks.floors", "ping"], log_dir / "ping_app_cold.log") as server:
        ping_http_s = server.wait_http(client)
    return {"import_torch_gradio_s": imports_s, "ping_app_first_http_s": ping_http_s}


def run(quick: bool = False, rounds: int | None = None, cold_starts: int | None = None, text_length: int | None = None) -> dict:
    """Cold starts, then interleaved rounds of floor (the app's trivial endpoint, "ping") / rerun against one server."""
    from attention_viz.data.tokenizer import DEFAULT_MAX_LEN

    text_length = text_length or DEFAULT_MAX_LEN  # the longest text the app accepts
    rounds = rounds or (8 if quick else 60)
    cold_starts = cold_starts if cold_starts is not None else (1 if quick else 3)
    log_dir = LOGS
    result: dict = {"rounds": rounds, "text_length": text_length, "load_before": load()}
    with httpx.Client(timeout=60) as client:
        result["cold_start"] = [cold_start(client, log_dir) for _ in range(cold_starts)]
        result["start_up_floor"] = [start_up_floor(client, log_dir) for _ in range(cold_starts)]
        with Server([sys.executable, "app.py"], log_dir / "app.log") as app:
            app.wait_http(client)
            time.sleep(SETTLE_S)  # the app draws the other tabs' figures on a side thread just after it starts
            browser = Browser(client, app.base)
            result.update(_rounds(browser, browser.dependency("visualize"), browser.dependency("ping"), rounds,
                                  random.Random(0), text_length))
    result["load_after"] = load()
    return result


def _rounds(browser: Browser, visualize: dict, ping: dict, rounds: int, rng: random.Random, text_length: int) -> dict:
    ids = browser.by_elem_id
    values = browser.initial_inputs(visualize)
    ping_values = browser.initial_inputs(ping)
    config = app_default_config(torch_compatible=False)  # the model the page opens with
    n_layers, n_heads = min(config.n_encoder_layers, config.n_decoder_layers), config.n_heads

    def floor():
        return browser.call(ping, ping_values, None)[0]

    def rerun():
        values[ids["text"]] = random_text(rng, text_length)
        return browser.call(visualize, values, ids["text"])[0]

    candidates = {"floor": floor, "rerun": rerun}
    for fn in candidates.values():  # warm-up: first connection, first of each path
        fn()
    timings = {name: Timing() for name in candidates}
    for r in range(rounds):
        names = list(candidates)
        for name in names[r % 2:] + names[: r % 2]:
            timings[name].samples.append(candidates[name]())
    return {
        "model": {"layers": n_layers, "heads": n_heads, "config": config.to_dict()},
        "timings": {name: t.to_dict() | {"samples_s": t.samples} for name, t in timings.items()},
    }


LABELS = {
    "floor": "trivial endpoint (floor)",
    "rerun": "new text: the model reruns, the run is packed",
}


def report(result: dict) -> str:
    """Latency table (median, p95, over the floor) and the cold start."""
    t = result["timings"]
    floor = t["floor"]["median_s"]
    rows = [
        [label, ms(t[name]["median_s"]), ms(t[name]["p95_s"]),
         "" if name == "floor" else ms(t[name]["median_s"] - floor), t[name]["n"]]
        for name, label in LABELS.items()
    ]
    floors = result.get("start_up_floor") or [{}] * len(result["cold_start"])
    cold = [[i + 1, f"{c['first_http_s']:.2f}", f"{c['first_answer_s']:.2f}",
             f"{f['import_torch_gradio_s']:.2f}" if f else "", f"{f['ping_app_first_http_s']:.2f}" if f else ""]
            for i, (c, f) in enumerate(zip(result["cold_start"], floors))]
    head = (
        f"App over HTTP (join the queue, read the event stream), {result['rounds']} interleaved rounds, "
        f"texts of {result['text_length']} characters, default model ({result['model']['layers']} layers x "
        f"{result['model']['heads']} heads); floor: the app's ping endpoint"
    )
    t1 = table(["interaction", "p50 ms", "p95 ms", "p50 over floor ms", "samples"], rows)
    t2 = table(["cold start", "first HTTP 200 s", "first answer s", "`import torch, gradio` s",
                "one-endpoint Gradio app, first HTTP 200 s"], cold)
    return f"{head}\n\n{t1}\n\n{t2}"
