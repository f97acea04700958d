"""One model protocol (service.models.AttentionModel): both kinds of model answer every question the service asks
with the protocol's own signature, say what they can do in their Abilities, and the views ask the protocol: a model
of a kind the service has never seen, handed out by the catalog, is what the views compute with and describe."""

from __future__ import annotations

import inspect
import os

import pytest

pytest.importorskip("transformers")

from attention_viz.service.catalog import Catalog  # noqa: E402
from attention_viz.service.hub_model import HubModel  # noqa: E402
from attention_viz.service.models import AttentionModel  # noqa: E402
from attention_viz.service.own_model import OwnModel  # noqa: E402
from attention_viz.service.runs import Runs  # noqa: E402
from attention_viz.service.views import Views  # noqa: E402
from devtools.hub_models import save_tiny  # noqa: E402

QUESTIONS = [name for name in vars(AttentionModel) if not name.startswith("_")]


@pytest.fixture(scope="module")
def real_views(tmp_path_factory, models_dir, one_thread):
    os.environ["HF_HUB_OFFLINE"] = "1"
    root = tmp_path_factory.mktemp("protocol")
    catalog = Catalog(models_dir, hub_models=[str(save_tiny(f, root / f"tiny-{f}")) for f in ("marian", "bert")])
    return Views(Runs(catalog))


def settings(views, model, text="the cat sat", d_k=16):
    return views.runs.settings(text, model, d_k, "sqrt_dk", 1.0, True, True, 0, 32, 2)


@pytest.mark.parametrize("implementation", [OwnModel, HubModel])
def test_each_kind_answers_every_question_of_the_protocol_with_its_signature(implementation):
    assert {"keys", "tokens", "run", "steps", "head_importance", "qk_statistics", "notes"} <= set(QUESTIONS)
    for name in QUESTIONS:
        asked = inspect.getattr_static(AttentionModel, name)
        given = inspect.getattr_static(implementation, name)
        if callable(asked):
            assert list(inspect.signature(given).parameters) == list(inspect.signature(asked).parameters), name
        else:
            assert isinstance(given, type(asked)), name


def test_the_catalog_hands_out_the_kind_a_settings_or_key_names_and_its_abilities_say_what_it_can_do(real_views):
    catalog = real_views.runs.catalog
    ours = catalog.attention_model(settings(real_views, "reverse/sqrt_dk"))
    untrained = catalog.attention_model(settings(real_views, "untrained"))
    marian = catalog.attention_model(settings(real_views, "hub:tiny-marian"))
    for model in (ours, untrained, marian):  # abilities, shape, sink: answered by every instance
        for name in AttentionModel.__annotations__:
            assert getattr(model, name, None) is not None, (type(model).__name__, name)
    bert = catalog.attention_model("hub:tiny-bert")
    assert isinstance(ours, OwnModel) and isinstance(untrained, OwnModel)
    assert isinstance(marian, HubModel) and isinstance(bert, HubModel)
    assert ours.abilities.scored_on == "task" and untrained.abilities.scored_on is None
    assert marian.abilities.scored_on == "text" and marian.abilities.d_k_fixed and not ours.abilities.d_k_fixed
    assert marian.abilities.writes_text and marian.abilities.causal
    assert not bert.abilities.writes_text and not bert.abilities.causal and "encoder.0.self_attn" in bert.keys
    assert ours.tokens("abc") == ["a", "b", "c", "<eos>"]
    assert marian.tokens("the cat") == marian.model.pieces(marian.model.encode("the cat").ids)
    assert ours.sink == "<eos>" and marian.sink == "</s>"


def test_an_additive_model_says_it_has_no_scaling_to_switch(runs):
    network = runs.catalog.untrained(16, 2, 8)
    additive = type(network.config)(**{**network.config.to_dict(), "compatibility": "additive"})
    model = OwnModel(type(network)(additive).eval(), None, runs.catalog.tokenizer, runs.catalog.device)
    assert model.abilities.scalings == () and model.abilities.compatibility == "additive"
    assert OwnModel(network, None, runs.catalog.tokenizer, runs.catalog.device).abilities.scalings


class Stranger:
    """A third kind of model: ours underneath, with its own words, its own sink and its own run line."""

    def __init__(self, inner: OwnModel, asked: list[str]) -> None:
        self.inner, self.asked = inner, asked
        self.abilities, self.shape, self.sink, self.keys = inner.abilities, inner.shape, "x", inner.keys

    def __getattr__(self, name):
        attribute = getattr(self.inner, name)
        if callable(attribute):
            self.asked.append(name)
        return attribute

    def notes(self, run):
        return ["**A stranger** wrote this run."]

    def output_text(self, run):
        return "(a stranger's output)"


def test_the_views_compute_and_describe_through_the_protocol_whatever_kind_the_catalog_hands_out(views,
                                                                                               monkeypatch):
    catalog, asked = views.runs.catalog, []
    own = catalog.attention_model
    monkeypatch.setattr(catalog, "attention_model", lambda which, means=None: Stranger(own(which, means), asked))
    s = views.runs.settings("xray", "reverse/sqrt_dk", 16, "sqrt_dk", 1.0, False, True, 1)
    shown = views.visualize(s)
    assert shown.output == "(a stranger's output)" and shown.info.startswith("**A stranger** wrote this run.")
    views.steps(s, "decoder.cross_attn", 1, 0)
    views.compare(s, "padding_mask", "encoder.self_attn", 0, 1)
    assert {"run", "step_maps", "value_norms", "steps", "teacher_forced_maps", "masks_under"} <= set(asked)
    scores = {kind["kind"]: kind["scores"] for kind in shown.run["kinds"]}
    assert scores["encoder.self_attn"]["labels"]["eos"] == "x sink"  # the sink the model names, not <eos>
