"""server.sessions: what Gradio keeps per session is bounded: the page's config shared, no values, few sessions.

What sessions.py relies on in the installed Gradio is checked by tests/server/test_gradio_internals.py."""

from __future__ import annotations

import json
import pathlib
import uuid

import httpx
import pytest
from gradio.state_holder import SessionState

from attention_viz.server import sessions

MiB = 1 << 20


@pytest.fixture(scope="module")
def demo(views):
    from attention_viz.webui import page

    return page.build_app(views)


def test_every_session_shares_the_entries_gradio_builds_and_keeps_no_values(demo, monkeypatch):
    before = SessionState(demo).config_values  # Gradio's own, each entry built for this session
    sessions.share_session_configs(demo)
    calls = []
    original = sessions._original
    monkeypatch.setattr(sessions, "_original", lambda *args: calls.append(args[0]) or original(*args))
    first, second = SessionState(demo), SessionState(demo)
    assert first.config_values == second.config_values == before
    assert calls == []  # nothing rebuilt: ~100 components, a third of them gr.HTML with long scripts
    text = next(key for key, entry in first.config_values.items() if entry.get("props", {}).get("elem_id") == "text")
    assert first.config_values[text] is second.config_values[text]  # one entry for every session
    untouched = dict(first.config_values[text]["props"])
    first._update_value_in_config(text, "x" * MiB)  # what Gradio does with every input and output of an event
    assert first.config_values[text]["props"] == untouched == SessionState(demo).config_values[text]["props"]
    replaced = type(first.blocks_config.blocks[text])(value="replaced", render=False)
    first[text] = replaced  # an event's gr.update: a new component for this session only (as Blocks.postprocess_data
    first._update_config(text)  # does), its entry built by Gradio
    assert first.config_values[text]["props"]["value"] == "replaced"
    assert SessionState(demo).config_values[text]["props"] == untouched


def test_a_gr_update_builds_its_component_once_for_every_session(demo, monkeypatch):
    """sessions.updated: the component a gr.update makes of a session's component is what Gradio builds (its
    arguments and entry), built once for every session that gets the same update of the same component, and shared
    with its entry; another update, or the same update of another component, builds another; an update whose
    arguments are not JSON's is built each time; at most UPDATES_KEPT are kept, the oldest dropped."""
    import gradio as gr

    sessions.share_session_configs(demo)
    monkeypatch.setattr(sessions, "_updates", type(sessions._updates)())
    dropdown = gr.Dropdown(["a", "b"], value="a", label="d", render=False)
    built = []
    real = gr.Dropdown.__init__
    monkeypatch.setattr(gr.Dropdown, "__init__", lambda self, *a, **k: built.append(k) or real(self, *a, **k))
    update = {"__type__": "update", "choices": ["p", "q"], "value": "q", "label": "new"}

    def gradios(base, update):  # Blocks.postprocess_data's own construction
        kwargs = {**base.constructor_args, **update, "render": False}
        kwargs.pop("value")
        kwargs.pop("__type__")
        return gr.Dropdown(**kwargs)

    reference = gradios(dropdown, update)
    built.clear()
    first = sessions.updated(dropdown, dropdown, dict(update))
    assert first.constructor_args == reference.constructor_args and first.choices == [("p", "p"), ("q", "q")]
    assert sessions._original(dropdown._id, [], first) == sessions._original(dropdown._id, [], reference)
    assert sessions._shared(dropdown._id, [], first) == sessions._original(dropdown._id, [], reference)  # its entry kept with it
    assert sessions.updated(dropdown, dropdown, {**update, "value": "p"}) is first  # its value is the answer's
    assert len(built) == 1
    assert sessions.updated(dropdown, first, dict(update)) is not first  # an update of the updated one
    assert sessions.updated(dropdown, dropdown, {**update, "label": "other"}).label == "other"
    assert len(built) == 3
    odd = {"__type__": "update", "choices": [object()]}  # not JSON: built each time, as Gradio builds it
    assert sessions.updated(dropdown, dropdown, odd) is not sessions.updated(dropdown, dropdown, odd)
    monkeypatch.setattr(sessions, "UPDATES_KEPT", 2)
    for label in ("x", "y", "z"):
        sessions.updated(dropdown, dropdown, {**update, "label": label})
    assert len(sessions._updates) == 2 and id(first) not in sessions._kept
    assert sessions.updated(dropdown, dropdown, dict(update)) is not first  # dropped: built again


def kept_bytes(state_holder) -> int:
    """The bytes of the values kept in Gradio's sessions: their config entries' values (each entry once: the page's
    own are shared) and their gr.State data."""
    entries = {id(entry): entry for session in list(state_holder.session_data.values())
               for entry in session.config_values.values()}
    total = sum(len(json.dumps(entry.get("props", {}).get("value"), default=str)) for entry in entries.values())
    for session in list(state_holder.session_data.values()):
        total += sum(len(json.dumps(value, default=str)) for value in session.state_data.values())
    return total


def test_refused_inputs_and_api_calls_leave_a_bounded_state(views, monkeypatch):
    """The app launched as main() launches it: a hundred 200 kB texts (refused), each from a new session as API
    clients send them, and some answered runs and exports: Gradio keeps at most SESSIONS_KEPT sessions, none holding
    a value, and the exports are served from the app's bounded folder (not copied into Gradio's cache)."""
    from devtools.launcher import free_port

    from attention_viz.webui import page

    monkeypatch.setattr(sessions, "SESSIONS_KEPT", 40)
    monkeypatch.setattr(views.exports, "per_client", 2)  # each session's last 2 exports (each export draws figures)
    port = free_port()
    monkeypatch.setenv("GRADIO_SERVER_PORT", str(port))
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    demo = page.build_app(views)
    page.launch(demo, views)
    port = demo.server_port or port  # where Gradio did start it
    assert demo.server.config.timeout_keep_alive == page.IDLE_CONNECTION_S > 60  # longer than a proxy's idle one
    base = f"http://127.0.0.1:{port}/gradio_api"
    try:
        with httpx.Client(timeout=60) as client:
            config = client.get(f"http://127.0.0.1:{port}/config").json()
            by_id = {c["id"]: c for c in config["components"]}
            deps = {d["api_name"]: d for d in config["dependencies"] if d.get("api_name")}

            def call(api: str, changes: dict[str, object], session: str) -> dict:
                dep = deps[api]
                values = [changes.get(by_id[i]["props"].get("elem_id"), by_id[i]["props"].get("value"))
                          for i in dep["inputs"]]
                body = {"data": values, "fn_index": dep["id"], "session_hash": session, "trigger_id": None}
                client.post(base + "/queue/join", json=body).raise_for_status()
                with client.stream("GET", base + "/queue/data", params={"session_hash": session}) as stream:
                    for line in stream.iter_lines():
                        if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                            return json.loads(line[5:])
                raise AssertionError("no answer")

            big = 200 * 1024  # under the body limit (body_limit.MAX_BODY_BYTES): Gradio queues it, the service refuses
            for _ in range(100):  # 2.5 x SESSIONS_KEPT sessions
                answer = call("visualize", {"text": "x" * big}, uuid.uuid4().hex)
                assert answer["success"] is False and "characters" in answer["output"]["error"]
            assert kept_bytes(demo.state_holder) < 256 * 1024  # the page's values (~20 kB), nothing of the 20 MB
            dep = deps["visualize"]  # past the limit: refused before Gradio reads it, with a message
            body = {"data": ["x" * MiB], "fn_index": dep["id"], "session_hash": "big", "trigger_id": None}
            refused = client.post(base + "/queue/join", json=body)
            assert refused.status_code == 413 and "Request too large" in refused.json()["detail"]
            exported = []
            for session in ("alice", "bob"):
                for i in range(3):  # one more than the app keeps per session
                    answer = call("export", {"text": f"abc{i}"}, session)
                    assert answer["success"], answer
                    exported.append((session, [f["path"] for f in answer["output"]["data"][0]]))
        assert len(demo.state_holder.session_data) <= 40 and kept_bytes(demo.state_holder) < 256 * 1024
        for _, paths in exported:
            assert all(views.export_root in pathlib.Path(p).parents for p in paths)  # served from the app's folder
        kept = [s for s, paths in exported if pathlib.Path(paths[0]).exists()]
        assert kept == ["alice"] * 2 + ["bob"] * 2  # each session's last 2 (per_client)
    finally:
        demo.close()


def test_main_launches_with_the_bounded_session_count(monkeypatch):
    from types import SimpleNamespace

    from attention_viz.webui import page

    launched = {}

    class Recorder:
        blocks: dict = {}
        _queue = SimpleNamespace(cached_event_analytics_summary={}, event_analytics={})
        server = SimpleNamespace(config=SimpleNamespace(timeout_keep_alive=5))  # uvicorn's, as launch starts it

        def launch(self, **kwargs):
            launched.update(kwargs)
            self.enable_monitoring = kwargs.get("enable_monitoring") in (True, None)  # as Gradio's launch sets it
            return SimpleNamespace(middleware_stack=None, build_middleware_stack=lambda: None,
                                   router=SimpleNamespace(routes=[]), dependency_overrides={}), "", None

        def block_thread(self):
            pass

    from gradio import queueing

    monkeypatch.setattr(queueing, "run_sync", queueing.run_sync)  # put back after the test
    monkeypatch.setattr(page, "build_app", lambda *a, **k: Recorder())
    monkeypatch.setattr(page, "warm_up", lambda views: None)
    monkeypatch.setattr(page.runtime, "tune_process", lambda: None)
    monkeypatch.setattr(page.runtime, "freeze_start_up_objects", lambda: None)
    page.main()
    assert launched["state_session_capacity"] == sessions.SESSIONS_KEPT <= 2000
    assert launched["enable_monitoring"] is False  # and so no record or summary of events (gradio_internals)
    assert Recorder.server.config.timeout_keep_alive == page.IDLE_CONNECTION_S  # longer than a proxy keeps one idle
