"""The simulated student of benchmarks.classroom: what it does on its page (benchmarks.browser.Page, asynchronously:
one event loop drives the class) with a teaching mix of actions, and the tally of what the class saw. Every answer is
checked against its own request: a run of the student's text, the head asked, numbers that fit its tokens, an
export's files."""

from __future__ import annotations

import json
import random
import re
import string
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from attention_viz.explorer.pack import FORMAT
from attention_viz.explorer.steps import COMPARE_FORMAT, STEPS_FORMAT
from attention_viz.service.limits import COMPARISONS
from attention_viz.service.requests import known_case

from .browser import Page, dependency, elem_ids, opening_values


ACTIONS = {"lab_dk": 30, "lab_scaled": 15, "lab_keys": 10, "rerun": 10, "heads": 10, "steps": 15, "lesson": 10}
REAL_SHARE = 10  # percent of the actions that run the real model with --real (from the lab's d_k and the reruns)


def real_actions(share: int, score: int = 0, models: tuple[str, ...] = ()) -> dict[str, int]:
    """The mix with `share` percent for the real model's runs, taken half from the lab's d_k and half from the reruns,
    and `score` percent scoring every head of it, taken from the steps. With several `models` (REAL_MODELS' keys),
    the share is split between them as one action each, "real:" + its key (the first gets what does not divide)."""
    mix = {"lab_dk": 30 - share // 2, "lab_scaled": 15, "lab_keys": 10, "rerun": 10 - (share - share // 2),
           "heads": 10, "steps": 15 - score, "lesson": 10}
    if len(models) > 1:
        mix |= {f"real:{key}": share // len(models) + (share % len(models) if i == 0 else 0)
                for i, key in enumerate(models)}
    else:
        mix["real"] = share
    return mix | ({"real_score": score} if score else {})


@dataclass(frozen=True)
class RealModel:
    """A real model the class may pick (benchmarks.classroom --real-model): its folder's name (the picker's value is
    "hub:" + it), what its runs' notes must say, and what the tables call it."""

    name: str
    notes: str
    label: str
    writes_text: bool = True  # its heads can be scored (an encoder writes nothing)


REAL_MODELS = {"opus-mt-random": RealModel("opus-mt-en-de-random", "real Marian model", "real model (74M)"),
               "minilm": RealModel("all-MiniLM-L6-v2", "real BERT model", "trained BERT (22M)", writes_text=False)}
WORDS = ("the", "attention", "model", "is", "all", "you", "need", "a", "translation", "of", "house", "green",
         "students", "learn", "quickly", "today", "with", "every", "head", "layer")
THINK_S = (1.5, 4.0)
ARRIVAL_S = 5.0   # students arrive (open the page) within this many seconds
SETTLED_S = 15.0  # answers after this many seconds: the class arrived, opened the page and made its first moves
WAIT_S = 1.0      # an action answered later than this waited: did the student see its place in the line?
STEP = re.compile(r"Step (\d+) of (\d+)")  # what a lesson step's text starts with
OWN_STEPS = 9  # the lesson's steps on our models (service.lesson.Lesson.TITLES); the steps after them are real models
EXPORTED = [".csv", ".html", ".npz", ".pdf", ".pdf", ".png", ".png", ".svg", ".svg"]  # views.export's nine files


def random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))


@dataclass
class Tally:
    """What the students saw (recorded on the class's one event loop: no lock)."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # every error, "action: message"
    waited: Counter = field(default_factory=Counter)  # actions answered after more than WAIT_S
    told: Counter = field(default_factory=Counter)    # of those, told their place in the line before the answer
    eta: Counter = field(default_factory=Counter)     # of those, given an estimate of the time too
    last_answer: float = 0.0                          # time.monotonic() of the last answer or error
    answered_at: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # monotonic, per sample
    requests: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # events sent, per sample

    last_open: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the last opening's: monotonic, our and the server's CPU
    real_steps: list[float] = field(default_factory=list)  # seconds of the lesson's Nexts that showed a real step
    resent: int = 0  # requests sent again on a new connection: the server closed a kept one as it was used

    def opened(self, server_cpu_s: float) -> None:
        """An opening answered: the clock and the CPU so far (the class's arrival lasts until the last one)."""
        self.last_open = (time.monotonic(), time.process_time(), server_cpu_s)

    def record(self, action: str, seconds: float, error: str | None, estimations: list[dict] = (),
               requests: int | None = None) -> None:
        self.seconds[action].append(seconds)
        if requests is not None:
            self.requests[action].append(requests)
        self.answered_at[action].append(time.monotonic())
        self.last_answer = max(self.last_answer, time.monotonic())
        if seconds > WAIT_S:
            self.waited[action] += 1
            self.told[action] += any(e.get("rank") is not None and e.get("queue_size") for e in estimations)
            self.eta[action] += any(e.get("rank_eta") is not None for e in estimations)
        if error is not None:
            self.errors[action] += 1
            self.messages.append(f"{action}: {error}")
            if len(self.examples) < 8:
                self.examples.append(f"{action}: {error[:300]}")


class Student:
    """One page's controls and what one student does with them."""

    def __init__(self, page: Page, rng: random.Random,
                 real: RealModel | tuple[RealModel, ...] = REAL_MODELS["opus-mt-random"]) -> None:
        self.browser, self.rng = page, rng
        self.reals = (real,) if isinstance(real, RealModel) else tuple(real)  # "real": the first; "real:key": key's

    async def open(self, files: tuple[str, ...] = ()) -> float:
        """GET /, its files and the config, as a browser fetches them; then the page's load events (and their
        chains) as it runs them: seconds of those events (this app has none: its opening run is in the config)."""
        await self.browser.open(files)
        self._read_config()
        t0 = time.perf_counter()
        for dep in self.loads:
            await self.call(dep)
        return time.perf_counter() - t0

    def _read_config(self) -> None:
        config = self.browser.config
        self.ids, self.values = elem_ids(config), opening_values(config)
        deps = self.dependencies = config["dependencies"]
        self.chains = {d["id"]: [c for c in deps if c.get("trigger_after") == d["id"] and c.get("backend_fn")
                                 and c.get("trigger_only_on_success")] for d in deps}
        then = {d["id"]: [c for c in deps if c.get("trigger_after") == d["id"] and c.get("backend_fn")] for d in deps}
        self.loads = [d for d in deps if d.get("backend_fn") and any(t[1] == "load" for t in d["targets"])]
        self.estimations: list[dict] = []  # the queue's estimations for the last action's events
        self.requests = 0  # the events the last action sent (joined the queue), its chains included
        # the lesson's Next: the backend event #lesson_next's click runs (a private event: found by its trigger)
        self.lesson = next((d for d in deps if d.get("backend_fn") and [self.ids.get("lesson_next"), "click"]
                            in [list(t) for t in d["targets"]]), None)
        if self.lesson is not None:  # a step's chains, .then and .success alike (an app whose step chained requests)
            self.chains[self.lesson["id"]] = then[self.lesson["id"]]
        self.lesson_at = self.rng.randrange(-1, 8)  # the step on show (-1: none yet): students are at various points
        self.real_step = False  # whether the lesson's last Next showed a real model's step
        run = self.values[self.ids["explorer_view"]]  # the page's opening run: its attentions, layers and heads
        self.head_keys = [f"{stack}.{i}.{name}" for entry in run["kinds"] for stack, name in [entry["kind"].split(".")]
                          for i in range(entry["layers"])]
        self.n_heads = int(run["n_heads"])
        self.heads_off: dict[str, set[int]] = {}  # what the student has clicked off so far
        self.api = {name: self.dependency(name) for name in ("dk_lab", "visualize", "steps")}
        # a real model's runs: the page's own event for them where it has one (an app before the queue chose the
        # line by the model: server/admission.py), else /visualize, which the queue puts on the real models' line
        real_line = self.ids.get("run_real")
        self.real_run = next((d for d in deps if d.get("backend_fn") and real_line is not None
                              and any(t[0] == real_line for t in d["targets"])), self.api["visualize"])
        # scoring every head of a real model: its own line where the page has one, else the public /importance
        score_line = self.ids.get("score_real")
        self.real_score = next((d for d in deps if d.get("backend_fn") and score_line is not None
                                and any(t[0] == score_line for t in d["targets"])), self.dependency("importance"))
        # the lab view's server function (an app before it asked every lab answer through the queue: none)
        lab_view = next((c for c in config["components"] if c["id"] == self.ids["lab_view"]), {})
        self.lab_answer = next(iter(lab_view.get("props", {}).get("server_fns") or []), None)
        # the steps view's (an app before it asked the steps through the queue only: none)
        steps_view = next((c for c in config["components"] if c["id"] == self.ids.get("steps_view")), {})
        self.steps_answer = next(iter(steps_view.get("props", {}).get("server_fns") or []), None)
        # the switches the page offers to compare (the radio's choices: those that act on its model), else every one
        radio = next((c for c in config["components"] if c["id"] == self.ids.get("comparison")), {})
        self.comparisons = [choice[1] for choice in radio.get("props", {}).get("choices") or []
                            if choice[1] in COMPARISONS] or list(COMPARISONS)
        missing = [name for name, dep in self.api.items() if dep is None]
        if missing:
            raise RuntimeError(f"the app has no endpoint named {missing}")

    def dependency(self, api_name: str) -> dict | None:
        return dependency(self.browser.config, api_name)

    async def call(self, dep: dict, trigger: str | None = None) -> tuple[float, list]:
        """One event and, as the browser does, the events chained on its success; seconds of the first."""
        self.requests += 1
        try:
            seconds, completed = await self.browser.call(dep, self.values, self.ids.get(trigger) if trigger else None)
        finally:
            self.estimations += self.browser.estimations
        if dep is self.lesson:  # the page shows what the step set (its index and controls) before the chains run
            for output, value in zip(dep["outputs"], completed["output"]["data"]):
                if isinstance(value, dict) and value.get("__type__") == "update":
                    if "value" in value:
                        self.values[output] = value["value"]
                else:
                    self.values[output] = value
        for chained in self.chains.get(dep["id"], []):
            await self.call(chained)
        return seconds, completed["output"]["data"]

    async def lab(self, action: str) -> tuple[float, object]:
        """The lab's answer at the controls' values as the page asks it: its view's server function beside the queue
        (where the page has one), and where that gives none the queued /dk_lab; seconds and the table."""
        t0 = time.perf_counter()
        view = self.ids["lab_view"]
        if self.lab_answer is not None:
            self.requests += 1
            asked = {"d_k": self.values[self.ids["lab_dk"]], "n_keys": self.values[self.ids["lab_keys"]],
                     "scaled": self.values[self.ids["lab_scaled"]]}
            answer = await self.browser.beside(view, self.lab_answer, asked)
            if isinstance(answer, dict) and answer.get("view"):
                return time.perf_counter() - t0, answer["numbers"]
        _, data = await self.call(self.api["dk_lab"], action)
        return time.perf_counter() - t0, data[-1]

    async def act(self, action: str) -> tuple[float, str | None]:
        """Do one action of the mix, or "compare" or "export" (not in ACTIONS: tests/e2e/test_reliability.py asks them):
        (seconds, what is wrong with the answer or None); its queue estimations in .estimations."""
        self.estimations, self.requests = [], 0
        rng, set_ = self.rng, lambda elem_id, value: self.values.__setitem__(self.ids[elem_id], value)
        if action.startswith("lab_"):
            if action == "lab_dk":
                set_("lab_dk", 2 ** rng.randint(0, 12))
            elif action == "lab_scaled":
                set_("lab_scaled", not self.values[self.ids["lab_scaled"]])
            else:
                set_("lab_keys", rng.randint(2, 1024))
            seconds, numbers = await self.lab(action)
            d_k = self.values[self.ids["lab_dk"]]
            rows = numbers.get("data") if isinstance(numbers, dict) else None
            return seconds, None if rows and rows[0][3] == f"{d_k} and 1" else f"lab table not for d_k {d_k}"
        if action == "rerun":
            set_("text", random_text(rng, rng.randint(3, 12)))
            seconds, data = await self.call(self.api["visualize"], "text")
            return seconds, run_problem(data, self.source(), "Scores QKᵀ")
        if action == "heads":  # the explorer's "switch heads off" mode: a tile clicked puts the heads in the box, runs
            key, head = rng.choice(self.head_keys), rng.randrange(self.n_heads)
            if sum(map(len, self.heads_off.values())) >= 4:  # a handful off: the student starts again
                self.heads_off = {}
            self.heads_off.setdefault(key, set()).symmetric_difference_update({head})
            if not any(self.heads_off.values()):
                self.heads_off[key] = {head}
            set_("heads_off", heads_json(self.heads_off))
            if rng.random() < 0.2:
                set_("ablation", "mean" if self.values[self.ids["ablation"]] == "zero" else "zero")
            seconds, data = await self.call(self.api["visualize"], "heads_apply")
            return seconds, run_problem(data, self.source(), "heads switched off")
        if action in ("real", "real_score") or action.startswith("real:"):  # pick a real model, type a sentence;
            # run it, or score its heads (the first that writes text)
            real = (REAL_MODELS[action[len("real:"):]] if action.startswith("real:") else self.reals[0]
                    if action == "real" else next(r for r in self.reals if r.writes_text))
            kept = {elem_id: self.values[self.ids[elem_id]] for elem_id in ("model", "text")}
            set_("model", "hub:" + real.name)
            self.heads_off = {}  # as the page does: heads off name one model's heads, and a new model starts all on
            set_("heads_off", "")
            set_("text", " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10))).capitalize() + ".")
            try:
                if action == "real_score":
                    seconds, data = await self.call(self.real_score)
                    return seconds, None if "Which heads matter" in str(data) else "real_score: no importance"
                seconds, data = await self.call(self.real_run, "text")
            finally:
                for elem_id, value in kept.items():  # the student goes back to the model and text it had
                    set_(elem_id, value)
            return seconds, None if real.notes in str(data) else f"{action}: no notes of a real model's run"
        if action == "lesson":
            return await self.lesson_step()
        head = {name: self.values[self.ids[name]] for name in ("kind", "layer", "head")}
        if action == "compare":
            set_("comparison", rng.choice(self.comparisons))
            seconds, (answer, text) = await self.call(self.dependency("compare"), "comparison")
            label = COMPARISONS[self.values[self.ids["comparison"]]][0]
            return seconds, head_problem(answer, head, COMPARE_FORMAT) or (f"compare: text lacks {label!r}" if label
                                                                           not in text else compare_problem(answer))
        if action == "export":
            seconds, (files, *_) = await self.call(self.dependency("export"))
            names = sorted(str(item.get("orig_name", "")) for item in files or [])
            csv = f"__{head['kind'].replace('.', '_')}__L{head['layer']}_H{head['head']}.csv"
            if sorted(n[n.rfind("."):] for n in names) != EXPORTED or not any(n.endswith(csv) for n in names):
                return seconds, f"export: files {names}, not the nine of *{csv}"
            body = await self.browser.get(next(f["url"] for f in files if f["orig_name"].endswith(".csv")), True)
            return seconds, None if b"\nquery \\ key" in body else "export: the CSV has no table"
        seconds, (answer, text) = await self.steps()
        return seconds, head_problem(answer, head, STEPS_FORMAT) or ("steps: no step text" if "softmax" not in text
                                                                     else steps_problem(answer, self.source()))

    async def steps(self) -> tuple[float, list]:
        """The steps view as the page asks for it: its server function beside the queue (where the page has one), with
        /steps' values, and where that gives none the queued /steps; seconds and [steps, text]."""
        t0 = time.perf_counter()
        if self.steps_answer is not None:
            self.requests += 1
            asked = [self.values[i] for i in self.api["steps"]["inputs"]]
            answer = await self.browser.beside(self.ids["steps_view"], self.steps_answer, asked)
            if isinstance(answer, dict) and answer.get("steps"):
                return time.perf_counter() - t0, [answer["steps"], answer["text"]]
        _, data = await self.call(self.api["steps"])
        return time.perf_counter() - t0, data

    def source(self) -> list[str]:
        """The source tokens of the student's text as the app runs it: a trained model lower-cases; pads after."""
        text, pads = self.values[self.ids["text"]], int(self.values.get(self.ids.get("pads")) or 0)
        text = text if self.values[self.ids["model"]] == "untrained" else known_case(text, string.ascii_lowercase)[0]
        return [*text, "<eos>", *["<pad>"] * pads]

    async def lesson_step(self) -> tuple[float, str | None]:
        """The lesson's Next from the step on show (after the last: from the start again, as a student who starts
        over); the answer must be the next step ("Step N of M" in #lesson_text). Seconds: the step's event and the
        events chained on it. The student then goes back to what it was exploring (its controls as before the step),
        so its other actions stay on its own runs."""
        if self.lesson is None:
            raise RuntimeError("the page has no lesson: no backend event on #lesson_next")
        kept, index = dict(self.values), self.lesson_at
        self.values[self.ids["lesson_step"]] = index
        t0 = time.perf_counter()
        try:
            _, data = await self.call(self.lesson, "lesson_next")
            seconds = time.perf_counter() - t0  # the step and every event chained on it (an app that chains any)
            text = str(data[self.lesson["outputs"].index(self.ids["lesson_text"])])
        finally:
            self.values = kept
        found = STEP.search(text)
        if not found:
            return seconds, f"lesson: no 'Step N of M' in the answer to Next from step {index}"
        shown, steps = int(found[1]), int(found[2])
        self.real_step = shown > OWN_STEPS  # a real model's step: the server set up with real models
        expected = min(index + 1, steps - 1) + 1
        self.lesson_at = -1 if shown >= steps else shown - 1
        return seconds, None if shown == expected else f"lesson: Next from step {index} showed step {shown} of {steps}"


def heads_json(off: dict[str, set[int]]) -> str:
    """Heads off as the explorer puts them in the #heads_off box: JSON {map key: [heads]} (page.js headsOffAsked)."""
    return json.dumps({key: sorted(heads) for key, heads in off.items() if heads}, separators=(",", ":"))


def run_problem(data: list, source: list[str], notes: str) -> str | None:
    """None when a /visualize answer is a packed run of this source, every layer's maps [H, Q, K] for its tokens
    (base64 of two bytes a weight), and its notes say `notes`; else what is wrong."""
    run, _, info = data[:3]
    if not isinstance(run, dict) or run.get("format") != FORMAT or run["tokens"]["source"] != source:
        return f"visualize: not a run of {''.join(source)!r}"
    for entry in run["kinds"]:
        q, k = len(run["tokens"][entry["queries"]]), len(run["tokens"][entry["keys"]])
        if [len(m) for m in entry["maps"]] != [4 * ((2 * run["n_heads"] * q * k + 2) // 3)] * entry["layers"]:
            return f"visualize: {entry['kind']}'s maps do not fit {q} x {k}"
    return None if notes in str(info) else f"visualize: the notes lack {notes!r}"


def head_problem(answer: object, head: dict, form: str) -> str | None:
    """What is wrong with the head a /steps or /compare answer is for (its format, kind, layer and head as asked)."""
    given = [answer.get(name) for name in ("format", "kind", "layer", "head")] if isinstance(answer, dict) else answer
    asked = [form, head["kind"], int(head["layer"]), int(head["head"])]
    return None if given == asked else f"an answer for {given}, asked for {asked}"


def steps_problem(steps: dict, source: list[str]) -> str | None:
    """None when a steps payload's five panels fit its tokens (its keys this source, unless the decoder's own), the
    masked scores are null (−∞) exactly where the mask forbids, and each softmax row with a key sums to 1."""
    q, k, mask = len(steps["queries"]), len(steps["keys"]), steps["mask"]
    if steps["kind"] != "decoder.self_attn" and steps["keys"] != source:
        return "steps: its keys are not this student's source"
    panels = {panel["key"]: panel["values"] for panel in steps["panels"]}
    widths = {key: k for key in ("scores", "scaled", "masked", "weights")} | {"output": steps["d_v"]}
    if {n: (len(v), *{len(r) for r in v}) for n, v in panels.items()} != {n: (q, w) for n, w in widths.items()}:
        return f"steps: panels {sorted(panels)} do not fit {q} x {k}"
    if any((value is None) == ok for row, oks in zip(panels["masked"], mask) for value, ok in zip(row, oks)):
        return "steps: the masked scores are not −∞ exactly where the mask forbids"
    sums = [sum(row) for row, oks in zip(panels["weights"], mask) if any(oks)]
    return next((f"steps: a softmax row sums to {total}" for total in sums if abs(total - 1) > 1e-4), None)


def compare_problem(comparison: dict) -> str | None:
    """None when a comparison's maps a, b and difference fit its tokens and the difference is a − b."""
    q, k = len(comparison["queries"]), len(comparison["keys"])
    if any(len(comparison[n]) != q or {len(r) for r in comparison[n]} != {k} for n in ("a", "b", "difference")):
        return f"compare: maps do not fit {q} x {k}"
    rows = zip(comparison["a"], comparison["b"], comparison["difference"])
    return next(("compare: the difference is not a − b" for a, b, diff in rows for x, y, d in zip(a, b, diff)
                 if abs(x - y - d) > 1e-6), None)
