"""Reliability of the launched app: a reduced load, every hostile input over raw HTTP and gradio_client, and safety.

A class of 5 simulated students (benchmarks.students, the lecture hall's students: `python -m benchmarks classroom`)
acts on the app at once, every answer of every endpoint correct for its own request; one page joining events back
to back hears the documented "Queue is full". Every hostile
input gets a clear error naming the problem (or the documented fallback) with no stack trace or server
path, and the app answers a valid request right after. The file routes serve only what the app produced,
checkpoints load only from safetensors, there is no share link, and the app listens on 127.0.0.1 unless
GRADIO_SERVER_NAME says otherwise. All traffic stays on loopback; every wait is bounded.
"""

from __future__ import annotations

import ast
import asyncio
import http.client
import json
import math
import os
import pickle
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # benchmarks/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(ROOT))

from attention_viz.service.catalog import Catalog
from attention_viz.webui.widgets import prose_html
from devtools.launcher import running_app
from benchmarks.browser import Page
from benchmarks.students import Student

START_TIMEOUT_S = 180
MAX_TEXT = Catalog().tokenizer.max_len  # the app's limit on a text: the longest max_len of the shipped cards
PNG = b"\x89PNG\r\n\x1a\n"
# What no answer may contain: a stack trace, a source file, a server path.
LEAKS = ("Traceback", 'File "', ".py", "/work/", "/root/", "/home/", "site-packages", str(ROOT))
# A valid request whose run is cached after the first call: the "answers correctly right after" probe.
VALID = dict(text="hello", model="untrained", d_k=16, scale_mode="sqrt_dk", custom_factor=1.0, causal_mask=True,
             padding_mask=True, pad_tokens=2, d_model=64, n_heads=4, kind="decoder.cross_attn", layer=1, head=2,
             colour_scale="absolute", comparison="scaling", compatibility=None,
             heads_off=None, ablation=None, other_text=None, other_model=None, position_bias=None)
VALID_NOTES = ("2 pad tokens", "d_model 64, h 4, d_k 16", "causal mask on")
LAB = dict(d_k=16, n_keys=32, scaled=True)
TRAINING = dict(d_k="512")
LIVE = dict(task="reverse", d_k="8", compatibility="dot")  # only refused live runs here: a valid one trains
BASES = {"dk_lab": LAB, "training": TRAINING, "live_train": LIVE}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """`python app.py` as a user starts it, but WITHOUT GRADIO_SERVER_NAME (the bind must default to loopback).

    Gradio's file cache (GRADIO_TEMP_DIR) and the system temp folder (TMPDIR, where the app writes and serves its
    exports) are private folders, so the file-route tests know what the app produced.
    """
    root = tmp_path_factory.mktemp("reliability")
    cache, system_tmp = root / "gradio_cache", root / "tmp"
    cache.mkdir()
    system_tmp.mkdir()
    with running_app(root / "app.log", host=None, timeout_s=START_TIMEOUT_S, GRADIO_TEMP_DIR=str(cache),
                     TMPDIR=str(system_tmp)) as server:
        yield SimpleNamespace(base=server.base, port=server.port, pid=server.pid, log=server.log, root=root,
                              cache=cache, system_tmp=system_tmp)


# ---------------------------------------------------------------------------- raw HTTP: Gradio 6's browser protocol


class Raw:
    """The browser's queue protocol over plain HTTP: any JSON (NaN included), any arity, answers read as sent."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.http = httpx.Client(timeout=60)
        config = self.http.get(base + "/config").json()
        self.fn = {d["api_name"]: d["id"] for d in config["dependencies"] if d.get("api_name")}
        info = self.http.get(base + "/gradio_api/info").json()["named_endpoints"]
        self.params = {name.lstrip("/"): [p["parameter_name"] for p in spec["parameters"]]
                       for name, spec in info.items()}

    def data(self, api: str, values: dict, drop=(), extra=()) -> list:
        """The values in the endpoint's parameter order, less `drop`, plus `extra` at the end."""
        return [values[name] for name in self.params[api] if name not in drop] + list(extra)

    def join(self, body: str) -> httpx.Response:
        return self.http.post(self.base + "/gradio_api/queue/join", content=body,
                              headers={"Content-Type": "application/json"})

    def event(self, api: str, data: list, event_data=None) -> tuple[str, object, str]:
        """("complete", outputs, raw) or ("error", message, raw) or ("http", status, body) for one event."""
        session = os.urandom(6).hex()
        body = json.dumps({"data": data, "event_data": event_data, "fn_index": self.fn[api], "trigger_id": None,
                           "session_hash": session})  # json.dumps writes NaN and Infinity, as a hostile client may
        joined = self.join(body)
        if joined.status_code != 200:
            return "http", joined.status_code, joined.text
        raw = []
        with self.http.stream("GET", self.base + "/gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                raw.append(line)
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    text = "\n".join(raw)
                    if message.get("success"):
                        return "complete", message["output"]["data"], text
                    return "error", message["output"].get("error"), text
                if message.get("msg") == "close_stream":
                    break
        return "error", None, "\n".join(raw)

    def fetch(self, item: dict) -> bytes:
        response = self.http.get(item["url"])
        assert response.status_code == 200, (item["url"], response.status_code)
        return response.content


@pytest.fixture(scope="module")
def raw(app):
    client = Raw(app.base)
    yield client
    client.http.close()


@pytest.fixture(scope="module")
def gradio(app):
    from gradio_client import Client

    return Client(app.base + "/", verbose=False, download_files=False)


def assert_serves_correctly(raw: Raw) -> None:
    """A valid visualize right after: the packed run of this very request, its output, and notes that describe it."""
    state, out, text = raw.event("visualize", raw.data("visualize", VALID))
    assert state == "complete", (out, text[-500:])
    run, output, info = out
    assert run["tokens"]["source"] == [*"hello", "<eos>", "<pad>", "<pad>"] and run["n_heads"] == 4
    assert [len(entry["maps"]) for entry in run["kinds"]] == [2, 2, 2]  # every kind and layer, at once
    assert run["settings"]["d_k"] == 16 and run["settings"]["pad_tokens"] == 2
    assert output and all(note in info for note in VALID_NOTES), info


def assert_no_leak(text: object) -> None:
    for leak in LEAKS:
        assert leak not in str(text), f"{leak!r} leaked in {str(text)[:400]!r}"


# ---------------------------------------------------------------------------- 1. load


ACTS = ("rerun", "steps", "compare", "lab_dk", "heads", "lesson")  # benchmarks.students.Student.act's; and "export"


def test_a_class_acting_at_once_gets_every_answer_right_for_its_own_request(app):
    """5 students on one event loop, each its own page, session and head, act at once: each does every action twice
    in its own order (the lab, a new text, heads switched off, the steps, a comparison, the lesson's Next) and one
    export (3 s of figures each, so once), and every answer is checked against that student's own request
    (benchmarks.students: a run of its own text, the head it asked, numbers that fit its tokens, a − b, the nine
    exported files named for its head)."""
    async def student(i: int) -> list:
        me = Student(Page(app.base, patience_s=120), random.Random(i))
        try:
            await me.open()
            for elem_id, value in (("kind", "decoder.cross_attn"), ("layer", i % 2), ("head", i % me.n_heads)):
                me.values[me.ids[elem_id]] = value
            order = ACTS[i:] + ACTS[:i]
            return [(action, (await me.act(action))[1]) for action in (*order, "export", *order[::-1])]
        finally:
            await me.browser.close()

    async def together() -> list:
        return await asyncio.gather(*(student(i) for i in range(5)))

    with ThreadPoolExecutor(max_workers=1) as pool:  # its own event loop, out of reach of any a test left running
        answers = [answer for one in pool.submit(asyncio.run, together()).result() for answer in one]
    assert len(answers) == 5 * (2 * len(ACTS) + 1) and {action for action, _ in answers} == {*ACTS, "export"}
    assert [answer for answer in answers if answer[1] is not None] == []


def test_the_class_checks_see_a_crossed_or_wrong_answer(raw):
    """The checks the class above relies on fail on another head, another text, a row that does not sum to 1, and a
    difference that is not a − b (the right answers, as the app sent them, pass)."""
    from attention_viz.explorer.steps import STEPS_FORMAT
    from benchmarks.students import compare_problem, head_problem, run_problem, steps_problem

    _, (steps, _), _ = raw.event("steps", raw.data("steps", VALID))
    _, (comparison, _), _ = raw.event("compare", raw.data("compare", VALID))
    _, run, _ = raw.event("visualize", raw.data("visualize", VALID))
    head, source = {"kind": "decoder.cross_attn", "layer": 1, "head": 2}, [*"hello", "<eos>", "<pad>", "<pad>"]
    assert head_problem(steps, head, STEPS_FORMAT) is None
    assert steps_problem(steps, source) is None and compare_problem(comparison) is None
    assert run_problem(run, source, "Scores ") is None and run_problem(run, source[1:], "Scores ")
    assert head_problem(steps, head | {"head": 1}, STEPS_FORMAT) and head_problem(comparison, head, STEPS_FORMAT)
    next(panel for panel in steps["panels"] if panel["key"] == "weights")["values"][0][0] += 0.5  # a row sums to 1.5
    comparison["difference"][0][0] += 0.5
    assert "sums to" in steps_problem(steps, source) and "a − b" in compare_problem(comparison)


def test_the_page_and_its_config_carry_no_python_objects(app):
    """What every opening downloads is plain data: no event trigger or component sent as its repr (a quoted
    attribute name in a gr.HTML's js_on_load once put one there, and its copy slowed every opening)."""
    import httpx

    with httpx.Client(timeout=30) as client:
        for path in ("/", "/config"):
            text = client.get(app.base + path).text
            assert "functools.partial" not in text and " object at 0x" not in text, path
            # Gradio's own gr.State sends its delete callback's repr; nothing else may name a function
            assert text.count("<function ") == text.count("<function default_delete_callback"), path


def test_queue_full_is_the_documented_refusal_and_the_app_serves_after(raw):
    """One page joining 100 events back to back without reading their answers holds PER_PAGE of them; its later joins
    hear HTTP 503 "Queue is full"; every queued event still completes, and another page is served after."""
    from attention_viz.server.admission import PER_PAGE

    session, statuses, refusals = os.urandom(6).hex(), [], set()
    for n in range(100):  # a new text each time: every event reruns the model, while a join costs a few ms
        values = raw.data("visualize", VALID | {"text": f"burst {n:03d}"})
        body = json.dumps({"data": values, "event_data": None, "fn_index": raw.fn["visualize"], "trigger_id": None,
                           "session_hash": session})
        joined = raw.join(body)
        statuses.append(joined.status_code)
        if joined.status_code != 200:
            refusals.add(joined.json().get("detail", joined.text)[:120])
    assert statuses.count(200) == PER_PAGE and statuses.count(503) == 100 - PER_PAGE, statuses
    assert refusals and all(m.startswith("Queue is full") for m in refusals), refusals
    outcomes, deadline = [], time.monotonic() + 120
    while len(outcomes) < PER_PAGE and time.monotonic() < deadline:  # the stream closes when the session is idle
        with raw.http.stream("GET", raw.base + "/gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed":
                    outcomes.append(message.get("success"))
                if message.get("msg") == "close_stream" or len(outcomes) == PER_PAGE:
                    break
    assert outcomes == [True] * PER_PAGE, outcomes
    assert_serves_correctly(raw)


# ---------------------------------------------------------------------------- 2. hostile inputs


@dataclass(frozen=True)
class Err:
    """A clear error: a message that contains `says`, or one of them (Gradio's range and choice checks, or the
    package's own, which say the same thing in other words); any non-empty message when None."""

    says: str | tuple[str, ...] | None = None


@dataclass(frozen=True)
class Refused:
    """Gradio refuses the event before the app sees it; its reason may be hidden (show_error=False), nothing leaks."""


@dataclass(frozen=True)
class Ok:
    """The documented fallback: the app answers, and the notes say `notes` (the value it used)."""

    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ErrOrOk:
    """Either a clear error that contains `says`, or the documented fallback (a correct answer)."""

    says: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Local:
    """gradio_client refuses before sending (e.g. NaN is not JSON): nothing reaches the app."""

    error: type
    says: str


NOT_JSON = Local(ValueError, "JSON compliant")  # gradio_client's httpx refuses NaN and infinities


@dataclass(frozen=True)
class Case:
    name: str
    api: str
    changes: dict = field(default_factory=dict)
    raw: object = None          # what raw HTTP must get
    client: object = None       # what gradio_client must get (default: as raw)
    drop: tuple = ()            # parameters left out
    extra: tuple = ()           # values added after the last parameter




NAN, INF = math.nan, math.inf
CASES = [
    # text
    Case("empty text", "visualize", {"text": ""}, Err("Text is empty")),
    Case("100,000 characters", "visualize", {"text": "x" * 100_000},
         Err(f"Text is 100000 characters; the maximum is {MAX_TEXT}.")),
    Case("control characters", "visualize", {"text": "ab\x00\x07\x1b[31m\r\n"},
         Err("Unknown characters: '\\x00', '\\x07', '\\x1b'")),
    Case("emoji", "visualize", {"text": "hi 😀🧪"}, Err("Unknown characters: '😀', '🧪'")),
    Case("right-to-left text", "visualize", {"text": "שלום עולם"}, Err("Unknown characters: 'ש'")),
    Case("bidi override", "visualize", {"text": "abc\u202edef"}, Err("Unknown characters: '\\u202e'")),
    Case("combining accent", "visualize", {"text": "e\u0301"}, Err("Unknown characters: '\u0301'")),
    Case("lone surrogate", "visualize", {"text": "a\ud800"}, Err("Unknown characters"),
         Local(UnicodeEncodeError, "surrogates not allowed")),  # httpx cannot encode it: only raw HTTP sends it
    # non-finite, negative, huge and fractional numbers
    Case("NaN d_k", "visualize", {"d_k": NAN}, Err("d_k must be a finite number"), NOT_JSON),
    Case("export: NaN layer", "export", {"layer": NAN}, Err("layer must be a finite number"), NOT_JSON),
    Case("NaN custom factor", "visualize", {"scale_mode": "custom", "custom_factor": NAN},
         Err("custom scale factor must be a finite number"), NOT_JSON),
    Case("NaN pad tokens", "visualize", {"pad_tokens": NAN}, Err("pad tokens must be a finite number"), NOT_JSON),
    Case("+infinity d_k", "visualize", {"d_k": INF},
         Err(("greater than maximum value 1024", "d_k must be a finite number")), NOT_JSON),
    Case("-infinity custom factor", "visualize", {"custom_factor": -INF},
         Err(("less than minimum value 0.001", "custom scale factor must be a finite number")), NOT_JSON),
    Case("negative d_k", "visualize", {"d_k": -5}, Err(("less than minimum value 1", "d_k must be between 1 and 1024"))),
    Case("negative head", "steps", {"head": -1}, Err(("less than minimum value 0", "head must be between 0 and"))),
    Case("huge d_k", "visualize", {"d_k": 1e308}, Err(("greater than maximum value 1024", "d_k must be between 1 and 1024"))),
    Case("huge integer pad tokens", "visualize", {"pad_tokens": 10**40},
         Err(("greater than maximum value 16", "pad tokens must be between 0 and 16"))),
    Case("zero custom factor", "visualize", {"scale_mode": "custom", "custom_factor": 0},
         Err(("less than minimum value 0.001", "custom scale factor must be between 0.001 and 100"))),
    Case("fractional d_k", "visualize", {"d_k": 2.5}, Err("d_k must be a whole number")),
    Case("compare: head beyond this model", "compare", {"head": 9}, Err("head must be between 0 and 3")),
    Case("heads x d_k too wide", "visualize", {"d_k": 1024, "n_heads": 16}, Err("heads × d_k is 16 × 1024")),
    Case("off-step slider value", "visualize", {"d_model": 20}, Ok(("d_model 20, h 4",))),
    # strings where numbers belong
    Case("word for d_k", "visualize", {"d_k": "abc"}, Err("d_k")),
    Case("digit string for d_k", "visualize", {"d_k": "16"}, ErrOrOk("d_k", VALID_NOTES)),
    Case("word for head", "steps", {"head": "x"}, Err("head")),
    Case("word for pad tokens", "visualize", {"pad_tokens": "many"}, Err("pad tokens")),
    Case("empty string for custom factor", "visualize", {"custom_factor": ""}, Err("custom scale factor")),
    # wrong types
    Case("list for d_k", "visualize", {"d_k": [16]}, Err("d_k")),
    Case("object for layer", "steps", {"layer": {"a": 1}}, Err("layer")),
    Case("boolean for d_k", "visualize", {"d_k": True}, Err("d_k must be a whole number")),
    Case("null for d_k", "visualize", {"d_k": None}, Err("d_k must be a whole number")),
    Case("null for text", "visualize", {"text": None}, Err("Text must be a string")),
    Case("number for text", "visualize", {"text": 123}, ErrOrOk("Text", VALID_NOTES)),  # Gradio's Textbox: str(123)
    Case("list for text", "visualize", {"text": ["a", "b"]}, ErrOrOk("Text", VALID_NOTES)),
    Case("path for model", "visualize", {"model": "../../etc/passwd"},
         Err(("not in the list of choices", "Unknown model '../../etc/passwd'"))),
    Case("number for model", "visualize", {"model": 5}, Err(("not in the list of choices", "Unknown model 5"))),
    Case("null model", "visualize", {"model": None}, Err("Unknown model None")),
    Case("unknown scaling", "visualize", {"scale_mode": "evil"}, Err(("not in the list of choices", "scaling must be one of"))),
    Case("unknown attention kind", "steps", {"kind": "encoder.0.self_attn"},
         Err(("not in the list of choices", "attention kind must be one of"))),
    Case("null colour scale", "export", {"colour_scale": None}, Err("colour scale must be one of")),
    Case("checkbox 'perhaps'", "visualize", {"causal_mask": "perhaps"}, Err("causal mask must be true or false")),
    Case("checkbox list", "visualize", {"padding_mask": []}, Err("padding mask must be true or false")),
    Case("checkbox 'false'", "visualize", {"causal_mask": "false"}, Ok(("causal mask off",))),
    Case("checkbox null", "visualize", {"causal_mask": None}, Ok(("causal mask off",))),
    Case("checkbox 1", "visualize", {"padding_mask": 1}, Ok(("padding mask on",))),
    # missing and extra arguments
    # (a browser always sends every value; gradio_client fills a missing one with the default its API page shows)
    Case("missing argument", "visualize", raw=Refused(), client=Ok(VALID_NOTES), drop=("n_heads",)),
    Case("no arguments", "visualize", raw=Refused(), client=Ok(("Scores QKᵀ",)), drop=tuple(VALID)),
    Case("extra argument", "visualize", raw=Ok(VALID_NOTES), client=Local(TypeError, "not a valid key-word argument"),
         extra=("surplus",)),
    # the other endpoints
    Case("steps: head beyond this model", "steps", {"head": 7}, Err("head must be between 0 and 3")),
    Case("steps: NaN layer", "steps", {"layer": NAN}, Err("layer must be a finite number"), NOT_JSON),
    Case("compare: unknown comparison", "compare", {"comparison": "bogus"},
         Err(("not in the list of choices", "comparison must be one of"))),
    Case("compare: null comparison", "compare", {"comparison": None}, Err("comparison must be one of")),
    Case("export: 100,000 characters", "export", {"text": "y" * 100_000}, Err("Text is 100000 characters")),
    Case("export: NaN head", "export", {"head": NAN}, Err("head must be a finite number"), NOT_JSON),
    Case("lab: zero d_k", "dk_lab", {"d_k": 0}, Err(("less than minimum value 1", "d_k must be between 1 and 4096"))),
    Case("lab: huge d_k", "dk_lab", {"d_k": 1e6}, Err(("greater than maximum value 4096", "d_k must be between 1 and 4096"))),
    Case("lab: -infinity d_k", "dk_lab", {"d_k": -INF}, Err(("less than minimum value 1", "d_k must be a finite number")),
         NOT_JSON),
    Case("lab: fractional d_k", "dk_lab", {"d_k": 2.5}, Err("d_k must be a whole number")),
    Case("lab: NaN keys", "dk_lab", {"n_keys": NAN}, Err("number of keys must be a finite number"), NOT_JSON),
    Case("lab: word for keys", "dk_lab", {"n_keys": "many"}, Err("number of keys")),
    Case("lab: checkbox 'maybe'", "dk_lab", {"scaled": "maybe"}, Err("scaled must be true or false")),
    Case("training: untrained size", "training", {"d_k": "64"}, Err("d_k must be one of the trained sizes")),
    Case("training: path for d_k", "training", {"d_k": "../../etc/passwd"},
         Err(("not in the list of choices", "d_k must be one of the trained sizes"))),
    Case("training: null d_k", "training", {"d_k": None}, Err("d_k must be one of the trained sizes")),
    Case("training: huge d_k", "training", {"d_k": 10**40}, Err("d_k must be one of the trained sizes")),
    Case("training: list for d_k", "training", {"d_k": [512]}, Err("d_k must be one of the trained sizes")),
    Case("live: unknown task", "live_train", {"task": "dates; rm -rf /"}, Err("task must be one of")),
    Case("live: untrained size", "live_train", {"d_k": "4096"}, Err("d_k must be one of")),
    Case("live: null compatibility", "live_train", {"compatibility": None},
         Err("compatibility function must be one of")),
    Case("live: 100,000-character task", "live_train", {"task": "x" * 100_000}, Err("task must be one of 'reverse', 'copy', 'sort'; got '" + "x" * 38 + "…")),
]


CASE_PARAMS = [
    pytest.param(c, id=c.name)
    for c in CASES
]


def values_for(case: Case) -> dict:
    base = BASES.get(case.api, VALID)
    return {**base, **case.changes}


def judge(expect: object, state: str, out: object, message: object) -> None:
    """Assert that one answer is what the case expects."""
    if isinstance(expect, ErrOrOk):
        expect = Err(expect.says) if state == "error" else Ok(expect.notes)
    if isinstance(expect, Err):
        assert state == "error", f"expected an error, got {state}: {str(out)[:300]}"
        assert isinstance(message, str) and message.strip(), f"an error without a message: {message!r}"
        assert "show_error=True" not in message, f"a generic error, not one that names the problem: {message!r}"
        if expect.says is not None:
            says = (expect.says,) if isinstance(expect.says, str) else expect.says
            assert any(s in message for s in says), f"none of {says!r} in {message!r}"
    elif isinstance(expect, Refused):
        assert state == "error", f"expected a refusal, got {state}: {str(out)[:300]}"
    elif isinstance(expect, Ok):
        assert state == "complete", f"expected the documented fallback (an answer), got {state}: {message!r}"
        info = out[2] if len(out) == 3 and isinstance(out[0], dict) else ""  # /visualize: (run, output, notes)
        for note in expect.notes:
            assert note in info, f"{note!r} not in {info!r}"
    else:
        raise TypeError(f"bad expectation {expect!r}")


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_hostile_input_over_raw_http(raw, case):
    state, out, text = raw.event(case.api, raw.data(case.api, values_for(case), case.drop, case.extra))
    assert state != "http", f"HTTP {out}: {text[:300]}"
    judge(case.raw, state, out, out if state == "error" else None)
    if state == "error":
        assert_no_leak(text)  # the whole event stream, not only the message
    assert_serves_correctly(raw)


@pytest.mark.parametrize("case", CASE_PARAMS)
def test_hostile_input_over_gradio_client(gradio, raw, case):
    from gradio_client.exceptions import AppError

    expect = case.client if case.client is not None else case.raw
    kwargs = {k: v for k, v in values_for(case).items() if k in raw.params[case.api] and k not in case.drop}
    kwargs |= {f"surplus_{i}": value for i, value in enumerate(case.extra)}
    if isinstance(expect, Local):
        with pytest.raises(expect.error, match=expect.says):
            gradio.predict(**kwargs, api_name="/" + case.api)
    else:
        try:
            out, state, message = gradio.predict(**kwargs, api_name="/" + case.api), "complete", None
        except AppError as error:
            out, state, message = None, "error", str(error)
        judge(expect, state, out, message)
        assert_no_leak(message or "")
    assert_serves_correctly(raw)


# Requests a browser never sends: refused at the HTTP level (4xx, or Gradio's bare 500), with nothing internal.
PROTOCOL = [
    ("invalid JSON", lambda fn: '{"data": [1,'),
    ("body is a list", lambda fn: "[1, 2]"),
    ("data is not a list", lambda fn: json.dumps({"data": "x", "fn_index": fn, "session_hash": "a1"})),
    ("no session", lambda fn: json.dumps({"data": [], "fn_index": fn})),
    ("unknown fn_index", lambda fn: json.dumps({"data": [], "fn_index": 10_000, "session_hash": "a1"})),
    ("negative fn_index", lambda fn: json.dumps({"data": [], "fn_index": -1, "session_hash": "a1"})),
    ("fn_index is a word", lambda fn: json.dumps({"data": [], "fn_index": "visualize", "session_hash": "a1"})),
]


def post_verbatim(port: int, path: str, body: str) -> tuple[int, str]:
    """POST a body as written, on a fresh loopback connection (Gradio may drop one after its own 500)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=body.encode(), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode(errors="replace")
    finally:
        connection.close()


@pytest.mark.parametrize("name, body", PROTOCOL, ids=[p[0] for p in PROTOCOL])
def test_malformed_requests_are_refused_without_internals(app, raw, name, body):
    status, text = post_verbatim(app.port, "/gradio_api/queue/join", body(raw.fn["visualize"]))
    assert 400 <= status < 600 and status != 503, (status, text)
    assert_no_leak(text)
    assert_serves_correctly(raw)


def test_unknown_api_name_and_bad_event_data_leak_nothing(app, raw):
    status, text = post_verbatim(app.port, "/gradio_api/call/no_such_endpoint", json.dumps({"data": [1]}))
    assert 400 <= status < 600, (status, text)
    assert_no_leak(text)
    # event data a browser never sends for this event (a select's index, with nothing in it), short of the head
    short = raw.data("steps", VALID)[:raw.params["steps"].index("head")]  # every input before the head, no more
    state, _, text = raw.event("steps", short, event_data={"index": None})
    assert state == "error"
    assert_no_leak(text)
    assert_serves_correctly(raw)


def test_steps_and_compare_answer_strict_json_numbers(raw):
    """/steps and /compare answer with the head's numbers: the event stream is strict JSON (a masked score,
    −∞, travels as null, never as -Infinity or NaN), and the answer is for the requested head."""
    def refuse(constant: str):
        raise AssertionError(f"{constant} in an answer: not JSON")

    answers = {}
    for api in ("steps", "compare"):
        state, out, text = raw.event(api, raw.data(api, VALID))
        assert state == "complete", text[-500:]
        for line in text.splitlines():
            if line.startswith("data:"):
                json.loads(line[5:], parse_constant=refuse)
        data, words = out
        assert (data["kind"], data["layer"], data["head"]) == ("decoder.cross_attn", 1, 2) and prose_html(data["text"]) == words
        answers[api] = data
    masked = next(panel for panel in answers["steps"]["panels"] if panel["key"] == "masked")["values"]
    assert all(row[-2:] == [None, None] for row in masked)  # the two pad keys, −∞
    assert answers["compare"]["labels"] == ["scaled by 1/√d_k", "unscaled"]
    assert_serves_correctly(raw)


# ---------------------------------------------------------------------------- 3. safety: files


def get_verbatim(port: int, path: str) -> tuple[int, bytes]:
    """GET a path exactly as written (no client-side removal of ../), on loopback."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


SECRETS = (b"root:x:0:0", b"import gradio", b"attention_viz-secret", b"PATH=", b"[core]", b"def test_", b"safetensors")


@pytest.fixture(scope="module")
def exported(raw, app):
    """The four files of one export (through the app), and where the app wrote them: its export folder, served as it
    is (bounded: service/exports.py), like its folder of rendered PNGs (images/)."""
    state, out, text = raw.event("export", raw.data("export", VALID))
    assert state == "complete", text[-500:]
    originals = sorted(p for p in app.system_tmp.glob("attention_viz-exports-*/*/*") if p.parent.name != "images")
    return out[0], originals


def test_files_the_app_produced_are_served_from_where_it_wrote_them(raw, app, exported):
    files, originals = exported
    by_suffix = {Path(f["orig_name"]).suffix: raw.fetch(f) for f in files}
    assert by_suffix[".png"][:8] == PNG and by_suffix[".npz"][:4] == b"PK\x03\x04"
    assert by_suffix[".csv"].startswith(b"# model: ") and b"\nquery \\ key" in by_suffix[".csv"]
    served = sorted(Path(f["path"]).resolve() for f in files)
    assert set(served) <= {p.resolve() for p in originals}  # no copy: served from where the app wrote them
    assert sorted(served[0].parent.iterdir()) == served  # its own folder (other tests' exports have theirs)
    exports = {p.name for p in app.system_tmp.glob("attention_viz-exports-*/*") if p.is_file()}
    assert exports <= {".lock"}, exports  # the export folder holds the exports' folders, images/ and its lock


def test_the_rendered_images_folder_holds_only_the_apps_pngs(app, exported):
    """The one folder served in place: every file in it is a PNG the app drew, named by its content."""
    images = sorted(app.system_tmp.glob("attention_viz-exports-*/images/*"))
    assert images, "no rendered images found: the test would prove nothing"
    for path in images:
        assert path.suffix == ".png" and len(path.stem) == 32 and path.read_bytes()[:8] == PNG, path.name


def test_file_routes_serve_nothing_else(app, exported):
    secret = app.root / "secret.txt"
    secret.write_text("attention_viz-secret\n")
    (app.system_tmp / "secret.txt").write_text("attention_viz-secret\n")  # beside the served export folder
    _, originals = exported
    some_dir = originals[0].parent  # one export's folder, served in place
    forbidden = [
        "/gradio_api/file=/etc/passwd",
        "/gradio_api/file=../../../../../../../../etc/passwd",
        "/gradio_api/file=..%2F..%2F..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "/gradio_api/file=%2Fetc%2Fpasswd",
        "/gradio_api/file=//etc/passwd",
        "/gradio_api/file=file:///etc/passwd",
        "/gradio_api/file=/proc/self/environ",
        "/gradio_api/file=app.py",
        f"/gradio_api/file={ROOT}/app.py",
        "/gradio_api/file=attention_viz/data/checkpoints.py",
        "/gradio_api/file=tests/conftest.py",
        f"/gradio_api/file={ROOT}/tests/e2e/test_reliability.py",
        "/gradio_api/file=.git/config",
        f"/gradio_api/file={secret}",
        f"/gradio_api/file={app.cache}/../secret.txt",
        f"/gradio_api/file={some_dir}/../../secret.txt",
        f"/gradio_api/file={app.cache}",
        f"/gradio_api/file=http://127.0.0.1:{app.port}/config",
        f"/gradio_api/file={some_dir.parent}",
        "/gradio_api/file/app.py",
        "/gradio_api/file/etc/passwd",
        "/file=/etc/passwd",
        "/file=app.py",
        "/static/../app.py",
        "/assets/../app.py",
        "/../app.py",
        "/gradio_api/../app.py",
    ]
    assert originals, "the export folder was not found: the test would prove nothing"
    named = ["app.py", "attention_viz/data/checkpoints.py", "tests/conftest.py", "tests/e2e/test_reliability.py", ".git"]
    assert all((ROOT / name).exists() for name in named), "a repository path above is gone: it would prove nothing"
    served = {}
    for path in forbidden:
        status, body = get_verbatim(app.port, path)
        if status not in (400, 403, 404) or any(s in body for s in SECRETS):
            served[path] = (status, body[:80])
        assert b"Traceback" not in body and b"site-packages" not in body, (path, body[:300])
    assert not served, served


def test_uploads_are_not_stored_and_served(raw, app):
    """The app takes no files: a file POSTed to Gradio's upload route must not become a URL on this server."""
    response = raw.http.post(raw.base + "/gradio_api/upload",
                             files={"files": ("page.html", b"<script>alert(1)</script>" * 100, "text/html")})
    if response.status_code == 200:
        for path in response.json():
            status, _ = get_verbatim(app.port, f"/gradio_api/file={path}")
            assert status in (403, 404), f"an uploaded file is served back from {path} (HTTP {status})"
    else:
        assert 400 <= response.status_code < 500
        assert_no_leak(response.text)


# ---------------------------------------------------------------------------- 3. safety: checkpoints


class CodeOnUnpickle:
    """A pickle payload that creates a file when it is unpickled: proof that code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture
def poisoned_models(tmp_path, models_dir):
    """The test family, plus a checkpoint whose .safetensors is a pickle that would create `marker` if loaded."""
    folder = tmp_path / "models"
    folder.mkdir()
    for path in models_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    marker = tmp_path / "code_ran"
    card = json.loads((models_dir / "copy_dk16_none.json").read_text())
    (folder / "evil_dk8_sqrt_dk.json").write_text(json.dumps({**card, "name": "evil_dk8_sqrt_dk", "task": "evil",
                                                              "scale": "sqrt_dk"}))
    with open(folder / "evil_dk8_sqrt_dk.safetensors", "wb") as file:
        pickle.dump({"weights": CodeOnUnpickle(marker)}, file)
    return folder, marker


def test_pickled_checkpoint_is_refused_by_the_app_path(poisoned_models, one_thread):
    """The app's loader (Runs -> Catalog -> load_model -> load_checkpoint) refuses the pickle and never runs it."""
    from attention_viz.data.checkpoints import UnsafeCheckpointError
    from attention_viz.service.runs import Runs

    folder, marker = poisoned_models
    runs = Runs(folder)
    assert "evil/sqrt_dk" in runs.catalog.families  # listed from its card: the weights are opened only on use
    settings = runs.settings("hello", "evil/sqrt_dk", 16)
    with pytest.raises(UnsafeCheckpointError):
        runs.run(settings)
    assert runs.run(runs.settings("hello", "copy/none", 16)).output is not None  # the others still load
    assert not marker.exists(), "unpickling ran code"


def test_a_refused_checkpoint_does_not_leak_server_paths(poisoned_models, one_thread):
    """What a user would read if a shipped checkpoint were bad: the reason, not the server's folders."""
    from attention_viz.service.runs import Runs

    folder, marker = poisoned_models
    runs = Runs(folder)
    with pytest.raises(ValueError) as error:
        runs.run(runs.settings("hello", "evil/sqrt_dk", 16))
    message = str(error.value)
    assert str(folder) not in message and "/tmp/" not in message and str(ROOT) not in message, message
    assert not marker.exists()


def test_no_code_path_unpickles():
    """No source the app runs calls a loader that unpickles (torch.load, pickle, numpy's allow_pickle)."""
    sources = [ROOT / "app.py", *sorted((ROOT / "attention_viz").rglob("*.py"))]
    banned = ("torch.load(", "pickle.load", "pickle.loads", "allow_pickle=True", "weights_only=False", "dill", "joblib")
    found = [f"{path.name}: {word}" for path in sources for word in banned if word in path.read_text()]
    assert not found, found


# ---------------------------------------------------------------------------- 3. safety: launch


def listening(port: int) -> list[str]:
    """Local addresses of the LISTEN sockets on `port`, from /proc/net/tcp and tcp6."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            host, _, hex_port = local.partition(":")
            if state == "0A" and int(hex_port, 16) == port:
                addresses.append(host)
    return addresses


LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def test_listens_on_loopback_only_by_default(app):
    """Started without GRADIO_SERVER_NAME, the app binds 127.0.0.1 and prints no public link."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp on this system")
    addresses = listening(app.port)
    assert addresses and set(addresses) <= LOOPBACK, addresses
    log = app.log.read_text()
    assert f"http://127.0.0.1:{app.port}" in log and "gradio.live" not in log and "public URL" not in log, log[-2000:]


@pytest.fixture
def app_module():
    from attention_viz.webui import page

    return page


@pytest.mark.parametrize("server_name", [None, "0.0.0.0"])
def test_launch_has_no_share_link_and_takes_the_host_from_the_environment(app_module, monkeypatch, server_name):
    """main()'s launch: share off, errors hidden; the host is GRADIO_SERVER_NAME's, and loopback without it."""
    import torch

    launched = {}

    class Recorder:
        blocks: dict = {}  # no components: sessions.share_session_configs has nothing to build
        server = SimpleNamespace(config=SimpleNamespace(timeout_keep_alive=5))  # the uvicorn server launch started

        def launch(self, *args, **kwargs):
            launched.update(kwargs, args=args)
            return SimpleNamespace(middleware_stack=None, build_middleware_stack=lambda: None,  # the app
                                   router=SimpleNamespace(routes=[]), dependency_overrides={}), "", None

        def block_thread(self):
            pass

    monkeypatch.delenv("GRADIO_SHARE", raising=False)
    if server_name is None:
        monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    else:
        monkeypatch.setenv("GRADIO_SERVER_NAME", server_name)
    monkeypatch.setattr(app_module, "build_app", lambda *a, **k: Recorder())
    monkeypatch.setattr(app_module, "warm_up", lambda *args: None)  # no figures drawn behind the test
    threads = torch.get_num_threads()
    try:
        app_module.main()
    finally:
        torch.set_num_threads(threads)
    assert not launched["args"], "launch() takes keywords only here"
    assert launched.get("share") in (None, False) and launched.get("show_error") in (None, False), launched
    host = launched.get("server_name")
    assert host in (None, server_name or "127.0.0.1"), f"server_name={host!r} overrides GRADIO_SERVER_NAME={server_name!r}"


def test_source_never_hard_codes_a_public_bind_or_a_share_link():
    """The launch calls of app.py and the package: share=False, no 0.0.0.0 literal, no auth-less public tunnel."""
    launches = 0
    for path in [ROOT / "app.py", *sorted((ROOT / "attention_viz").glob("*/*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "launch":
                launches += 1
                keywords = {keyword.arg: keyword.value for keyword in node.keywords}
                share = keywords.get("share")
                assert isinstance(share, ast.Constant) and share.value is False, f"{path.name}: {ast.unparse(node)}"
                host = keywords.get("server_name")
                assert not (isinstance(host, ast.Constant) and host.value == "0.0.0.0"), ast.unparse(node)
    assert launches >= 1, "no launch call found: the test would check nothing"
