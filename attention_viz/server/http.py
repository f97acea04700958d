"""The app's HTTP side beside Gradio's routes, given to `launch(app_kwargs=...)`: the body limit and the page's
compression as the FastAPI app's own middleware, GET /healthz, and a call to an endpoint that does not exist
answered 404 with a message (Gradio answers 500 and logs a trace). StaticCache goes in front of it all once the
app runs (static.files_first).
"""

from __future__ import annotations

import logging

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from attention_viz.server import gradio_internals as gradio
from attention_viz.server.body_limit import BodyLimit
from attention_viz.server.liveness import health_route
from attention_viz.server.static import PageCompression
from attention_viz.service.catalog import Catalog
from attention_viz.service.checks import shown

logger = logging.getLogger(__name__)


# FastAPI's own OpenTelemetry (FastAPI(telemetry=...)): the app configures no provider, so it records nothing, but
# FastAPI asks the global providers (environment variables read) on every request: ~0.1 ms each, off.
NO_TELEMETRY = {"tracing": False, "metrics": False, "logs": False}


def server_app_kwargs(catalog: Catalog | None = None, uploads: int = 0) -> dict:
    """Gradio's launch(app_kwargs=...) for the app: its FastAPI app with BodyLimit and PageCompression as its own
    (who may join the queue is decided in the queue: server/admission.py), unknown endpoints answered 404, no
    telemetry asked for on each request, and, given the server's catalog, GET /healthz. uploads: the bytes an upload
    may take (0: the server takes none, and an upload is held to the body limit)."""
    kwargs = {"middleware": [Middleware(BodyLimit, uploads=uploads), Middleware(PageCompression)],
              "exception_handlers": {gradio.FnIndexInferError: unknown_endpoint, KeyError: unknown_endpoint},
              "telemetry": NO_TELEMETRY}
    if catalog is not None:
        kwargs["routes"] = [health_route(catalog)]
    return kwargs


async def unknown_endpoint(request: Request, error: Exception) -> Response:
    """POST /gradio_api/call|call/v2|run|api/<name> for a name no event has (Gradio raises FnIndexInferError, or a
    KeyError for call/v2), or with an fn_index no event has (a KeyError of that int): 404, saying so, the name cut
    to 40 characters. Any other KeyError is what it was: logged with its trace, and a bare 500."""
    name = request.path_params.get("api_name")
    if (isinstance(error, KeyError) and error.args and type(error.args[0]) is int
            and not gradio.has_event(request.app, fn_index=error.args[0])):
        return JSONResponse({"detail": f"No event with fn_index {shown(error.args[0])}."}, status_code=404)
    if name is not None and not gradio.has_event(request.app, api_name=name):
        return JSONResponse({"detail": f"No endpoint named {shown(name)}; the app's \"Use via API\" page lists them."},
                            status_code=404)
    logger.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return PlainTextResponse("Internal Server Error", status_code=500)
