"""The app's routes made cheaper, answering as before. A request's route found once per path: FastAPI finds a request's route by trying the app's routes in turn (Gradio's
~85), and for the routes Gradio includes it does so twice (the included router's match, then again when it handles
the request). A queued event is two requests (/queue/join, /queue/data), and their two scans were about a third of
the server's CPU for an event that does nothing (/ping).

A route without path parameters matches one path only, so its match is a function of the request's type, method,
root path and path, as long as the routes stay the same: RouteMemo keeps it for each such path and answers it
again (a fresh copy of what FastAPI's match answered, so no request shares a dict with another). Any other request
(a path parameter, no full match, a refused method, a 404) goes through FastAPI's scan as before; the routes
changing empties what is kept.

And the login check answered in the event loop: every request of the queue depends on Gradio's login_check, a plain
function FastAPI runs in a worker thread (a hop of ~0.2 ms of CPU); in an app without a login it returns at once, so
an app without one has it replaced by a coroutine that returns at once, in the routes' own dependants (FastAPI's
dependency_overrides would do it too, but an app with any override has FastAPI derive every dependency of every
request afresh: 7.44 -> 7.17 ms of CPU a request through TestClient, medians of 8 x 400).
The reaches are named and checked in server/gradio_checks.py.

    keep_route_matches(app)   # after launch: the app's included routers answer a kept match where they have one
    check_logins_at_once(app) # an app without a login: its login check with no thread
"""

from __future__ import annotations

from typing import Any

from starlette.routing import Match

from attention_viz.server.gradio_internals import (included_routers, login_dependants, match_routes_with,
                                                  route_matcher, routes_version)

KEPT_MAX = 256  # paths kept per router: a route without parameters has one path, and Gradio has ~85 routes


def _copied(child_scope: dict) -> dict:
    """A match's scope for one request: the dict and the dicts in it copied (path_params, FastAPI's own)."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in child_scope.items()}


class RouteMemo:
    """An included router's `_match(scope)`, answering a full match without path parameters from what it kept."""

    def __init__(self, router: Any) -> None:
        self.router, self.match = router, route_matcher(router)
        self.kept: dict[tuple, tuple] = {}
        self.version = routes_version(router)

    def __call__(self, scope: dict) -> tuple:
        if scope.get("path_params"):  # a request inside another match's parameters: never kept
            return self.match(scope)
        version = routes_version(self.router)
        if version != self.version:  # routes added or removed: every kept match may be stale
            self.kept, self.version = {}, version
        key = (scope["type"], scope.get("method"), scope.get("root_path", ""), scope["path"])
        kept = self.kept.get(key)
        if kept is None:
            kept = self.match(scope)
            match, child_scope, _, _ = kept
            if match is not Match.FULL or child_scope.get("path_params") or len(self.kept) >= KEPT_MAX:
                return kept
            self.kept[key] = kept
        match, child_scope, route, context = kept
        return match, _copied(child_scope), route, context


def keep_route_matches(app: Any) -> None:
    """Every router the app includes matches through a RouteMemo (once: a router already wrapped is left)."""
    for router in included_routers(app):
        if not isinstance(route_matcher(router), RouteMemo):
            match_routes_with(router, RouteMemo(router))


async def no_login_needed(user: str | None = None) -> None:
    """Gradio's login_check in an app without a login: nothing to check, and no thread to check it in. `user`: what
    login_check's own dependency (Gradio's get_current_user, a coroutine) gave, which FastAPI still passes."""


def check_logins_at_once(app: Any) -> None:
    """Where the app has no login, its login checks answered by no_login_needed (nothing changes where it has one)."""
    for dependant in login_dependants(app):
        dependant.call = no_login_needed
