"""The compatibility picker's handlers: model_controls shows it for the study's models only, and it picks the
study's family of the chosen function."""

import gradio as gr
import pytest

from attention_viz.service.catalog import Catalog
from attention_viz.service.runs import Runs
from attention_viz.service.views import Views
from attention_viz.webui.handlers import Handlers


@pytest.fixture(scope="module")
def handlers(one_thread):
    return Handlers(Views(Runs(Catalog())))  # the shipped models, the study's included


def test_model_controls_show_the_picker_for_a_study_model(handlers):
    c = handlers.model_controls("study/dot", 100, 4)
    dk_log, untrained_box, scale, note, compat = (c[n] for n in ("dk_log", "untrained_box", "scale_mode", "dk_note",
                                                                           "compatibility"))
    assert (compat["visible"], compat["value"]) == (True, "dot")
    assert (dk_log["minimum"], dk_log["maximum"], c["d_k"]) == (3, 10, 128)
    assert scale["value"] == "none" and scale["interactive"] is True and untrained_box["visible"] is False
    assert note == "<p>Trained d_k: 8, 32, 128, 512, 1024.</p>\n"
    c = handlers.model_controls("study/additive", 128, 4)
    scale, note, compat = c["scale_mode"], c["dk_note"], c["compatibility"]
    assert compat["value"] == "additive" and scale["interactive"] is False and "scaling does not apply" in note
    for other in ("reverse/sqrt_dk", "untrained"):
        c = handlers.model_controls(other, 16, 4)
        scale, compat = c["scale_mode"], c["compatibility"]
        assert (compat["visible"], compat["value"], scale["interactive"]) == (False, None, True)


def test_the_picker_picks_the_study_family(handlers):
    assert handlers.pick_compatibility("study/scaled_dot", "additive")["value"] == "study/additive"
    assert handlers.pick_compatibility("study/dot", "dot") == gr.skip()  # already that model: no change event
    with pytest.raises(gr.Error, match="compatibility function must be one of"):
        handlers.pick_compatibility("study/dot", "cosine")


def test_visualize_runs_the_picked_function(handlers):
    run, output, info = handlers.visualize("hello", "study/scaled_dot", 32, "sqrt_dk", 1.0, True, True, 0, 64, 4,
                                           "additive")
    assert run["settings"]["model"] == "study/additive" and run["settings"]["checkpoint"] == "reverse_additive_dk32"
    assert output == "olleh" and "Scaling does not apply" in info
    with pytest.raises(gr.Error, match="compatibility function 'additive' applies only"):
        handlers.visualize("hello", "reverse/sqrt_dk", 16, "sqrt_dk", 1.0, True, True, 0, 64, 4, "additive")
