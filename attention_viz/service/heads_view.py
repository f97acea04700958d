"""Which heads matter, for the page to draw: every head of the chosen model switched off alone, Michel's one-pass
estimate beside it, and the prune curve (attention_viz.importance), as numbers, a text written from them and a CSV.

A shipped model is scored on its task's first IMPORTANCE_STRINGS held-out strings (exact match and loss); a real
model on the text in the box (the log-probability of what it writes for it, teacher-forced). Scores are cached per
model, scaling and ablation (and text, for a real model): they do not depend on the heads switched off in the view.
A real model's scores take seconds: HeadsView.stream tells them as they come (partial payloads, then the payload).

Payload format "attention_viz.importance/1":

    {"format", "model": the picker's value, "title": str, "metric": "exact match" | "log-probability per token",
     "unit": "points" | "nats", "ablation": "zero" | "mean", "scaling": how QKᵀ was scaled (in words), "texts": N,
     "baseline": float, "n_heads": H,
     "kinds": [{"kind", "label", "layers"}], "drop": {key: [H]}  (metric lost with that head alone off; points of
     exact match are percentages), "loss_rise": {key: [H]} (ours only), "gradient": {key: [H]} (Michel's I_h),
     "agreement": Spearman's ρ or null, "order": [[key, head], ...] least important first, "prune": [metric with the
     first k of order off, k = 0 .. n - 1], "can_go": heads that can go losing at most one point (0.01 nats),
     "total": H x attentions, "text": the summary (Markdown)}

A partial payload (HeadsView.stream, while a real model is scored) has the same fields, with what is not scored yet
as null: "drop" and "gradient" hold null for the heads to come (the gradient comes with the last head), "prune"
the points so far (the prune curve is scored after every head), "order" is empty, "can_go" and "agreement" are
null, "text" says how far it got, and one more field says it: "progress": {"done": heads scored, "total": heads,
"curve": null while heads are scored, then {"done": points of the prune curve, "total": its points}}. The payload
itself has no "progress".
"""

from __future__ import annotations

import io
import math
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace

from attention_viz.core.maps import KINDS, layers_of
from attention_viz.importance import RealPartial
from attention_viz.service.checks import check_choice
from attention_viz.service.exports import ExportFolder, one_line
from attention_viz.service.limits import ABLATIONS
from attention_viz.service.requests import Settings
from attention_viz.service.runs import Runs
from attention_viz.service.texts import code, file_name, scaling_text

FORMAT = "attention_viz.importance/1"
IMPORTANCE_STRINGS = 50   # a shipped model's held-out strings scored in the app (the API's default is 200)
DIGITS = 4
REAL_CHUNK = 64           # a real model's batch rows per pass (real_head_importance's chunk), after a first pass of
                          # the grid's first row: a partial payload each
CACHED = 16               # scored payloads kept (a few per model: scaling x ablation, and text for a real model)


class HeadsView:
    """Head importance of this server's models, cached (a few per model: scaling x ablation)."""

    def __init__(self, runs: Runs, exports: ExportFolder) -> None:
        self.runs = runs
        self.exports = exports
        self._cache: OrderedDict[tuple[Settings, str], dict] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()  # guards _cache only: never held while scoring

    def importance(self, settings: Settings, ablation: object = "zero",
                   partial: Callable[[dict], None] | None = None) -> dict:
        """The payload (module docstring) for the model `settings` runs; ValueError for a model that cannot be
        scored (the untrained model has no task; an encoder-only model writes nothing). `partial`, if given, gets
        each partial payload of a real model being scored (none when the payload is cached, or for our models)."""
        key = self._key(settings, ablation)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        data = self._score(*key, partial)
        with self._lock:
            self._cache[key] = data
            self._cache.move_to_end(key)
            while len(self._cache) > CACHED:
                self._cache.popitem(last=False)
        return data

    def stream(self, settings: Settings, ablation: object = "zero") -> Iterator[dict]:
        """importance's partial payloads as they come, then its payload (the last). The scoring runs on a thread
        of its own: closed early (the visitor left), the stream stops waiting and the scores are still cached."""
        key = self._key(settings, ablation)  # refused here, before any thread
        told: queue.SimpleQueue = queue.SimpleQueue()

        def work() -> None:
            try:
                told.put(("payload", self.importance(*key, partial=lambda data: told.put(("partial", data)))))
            except BaseException as error:  # noqa: BLE001 - raised again by the stream, in the caller's thread
                told.put(("error", error))

        threading.Thread(target=work, name="head importance", daemon=True).start()
        while True:
            what, value = told.get()
            if what == "error":
                raise value
            yield value
            if what == "payload":
                return

    def _key(self, settings: Settings, ablation: object) -> tuple[Settings, str]:
        """The cache's key: the settings less what the scores do not depend on (the text, but a real model's; the
        heads switched off, the padding, the masks; a real model's scaling: it is scored as it was trained, with its
        own 1/√d_k), and the ablation, checked."""
        ablation = check_choice("ablation", "zero" if ablation in (None, "") else ablation, ABLATIONS)
        abilities = self.runs.attention_model(settings).abilities
        scored_on = abilities.scored_on
        if scored_on is None:  # the page's buttons are off for it already (ModelControls.abilities), saying why
            raise ValueError(abilities.unscored or "This model's heads cannot be scored.")
        keep_text = scored_on == "text"
        switches = dict(heads_off=(), ablation="zero", causal_mask=True, padding_mask=True)
        if keep_text:  # a real model's scoring passes run as it was trained (and the payload says so)
            switches["scale"] = "sqrt_dk"
        plain = replace(settings.switched(**switches), text=settings.text if keep_text else "", typed=None,
                        pad_tokens=0)
        return plain, ablation

    def _score(self, settings: Settings, ablation: str, partial: Callable[[dict], None] | None = None) -> dict:
        model = self.runs.attention_model(settings)
        n_heads, on_text = model.shape.n_heads, model.abilities.scored_on == "text"
        told = (lambda part: partial(partial_payload(settings, part, n_heads))) if partial else None
        imp = model.head_importance(settings, ablation, IMPORTANCE_STRINGS, REAL_CHUNK, told)
        return payload(settings, imp, n_heads, real=on_text)

    def csv_file(self, settings: Settings, ablation: object = "zero", client: str | None = None) -> str:
        """Every head's numbers as a CSV file (its settings in # lines); the file's path. `client`: ExportFolder.write."""
        data = self.importance(settings, ablation)
        out = io.StringIO()
        out.write(f"# {one_line(data['title'])}\n# ablation: {data['ablation']}; scaling: {data['scaling']}; texts: "
                  f"{data['texts']}; baseline {data['metric']}: {data['baseline']}\n")
        rise = "loss_rise" in data
        out.write(f"key,head,{data['metric'].replace(' ', '_')}_lost{',loss_rise' if rise else ''},gradient,"
                  "prune_rank\n")
        rank = {(key, head): i for i, (key, head) in enumerate(data["order"])}
        for key in data["drop"]:
            for h in range(data["n_heads"]):
                row = [key, h, data["drop"][key][h]] + ([data["loss_rise"][key][h]] if rise else [])
                out.write(",".join(map(str, row + [data["gradient"][key][h], rank[(key, h)]])) + "\n")
        files = {f"{file_name(settings.name)}__head_importance_{data['ablation']}.csv": out.getvalue().encode()}
        return str(self.exports.write(files, client)[0])


def payload(settings: Settings, imp, n_heads: int, real: bool) -> dict:
    """A HeadImportance (ours) or RealHeadImportance as the page's numbers and text."""
    scale = 100.0 if not real else 1.0  # exact match in points
    data = _numbers(settings, imp, n_heads, real) | {
        "gradient": {key: [round(float(v), 6) for v in imp.gradient[key]] for key in imp.keys},
        "agreement": None if math.isnan(imp.agreement) else round(float(imp.agreement), 3),
        "order": [[key, int(h)] for key, h in imp.order],
        "prune": _rounded(imp.prune, scale), "can_go": int(imp.can_go()), "total": int(imp.total),
    }
    if not real:
        data["loss_rise"] = {key: [round(float(v), DIGITS) for v in imp.loss_rise[key]] for key in imp.keys}
    data["text"] = summary(data)
    return data


def partial_payload(settings: Settings, part: RealPartial, n_heads: int) -> dict:
    """What a real model's scoring has so far (a RealPartial) as a partial payload (module docstring)."""
    gradient = part.gradient or {key: [math.nan] * part.n_heads for key in part.keys}
    curve = {"done": len(part.prune), "total": part.total} if part.gradient is not None else None
    data = _numbers(settings, part, n_heads, real=True) | {
        "gradient": {key: [None if math.isnan(v) else round(float(v), 6) for v in gradient[key]] for key in part.keys},
        "agreement": None, "order": [], "prune": _rounded(part.prune, 1.0), "can_go": None, "total": part.total,
        "progress": {"done": part.done, "total": part.total, "curve": curve},
    }
    data["text"] = (f"Scored {part.done} of {part.total} heads, each switched off alone ({part.ablation} ablation); "
                    "the rest follow." if curve is None else
                    f"Every head scored; the prune curve: {curve['done']} of {curve['total']} points.")
    return data


def _numbers(settings: Settings, imp, n_heads: int, real: bool) -> dict:
    """The fields a payload and a partial payload share: what was scored, how, and each head alone off."""
    scale = 100.0 if not real else 1.0  # exact match in points
    kinds = []
    for kind, label in KINDS.items():
        layers = layers_of(imp.keys, kind)
        if layers:
            kinds.append({"kind": kind, "label": label, "layers": layers})
    return {
        "format": FORMAT, "model": settings.model, "title": title(settings, imp, real),
        "metric": "log-probability per token" if real else "exact match", "unit": "nats" if real else "points",
        "ablation": imp.ablation, "scaling": scaling_text(settings), "texts": imp.texts,
        "baseline": round(float(imp.baseline) * scale, DIGITS),
        "n_heads": n_heads, "kinds": kinds,
        "drop": {key: _rounded(imp.drop[key], scale) for key in imp.keys},
    }


def _rounded(values, scale: float) -> list[float | None]:
    """Metric values in the payload's unit, DIGITS decimals; NaN (not scored yet) as None."""
    return [None if math.isnan(v) else round(float(v) * scale, DIGITS) for v in values]


def title(settings: Settings, imp, real: bool) -> str:
    if real:
        return f"Which heads matter: {settings.name} on “{settings.text}” ({imp.total} heads)"
    return f"Which heads matter: {settings.name} on {imp.texts} held-out strings ({imp.total} heads)"


def most_important(data: dict) -> tuple[float, str, int, int]:
    """(what is lost, key, head) of the head that matters most in a payload, and how many heads cost nothing (or
    help) switched off alone."""
    flat = [(v, key, h) for key, values in data["drop"].items() for h, v in enumerate(values)]
    return (*max(flat), sum(1 for v, _, _ in flat if v <= 0))


def summary(data: dict) -> str:
    """What the numbers say, in words: the baseline, the head that matters most, how many cost nothing, the prune
    curve's verdict and how well Michel's estimate agrees."""
    unit = data["unit"]
    top, key, head, free = most_important(data)
    base = (f"{data['baseline']:.1f}% exact match on the {data['texts']} held-out strings scored here" if unit == "points"
            else f"{data['baseline']:.3f} nats of log-probability per token of its own output")
    lost = f"{top:.1f} points" if unit == "points" else f"{top:.3f} nats"
    one = "one point" if unit == "points" else "0.01 nats"
    lines = [
        f"Each of the {data['total']} heads switched off alone ({data['ablation']} ablation), the rest on: with every "
        f"head on, {base}. The head that matters most is {code(key)} head {head}: {lost} lost without it. "
        f"{free} of {data['total']} cost nothing (or help) when switched off alone.",
        f"Pruned least important first, **{data['can_go']} of {data['total']} heads can go** with at most {one} lost; "
        f"the curve below shows each step (hover a point for its exact number).",
    ]
    if data["agreement"] is not None:
        against = "the loss rise" if unit == "points" else "the log-probability drop"
        lines.append(f"Michel et al.'s one-pass estimate |∂L/∂ξ_h| ranks the heads with Spearman ρ = "
                     f"{data['agreement']:.2f} against {against} (1: the same order).")
    return "\n\n".join(lines)
