"""The steps view's answer beside the queue (webui/transformer_tab.py steps_beside, Views.steps_at_once): what /steps
answers, where the run on screen is kept and is a trained family's; None (the page then asks the queued /steps) for
anything else, computing nothing."""

from __future__ import annotations

import json
import random
import string

import pytest

from attention_viz.webui.handlers import Handlers, opening_settings
from attention_viz.webui.inputs import STEPS
from attention_viz.webui.transformer_tab import steps_beside

KINDS = ("encoder.self_attn", "decoder.self_attn", "decoder.cross_attn")


@pytest.fixture
def handlers(views):
    return Handlers(views)


def asked(model: str, text: str, d_k, kind: str, layer: int, head: int, heads_off: str = "", ablation: str = "zero",
          **settings) -> list:
    """/steps' values in its order (the page's settings, kind, layer, head, compatibility, heads off, ablation,
    position bias)."""
    values = {"scale": "sqrt_dk", "factor": 1.0, "causal": True, "padding": True, "pads": 0, "d_model": 64,
              "n_heads": 4, **settings}
    return [text, model, d_k, values["scale"], values["factor"], values["causal"], values["padding"], values["pads"],
            values["d_model"], values["n_heads"], kind, layer, head, None, heads_off, ablation, True]


def test_steps_beside_the_queue_are_what_steps_answers_once_the_run_is_kept(handlers, views):
    """On random trained models, texts, heads, switches and heads off: None before the run is computed (nothing
    computed), then, once /visualize has run it, the same steps and text as the queued /steps (after JSON)."""
    rng = random.Random(11)
    families = [key for key in views.runs.catalog.families if not key.startswith("study/")]
    for _ in range(10):
        model = rng.choice(families)
        text = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 14)))
        kind, head = rng.choice(KINDS), rng.randrange(2)  # every family has 2 heads or more
        off = json.dumps({f"decoder.{rng.randrange(2)}.cross_attn": [rng.randrange(2)]}) if rng.random() < 0.5 else ""
        values = asked(model, text, rng.choice([4, 16, 64, 16.0]), kind, 0, head, off,
                       rng.choice(["zero", "mean"]), scale=rng.choice(["sqrt_dk", "none"]), causal=rng.random() < 0.8,
                       pads=rng.choice([0, 0, 2]))
        runs_before = views.runs.run.cache_info().currsize
        assert steps_beside(handlers, values) is None, values  # the run is not kept yet
        assert views.runs.run.cache_info().currsize == runs_before  # and nothing was run to find out
        handlers.visualize(*values[:10], *values[13:])
        answer = steps_beside(handlers, values)
        assert answer is not None and answer.media_type == "application/json", values
        steps, text_html = handlers.steps(*values)
        assert json.loads(answer.body) == json.loads(json.dumps({"steps": steps, "text": text_html}))
        assert steps_beside(handlers, values[:13]) is not None  # the optional last values left out, as the API allows


def test_anything_else_goes_through_the_queue(handlers, views):
    """None where the queued /steps is to answer: a real or untrained model's run (its steps may take long: a model
    too wide to keep is built again), a refusal (/steps tells its message), values that are not /steps' (too few,
    too many, not a list), a fault (logged by the handler)."""
    settings = opening_settings(views)
    handlers.visualize("attention", "untrained", 16, "sqrt_dk", 1.0, True, True, 0, 64, 4)
    assert steps_beside(handlers, asked("untrained", "attention", 16, "decoder.self_attn", 0, 0)) is None
    good = asked(settings.model, "hello", settings.d_k, "decoder.cross_attn", 0, 1)
    handlers.visualize(*good[:10], *good[13:])
    assert steps_beside(handlers, good) is not None
    for refused in (asked(settings.model, "hello", settings.d_k, "decoder.cross_attn", 9, 2),  # no layer 9
                    asked(settings.model, "hello", settings.d_k, "decoder.nothing", 0, 0),
                    asked(settings.model, "x" * 500, settings.d_k, "decoder.cross_attn", 0, 0),
                    asked("no such model", "hello", settings.d_k, "decoder.cross_attn", 0, 0),
                    good[:12], [*good, "more"], {"text": "hello"}, None, "hello"):
        assert steps_beside(handlers, refused) is None, refused
    assert len(good) == len(STEPS)


def test_a_fault_is_logged_and_goes_through_the_queue(handlers, views, monkeypatch, caplog):
    settings = opening_settings(views)
    good = asked(settings.model, "fault", settings.d_k, "encoder.self_attn", 0, 1)
    handlers.visualize(*good[:10], *good[13:])

    def broken(*args):
        raise RuntimeError("a fault of ours")

    monkeypatch.setattr(views, "steps", broken)
    assert steps_beside(handlers, good) is None
    assert "a fault of ours" in caplog.text
