"""Honest inputs: a model trained on lower-case letters runs capitals lower-cased and says so; characters it
never saw are named; the untrained model runs the text as typed; the run opens on its telling view."""

import random
import string

import pytest

from attention_viz.service.catalog import Catalog
from attention_viz.service.requests import known_case, parse_settings
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views

LOWER = string.ascii_lowercase


@pytest.fixture(scope="module")
def views(one_thread):
    return Views(Runs(Catalog()))


@pytest.mark.parametrize("typed, runs, said", [
    ("Hello", "hello", "Hello"), ("ABC", "abc", "ABC"), ("abc", "abc", None), ("a B!", "a b!", "a B!"),
    ("123", "123", None), ("É", "É", None),  # é is not in a-z: left as typed, named as new in the notes
])
def test_known_case_lower_cases_only_what_the_alphabet_knows(typed, runs, said):
    assert known_case(typed, LOWER) == (runs, said)


def test_known_case_leaves_a_text_alone_without_a_lower_case_alphabet():
    assert known_case("Hello", None) == ("Hello", None)
    assert known_case("Hello", "ABCabc") == ("Hello", None)  # the model knows capitals


def test_random_texts_run_lower_cased_and_only_capitals_change():
    rng = random.Random(0)
    for _ in range(500):
        typed = "".join(rng.choice(string.printable[:95]) for _ in range(rng.randint(1, 20)))
        run, said = known_case(typed, LOWER)
        assert len(run) == len(typed) and not any(c.isupper() and c.lower() in LOWER for c in run)
        assert all(a == b or (a.isupper() and b == a.lower()) for a, b in zip(typed, run))
        assert (said is None) == (run == typed) and (said is None or said == typed)


def test_a_trained_model_runs_capitals_lower_cased_and_says_so(views):
    model = views.runs.catalog.default_model
    settings = parse_settings(views.runs.catalog, "Hello World", model, 64)
    assert (settings.text, settings.typed) == ("hello world", "Hello World")
    view = views.visualize(settings)
    assert view.run["tokens"]["source"][:11] == list("hello world")
    assert "Capitals lower-cased" in view.info and "`Hello World` runs as `hello world`" in view.info
    assert "new to it: ' '" in view.info  # the space is named: the model never saw one
    same = views.visualize(parse_settings(views.runs.catalog, "hello world", model, 64))
    assert "Capitals" not in same.info and same.run["tokens"] == view.run["tokens"]


def test_the_untrained_model_runs_the_text_as_typed(views):
    settings = parse_settings(views.runs.catalog, "Hello", "untrained", 8)
    assert (settings.text, settings.typed) == ("Hello", None)
    assert views.visualize(settings).run["tokens"]["source"][:5] == list("Hello")


def test_a_run_opens_on_its_last_layer_of_encoder_decoder_attention(views):
    run = views.visualize(parse_settings(views.runs.catalog, "attention", views.runs.catalog.default_model, 64)).run
    cross = next(k for k in run["kinds"] if k["kind"] == "decoder.cross_attn")
    assert run["opening"] == {"kind": "decoder.cross_attn", "layer": cross["layers"] - 1, "head": 0}
