"""server.routes: a path's route kept once found. Every request answers as FastAPI's own scan answers it (a kept
route, a path parameter, a refused method, an unknown path), only routes without parameters are kept, no request
shares a dict of the kept match, and routes added afterwards are found."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, FastAPI, Request
from fastapi.testclient import TestClient

from attention_viz.server.gradio_internals import included_routers, route_matcher
from attention_viz.server.routes import RouteMemo, keep_route_matches


def make_app() -> FastAPI:
    app, router = FastAPI(), APIRouter()

    @router.get("/api/info")
    def info(request: Request) -> dict:
        request.scope["path_params"]["touched"] = "yes"  # a handler that writes into its scope's dicts
        return {"route": "info", "params": sorted(request.path_params)}

    @router.post("/api/join")
    def join(body: dict) -> dict:
        return {"route": "join", "body": body}

    @router.get("/api/items/{item}")
    def item(item: int) -> dict:
        return {"route": "item", "item": item}

    app.include_router(router)
    return app


REQUESTS = [("GET", "/api/info", None), ("POST", "/api/join", {"a": 1}), ("GET", "/api/items/3", None),
            ("GET", "/api/items/x", None), ("GET", "/api/join", None), ("GET", "/nowhere", None),
            ("POST", "/api/info", None), ("GET", "/api/info/", None)]


def answers(client: TestClient) -> list[tuple[int, str]]:
    return [(r.status_code, r.text) for method, path, body in REQUESTS * 3
            for r in [client.request(method, path, json=body)]]


def test_every_request_answers_as_fastapis_own_scan_does():
    plain, kept = make_app(), make_app()
    keep_route_matches(kept)
    (router,) = included_routers(kept)
    memo = route_matcher(router)
    assert isinstance(memo, RouteMemo)
    assert answers(TestClient(kept)) == answers(TestClient(plain))
    # only the full matches without parameters: the info and join paths, nothing else
    assert sorted(key[1:4:2] for key in memo.kept) == [("GET", "/api/info"), ("POST", "/api/join")]
    assert "touched" not in memo.kept[("http", "GET", "", "/api/info")][1]["path_params"]  # never shared
    keep_route_matches(kept)  # once: a second call wraps nothing again
    assert route_matcher(router) is memo


def test_routes_added_later_are_found_and_the_kept_matches_start_again():
    app = make_app()
    keep_route_matches(app)
    client = TestClient(app)
    assert client.get("/api/info").json()["route"] == "info"
    (router,) = included_routers(app)
    router.original_router.add_api_route("/api/late", lambda: {"route": "late"}, methods=["GET"])
    assert client.get("/api/late").json() == {"route": "late"}
    assert [key[3] for key in route_matcher(router).kept] == ["/api/late"]
    inner = APIRouter()  # a router it includes, and a route added to that one afterwards: kept matches start again
    router.original_router.include_router(inner)
    assert client.get("/api/late").json() == {"route": "late"}
    inner.add_api_route("/api/inner", lambda: {"route": "inner"}, methods=["GET"])
    assert client.get("/api/inner").json() == {"route": "inner"}
    assert [key[3] for key in route_matcher(router).kept] == ["/api/inner"]


@pytest.mark.parametrize("path", ["/gradio_api/queue/join", "/gradio_api/queue/data"])
def test_the_apps_queue_paths_are_kept_by_the_route_that_fastapi_finds(path):
    import gradio as gr

    with gr.Blocks() as demo:
        gr.Button().click(lambda: None, None, None)
    demo.queue()
    app = gr.routes.App.create_app(demo)
    (router,) = included_routers(app)
    method = "POST" if path.endswith("join") else "GET"
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}
    found = route_matcher(router)(dict(scope))
    keep_route_matches(app)
    memo = route_matcher(router)
    for _ in range(2):
        match, child, route, _ = memo(dict(scope))
        assert (match, route) == found[:1] + found[2:3] and child == found[1] and child is not found[1]
    assert len(memo.kept) == 1


def test_without_a_login_the_queue_checks_none_in_a_thread_and_with_one_it_still_refuses(monkeypatch):
    import fastapi.dependencies.utils as fastapi_dependencies
    import gradio as gr

    from attention_viz.server.gradio_internals import login_dependants
    from attention_viz.server.routes import check_logins_at_once, no_login_needed

    with gr.Blocks() as demo:
        gr.Button().click(lambda: None, None, None)
    demo.queue()
    app = gr.routes.App.create_app(demo)
    threaded: list[str] = []  # every dependency FastAPI hands to a worker thread
    run_in_threadpool = fastapi_dependencies.run_in_threadpool

    async def spied(call, *args, **kwargs):
        threaded.append(getattr(call, "__name__", repr(call)))
        return await run_in_threadpool(call, *args, **kwargs)

    monkeypatch.setattr(fastapi_dependencies, "run_in_threadpool", spied)
    client = TestClient(app)
    client.get("/gradio_api/info")
    assert threaded == ["login_check"]  # what the swap removes (the spy sees it: this test can fail)
    dependants = login_dependants(app)
    assert len(dependants) >= 4 and {d.call.__name__ for d in dependants} == {"login_check"}  # join, data, ...
    check_logins_at_once(app)
    assert all(d.call is no_login_needed for d in login_dependants(app) + dependants)
    assert app.dependency_overrides == {}  # any override has FastAPI derive every request's dependencies afresh
    threaded.clear()
    answer = client.get("/gradio_api/info")
    assert answer.status_code == 200 and "named_endpoints" in answer.json()
    joined = client.post("/gradio_api/queue/join", json={"data": [], "fn_index": 0, "session_hash": "s"})
    assert joined.status_code == 200 and "event_id" in joined.json()
    assert threaded == []  # the routes answered with no worker thread for a login

    demo.auth_message = "Log in first."  # what launch() sets, which the refusal reads
    guarded = gr.routes.App.create_app(demo, auth_dependency=lambda request: None)  # a login nobody passes
    assert login_dependants(guarded) == []
    check_logins_at_once(guarded)
    assert TestClient(guarded).get("/gradio_api/info").status_code == 401
