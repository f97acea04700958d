"""Fixtures shared by the service's tests."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def real_views(tmp_path_factory, one_thread):
    """Views of a server set up with a small Marian model (2 + 2 layers, 4 heads: 24 heads; random weights)."""
    pytest.importorskip("transformers")
    from attention_viz.service.catalog import Catalog
    from attention_viz.service.runs import Runs
    from attention_viz.service.views import Views
    from devtools.hub_models import save_tiny

    os.environ["HF_HUB_OFFLINE"] = "1"
    folder = save_tiny("marian", tmp_path_factory.mktemp("real") / "tiny-marian")
    return Views(Runs(Catalog(hub_models=[str(folder)])))


def own(runs, settings):
    """Our Transformer a Settings runs (eval mode, shared: never mutate it) and its card (None when untrained), as
    the catalog hands it to the service (service.own_model.OwnModel)."""
    model = runs.attention_model(settings)
    return model.network, model.card
