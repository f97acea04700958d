"""The guided lesson: seven steps, each setting what it says, its text written from the numbers of that view."""

import re

import pytest

from attention_viz.service.lesson import Lesson
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views


@pytest.fixture(scope="module")
def lesson():
    return Lesson(Views(Runs()))


def test_seven_steps_in_order_each_opening_a_tab(lesson):
    steps = [lesson.step(i) for i in range(len(lesson))]
    assert len(steps) == 7
    assert [s.tab for s in steps] == ["transformer", "transformer", "transformer", "lab", "training",
                                      "transformer", "training"]
    for i, s in enumerate(steps):
        assert s.text.startswith(f"**Step {i + 1} of 7: {s.title}.**")
    for bad in (-1, 7, "2.5", None, "x" * 1000):
        with pytest.raises(ValueError, match="lesson step"):
            lesson.step(bad)


def test_the_numbers_in_the_text_are_those_of_the_view_it_sets(lesson):
    views, runs = lesson.views, lesson.runs
    first = lesson.step(0)
    c = first.controls
    packed = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"])).run
    cross = next(k for k in packed["kinds"] if k["kind"] == "decoder.cross_attn")
    best = cross["scores"]["values"]["alignment"][first.explorer["layer"]][first.explorer["head"]]
    assert best == max(max(row) for row in cross["scores"]["values"]["alignment"])
    assert f"puts {best:.2f} of its weight" in first.text and f"`{packed['output']}`" in first.text

    third = lesson.step(2)
    assert third.controls["scale"] == "none" and third.controls["d_k"] == 128
    c = third.controls
    broken = views.visualize(runs.settings(c["text"], c["model"], c["d_k"], c["scale"])).run["output"]
    assert f"the output breaks: `{broken}` instead of `noitnetta`" in third.text

    lab = lesson.step(3)
    sweep = views.dk_lab(512, 32, False).data["sweep"]
    i = sweep["d_k"].index(lab.lab["d_k"])
    assert f"{sweep['unscaled']['logit_var'][i]:.0f} unscaled" in lab.text
    assert f"gradient to {sweep['unscaled']['grad_norm'][i]:.4f}" in lab.text

    training = lesson.step(4)
    arms = views.training(training.training["d_k"])["arms"]
    for arm in arms:
        assert f"{arm['label']} {arm['alignment'][-1]:.2f}" in training.text

    additive = lesson.step(5)
    assert "scale" not in additive.controls  # additive attention has no QKᵀ to scale
    assert re.search(r"additive model puts 0\.\d\d of its weight", additive.text)

    live = lesson.step(6)
    assert live.live == {"task": "reverse", "d_k": 1024, "arm": "dot"}
