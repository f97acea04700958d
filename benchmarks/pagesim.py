"""One simulated page of the app for the load tests: its requests (a teaching mix over every endpoint) and the
checks that each answer is for its own request (benchmarks/load.py drives it): a /steps or /compare answer is for the
requested head, its panels fit its tokens, masked scores are −∞ (null) exactly where the mask forbids, softmax rows
sum to 1, a comparison's difference is a − b."""

from __future__ import annotations

import base64
import random
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from attention_viz.data.tokenizer import DEFAULT_MAX_LEN
from attention_viz.explorer.pack import FORMAT
from attention_viz.explorer.steps import COMPARE_FORMAT, STEPS_FORMAT
from attention_viz.service.requests import known_case

from .app import Browser

PNG = b"\x89PNG\r\n\x1a\n"
API = "/gradio_api"
ALLOWED_ERRORS = {"queue_full"}   # the one refusal by design (QUEUE_SIZE in webui/page.py, PER_PAGE in server/admission.py)
HTTP_TIMEOUT_S = 120.0            # per HTTP call; the queue may hold 20 events of ~0.5 s each
TEXT_CHARS = string.ascii_letters + string.digits + string.punctuation + " "
COMPARE_LABEL = {"scaling": "scaled by 1/√d_k", "causal_mask": "causal mask on", "padding_mask": "padding mask on"}

# What one client does next, and how often (the weights add up to 100). A change of attention kind, layer, head or
# colour is no request at all: the page draws it from the run it holds.
ACTIONS = {
    "rerun": 38,       # a new text, sometimes with a changed computation control: the model reruns
    "model": 8,        # another model: model_controls, then visualize
    "steps": 14,       # these three, half the time after choosing another head in the browser
    "compare": 14,
    "export": 8,
    "dk_lab": 18,
}
UNTRAINED_D_MODELS = (16, 32, 64, 128, 256)
UNTRAINED_HEADS = (1, 2, 4, 8)
UNTRAINED_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
HEAD_WIDTH_MAX = 4096  # heads x d_k of the untrained model (service.limits.MAX_HEAD_WIDTH)


def choice_values(component: dict) -> list:
    """The values of a Radio / Dropdown's choices ([label, value] pairs in the config)."""
    return [c[1] if isinstance(c, (list, tuple)) else c for c in component["props"]["choices"]]


# ---------------------------------------------------------------------------- one page


@dataclass
class Request:
    """One event to send and what its answer must say."""

    name: str                  # interaction: "visualize:rerun", "model_controls", "steps", ...
    api: str                   # the dependency's api_name
    values: dict[int, object]  # component id -> value, for every input of the dependency
    trigger: int | None
    expect: dict = field(default_factory=dict)


class Page:
    """One browser page's controls, changed the way a person changes them, and the checks of each answer."""

    def __init__(self, browser: Browser, rng: random.Random) -> None:
        self.browser, self.rng = browser, rng
        self.ids = browser.by_elem_id
        self.deps = {name: browser.dependency(name) for name in
                     ("visualize", "steps", "compare", "export", "dk_lab", "model_controls")}
        missing = [name for name in ("visualize", "steps", "compare", "export", "dk_lab") if self.deps[name] is None]
        if missing:
            raise RuntimeError(f"app.py has no endpoint named {missing}")
        comp = browser.components
        self.values: dict[int, object] = {i: comp[i].get("props", {}).get("value") for i in comp}
        self.models = choice_values(comp[self.ids["model"]])
        self.kinds = choice_values(comp[self.ids["kind"]])
        self.colours = choice_values(comp[self.ids["colour"]])
        self.comparisons = choice_values(comp[self.ids["comparison"]])
        self.n_heads = int(self.v("n_heads"))
        self.layers = {kind: 2 for kind in self.kinds}  # per attention kind, from the last run (the page's own)
        self.trained_d_ks: list[int] = []
        self.then_visualize = False  # model_controls was sent: the browser's .success chain runs visualize next
        self.loaded = False          # the page's load events (model_controls, then visualize) not sent yet

    def v(self, elem_id: str):
        return self.values[self.ids[elem_id]]

    def set(self, **changes) -> None:
        for elem_id, value in changes.items():
            self.values[self.ids[elem_id]] = value

    @property
    def untrained(self) -> bool:
        return self.v("model") == "untrained"

    def _request(self, name: str, api: str, trigger: str | None, **expect) -> Request:
        dep = self.deps[api]
        return Request(name, api, {i: self.values[i] for i in dep["inputs"]},
                       self.ids.get(trigger) if trigger else None, expect)

    # -- what a person does next

    def next_request(self) -> Request:
        if not self.loaded and self.deps["model_controls"] is not None:  # as the page opens (demo.load)
            self.loaded = True
            self.then_visualize = True
            return self._request("model_controls", "model_controls", None)
        if self.then_visualize:
            self.then_visualize = False
            return self._visualize("visualize:rerun", "model")
        action = self.rng.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
        return getattr(self, "_" + action)()

    def _rerun(self) -> Request:
        rng = self.rng
        self.set(text="".join(rng.choice(TEXT_CHARS) for _ in range(rng.randint(1, DEFAULT_MAX_LEN))))
        trigger = "text"
        if rng.random() < 0.5:
            control = rng.choice(["scale", "factor", "causal", "padding", "pads", "dk", "shape"])
            trigger = control
            if control == "scale":
                self.set(scale=rng.choice(["sqrt_dk", "none", "custom"]))
            elif control == "factor":
                self.set(scale="custom", factor=round(10 ** rng.uniform(-3, 2), 4))
            elif control in ("causal", "padding"):
                self.set(**{control: not self.v(control)})
            elif control == "pads":
                self.set(pads=rng.randint(0, 16))
            elif control == "dk":
                pool = self.trained_d_ks or [d for d in UNTRAINED_D_KS if d * self.n_heads <= HEAD_WIDTH_MAX]
                self.set(dk=rng.choice(pool))
            elif self.untrained:  # shape: width and heads of the untrained model
                heads = rng.choice(UNTRAINED_HEADS)
                d_k = min(int(self.v("dk")), HEAD_WIDTH_MAX // heads)
                self.set(d_model=rng.choice(UNTRAINED_D_MODELS), n_heads=heads, dk=d_k)
                trigger = "d_model"
                if self.deps["model_controls"] is not None and heads != self.n_heads:
                    # n_heads.release runs model_controls first: it narrows the head slider, for this session too
                    self.then_visualize = True
                    return self._request("model_controls", "model_controls", "n_heads")
                self.n_heads = heads
                self._clamp()
        return self._visualize("visualize:rerun", trigger)

    def _choose_head(self) -> None:
        """Half the time, another kind, layer and head first, as a click in the explorer chooses them (no request)."""
        rng = self.rng
        if rng.random() < 0.5:
            kind = rng.choice(self.kinds)
            self.set(kind=kind, layer=rng.randrange(self.layers[kind]), head=rng.randrange(self.n_heads))

    def _model(self) -> Request:
        self.set(model=self.rng.choice(self.models))
        if self.deps["model_controls"] is None:
            return self._visualize("visualize:rerun", "model")
        self.then_visualize = True
        return self._request("model_controls", "model_controls", "model")

    def _steps(self) -> Request:
        self._choose_head()
        return self._request("steps", "steps", None, **self._expect_run())

    def _compare(self) -> Request:
        self._choose_head()
        self.set(comparison=self.rng.choice(self.comparisons))
        return self._request("compare", "compare", "comparison", label=COMPARE_LABEL.get(self.v("comparison")))

    def _export(self) -> Request:
        self._choose_head()
        self.set(colour=self.rng.choice(self.colours))
        return self._request("export", "export", None, kind=self.v("kind"), layer=self.v("layer"),
                             head=self.v("head"))

    def _dk_lab(self) -> Request:
        rng = self.rng
        d_k = 2 ** rng.randint(0, 12) if rng.random() < 0.7 else rng.randint(1, 4096)
        n_keys = rng.randint(2, 1024)
        self.set(lab_dk=d_k, lab_keys=n_keys, lab_scaled=rng.random() < 0.5)
        return self._request("dk_lab", "dk_lab", "lab_dk", d_k=d_k, n_keys=n_keys)

    def _visualize(self, name: str, trigger: str) -> Request:
        return self._request(name, "visualize", trigger, **self._expect_run())

    def _expect_run(self) -> dict:
        expect = {"pads": int(self.v("pads")), "causal": bool(self.v("causal")), "text": self.v("text")}
        if self.untrained:  # its shape is what the page says, even when model_controls failed
            expect |= {"d_k": int(self.v("dk")), "d_model": int(self.v("d_model")), "n_heads": int(self.v("n_heads"))}
        return expect

    def _clamp(self) -> None:
        layers = self.layers[self.v("kind")]
        self.set(layer=min(int(self.v("layer")), layers - 1), head=min(int(self.v("head")), self.n_heads - 1))

    def describe(self, request: Request) -> dict:
        """The request's values by elem_id: enough to reproduce it by hand."""
        names = {i: name for name, i in self.ids.items()}
        return {names.get(i, i): value for i, value in request.values.items()}

    # -- answers

    def answered(self, api: str, data: list) -> dict[str, object]:
        """An answer's values by the elem_id of the output each one is for (the event's outputs, in order)."""
        components = self.browser.components
        return {components[i].get("props", {}).get("elem_id"): value
                for i, value in zip(self.deps[api]["outputs"], data)}

    def apply_model_controls(self, data: list) -> None:
        """The page's d_k controls after model_controls answered (what the browser applies)."""
        out = self.answered("model_controls", data)
        d_k, scale, note, compatibility = out["dk"], out["scale"], out["dk_note"], out["compatibility"]
        value = (lambda v: v.get("value") if isinstance(v, dict) else v)
        self.set(dk=int(value(d_k)), scale=value(scale), compatibility=value(compatibility))
        self.trained_d_ks = [int(x) for x in re.findall(r"\d+", note.split(":", 1)[1])] if "Trained" in note else []

    def apply_run(self, run: dict) -> None:
        """What the page's explorer knows after a run: its heads and layers; the chosen head stays within them."""
        self.n_heads = int(run["n_heads"])
        self.layers = {entry["kind"]: int(entry["layers"]) for entry in run["kinds"]}
        self._clamp()

    def check(self, request: Request, data: list, files: dict[str, bytes]) -> str | None:
        """None when the answer is right for this request, else what is wrong with it."""
        e = request.expect

        def png(item) -> bool:
            return isinstance(item, dict) and files.get(item.get("url"), b"")[:8] == PNG

        if request.api == "model_controls":
            sent = {self.browser.components[i].get("props", {}).get("elem_id"): v for i, v in request.values.items()}
            if sent.get("model") == sent.get("last_model"):  # the picker already on it: nothing to change
                self.then_visualize = False
                return None
            out = self.answered("model_controls", data)
            if not isinstance(out.get("dk"), int) or out.get("heads_off") != "":  # the d_k controls, every head on
                return f"model_controls answered {str(data)[:200]}"
            if "last_model" in self.ids:  # the page keeps the model that answered
                self.set(last_model=sent.get("model"))
            self.apply_model_controls(data)
            return None
        if request.api == "visualize":
            run, output, info = data
            wanted = [f"{e['pads']} pad token", f"causal mask {'on' if e['causal'] else 'off'}", "Scores "]
            if "d_k" in e:
                wanted.append(f"d_model {e['d_model']}, h {e['n_heads']}, d_k {e['d_k']}")
            source = run["tokens"]["source"]
            problems = [
                run.get("format") != FORMAT and "not a packed run",
                source != source_tokens(e) and "the run is not of this request's text",
                "d_k" in e and run["n_heads"] != e["n_heads"] and f"a run of {run['n_heads']} heads",
                sorted(entry["kind"] for entry in run["kinds"]) != sorted(self.kinds) and "kinds missing",
                *[packed_sizes(run, entry) for entry in run["kinds"]],
                not isinstance(output, str) and "no output text",  # a trained model may answer "" (<eos> first)
                "d_k" in e and not output.startswith("(untrained model") and "not the untrained model's output",
                *[w not in info and f"notes lack {w!r}" for w in wanted],
            ]
            if not any(problems):
                self.apply_run(run)
        elif request.api == "steps":
            steps, text = data
            problems = [
                not isinstance(steps, dict) or steps.get("format") != STEPS_FORMAT and "not a steps payload",
                "softmax" not in text and "no step text",
                "d_k" in e and f"d_k = {e['d_k']})" not in text and f"text lacks d_k = {e['d_k']}",
                *head_problems(steps, request.values, self.ids),
            ]
            if not any(problems):
                problems.append(steps_sizes(steps, e))
        elif request.api == "compare":
            comparison, text = data
            problems = [
                not isinstance(comparison, dict) or comparison.get("format") != COMPARE_FORMAT
                and "not a compare payload",
                e["label"] and e["label"] not in text and f"text lacks {e['label']!r}",
                *head_problems(comparison, request.values, self.ids),
            ]
            if not any(problems):
                problems.append(compare_sizes(comparison))
        elif request.api == "export":
            items = data[0] if data and isinstance(data[0], list) else []
            names = sorted(item.get("orig_name", "") for item in items)
            suffixes = sorted(Path(name).suffix for name in names)
            head_csv = f"__{e['kind'].replace('.', '_')}__L{e['layer']}_H{e['head']}.csv"
            expected = [".csv", ".html", ".npz", ".pdf", ".pdf", ".png", ".png", ".svg", ".svg"]  # views.export's nine
            problems = [suffixes != expected and f"export files {names}",
                        not any(name.endswith(head_csv) for name in names) and f"no *{head_csv}"]
            csv_item = next((item for item in items if str(item.get("orig_name", "")).endswith(".csv")), None)
            if csv_item is not None:
                body = self.browser.client.get(csv_item["url"]).content
                table = [line for line in body.splitlines() if not line.startswith(b"#")]
                problems.append(not (table and table[0].startswith(b"query \\ key")) and "CSV has no header row")
        elif request.api == "dk_lab":
            lab, numbers = data  # the numbers the page draws, and the table
            rows = numbers.get("data") if isinstance(numbers, dict) else None
            histogram = lab.get("histogram", {}) if isinstance(lab, dict) else {}
            problems = [not isinstance(lab, dict) and "no lab data",
                        isinstance(lab, dict) and lab.get("d_k") != e["d_k"] and f"data are for d_k {lab.get('d_k')}",
                        isinstance(lab, dict) and len(lab.get("query", {}).get("weights", [])) != e["n_keys"]
                        and "not one weight per key",
                        len(histogram.get("counts", [])) + 1 != len(histogram.get("edges", [])) and "no histogram",
                        not rows and "no numbers",
                        rows and rows[0][3] != f"{e['d_k']} and 1" and f"numbers are for {rows[0][3]!r}"]
        else:
            return f"unknown endpoint {request.api}"
        problems = [p for p in problems if p]
        return "; ".join(problems) or None


def packed_sizes(run: dict, entry: dict) -> str | None:
    """None when one kind of a packed run has every layer, each [H, Q, K] for its tokens, with [L][H] statistics."""
    heads = run["n_heads"]
    q, k = len(run["tokens"][entry["queries"]]), len(run["tokens"][entry["keys"]])
    sizes = {len(base64.b64decode(data)) for data in entry["maps"]}
    if len(entry["maps"]) != entry["layers"] or sizes != {2 * heads * q * k} or len(entry["mask"]) != q:
        return f"{entry['kind']}: maps of {sorted(sizes)} bytes, expected {entry['layers']} x {2 * heads * q * k}"
    if [len(row) for row in entry["stats"]["entropy"]] != [heads] * entry["layers"]:
        return f"{entry['kind']}: statistics are not [layer][head]"
    return None


def head_problems(answer: dict, values: dict, ids: dict) -> list:
    """What is wrong with the head a /steps or /compare answer is for (kind, layer, head as requested)."""
    if not isinstance(answer, dict):
        return ["the answer is not a dict"]
    asked = (values.get(ids["kind"]), int(values.get(ids["layer"])), int(values.get(ids["head"])))
    given = (answer.get("kind"), answer.get("layer"), answer.get("head"))
    return [given != asked and f"an answer for {given}, asked for {asked}"]


def source_tokens(e: dict) -> list[str]:
    """The source a request runs: a trained model (all of them know a-z) lower-cases capitals; the untrained one
    ("d_k" in e) runs the text as typed."""
    text = e["text"] if "d_k" in e else known_case(e["text"], string.ascii_lowercase)[0]
    return [*text, "<eos>", *["<pad>"] * e["pads"]]


def steps_sizes(steps: dict, e: dict) -> str | None:
    """None when a steps payload's five panels fit its tokens, the masked scores are null (−∞) exactly where
    the mask forbids, and each softmax row with a key to attend to sums to 1."""
    q, k, mask = len(steps["queries"]), len(steps["keys"]), steps["mask"]
    if steps["kind"] != "decoder.self_attn" and steps["keys"] != source_tokens(e):
        return "the steps' keys are not this request's source"
    panels = {panel["key"]: panel["values"] for panel in steps["panels"]}
    widths = {key: k for key in ("scores", "scaled", "masked", "weights")} | {"output": steps["d_v"]}
    if set(panels) != set(widths) or any(len(rows) != q or {len(r) for r in rows} != {widths[key]}
                                         for key, rows in panels.items()):
        return f"steps panels {sorted(panels)} do not fit {q} x {k} (d_v {steps['d_v']})"
    if any((value is None) == ok for row, oks in zip(panels["masked"], mask) for value, ok in zip(row, oks)):
        return "the masked scores are not −∞ exactly where the mask forbids"
    sums = [sum(row) for row, oks in zip(panels["weights"], mask) if any(oks)]
    return next((f"a softmax row sums to {total}" for total in sums if abs(total - 1) > 1e-4), None)


def compare_sizes(comparison: dict) -> str | None:
    """None when a comparison's maps fit its tokens and its difference is a − b (of two runs, another text or model:
    b fits its own tokens, and the difference a's where the tokens align, null elsewhere)."""
    q, k = len(comparison["queries"]), len(comparison["keys"])
    if comparison.get("pair"):
        shapes = {"a": (q, k), "difference": (q, k), "b": (len(comparison["queries_b"]), len(comparison["keys_b"]))}
        if any(len(comparison[name]) != rows or {len(r) for r in comparison[name]} - {cols}
               for name, (rows, cols) in shapes.items()):
            return f"comparison maps do not fit {q} x {k} and b's {shapes['b'][0]} x {shapes['b'][1]}"
        if all(d is None for row in comparison["difference"] for d in row) and "unaligned" not in comparison:
            return "a comparison of two runs aligns nothing and says nothing of it"
        return None
    if any(len(comparison[name]) != q or {len(r) for r in comparison[name]} != {k} for name in ("a", "b", "difference")):
        return f"comparison maps do not fit {q} x {k}"
    rows = zip(comparison["a"], comparison["b"], comparison["difference"])
    if any(abs(x - y - d) > 1e-6 for a, b, diff in rows for x, y, d in zip(a, b, diff)):
        return "the difference is not a − b"
    return None
