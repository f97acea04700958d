"""The Hub's HTTP client with bounded waits: every request huggingface_hub makes gets a connect and a read timeout.

huggingface_hub's own client waits for ever (its factory sets `timeout=None`, and calls such as `repo_info` pass
`timeout=None` again per request), so a Hub that accepts a connection and never answers stalls a download for
good. `bounded()` installs, once per process, a client whose transport fills in every phase a request leaves
unbounded: HF_HUB_ETAG_TIMEOUT seconds to connect and to get a first answer, HF_HUB_DOWNLOAD_TIMEOUT between two
reads (huggingface_hub's own settings, 10 s each by default). A timeout then raises, and fetch refuses the model
with that reason.

What this relies on in huggingface_hub (tests/hub/test_hub_network.py fails loudly if an upgrade changes it):
`set_client_factory` and the request hook of its default client, `huggingface_hub.utils._http.hf_request_event_hook`
(offline mode and its headers), and httpx2's per-request "timeout" extension.
"""

from __future__ import annotations

import threading

from huggingface_hub import constants, set_client_factory
from huggingface_hub.utils import _http

try:  # huggingface_hub 2 speaks httpx2; 1.x, httpx (the same API)
    import httpx2
except ImportError:  # pragma: no cover - the older huggingface_hub
    import httpx as httpx2

_installed = threading.Lock()
_done = False


def timeouts() -> dict[str, float]:
    """The bound of each phase of a request, in seconds (huggingface_hub's HF_HUB_*_TIMEOUT settings)."""
    first, between = float(constants.HF_HUB_ETAG_TIMEOUT), float(constants.HF_HUB_DOWNLOAD_TIMEOUT)
    return {"connect": first, "read": max(first, between), "write": first, "pool": first}


class BoundedTransport(httpx2.HTTPTransport):
    """httpx2's transport that gives each unbounded phase of a request its bound from `timeouts()`."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        asked = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {phase: asked.get(phase) if asked.get(phase) is not None else limit
                                         for phase, limit in timeouts().items()}
        return super().handle_request(request)


def client() -> httpx2.Client:
    """huggingface_hub's default client, its transport bounded."""
    return httpx2.Client(event_hooks={"request": [_http.hf_request_event_hook]}, follow_redirects=True,
                         timeout=httpx2.Timeout(**timeouts()), transport=BoundedTransport())


def bounded() -> None:
    """Make huggingface_hub's requests in this process use `client()` (once; later calls do nothing)."""
    global _done
    with _installed:
        if not _done:
            set_client_factory(client)
            _done = True
