"""The lab tab as Gradio serves it: a gr.HTML holding the numbers, with lab.js and lab.css inlined; its events."""

import re

import gradio as gr
import pytest

from attention_viz import labview
from attention_viz.core.maps import KINDS
from attention_viz.service.qk_view import OwnQK
from attention_viz.service.limits import LAB_D_K, LAB_KEYS
from attention_viz.service.views import Views
from attention_viz.webui import lab_tab, page


@pytest.fixture(scope="module")
def config(runs):
    return page.build_app(Views(runs)).get_config_file()


def component(config, elem_id):
    return next(c for c in config["components"] if c.get("props", {}).get("elem_id") == elem_id)


def test_the_view_ships_its_script_and_style_and_opens_with_numbers(config):
    props = component(config, lab_tab.VIEW_ID)["props"]
    assert props["js_on_load"].startswith("attentionViz.mountLab(element, props, watch")  # lab.js: in the page's head
    assert props["css_template"] == labview.asset("lab.css")
    assert "${value}" not in props["html_template"] and labview.MOUNT_CLASS in props["html_template"]
    value = props["value"]  # in the page's config: the lab opens without a request
    assert (value["d_k"], value["n_keys"], value["scaled"]) == (LAB_D_K, LAB_KEYS, True)
    numbers = component(config, lab_tab.NUMBERS_ID)["props"]["value"]
    assert numbers["data"][0][3] == f"{LAB_D_K} and 1"


def test_nothing_is_fetched_from_elsewhere():
    for name in ("lab.js", "lab.css"):
        text = labview.asset(name)
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), name  # the SVG namespace is a name
        assert "import(" not in text and "fetch(" not in text and "@import" not in text
    with pytest.raises(ValueError, match="no such asset"):
        labview.asset("../lab_view.py")


def test_a_change_is_asked_beside_the_queue_then_through_it_and_marks_the_view(config):
    """The counter's change runs the page's labAsk (no Python function: beside the queue); its success marks the view
    current; its failure asks the queued /dk_lab with the same controls, whose success marks it current and whose
    failure (a refusal) marks it stale with the controls' values then."""
    deps = config["dependencies"]
    then = lambda dep, kind: [d for d in deps if d.get("trigger_after") == dep["id"] and d[f"trigger_only_on_{kind}"]]
    queued = next(d for d in deps if d.get("api_name") == "dk_lab")
    beside = next(d for d in deps if d["id"] == queued["trigger_after"])
    assert beside["js"] == lab_tab.ASK_JS and not beside["backend_fn"] and queued["trigger_only_on_failure"]
    assert [d["js"] for d in then(beside, "success")] == [lab_tab.CURRENT_JS]
    assert queued["backend_fn"] and queued["trigger_mode"] == "multiple" and queued["js"] is None
    assert queued["inputs"] == beside["inputs"] and queued["outputs"] == beside["outputs"]
    view = component(config, lab_tab.VIEW_ID)
    assert beside["outputs"] == [view["id"], component(config, lab_tab.NUMBERS_ID)["id"]]
    assert [d["js"] for d in then(queued, "success")] == [lab_tab.CURRENT_JS]
    [stale] = then(queued, "failure")
    assert stale["js"] == lab_tab.STALE_JS and stale["inputs"] == beside["inputs"]  # the controls when refused
    assert not any(d["backend_fn"] for d in then(beside, "success") + then(queued, "success") + [stale])
    assert view["props"]["server_fns"] == [lab_tab.ANSWER] and '"answer": "lab_answer"' in view["props"]["js_on_load"]


def test_the_answer_beside_the_queue_is_dk_labs_and_refusals_and_faults_go_through_the_queue(views, caplog):
    """lab_answer, the view's server function, answers what /dk_lab answers (the same numbers after JSON, on random
    controls); a refusal, a value that is not a dict and a fault answer None (the page then asks /dk_lab, which tells
    why), the fault logged with its trace; so does a d_k off the slider's powers of two (tens of ms in the event loop,
    which would answer no one else meanwhile: /dk_lab computes it in a worker thread)."""
    import asyncio
    import json
    import random
    from concurrent.futures import ThreadPoolExecutor

    from attention_viz.webui.handlers import Handlers

    handlers = Handlers(views)
    pool = ThreadPoolExecutor(max_workers=1)  # its own thread: the browser tests leave an event loop in this one
    answer_of = lambda asked: pool.submit(asyncio.run, lab_tab.lab_view(handlers).lab_answer(asked)).result()
    rng = random.Random(5)
    for _ in range(12):
        asked = {"d_k": rng.choice([1, 2, 64, 64.0, 4096]), "n_keys": rng.randint(2, 1024), "scaled": rng.random() < 0.5}
        answer = answer_of(asked)
        assert answer.media_type == "application/json"
        view, numbers = handlers.dk_lab(asked["d_k"], asked["n_keys"], asked["scaled"])
        assert json.loads(answer.body) == json.loads(json.dumps({"view": view, "numbers": numbers}))
    for refused in ({"d_k": 5000, "n_keys": 8, "scaled": True}, {"d_k": 4, "n_keys": "x", "scaled": True},
                    [4, 8, True], None, "d_k=4", {"d_k": True, "n_keys": 8, "scaled": True}, {"n_keys": 8}):
        assert answer_of(refused) is None, refused
    for off_the_sweeps in (3, 100, 4095, 64.5):  # /dk_lab answers these (64.5: its refusal)
        assert answer_of({"d_k": off_the_sweeps, "n_keys": 8, "scaled": True}) is None, off_the_sweeps
    assert handlers.dk_lab(100, 8, True)[1]["data"][0][3] == "100 and 1"

    def broken(*args):
        raise RuntimeError("a fault of ours")
    handlers.views = type("Broken", (), {"dk_lab": staticmethod(broken), "lab": views.lab})()
    with caplog.at_level("ERROR"):
        assert answer_of({"d_k": 4, "n_keys": 8, "scaled": True}) is None
    assert "a fault of ours" in caplog.text


def test_a_standalone_page_inlines_everything(views):
    html = labview.page(views.dk_lab(64, 16, True).data)
    assert html.startswith("<!doctype html>") and "<script src" not in html and "<link" not in html
    assert "AttentionLab.mountAt(" in html and html.rstrip().endswith("</html>")


def test_the_numbers_are_a_template_table_that_escapes_its_cells(config):
    props = component(config, lab_tab.NUMBERS_ID)["props"]
    assert component(config, lab_tab.NUMBERS_ID)["type"] == "html"
    template = props["html_template"]
    # Handlebars' {{this}} escapes; a triple-stash {{{ }}} or a ${...} JS expression would not
    assert "{{#each value.headers}}" in template and "{{#each value.data}}" in template and "{{this}}" in template
    assert "{{{" not in template and "${" not in template
    assert props["value"]["headers"] == list(lab_tab.LAB_HEADERS)



# ---------------------------------------------------------------- this model's own q·k


@pytest.fixture(scope="module")
def own_handlers(runs):
    return lab_tab.OwnHandlers(OwnQK(runs.catalog))


def test_the_own_view_opens_with_the_default_models_head_in_the_config(config, runs):
    props = component(config, lab_tab.OWN_ID)["props"]
    assert props["js_on_load"] == "attentionViz.mountOwn(element, props, watch)"
    own = OwnQK(runs.catalog)
    value = props["value"]
    assert value == own.view(own.default_model, value["kind"], 0, 0, True)  # the page opens on it: no request
    picker = component(config, "own_model")["props"]
    assert [value for _, value in picker["choices"]] == [value for _, value in own.choices]


def test_the_handler_answers_what_the_service_answers_and_refuses_with_a_message(own_handlers, runs):
    own = own_handlers.own
    model = own.default_model
    assert own_handlers.view(model, "decoder.cross_attn", 1, 1, False) == own.view(model, "decoder.cross_attn", 1, 1,
                                                                                  False)
    with pytest.raises(gr.Error, match="head must be"):
        own_handlers.view(model, "decoder.cross_attn", 1, 9, False)
    with pytest.raises(gr.Error, match="Unknown model"):
        own_handlers.view("hub:elsewhere", "decoder.cross_attn", 1, 0, False)


def test_a_new_model_or_kind_resets_the_pickers_to_what_it_has(own_handlers):
    model = [value for _, value in own_handlers.own.choices][-1]
    kind, layer, head, data = own_handlers.pick_model(model, True)
    assert kind["value"] == "decoder.cross_attn" and [k for _, k in kind["choices"]] == list(KINDS)
    assert layer["choices"] == [0, 1] and head["choices"] == [0, 1] and (layer["value"], head["value"]) == (0, 0)
    assert data == own_handlers.own.view(model, "decoder.cross_attn", 0, 0, True)
    layer, head, data = own_handlers.pick_kind(model, "encoder.self_attn", False)
    assert (layer["value"], head["value"], data["key"], data["scaled"]) == (0, 0, "encoder.0.self_attn", False)


def test_the_own_events_are_one_public_endpoint_and_browser_marks(config):
    deps = config["dependencies"]
    endpoint = next(d for d in deps if d.get("api_name") == "qk_lab")
    ids = {c["id"]: c["props"].get("elem_id") for c in config["components"]}
    assert [ids[i] for i in endpoint["inputs"]] == ["own_model", "own_kind", "own_layer", "own_head", "own_scaled"]
    assert [ids[i] for i in endpoint["outputs"]] == [lab_tab.OWN_ID]
    chained = {d["js"] for d in deps if d.get("trigger_after") == endpoint["id"]}
    assert chained == {lab_tab._own_js(True), lab_tab._own_js(False)}
