"""The page as Gradio serves it: which widgets the browser must load and mount before the first view."""

import pytest

from attention_viz.service.views import Views
from attention_viz.webui import page


@pytest.fixture(scope="module")
def demo(runs):
    return page.build_app(Views(runs))


@pytest.fixture(scope="module")
def config(demo):
    return demo.get_config_file()


def test_the_page_uses_only_the_widget_types_it_needs(config):
    """Every widget type is one more script (and style) the browser fetches before the first view is drawn
    (docs/benchmarks.md, the page complete): no table widget, no examples dataset, no group, no image, and no
    Markdown (the texts are rendered to HTML on the server: widgets.prose)."""
    types = {c["type"] for c in config["components"]}
    assert not types & {"dataframe", "dataset", "group", "image", "gallery", "plot", "json", "code", "markdown"}, types
    assert len(types) <= 18, sorted(types)


def test_the_config_holds_only_plain_data(demo):
    """Every page open copies the config (Gradio's safe_deepcopy) and sends it as JSON. A word in quotes in a
    gr.HTML's js_on_load that names one of its attributes (`every` in a comment did) turns that attribute into
    an event trigger: a Python object in the config, sent as its repr, whose failed deep copy cost every page
    open 30-60 ms. The config must copy and serialise as plain data."""
    import copy
    import json

    config = demo.config  # what each GET / and /config copies
    copy.deepcopy(config)  # raises on a lock inside an event trigger
    for component in config["components"]:
        if component["type"] != "state":  # gr.State's own props hold its delete callback
            json.dumps(component["props"])  # no default: anything but plain data raises
        assert component["props"].get("every") is None, component["props"].get("elem_id")


def test_every_html_template_is_a_valid_template_literal(config):
    """Gradio's gr.HTML evaluates css_template (and html_template) in the browser as a JavaScript template
    literal: a backtick in a CSS comment ends it, the component's script then never runs and the view stays
    empty. Only `${...}` placeholders may use the template's syntax, and no backtick at all."""
    htmls = [c["props"] for c in config["components"] if c["type"] == "html"]
    assert htmls
    for props in htmls:
        for name in ("css_template", "html_template"):
            text = props.get(name) or ""
            assert "`" not in text, (props.get("elem_id"), name)
            assert "\\" not in text.replace("\\n", ""), (props.get("elem_id"), name)  # an escape would be read
