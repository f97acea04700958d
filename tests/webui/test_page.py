"""The page as Gradio serves it: which widgets the browser must load and mount before the first view."""

import pytest

from attention_viz.service.views import Views
from attention_viz.webui import page


@pytest.fixture(scope="module")
def config(runs):
    return page.build_app(Views(runs)).get_config_file()


def test_the_page_uses_only_the_widget_types_it_needs(config):
    """Every widget type is one more script (and style) the browser fetches before the first view is drawn
    (docs/benchmarks.md, the page complete): no table widget, no examples dataset, no group, no image."""
    types = {c["type"] for c in config["components"]}
    assert not types & {"dataframe", "dataset", "group", "image", "gallery", "plot", "json", "code"}, types
    assert len(types) <= 18, sorted(types)

