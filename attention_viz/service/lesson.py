"""A guided lesson: eight steps from the anti-diagonal of reverse, through which of its heads matter, to why the paper
scales by 1/√d_k, and two more on a real model when the server is set up with one (service.real_models): the
1/√d_k taken out of it, and which of its heads matter.

Each step says which tab to open and which controls to set (the page sets them), and writes what to notice with
the numbers of exactly that view: the runs, the lab and the training snapshots it sets are computed here through
Views (cached, so the page's own requests for the same view cost nothing).

    lesson = Lesson(views)
    step = lesson.step(0)     # LessonStep: index, title, tab, controls, explorer, lab, training, live, text
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from attention_viz.service.checks import check_int
from attention_viz.service.heads_view import most_important
from attention_viz.service.requests import heads_off_text
from attention_viz.service.texts import code
from attention_viz.service.views import Views

TEXT = "attention"
REAL_TEXT = "Attention is all you need."  # the real model's text
REAL_TITLE = "Take the 1/√d_k out of a real model"
HEADS_TITLE = "Which heads matter"
REAL_HEADS_TITLE = "Which heads matter in a real model"


@dataclass(frozen=True)
class LessonStep:
    """One step: where it takes the learner and what it says (Markdown, with this view's numbers)."""

    index: int
    title: str
    tab: str                                      # "transformer", "lab" or "training"
    text: str = ""
    controls: dict = field(default_factory=dict)  # the Transformer tab: text, model, d_k, scale (when it applies),
    #                                               heads_off (text, as parse_heads_off reads it; "" for none)
    explorer: dict | None = None                  # kind, layer, head the explorer opens
    lab: dict | None = None                       # the lab: d_k, scaled
    training: dict | None = None                  # the training view: d_k
    live: dict | None = None                      # train it yourself: task, d_k, arm


def _spare(free: int, can_go: int, total: int, allowed: str) -> str:
    """How many heads the model can do without, in words: alone, and pruned least important first."""
    alone = (f"Not one of the {total} heads is free to lose alone" if free == 0 else
             f"{free} of the {total} heads cost nothing switched off alone")
    pruned = (f"not one can go without losing more than {allowed}: this model uses what it has." if can_go == 0 else
              f"{can_go} can go with at most {allowed} lost.")
    return f"{alone}; pruned least important first, {pruned}"


def _best_alignment(packed: dict) -> tuple[int, int, float, float]:
    """(layer, head, score, chance) of the encoder-decoder head most on the task's alignment."""
    cross = next(k for k in packed["kinds"] if k["kind"] == "decoder.cross_attn")
    scores = np.array(cross["scores"]["values"]["alignment"], dtype=float)
    layer, head = np.unravel_index(np.nanargmax(scores), scores.shape)
    return int(layer), int(head), float(scores[layer, head]), float(cross["scores"]["chance"]["alignment"])


class Lesson:
    """The lesson's steps, each built from the views it sets (ValueError for a step that does not exist)."""

    TITLES = (
        "See the anti-diagonal of reverse",
        "Watch it decode, one character at a time",
        HEADS_TITLE,
        "Take the 1/√d_k away at the largest d_k",
        "Why: q·k has variance d_k",
        "Scaled and unscaled, side by side in training",
        "Meet additive attention",
        "Train one yourself",
    )

    def __init__(self, views: Views) -> None:
        self.views = views
        self.runs = views.runs
        real = views.runs.catalog.real.keys
        self.real_model = real[0] if real else None  # the first real model set up, if any
        self.titles = self.TITLES + ((REAL_TITLE, REAL_HEADS_TITLE) if self.real_model else ())

    @staticmethod
    def available(views: Views) -> bool:
        """Whether the models the lesson uses ship with this app (reverse, the study's members and snapshots)."""
        families = views.runs.catalog.families
        return ({"reverse/sqrt_dk", "study/dot", "study/additive"} <= families.keys()
                and {512, 1024} <= set(views.training_sizes()))

    def __len__(self) -> int:
        return len(self.titles)

    def step(self, index: object) -> LessonStep:
        index = check_int("lesson step", index, 0, len(self) - 1)
        build = (self._anti_diagonal, self._decode, self._heads, self._unscaled, self._lab, self._training,
                 self._additive, self._live, self._real, self._real_heads)[index]
        step = build(LessonStep(index, self.titles[index], "transformer"))
        return replace(step, text=f"**Step {index + 1} of {len(self)}: {step.title}.** {step.text}")

    # -- the steps

    def _reverse(self, d_k: int, scale: str) -> tuple[dict, dict]:
        controls = {"text": TEXT, "model": "reverse/sqrt_dk", "d_k": d_k, "scale": scale}
        settings = self.runs.settings(TEXT, "reverse/sqrt_dk", d_k, scale)
        return controls, self.views.visualize(settings).run

    def _anti_diagonal(self, step: LessonStep) -> LessonStep:
        controls, packed = self._reverse(16, "sqrt_dk")
        layer, head, score, chance = _best_alignment(packed)
        text = (f"The model reverses {code(TEXT)} into {code(packed['output'])}. In encoder-decoder attention each row is an "
                f"output character and each column a source character: head L{layer}·H{head} puts {score:.2f} of "
                f"its weight on the character each output is written from (an evenly spread head would put "
                f"{chance:.2f}), so its map is an anti-diagonal. The table under the head scores every head.")
        return replace(step, text=text, controls=controls,
                       explorer={"kind": "decoder.cross_attn", "layer": layer, "head": head})

    def _decode(self, step: LessonStep) -> LessonStep:
        controls, packed = self._reverse(16, "sqrt_dk")
        layer, head, _, _ = _best_alignment(packed)
        cross = self.runs.run(self.runs.settings(TEXT, "reverse/sqrt_dk", 16, "sqrt_dk")).maps[
            f"decoder.{layer}.cross_attn"][head]  # (T, S)
        written = packed["decode"]["written"]
        source = packed["tokens"]["source"]
        lines = [f"step {t + 1} writes {code(written[t])} looking most at source {code(source[int(cross[t].argmax())])} "
                 f"({cross[t].max():.2f})" for t in range(min(3, len(written)))]
        text = ("Press ▶ play in the bar above the grid (or drag it): the decoder writes one character per step, and "
                "the marked row is the step being computed. For head "
                f"L{layer}·H{head}: " + "; ".join(lines) + ". Rows below the mark do not exist yet.")
        return replace(step, text=text, controls=controls,
                       explorer={"kind": "decoder.cross_attn", "layer": layer, "head": head})

    def _heads(self, step: LessonStep) -> LessonStep:
        controls, packed = self._reverse(16, "sqrt_dk")
        scores = self.views.heads.importance(self.runs.settings(TEXT, "reverse/sqrt_dk", 16, "sqrt_dk"), "zero")
        drop, key, head, free = most_important(scores)
        off = heads_off_text(((key, (head,)),))
        without = self.views.visualize(self.runs.settings(TEXT, "reverse/sqrt_dk", 16, "sqrt_dk", heads_off=off)).run
        stack, layer, name = key.split(".")
        text = (f"§3.2.2 gives the model {scores['n_heads']} heads per attention, each free to look at something else. "
                f"Are they all needed? Each of its {scores['total']} heads was switched off alone (its output set to "
                f"0 before W_O) on {scores['texts']} held-out strings, where the model gets {scores['baseline']:.0f}% "
                f"exactly right. Without {code(key)} head {head}, that falls by {drop:.0f} points, the most of any "
                f"head. {_spare(free, scores['can_go'], scores['total'], 'one point')} That head is switched off now: "
                f"{code(TEXT)} comes out as {code(without['output'])} instead of {code(packed['output'])}, and its "
                "map, still computed, is marked off. Press **✂ switch heads off** to try others, **Every head on** "
                "to bring them back, and the **Which heads matter** tab for every head's score and the prune curve.")
        return replace(step, text=text, controls={**controls, "heads_off": off},
                       explorer={"kind": f"{stack}.{name}", "layer": int(layer), "head": head})

    def _unscaled(self, step: LessonStep) -> LessonStep:
        sizes = self.runs.catalog.d_k_choices("reverse/sqrt_dk")
        d_k = max(sizes)
        _, scaled = self._reverse(d_k, "sqrt_dk")
        controls, unscaled = self._reverse(d_k, "none")

        def peak(packed: dict) -> float:
            cross = next(k for k in packed["kinds"] if k["kind"] == "decoder.cross_attn")
            return float(np.mean(cross["stats"]["max_weight"]))

        text = (f"The same model at d_k {d_k} (its largest trained size), run without the 1/√d_k it was trained "
                f"with. The logits grow by √{d_k} ≈ {d_k ** 0.5:.0f}, so the softmax goes one-hot: the mean largest "
                f"weight of a row in encoder-decoder attention rises from {peak(scaled):.2f} to {peak(unscaled):.2f}, "
                f"and the output breaks: {code(unscaled['output'])} instead of {code(scaled['output'])}.")
        layer, head, _, _ = _best_alignment(scaled)
        return replace(step, text=text, controls=controls,
                       explorer={"kind": "decoder.cross_attn", "layer": layer, "head": head})

    def _lab(self, step: LessonStep) -> LessonStep:
        d_k = 512
        sweep = self.views.dk_lab(d_k, 32, False).data["sweep"]  # means over many queries, both modes
        i = sweep["d_k"].index(d_k)
        un, sc = ({name: values[i] for name, values in sweep[mode].items()} for mode in ("unscaled", "scaled"))
        text = (f"With q and k of unit-variance components, q·k is a sum of d_k products, so its variance is d_k: "
                f"{un['logit_var']:.0f} unscaled against {sc['logit_var']:.2f} scaled at d_k {d_k} (means over "
                f"{sweep['n_queries']} queries of {sweep['n_keys']} keys). Unscaled, one key takes "
                f"{un['max_weight']:.3f} of the weight (scaled {sc['max_weight']:.2f}), the entropy falls to "
                f"{un['entropy']:.3f} nats ({sc['entropy']:.2f} scaled) and the softmax's gradient to "
                f"{un['grad_norm']:.4f} ({sc['grad_norm']:.2f} scaled): the queries and keys stop learning. Tick "
                "*scaled* to compare, and move d_k.")
        return replace(step, tab="lab", text=text, lab={"d_k": d_k, "scaled": False})

    def _training(self, step: LessonStep) -> LessonStep:
        d_k = 512
        data = self.views.training(d_k)
        parts = [f"{arm['label']} {arm['alignment'][-1]:.2f} ({100 * arm['heldout_exact_match']:.0f}% of held-out "
                 f"strings exact)" for arm in data["arms"]]
        text = (f"The same one-head model trained three ways at d_k {d_k}. Press ▶ play and watch cross-attention "
                "find the anti-diagonal. After 1,000 steps its weight there is: " + "; ".join(parts) + ". Without "
                "the scaling the softmax starts saturated, and the head forms late or not at all.")
        return replace(step, tab="training", text=text, training={"d_k": d_k})

    def _additive(self, step: LessonStep) -> LessonStep:
        text_in, d_k = "reverse", 1024
        scores = {}
        for arm in ("additive", "dot"):
            model = f"study/{arm}"
            settings = self.runs.settings(text_in, model, d_k, self.views.model_controls(model, d_k).scale_mode)
            packed = self.views.visualize(settings).run
            scores[arm] = (*_best_alignment(packed)[2:3], packed["output"])
        text = ("Additive attention (Bahdanau et al.) scores a key with a small network, w·tanh(W q + U k), instead "
                "of a dot product; nothing there grows with d_k, so it needs no scaling. At d_k 1024 on "
                f"{code(text_in)} the study's additive model puts {scores['additive'][0]:.2f} of its weight on the "
                f"anti-diagonal and writes {code(scores['additive'][1])}; its plain dot product twin "
                f"{scores['dot'][0]:.2f}, writing {code(scores['dot'][1])}. §3.2.1: additive attention beats unscaled "
                "dot products at large d_k; with 1/√d_k, dot products match it and run faster.")
        return replace(step, text=text, controls={"text": text_in, "model": "study/additive", "d_k": d_k},
                       explorer={"kind": "decoder.cross_attn", "layer": 0, "head": 0})

    def _live(self, step: LessonStep) -> LessonStep:
        d_k = 1024
        arms = {arm["arm"]: arm for arm in self.views.training(d_k)["arms"]}
        text = (f"Now train one: the task, d_k {d_k} and plain dot product are set below. Press **Train** and watch "
                "the alignment line; then pick scaled dot product and train again. The study's models at this d_k "
                f"ended at alignment {arms['dot']['alignment'][-1]:.2f} (plain) and "
                f"{arms['scaled_dot']['alignment'][-1]:.2f} (scaled) after 1,000 steps.")
        return replace(step, tab="training", text=text, training={"d_k": d_k},
                       live={"task": "reverse", "d_k": d_k, "arm": "dot"})

    def _real(self, step: LessonStep) -> LessonStep:
        key = self.real_model
        try:
            d_k = self.runs.catalog.default_d_k(key)
            scaled, unscaled = (self.views.visualize(self.runs.settings(REAL_TEXT, key, d_k, scale)).run
                                for scale in ("sqrt_dk", "none"))
        except ValueError as error:  # not loadable here: say so, and the rest of the lesson stands
            return replace(step, text=f"This server is set up with a real model, but it cannot run now: {error}")
        name, family = scaled["settings"]["checkpoint"], self.runs.catalog.real.shape(key).family
        kind = "decoder.cross_attn" if any(k["kind"] == "decoder.cross_attn" for k in scaled["kinds"]) else \
            scaled["kinds"][0]["kind"]
        a, b = (next(k for k in packed["kinds"] if k["kind"] == kind)["stats"] for packed in (scaled, unscaled))
        peak_a, peak_b = float(np.mean(a["max_weight"])), float(np.mean(b["max_weight"]))
        entropy_a, entropy_b = float(np.mean(a["entropy"])), float(np.mean(b["entropy"]))
        change = np.abs(np.array(b["max_weight"]) - np.array(a["max_weight"]))  # (L, H)
        layer, head = (int(i) for i in np.unravel_index(change.argmax(), change.shape))
        same = scaled["output"] == unscaled["output"]
        outcome = (f"the output stays {code(scaled['output'])}" if same else
                   f"the output changes from {code(scaled['output'])} to {code(unscaled['output'])}")
        label = {"decoder.cross_attn": "encoder-decoder attention", "encoder.self_attn": "encoder self-attention",
                 "decoder.self_attn": "masked decoder self-attention"}[kind]
        text = (f"{code(name)} is a real {family} model; its attention scales QKᵀ by 1/√{d_k}. Run without that, "
                f"every logit grows by √{d_k} ≈ {d_k ** 0.5:.0f}: in {label} the mean largest weight of a row goes "
                f"from {peak_a:.2f} to {peak_b:.2f} and the mean entropy from {entropy_a:.2f} to {entropy_b:.2f} nats, and {outcome}. "
                f"Head L{layer}·H{head} changes most. This is step 3 again, on a model nobody here trained.")
        return replace(step, text=text, controls={"text": REAL_TEXT, "model": key, "d_k": d_k, "scale": "none"},
                       explorer={"kind": kind, "layer": layer, "head": head})

    def _real_heads(self, step: LessonStep) -> LessonStep:
        key = self.real_model
        try:
            d_k = self.runs.catalog.default_d_k(key)
            settings = self.runs.settings(REAL_TEXT, key, d_k, "sqrt_dk")
            scores = self.views.heads.importance(settings, "zero")
            drop, attention, head, free = most_important(scores)
            off = heads_off_text(((attention, (head,)),))
            every = self.views.visualize(settings).run
            without = self.views.visualize(self.runs.settings(REAL_TEXT, key, d_k, "sqrt_dk", heads_off=off)).run
        except ValueError as error:  # not loadable or not scorable here: say so, and the rest of the lesson stands
            return replace(step, text=f"This server is set up with a real model, but its heads cannot be scored "
                                      f"now: {error}")
        name = every["settings"]["checkpoint"]
        stack, layer, kind = attention.split(".")
        outcome = (f"the output stays {code(every['output'])}" if every["output"] == without["output"] else
                   f"the output changes from {code(every['output'])} to {code(without['output'])}")
        text = (f"Step 3 again, on {code(name)}: each of its {scores['total']} heads switched off alone, scored by "
                f"how much less likely its own output for {code(REAL_TEXT)} becomes (with every head on, its "
                f"log-probability is {scores['baseline']:.3f} nats per token). {code(attention)} head {head} matters most: {drop:.3f} nats lost "
                f"without it. {_spare(free, scores['can_go'], scores['total'], '0.01 nats')} Voita et al. and "
                f"Michel et al. found most heads of trained translation models could go. That head is switched off "
                f"now, and {outcome}.")
        return replace(step, text=text, controls={"text": REAL_TEXT, "model": key, "d_k": d_k, "scale": "sqrt_dk",
                                                  "heads_off": off},
                       explorer={"kind": f"{stack}.{kind}", "layer": int(layer), "head": head})
