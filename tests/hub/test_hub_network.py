"""hub.network: every request to the Hub is bounded, so a Hub that accepts and never answers refuses the model in
seconds instead of stalling it for good; and what the bound relies on in huggingface_hub is still there."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("transformers")

import huggingface_hub  # noqa: E402
from huggingface_hub import constants  # noqa: E402
from huggingface_hub.utils import _http  # noqa: E402

from attention_viz.hub import ModelUnavailableError, fetch, network  # noqa: E402
from devtools.silent_hub import SilentHub  # noqa: E402


@pytest.fixture
def silent_hub(monkeypatch):
    """A Hub on 127.0.0.1 that accepts and never answers (devtools.silent_hub), with the timeouts at 1 s."""
    with SilentHub() as hub:
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 1)
        monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)
        yield hub.held


def test_a_hub_that_never_answers_refuses_the_model_with_the_reason_in_bounded_time(silent_hub):
    began = time.monotonic()
    with pytest.raises(ModelUnavailableError, match="could not be downloaded \\(the Hub did not answer in time\\)"):
        fetch("someone/model")
    assert time.monotonic() - began < 60 and silent_hub  # it did connect: the wait was the Hub's silence


def test_every_phase_a_request_leaves_unbounded_gets_its_bound(monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 3)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 7)
    seen = {}

    class Recording(network.BoundedTransport):
        def handle_request(self, request):
            try:
                return super().handle_request(request)
            finally:
                seen.update(request.extensions["timeout"])

    transport = Recording()
    request = network.httpx2.Request("GET", "http://127.0.0.1:9/", extensions={"timeout": {"connect": None,
                                                                                          "read": 2.0}})
    with pytest.raises(network.httpx2.ConnectError):
        transport.handle_request(request)
    assert seen == {"connect": 3.0, "read": 2.0, "write": 3.0, "pool": 3.0}  # a bound asked for is kept


def test_what_the_bound_relies_on_in_huggingface_hub_is_there():
    """An upgrade that renames these breaks the bound: this test says where."""
    assert callable(huggingface_hub.set_client_factory) and callable(_http.hf_request_event_hook)
    assert hasattr(constants, "HF_HUB_ETAG_TIMEOUT") and hasattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT")
    network.bounded()
    client = huggingface_hub.get_session()
    assert isinstance(client._transport, network.BoundedTransport)  # the factory's client is the one in use
