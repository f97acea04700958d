"""One model protocol (service.models.ServedModel): both kinds of model answer every question the service asks
with the protocol's own signature, say what they can do in their Abilities, and the views ask the protocol: a model
of a kind the service has never seen, handed out by the catalog, is what the views compute with and describe, and
its controls (ModelControls) are its kind's own answer, with the switches its Abilities say. Each picker entry
(service.models.Entry) answers for its kind, and a fourth kind is one entry in the catalog's list."""

from __future__ import annotations

import inspect
import os

import pytest

pytest.importorskip("transformers")

from attention_viz.service.catalog import Catalog  # noqa: E402
from attention_viz.service.hub_model import HubModel, RealEntry  # noqa: E402
from attention_viz.service.models import Abilities, Entry, ModelControls, ServedModel  # noqa: E402
from attention_viz.service.own_model import FamilyEntry, OwnModel, UntrainedEntry  # noqa: E402
from attention_viz.service.runs import Runs  # noqa: E402
from attention_viz.service.views import Views  # noqa: E402
from attention_viz.webui.handlers import Handlers  # noqa: E402
from devtools.hub_models import save_tiny  # noqa: E402

QUESTIONS = [name for name in vars(ServedModel) if not name.startswith("_")]
ENTRY_QUESTIONS = [name for name in vars(Entry) if not name.startswith("_")]


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
        asked = inspect.getattr_static(ServedModel, name)
        given = inspect.getattr_static(implementation, name)
        if callable(asked):
            assert list(inspect.signature(given).parameters) == list(inspect.signature(asked).parameters), name
        else:
            assert isinstance(given, type(asked)), name



@pytest.mark.parametrize("implementation", [FamilyEntry, UntrainedEntry, RealEntry])
def test_each_entry_answers_every_question_of_the_protocol_with_its_signature(implementation, real_views):
    assert {"d_k_choices", "controls", "checked_text", "member", "attention_model"} <= set(ENTRY_QUESTIONS)
    for name in ENTRY_QUESTIONS:
        asked, given = inspect.getattr_static(Entry, name), inspect.getattr_static(implementation, name)
        assert list(inspect.signature(given).parameters) == list(inspect.signature(asked).parameters), name
    listed = [entry for entry in real_views.runs.catalog.entries() if isinstance(entry, implementation)]
    assert listed and all(isinstance(entry.key, str) and isinstance(entry.label, str) for entry in listed)

def test_the_catalog_hands_out_the_kind_a_settings_or_key_names_and_its_abilities_say_what_it_can_do(real_views):
    catalog = real_views.runs.catalog
    ours = catalog.attention_model(settings(real_views, "reverse/sqrt_dk"))
    untrained = catalog.attention_model(settings(real_views, "untrained"))
    marian = catalog.attention_model(settings(real_views, "hub:tiny-marian"))
    for model in (ours, untrained, marian):  # abilities, shape, sink: answered by every instance
        for name in ServedModel.__annotations__:
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


def test_every_entrys_controls_show_the_switches_its_models_abilities_say(real_views):
    catalog = real_views.runs.catalog
    for _, entry in catalog.model_choices:
        controls = real_views.model_controls(entry, None)
        model = catalog.attention_model(settings(real_views, entry, d_k=controls.d_k))
        assert controls.abilities == model.abilities, entry
        assert controls.scaling_applies == bool(model.abilities.scalings), entry
        assert controls.causal_applies == model.abilities.causal, entry
    assert not real_views.model_controls("hub:tiny-bert", None).causal_applies  # an encoder alone: no causal mask


def stranger_controls(d_k: int, layer: int, head: int) -> ModelControls:
    """A third kind's own answer: an encoder alone with additive attention (nothing to scale), 1 layer of 2 heads."""
    abilities = Abilities(writes_text=False, fills_masks=False, causal=False, compatibility="additive", scalings=(),
                          d_k_fixed=True, scored_on=None)
    return ModelControls(abilities, False, 8, 3.0, 4.0, 1.0, 0, 1, min(layer, 0), min(head, 1), "sqrt_dk",
                         f"d_k = 8, its own (asked for {d_k}).", trained_d_ks=(8,), text_label="Text (a stranger's)")


def test_a_third_kind_gets_its_controls_from_its_own_answer_with_no_branch_in_the_views(views, monkeypatch):
    """The catalog knows the new key and asks the new kind; the views check the inputs and ask the catalog once; the
    page hides the switches the kind's Abilities cannot act on."""
    catalog, asked = views.runs.catalog, []
    check_model, controls = catalog.check_model, getattr(catalog, "controls", None)

    def stranger_or_ours(model, d_k, layer, head, n_heads, progress=None):
        if model != "stranger":
            return controls(model, d_k, layer, head, n_heads, progress)
        asked.append((d_k, layer, head))
        return stranger_controls(d_k, layer, head)

    monkeypatch.setattr(catalog, "check_model", lambda model: model if model == "stranger" else check_model(model))
    monkeypatch.setattr(catalog, "controls", stranger_or_ours, raising=False)
    c = views.model_controls("stranger", "16", 3, 5, n_heads="the untrained model's only")
    assert asked == [(16, 3, 5)]  # checked by the views, then asked once
    assert (c.d_k, c.layer, c.head, c.trained_d_ks, c.d_k_note) == (8, 0, 1, (8,), "d_k = 8, its own (asked for 16).")
    assert c.scaling_applies is False and c.causal_applies is False  # from its Abilities
    with pytest.raises(ValueError, match="layer"):
        views.model_controls("stranger", 16, 65, 0)
    assert len(asked) == 1  # bad input never reaches the kind
    out = Handlers(views).controls_of(c, "none")
    assert out["causal_mask"]["visible"] is False and "causal_mask" not in [key for _, key in out["comparison"]["choices"]]
    assert out["scale_mode"] == {"__type__": "update", "value": "sqrt_dk", "interactive": False, "info": ""}
    assert out["text"]["label"] == "Text (a stranger's)" and out["dk_trained"]["choices"] == ["8"]
    assert views.model_controls("reverse/sqrt_dk", 16).causal_applies  # our kinds answer as before


class StrangerEntry:
    """A fourth kind's entry: the untrained model under its own key, reading lower case only, d_k fixed at 8."""

    key, label = "stranger", "a stranger (a fourth kind)"

    def __init__(self, inner: UntrainedEntry) -> None:
        self.inner = inner

    def d_k_choices(self):
        return [8]

    def default_d_k(self):
        return 8

    def model_shape(self, d_k=None):
        return None

    def largest(self):
        return 2, 2

    def controls(self, d_k, layer, head, n_heads, progress=None):
        return stranger_controls(d_k, layer, head)

    def checked_text(self, text):
        if isinstance(text, str) and text != text.lower():
            raise ValueError("A stranger reads lower case only.")
        return self.inner.checked_text(text)

    def member(self, text, d_k, d_model, n_heads):
        return self.inner.member(text, 8, d_model, n_heads)

    def attention_model(self, settings, means=None):
        return self.inner.attention_model(settings, means)


def test_a_fourth_kind_is_one_entry_in_the_catalogs_list_and_nothing_else_changes(views, monkeypatch):
    """Offered by the picker, checked, given its controls, its text checked by its rule, parsed and run: every
    catalog method asks the entry its key names."""
    catalog = views.runs.catalog
    listed, stranger = catalog.entries, StrangerEntry(catalog.entry("untrained"))
    monkeypatch.setattr(catalog, "entries", lambda: [*listed(), stranger])
    assert catalog.model_choices[-1] == ("a stranger (a fourth kind)", "stranger")
    assert catalog.check_model("stranger") == "stranger" and catalog.entry("stranger").key == "stranger"
    assert (catalog.d_k_choices("stranger"), catalog.default_d_k("stranger")) == ([8], 8)
    c = views.model_controls("stranger", None, 3, 5)
    assert (c.d_k, c.layer, c.head, c.trained_d_ks) == (8, 0, 1, (8,))
    with pytest.raises(ValueError, match="lower case only"):
        views.runs.settings("Hello", "stranger", 16, "sqrt_dk", 1.0, True, True, 0, 32, 2)
    s = views.runs.settings("hello", "stranger", 16, "sqrt_dk", 1.0, True, True, 0, 32, 2)
    assert (s.model, s.checkpoint, s.d_k) == ("stranger", None, 8)
    assert views.runs.attention_model(s).shape.d_k == 8 and views.visualize(s).output is not None
    with pytest.raises(ValueError, match="Unknown model 'strangers'; choose one of .*'untrained', 'stranger'"):
        catalog.check_model("strangers")
