"""The lab's "this model's own q·k" through gradio_client on the launched app: /qk_lab answers what the service
answers for the same head, and a refused input raises AppError with the message."""

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from attention_viz.service.catalog import Catalog
from attention_viz.service.qk_view import OwnQK


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


def test_qk_lab_answers_the_services_numbers(client):
    own = OwnQK(Catalog())
    for model, kind, layer, head, scaled in (("reverse_dk64_unscaled", "decoder.cross_attn", 1, 2, False),
                                             ("copy", "encoder.self_attn", 0, 3, True)):
        data = client.predict(model=model, kind=kind, layer=layer, head=head, scaled=scaled, api_name="/qk_lab")
        assert data == own.view(model, kind, layer, head, scaled)
        assert data["numbers"]["data"][2][0] == "Var q·k, raw" and data["histogram"]["samples"] > 100


@pytest.mark.parametrize("args, message", [
    (dict(model="nope", kind="encoder.self_attn", layer=0, head=0, scaled=True), "Unknown model 'nope'"),
    (dict(model="reverse", kind="encoder.self_attn", layer=0, head=7, scaled=True), "head must be"),
])
def test_a_refused_input_says_why(client, args, message):
    with pytest.raises(AppError, match=message):
        client.predict(**args, api_name="/qk_lab")
