"""The compatibility study's shipped members in the app: three families of their own, switched by the
compatibility function at the same d_k; additive attention runs unscaled and says so."""

import numpy as np
import pytest

from attention_viz.core.maps import KINDS
from attention_viz.service.catalog import Catalog
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views

STUDY = ("study/scaled_dot", "study/dot", "study/additive")
OLD = {"copy/sqrt_dk": [16], "dates/sqrt_dk": [16], "reverse/sqrt_dk": [4, 16, 64, 128], "sort/sqrt_dk": [16],
       "reverse/none": [4, 16, 64, 128]}


@pytest.fixture(scope="module")
def views(one_thread):
    return Views(Runs(Catalog()))  # the shipped models, the study's folder included


@pytest.fixture(scope="module")
def runs(views):
    return views.runs


def test_the_study_is_three_families_of_its_own(runs):
    families = runs.catalog.families
    assert {key: families[key].d_ks for key in STUDY} == {key: [8, 32, 128, 512, 1024] for key in STUDY}
    assert [families[key].arm for key in STUDY] == ["scaled_dot", "dot", "additive"]
    assert families["study/dot"].label == "reverse, 1 head (study): plain dot product (trained without 1/√d_k)"
    assert families["study/additive"].compatibility == "additive" and families["study/additive"].study
    members = {name for key in STUDY for _, name in families[key].members}
    assert len(members) == 15 and all(name.startswith("reverse_") for name in members)
    # the shipped families are as before: same keys, members and labels, and nothing of the study in them
    assert {key: families[key].d_ks for key in OLD} == OLD
    assert not members & {name for key in OLD for _, name in families[key].members}
    assert families["reverse/sqrt_dk"].label == "reverse (trained with 1/√d_k)" and not families["reverse/none"].study
    values = [value for _, value in runs.catalog.model_choices]
    assert values == [*OLD, *STUDY, "untrained"] and runs.catalog.default_model == "reverse/sqrt_dk"


@pytest.mark.parametrize("key", STUDY)
def test_every_member_loads(runs, key):
    family = runs.catalog.families[key]
    for d_k, name in family.members:
        model, card = runs.catalog.trained(name)
        assert (model.config.d_k, card["name"], card["family"]) == (d_k, name, "study")
        assert model.config.compatibility == family.compatibility


@pytest.mark.parametrize("requested, member", [(1, 8), (16, 8), (20, 32), (100, 128), (700, 512), (1024, 1024)])
def test_d_k_snaps_to_the_nearest_member_on_a_log_scale(runs, requested, member):
    settings = runs.settings("hello", "study/scaled_dot", requested)
    assert (settings.d_k, settings.checkpoint) == (member, f"reverse_scaled_dot_dk{member}")
    assert (settings.d_model, settings.n_heads) == (32, 1)


def test_the_compatibility_function_switches_family_at_the_same_d_k(runs):
    for arm in ("scaled_dot", "dot", "additive"):
        settings = runs.settings("hello", "study/dot", 100, compatibility=arm)
        assert (settings.model, settings.checkpoint) == (f"study/{arm}", f"reverse_{arm}_dk128")
    for kept in (None, ""):  # left out: the model as named (old clients)
        assert runs.settings("hello", "study/dot", 32, compatibility=kept).model == "study/dot"
    assert runs.settings("hello", "reverse/sqrt_dk", 16, compatibility="scaled_dot").model == "reverse/sqrt_dk"


@pytest.mark.parametrize("model, compatibility, message", [
    ("study/dot", "bilinear", "compatibility function must be one of 'scaled_dot', 'dot', 'additive'; got 'bilinear'"),
    ("study/dot", 3, "compatibility function must be one of"),
    ("reverse/sqrt_dk", "additive", "compatibility function 'additive' applies only to the study's models"),
    ("untrained", "dot", "compatibility function 'dot' applies only to the study's models"),
])
def test_a_bad_compatibility_is_refused_naming_the_input(runs, model, compatibility, message):
    misses = runs.run.cache_info().misses
    with pytest.raises(ValueError, match="compatibility function") as error:
        runs.settings("hello", model, 16, compatibility=compatibility)
    assert message in str(error.value) and runs.run.cache_info().misses == misses


def test_additive_attention_runs_unscaled_and_its_rows_sum_to_one(views, runs):
    scaled = runs.settings("hello", "study/additive", 32, "sqrt_dk")
    assert scaled == runs.settings("hello", "study/additive", 32, "none")  # the scaling input changes nothing
    assert scaled == runs.settings("hello", "study/additive", 32, "custom", 0.01)
    assert (scaled.scale, scaled.compatibility) == ("none", "additive")
    run = runs.run(scaled)
    assert run.output == "olleh" and run.finished
    for kind in KINDS:
        weights = run.weights(kind)  # (L, H, Q, K)
        assert weights.shape[:2] == (1, 1)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
        assert (weights[..., ~run.mask(kind)] == 0).all()
    info = views.visualize(scaled).info
    assert "`reverse_additive_dk32` (compatibility study, seed 0: additive attention)" in info
    assert "held-out exact match" in info and "Scaling does not apply" in info and "×1/√" not in info
    steps, text = views.steps(scaled, "decoder.cross_attn", 0, 0)
    assert [panel["name"] for panel in steps["panels"]][:2] == ["w_hᵀ tanh(q_h + k_h)", "not scaled"]
    assert steps["factor"] == 1.0 and "not scaled" in text
    np.testing.assert_allclose(np.array(steps["panels"][3]["values"]), run.head("decoder.cross_attn", 0, 0),
                               atol=1e-5)
    _, said = views.compare(scaled, "scaling", "decoder.cross_attn", 0, 0)
    assert "has no QKᵀ to scale" in said


def test_plain_dot_product_notes_say_how_it_was_trained(views, runs):
    settings = runs.settings("abcdefghij", "study/dot", 1024, "none")
    info = views.visualize(settings).info
    assert "`reverse_dot_dk1024` (compatibility study, seed 0: plain dot product)" in info
    assert "trained with no scaling" in info and "at most 8 characters; this one has 10" in info
    controls = views.model_controls("study/additive", 100)
    assert (controls.study, controls.compatibility, controls.scaling_applies, controls.d_k) == (
        True, "additive", False, 128)
    assert "scaling does not apply" in controls.d_k_note
    old = views.model_controls("reverse/sqrt_dk", 16)
    assert (old.study, old.compatibility, old.scaling_applies) == (False, None, True)
