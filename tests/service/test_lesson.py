"""The guided lesson: nine steps, each a state (every setting of its view), its text written from that view's numbers."""

import re

import pytest

from attention_viz.service.lesson import Lesson
from attention_viz.service.limits import LAB_TABLE
from attention_viz.service.texts import as_shown
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views


@pytest.fixture(scope="module")
def lesson():
    return Lesson(Views(Runs()))


def test_nine_steps_in_order_each_opening_a_tab_and_setting_everything_it_depends_on(lesson):
    steps = [lesson.step(i) for i in range(len(lesson))]
    assert len(steps) == 9
    assert [s.tab for s in steps] == ["transformer", "transformer", "transformer", "transformer", "lab", "lab",
                                      "training", "transformer", "training"]
    for i, s in enumerate(steps):
        assert s.text.startswith(f"**Step {i + 1} of 9: {s.title}.**")
        assert not re.search(r"step \d+ again|(see|in) step \d", s.text, re.IGNORECASE)  # others named by title
    # every Transformer step carries the whole Settings of its run: masks on, no pads, the model's own scaling
    for s in steps:
        if s.tab == "transformer":
            assert s.settings is not None and s.settings.causal_mask and s.settings.padding_mask
            assert s.settings.pad_tokens == 0 and s.settings.ablation == "zero"
    # only the heads step switches heads off; every other Transformer step turns them all back on
    assert [s.settings.heads_off for s in steps if s.settings and s is not steps[2]] == [()] * 4
    assert steps[7].settings.scale == "none"  # additive attention: nothing to scale, said as such
    for bad in (-1, 9, "2.5", None, "x" * 1000):
        with pytest.raises(ValueError, match="lesson step"):
            lesson.step(bad)


def test_the_own_qk_step_quotes_the_numbers_of_the_head_it_opens(lesson):
    step = lesson.step(5)
    o = step.own_qk
    view = lesson.views.own_qk.view(o["model"], o["kind"], o["layer"], o["head"], o["scaled"])
    for label, value, _ in view["numbers"]["data"][:9]:
        if label != "Var q·k within one query's keys":
            assert f"{value:g}" in step.text, label
    assert "*Why: q·k has variance d_k*" in step.text


def test_the_numbers_in_the_text_are_those_of_the_view_it_sets(lesson):
    views, runs = lesson.views, lesson.runs
    first = lesson.step(0)
    c = first.controls
    packed = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"])).run
    cross = next(k for k in packed["kinds"] if k["kind"] == "decoder.cross_attn")
    best = cross["scores"]["values"]["alignment"][first.explorer["layer"]][first.explorer["head"]]
    assert best == max(max(row) for row in cross["scores"]["values"]["alignment"])
    assert f"puts {best:.2f} of its weight" in first.text and f"`{packed['output']}`" in first.text

    third = lesson.step(3)
    assert third.controls["scale"] == "none" and third.controls["d_k"] == 128
    c = third.controls
    broken = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"])).run["output"]
    assert f"the output breaks: `{broken}` instead of `noitnetta`" in third.text

    lab = lesson.step(4)
    rows = views.dk_lab(lab.lab["d_k"], 32, False).numbers  # the lab's table, as it opens
    for row in rows:  # every median (and variance) the text quotes is the table's, as the page writes it
        for value in row[1:3]:
            assert as_shown(value) in lab.text, (row, lab.text)
    assert "medians over 256 queries" in lab.text and "mean" not in lab.text.replace("meaning", "")
    # the medians are said to be the table's, by its caption, never the one query the charts draw (whose own
    # numbers differ: its largest weight is the median, its gradient is not)
    assert f"the table *{LAB_TABLE}* under the charts" in lab.text and "drawn here" not in lab.text

    training = lesson.step(6)
    arms = views.training(training.training["d_k"])["arms"]
    for arm in arms:
        assert f"{arm['label']} {arm['alignment'][-1]:.2f}" in training.text

    additive = lesson.step(7)
    assert "scale" not in additive.controls  # additive attention has no QKᵀ to scale
    assert re.search(r"additive model puts 0\.\d\d of its weight", additive.text)

    live = lesson.step(8)
    assert live.live == {"task": "reverse", "d_k": 1024, "arm": "dot"}


def test_the_heads_step_switches_off_the_head_that_matters_most_and_says_what_it_costs(lesson):
    views, runs = lesson.views, lesson.runs
    step = lesson.step(2)
    c = step.controls
    assert (c["text"], c["model"], c["d_k"], c["scale"]) == ("attention", "reverse/sqrt_dk", 16, "sqrt_dk")
    scores = views.heads.importance(runs.settings(c["text"], c["model"], c["d_k"], c["scale"]), "zero")
    flat = [(v, key, h) for key, values in scores["drop"].items() for h, v in enumerate(values)]
    drop, key, head = max(flat)
    assert drop == max(v for v, _, _ in flat) > 0
    assert c["heads_off"] == f"{key}: {head}"
    stack, layer, name = key.split(".")
    assert step.explorer == {"kind": f"{stack}.{name}", "layer": int(layer), "head": head}
    every = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"])).run
    without = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"], heads_off=c["heads_off"])).run
    assert without["heads_off"] == {key: [head]} and "heads_off" not in every
    assert f"falls by {drop:.0f} points" in step.text and f"`{key}` head {head}" in step.text
    assert f"comes out as `{without['output']}` instead of `{every['output']}`" in step.text
    assert f"{scores['baseline']:.0f}% exactly right" in step.text and f"on {scores['texts']} held-out" in step.text


def test_warming_the_lesson_up_builds_every_step_on_our_models_and_loads_no_real_model():
    """After Lesson.warm_up, each of our steps is answered from the views' caches: building it again computes no run."""
    views = Views(Runs())  # the shipped models: the lesson's study members and snapshots
    lesson = Lesson(views)
    lesson.warm_up()
    misses = views.runs.run._misses
    for index in range(len(Lesson.TITLES)):
        lesson.step(index)
    assert views.runs.run._misses == misses and views.runs.catalog.real.states() == {}


def test_warming_up_with_real_builds_the_real_steps_too(monkeypatch):
    """warm_up(real=True) (webui.page.main's, where the set-up says so) builds every step, the real ones after ours;
    without it, ours only. The steps themselves stand in for the views (no model is run here)."""
    from types import SimpleNamespace

    built = []
    monkeypatch.setattr(Lesson, "step", lambda self, index: built.append(index))
    real = SimpleNamespace(keys=["hub:some"], text_keys=["hub:some"], one_stack=lambda key: True)  # the long text's
    media = SimpleNamespace(picture_keys=[])                                                       # step too
    lesson = Lesson(SimpleNamespace(runs=SimpleNamespace(catalog=SimpleNamespace(real=real)), media=media))
    lesson.warm_up()
    assert built == list(range(len(Lesson.TITLES)))
    built.clear()
    lesson.warm_up(real=True)
    assert built == list(range(len(Lesson.TITLES) + 4)) == list(range(len(lesson)))
    media.picture_keys = ["hub:vit"]  # an image model too: its two steps last
    built.clear()
    lesson.warm_up(real=True)
    assert built == list(range(len(Lesson.TITLES) + 6)) == list(range(len(lesson)))
