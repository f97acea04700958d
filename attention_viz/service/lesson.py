"""A guided lesson: nine steps from the anti-diagonal of reverse, through which of its heads matter, to why the paper
scales by 1/√d_k (footnote 4, in numbers and in a trained model's own q and k), and more on a real model when the
server is set up with one (service.real_models): the 1/√d_k taken out of it, footnote 4 in its own q and k, which
of its heads matter (when it writes text), and where its heads look in a page read at length (the Long text tab: the
sink, a head on the previous token; a model of one stack preferred, which reads the whole page); and, where it has an
image model, where a picture's class token looks and what taking 1/√d_k out does to it (service.lesson_media).

A step is a state, not a sequence of side effects: it says which tab to open and sets every control its view
depends on (a Transformer step: the whole Settings of its run, so nothing is left from an earlier step), and writes
what to notice with the numbers of exactly that view: the runs, the lab and the training snapshots it sets are
computed here through Views (cached, so the page's own requests for the same view cost nothing). Steps refer to
each other by title. The real steps use the first real model this server can have now, and name it; with none, each
says so in its place (the number of steps depends on the set-up alone).

    lesson = Lesson(views)
    step = lesson.step(0)     # LessonStep: index, title, tab, settings, explorer, lab, own_qk, training, live, long,
                              # text
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources

import numpy as np

from attention_viz.core.maps import MapKey, kind_key
from attention_viz.service.checks import check_int
from attention_viz.service.heads_view import most_important
from attention_viz.service.lesson_media import IMAGE_TITLE, IMAGE_UNSCALED_TITLE, image_step
from attention_viz.service.limits import HUB_PREFIX, LAB_TABLE
from attention_viz.service.real_models import display_name
from attention_viz.service.requests import Settings, heads_off_text
from attention_viz.service.texts import as_shown, code, fixed, long_shown
from attention_viz.service.views import Views

TEXT = "attention"
REAL_TEXT = "Attention is all you need."  # the real model's text
HEADS_TITLE = "Which heads matter"
UNSCALED_TITLE = "Take the 1/√d_k away at the largest d_k"
WHY_TITLE = "Why: q·k has variance d_k"
OWN_QK_TITLE = "Footnote 4 in a trained model's own q and k"
REAL_TITLE = "Take the 1/√d_k out of a real model"
REAL_QK_TITLE = "Footnote 4 in a real model's own q and k"
REAL_HEADS_TITLE = "Which heads matter in a real model"
LONG_TITLE = "Where attention goes in a long text"
NO_REAL_TITLE = "Real models: none can be had now"


@dataclass(frozen=True)
class LessonStep:
    """One step: where it takes the learner and what it says (Markdown, with this view's numbers)."""

    index: int
    title: str
    tab: str                                      # "transformer", "lab", "training", "long" or "media"
    text: str = ""
    controls: dict = field(default_factory=dict)  # the Transformer tab: text, model, d_k, scale (when it applies),
    #                                               heads_off (text, as parse_heads_off reads it; "" for none)
    settings: Settings | None = None              # ... and every setting of its run, parsed (the page sets them all)
    explorer: dict | None = None                  # kind, layer, head the explorer opens
    view: str = "heatmaps"                        # the Transformer tab's view it opens ("heads": the scores)
    lab: dict | None = None                       # the lab: d_k, n_keys, scaled
    own_qk: dict | None = None                    # the lab's own q·k: model, kind, layer, head, scaled
    training: dict | None = None                  # the training view: d_k
    live: dict | None = None                      # train it yourself: task, d_k, arm
    long: dict | None = None                      # the Long text tab: model, text, and its view's payload (the
    #                                               kept run's, with the chosen head's overview)
    media: dict | None = None                     # the Pictures and sound tab: model, picture, scale, layer, head,
    #                                               query, and its views (service.media_view's answer)


@lru_cache(maxsize=1)
def long_page() -> str:
    """The page the lesson reads at length: the opening of Pride and Prejudice (Jane Austen, 1813; in the public
    domain), shipped as package data: 341 words (a model whose positions end earlier reads what it can)."""
    return resources.files("attention_viz.data").joinpath("long_page.txt").read_text(encoding="utf-8")


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
        UNSCALED_TITLE,
        WHY_TITLE,
        OWN_QK_TITLE,
        "Scaled and unscaled, side by side in training",
        "Meet additive attention",
        "Train one yourself",
    )

    def __init__(self, views: Views) -> None:
        self.views = views
        self.runs = views.runs
        self.real = views.runs.catalog.real

    @staticmethod
    def available(views: Views) -> bool:
        """Whether the models the lesson uses ship with this app (reverse, the study's members and snapshots)."""
        families = views.runs.catalog.families
        return ({"reverse/sqrt_dk", "study/dot", "study/additive"} <= families.keys()
                and {512, 1024} <= set(views.training_sizes()))

    # -- which real model, if any

    def real_model(self, writes: bool = False, one_stack: bool = False) -> str | None:
        """The first real model set up here that can be had now (loading it if need be); with writes, the first that
        writes text (an encoder-decoder or a decoder, whose heads can be scored by their output); with one_stack, the
        first of one stack (which reads the whole page, where an encoder-decoder reads it with its encoder). None
        when none."""
        for key in self.real.text_keys:
            if one_stack and not self.real.one_stack(key):
                continue
            try:
                model = self.runs.catalog.attention_model(key)
            except ValueError:
                continue  # not loadable now: the next one
            if not writes or model.abilities.writes_text:
                return key
        return None

    @property
    def titles(self) -> tuple[str, ...]:
        """The steps' titles: ours, the four real steps when the server is set up with real models that read text (the
        page read at length in the Long text tab), then the two on pictures where it has an image model. The count
        depends on the set-up alone, never on what loading found (a reader's "of 13" holds from the first step to the last): a real step whose model cannot
        be had, or a heads step with no model that writes text, says so in its place."""
        real = (REAL_TITLE, REAL_QK_TITLE, REAL_HEADS_TITLE, LONG_TITLE) if self.real.text_keys else ()
        pictures = (IMAGE_TITLE, IMAGE_UNSCALED_TITLE) if self.views.media.picture_keys else ()
        return (*self.TITLES, *real, *pictures)

    def __len__(self) -> int:
        return len(self.titles)

    def warm_up(self, real: bool = False) -> None:
        """Build each step on our own models once (its runs, scores, lab and snapshots, cached in the views), so a
        class's first Next at each step does not pay for it; with `real`, the real steps too (each loads and runs the
        real models it names), else they are left to their first use (nothing loads)."""
        for index in range(len(self.titles) if real else len(self.TITLES)):
            self.step(index)

    def step(self, index: object) -> LessonStep:
        titles = self.titles
        index = check_int("lesson step", index, 0, len(titles) - 1)
        build = {"See the anti-diagonal of reverse": self._anti_diagonal,
                 "Watch it decode, one character at a time": self._decode, HEADS_TITLE: self._heads,
                 UNSCALED_TITLE: self._unscaled, WHY_TITLE: self._lab, OWN_QK_TITLE: self._own_qk,
                 "Scaled and unscaled, side by side in training": self._training,
                 "Meet additive attention": self._additive, "Train one yourself": self._live,
                 REAL_TITLE: self._real, REAL_QK_TITLE: self._real_qk, REAL_HEADS_TITLE: self._real_heads,
                 LONG_TITLE: self._long, IMAGE_TITLE: lambda step: image_step(self, step, scaled=True),
                 IMAGE_UNSCALED_TITLE: lambda step: image_step(self, step, scaled=False)}[titles[index]]
        step = build(LessonStep(index, titles[index], "transformer"))
        if step.tab == "transformer" and step.controls and step.settings is None:
            step = replace(step, settings=self.settings_of(step.controls))
        return replace(step, text=f"**Step {index + 1} of {len(titles)}: {step.title}.** {step.text}")

    def settings_of(self, controls: dict) -> Settings:
        """Every setting of a Transformer step's run: what it names, the model's own for the rest (its scaling),
        the masks on, no pad tokens, every head on unless it says."""
        model = controls["model"]
        scale = controls.get("scale") or self.views.model_controls(model, controls["d_k"]).scale_mode
        return self.runs.settings(controls["text"], model, controls["d_k"], scale, 1.0, True, True, 0,
                                  heads_off=controls.get("heads_off") or None)

    # -- the steps

    def _reverse(self, d_k: int, scale: str) -> tuple[dict, dict]:
        controls = {"text": TEXT, "model": "reverse/sqrt_dk", "d_k": d_k, "scale": scale}
        settings = self.runs.settings(TEXT, "reverse/sqrt_dk", d_k, scale)
        return controls, self.views.visualize(settings).run

    def _anti_diagonal(self, step: LessonStep) -> LessonStep:
        controls, packed = self._reverse(16, "sqrt_dk")
        layer, head, score, chance = _best_alignment(packed)
        text = (f"The model reverses {code(TEXT)} into {code(packed['output'])}. In encoder-decoder attention each row is a "
                f"decoder input (`<bos>` and the output so far) and writes the next output character; each column is a "
                f"source character: head L{layer}·H{head} puts {score:.2f} of "
                f"its weight on the character each output is written from (an evenly spread head would put "
                f"{chance:.2f}), so its map is an anti-diagonal. The table under the head scores every head.")
        return replace(step, text=text, controls=controls,
                       explorer={"kind": "decoder.cross_attn", "layer": layer, "head": head})

    def _decode(self, step: LessonStep) -> LessonStep:
        controls, packed = self._reverse(16, "sqrt_dk")
        layer, head, _, _ = _best_alignment(packed)
        cross = self.runs.run(self.runs.settings(TEXT, "reverse/sqrt_dk", 16, "sqrt_dk")).maps[
            kind_key("decoder.cross_attn", layer)][head]  # (T, S)
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
        where = MapKey.parse(key)
        text = (f"§3.2.2 gives the model {scores['n_heads']} heads per attention, each free to look at something else. "
                f"Are they all needed? Each of its {scores['total']} heads was switched off alone (its output set to "
                f"0 before W_O) on {scores['texts']} held-out strings, where the model gets {scores['baseline']:.0f}% "
                f"exactly right. Without {code(key)} head {head}, that falls by {drop:.0f} points, the most of any "
                f"head. {_spare(free, scores['can_go'], scores['total'], 'one point')} That head is switched off now: "
                f"{code(TEXT)} comes out as {code(without['output'])} instead of {code(packed['output'])}, and its "
                "map, still computed, is marked off. Press **✂ switch heads off** to try others, **Every head on** "
                "to bring them back, and the **Which heads matter** tab for every head's score and the prune curve.")
        return replace(step, text=text, controls={**controls, "heads_off": off}, view="heads",
                       explorer={"kind": where.kind, "layer": where.layer, "head": head})

    def _unscaled(self, step: LessonStep) -> LessonStep:
        sizes = self.runs.catalog.d_k_choices("reverse/sqrt_dk")
        d_k = max(sizes)
        _, scaled = self._reverse(d_k, "sqrt_dk")
        controls, unscaled = self._reverse(d_k, "none")
        layer, head, _, _ = _best_alignment(scaled)
        stats = next(k for k in unscaled["kinds"] if k["kind"] == "decoder.cross_attn")["stats"]
        text = (f"The same model at d_k {d_k} (its largest trained size), run without the 1/√d_k it was trained "
                f"with. The logits grow by √{d_k} ≈ {d_k ** 0.5:.0f}, so the softmax goes one-hot: head "
                f"L{layer}·H{head} of encoder-decoder attention, the one that follows the anti-diagonal, now puts "
                f"{stats['max_weight'][layer][head]:.3f} of a row's weight on one key on average (its max weight "
                f"under the head; entropy {stats['entropy'][layer][head]:.3f} nats), and the output breaks: "
                f"{code(unscaled['output'])} instead of {code(scaled['output'])}. Pick *1/√d_k (paper)* to see "
                "both come back.")
        return replace(step, text=text, controls=controls,
                       explorer={"kind": "decoder.cross_attn", "layer": layer, "head": head})

    def _lab(self, step: LessonStep) -> LessonStep:
        d_k, n_keys = 512, 32
        rows = self.views.dk_lab(d_k, n_keys, False).numbers  # the lab's table, as on screen
        (var, var_s), (top, top_s), (ent, ent_s), (grad, grad_s) = ((as_shown(r[1]), as_shown(r[2])) for r in rows)
        queries = rows[1][0].split("median over ")[1]
        text = (f"With q and k of unit-variance components, q·k is a sum of d_k products, so its variance is d_k: "
                f"{var} unscaled against {var_s} scaled at d_k {d_k}. Unscaled, a query puts a median {top} of its "
                f"weight on one key (scaled {top_s}); the entropy falls to a median {ent} nats ({ent_s} scaled) and "
                f"the softmax's gradient to {grad} ({grad_s} scaled): the queries and keys stop learning. These are "
                f"medians over {queries}, the table *{LAB_TABLE}* under the charts; the charts above it draw one "
                "typical query. Tick *scaled* to compare, and move d_k.")
        return replace(step, tab="lab", text=text, lab={"d_k": d_k, "n_keys": n_keys, "scaled": False})

    def _own_qk_text(self, model: str, kind: str, layer: int, head: int) -> tuple[dict, str]:
        """The lab's own-q·k view of one head and its numbers in words (each as the page's table writes it)."""
        view = self.views.own_qk.view(model, kind, layer, head, True)
        n = {label: f"{value:g}" for label, value, _ in view["numbers"]["data"]}
        text = (f"Var q = {n['Var q (components)']}, Var k = {n['Var k (components)']} and Var q·k = "
                f"{n['Var q·k, raw']} at d_k = {view['d_k']}, where d_k · Var q · Var k = {n['d_k · Var q · Var k']}:"
                f" a ratio of {n['Var q·k / (d_k · Var q · Var k)']}. Its scaled logits have variance "
                f"{n['Var q·k / d_k (Var of the scaled logits)']}, and its softmax keeps "
                f"{n['softmax entropy with 1/√d_k, nats']} nats with 1/√d_k, "
                f"{n['softmax entropy without scaling, nats']} without")
        return view, text

    def _own_qk(self, step: LessonStep) -> LessonStep:
        model = self.runs.catalog.families["reverse/sqrt_dk"].nearest(16)[1]  # the checkpoint of the steps above
        kind, layer, head = "decoder.cross_attn", 1, 0
        view, numbers = self._own_qk_text(model, kind, layer, head)
        text = (f"*{WHY_TITLE}* assumed q and k have independent components of variance 1. The lab's "
                f"**This model's own q·k** measures a trained model's: reverse, encoder-decoder attention, layer "
                f"{layer}, head {head}, the head that reads the source backwards, on {view['texts']}. {numbers}. "
                "The queries and keys have learned to line up, so even after 1/√d_k the grey histogram spreads far "
                "past footnote 4's law. Pick encoder self-attention, layer 0, head 2 for a head where footnote 4 "
                "nearly holds. The scaling fixes the variance at initialisation; training moves it.")
        return replace(step, tab="lab", text=text,
                       own_qk={"model": model, "kind": kind, "layer": layer, "head": head, "scaled": True})

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
        model = "study/additive"
        settings = self.runs.settings(text_in, model, d_k, self.views.model_controls(model, d_k).scale_mode)
        packed = self.views.visualize(settings).run
        score, output = _best_alignment(packed)[2], packed["output"]
        text = ("Additive attention (Bahdanau et al.) scores a key with a small network, w·tanh(W q + U k), instead "
                "of a dot product; nothing there grows with d_k, so it needs no scaling. At d_k 1024 on "
                f"{code(text_in)} the study's additive model puts {score:.2f} of its weight on the anti-diagonal and "
                f"writes {code(output)}. Pick *plain dot product* in the compatibility function to see its twin "
                "without the scaling. §3.2.1: additive attention beats unscaled dot products at large d_k; with "
                "1/√d_k, dot products match it and run faster.")
        return replace(step, text=text, controls={"text": text_in, "model": model, "d_k": d_k},
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

    def _no_real(self, step: LessonStep) -> LessonStep:
        names = ", ".join(code(key[len(HUB_PREFIX):]) for key in self.real.text_keys)
        return replace(step, title=NO_REAL_TITLE, tab="transformer",
                       text=f"This server is set up with real models ({names}), but none can be had now: picking "
                            "one in the model picker says why. The lesson's other steps stand; try again later.")

    def _real(self, step: LessonStep) -> LessonStep:
        key = self.real_model()
        if key is None:
            return self._no_real(step)
        d_k = self.runs.catalog.default_d_k(key)
        scaled, unscaled = (self.views.visualize(self.runs.settings(REAL_TEXT, key, d_k, scale)).run
                            for scale in ("sqrt_dk", "none"))
        name, model = scaled["settings"]["checkpoint"], self.runs.catalog.attention_model(key)
        kind = "decoder.cross_attn" if any(k["kind"] == "decoder.cross_attn" for k in scaled["kinds"]) else \
            scaled["kinds"][0]["kind"]
        a, b = (next(k for k in packed["kinds"] if k["kind"] == kind)["stats"] for packed in (scaled, unscaled))
        change = np.array(b["max_weight"]) - np.array(a["max_weight"])  # (L, H)
        layer, head = (int(i) for i in np.unravel_index(np.abs(change).argmax(), change.shape))
        label = {"decoder.cross_attn": "encoder-decoder attention", "encoder.self_attn": "encoder self-attention",
                 "decoder.self_attn": "masked decoder self-attention"}[kind]
        can = model.abilities
        if not can.writes_text:
            outcome = ("it writes no text (an encoder), so its maps are what changes" if not can.fills_masks else
                       "its maps change (it writes only where the text has its mask token)")
        elif scaled["output"] == unscaled["output"]:
            outcome = f"the output stays {code(scaled['output'])}"
        else:
            outcome = f"the output changes from {code(scaled['output'])} to {code(unscaled['output'])}"
        text = (f"{code(name)} is a real {model.shape.family} model; its attention scales QKᵀ by 1/√{d_k}. Run without "
                f"that, every logit grows by √{d_k} ≈ {d_k ** 0.5:.0f}, and {outcome}. In {label}, head "
                f"L{layer}·H{head} changes most: it now puts {b['max_weight'][layer][head]:.3f} of a row's weight on "
                f"one key on average (its max weight under the head; entropy {b['entropy'][layer][head]:.3f} nats). "
                f"Pick *1/√d_k (paper)* to compare. This is *{UNSCALED_TITLE}* again, on a model nobody here "
                "trained.")
        return replace(step, text=text, controls={"text": REAL_TEXT, "model": key, "d_k": d_k, "scale": "none"},
                       explorer={"kind": kind, "layer": layer, "head": head})

    def _real_qk(self, step: LessonStep) -> LessonStep:
        key = self.real_model()
        if key is None:
            return self._no_real(step)
        shape = self.views.own_qk.shape(key)
        kind = shape["kinds"][-1]
        view, numbers = self._own_qk_text(key, kind, 0, 0)
        text = (f"*{OWN_QK_TITLE}* on {code(key[len(HUB_PREFIX):])}, a real model trained by others: its "
                f"{view['label'].split(', d_k')[0] if 'label' in view else 'attention'}, layer 0, head 0, on "
                f"{view['texts']}. {numbers}. Move through its layers and heads: how far is each from footnote 4?")
        return replace(step, tab="lab", text=text,
                       own_qk={"model": key, "kind": kind, "layer": 0, "head": 0, "scaled": True})

    def _real_heads(self, step: LessonStep) -> LessonStep:
        key = self.real_model(writes=True)
        if key is None and self.real_model() is None:
            return self._no_real(step)
        if key is None:
            return replace(step, text="None of the real models this server can have now writes text (an encoder "
                                      "has no output to score its heads by): the heads of our own models are scored "
                                      f"in *{HEADS_TITLE}*.")
        d_k = self.runs.catalog.default_d_k(key)
        settings = self.runs.settings(REAL_TEXT, key, d_k, "sqrt_dk")
        scores = self.views.heads.importance(settings, "zero")
        drop, attention, head, free = most_important(scores)
        off = heads_off_text(((attention, (head,)),))
        every = self.views.visualize(settings).run
        without = self.views.visualize(self.runs.settings(REAL_TEXT, key, d_k, "sqrt_dk", heads_off=off)).run
        name = every["settings"]["checkpoint"]
        where = MapKey.parse(attention)
        outcome = (f"the output stays {code(every['output'])}" if every["output"] == without["output"] else
                   f"the output changes from {code(every['output'])} to {code(without['output'])}")
        text = (f"*{HEADS_TITLE}* again, on {code(name)}: each of its {scores['total']} heads switched off alone, "
                f"scored by how much less likely its own output for {code(REAL_TEXT)} becomes (with every head on, "
                f"its log-probability is {scores['baseline']:.3f} nats per token). {code(attention)} head {head} "
                f"matters most: {drop:.3f} nats lost without it. "
                f"{_spare(free, scores['can_go'], scores['total'], '0.01 nats')} Voita et al. and Michel et al. found "
                f"most heads of trained translation models could go. That head is switched off now, and {outcome}.")
        return replace(step, text=text, controls={"text": REAL_TEXT, "model": key, "d_k": d_k, "scale": "sqrt_dk",
                                                  "heads_off": off}, view="heads",
                       explorer={"kind": where.kind, "layer": where.layer, "head": head})

    def _long(self, step: LessonStep) -> LessonStep:
        key = self.real_model(one_stack=True) or self.real_model()  # a model of one stack reads the whole page
        if key is None:
            return self._no_real(step)
        page = long_page()
        for _ in range(2):  # a run dropped to make room between the read and its view: read again, once
            payload = self.views.long.shared(key, page)
            stats = {name: np.array(stats) for name, stats in payload["stats"].items()}  # (L, H) each, as sent
            sink = np.unravel_index(stats["first_token"].argmax(), stats["first_token"].shape)
            layer, head = (int(i) for i in np.unravel_index(stats["previous_token"].argmax(),
                                                            stats["previous_token"].shape))
            overview = self.views.long.view({"run": payload["run"], "what": "overview", "key": payload["keys"][layer],
                                             "head": head})
            if "error" not in overview:
                break
        else:
            raise ValueError(overview["error"])
        chosen = payload["keys"][layer]
        read = (f"{payload['read']:,} tokens" if payload["read"] == payload["of"] else
                f"the first {payload['read']:,} of its {payload['of']:,} tokens (where the model's positions end)")
        reader = "" if self.real.one_stack(key) else " with its encoder (an encoder-decoder's decoder reads no page)"
        text = (f"{code(display_name(key))} has read a page in one pass{reader}: the opening of *Pride and "
                f"Prejudice*, {read}. Each cell of the three grids is one of its heads (rows: layers, columns: "
                "heads). Many heads park their weight on the first token, a *sink* that carries little meaning: "
                f"the brightest cell of the first grid, layer {sink[0]}, head {sink[1]}, puts "
                f"{long_shown(stats['first_token'][sink])} of a row's weight there on average (the top of that grid's "
                f"colour bar). Others look one token back: {code(chosen)} head {head}, open below the grids, puts "
                f"{fixed(stats['previous_token'][layer, head], 3)} of a row's weight on the previous token (its line "
                f"under the grids: sink {fixed(stats['first_token'][layer, head], 3)}, previous token "
                f"{fixed(stats['previous_token'][layer, head], 3)}); on its map those weights are the line just under "
                "the diagonal. Tick *leave out the first token* to see where the rest of each row goes, drag a "
                "rectangle on the map for exact weights, and click other cells to compare heads.")
        return replace(step, tab="long", text=text,
                       long={"model": key, "text": page, "payload": {**payload, "overview": overview}})
