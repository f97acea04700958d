"""webui.sessions: a student's session starts with a copy of each component's config entry, built once per app."""

from __future__ import annotations

import pytest
from gradio.state_holder import SessionState

from attention_viz.webui import sessions


@pytest.fixture(scope="module")
def demo(views):
    from attention_viz.webui import page

    return page.build_app(views)


def test_every_session_starts_with_the_entries_gradio_builds_without_rebuilding_them(demo, monkeypatch):
    before = SessionState(demo).config_values  # Gradio's own, each entry built for this session
    sessions.share_session_configs(demo)
    calls = []
    original = sessions._original
    monkeypatch.setattr(sessions, "_original", lambda *args: calls.append(args[0]) or original(*args))
    first, second = SessionState(demo), SessionState(demo)
    assert first.config_values == second.config_values == before
    assert calls == []  # nothing rebuilt: ~100 components, a third of them gr.HTML with long scripts


def test_what_one_session_writes_stays_in_that_session(demo):
    sessions.share_session_configs(demo)
    first, second = SessionState(demo), SessionState(demo)
    text = next(key for key, entry in first.config_values.items() if entry.get("props", {}).get("elem_id") == "text")
    untouched = second.config_values[text]["props"]["value"]
    first._update_value_in_config(text, "a value only this student typed")
    assert first.config_values[text]["props"]["value"] == "a value only this student typed"
    assert second.config_values[text]["props"]["value"] == untouched == SessionState(demo).config_values[text]["props"]["value"]
    replaced = type(first.blocks_config.blocks[text])(value="replaced", render=False)
    first[text] = replaced  # an event's gr.update: a new component for this session only (as Blocks.postprocess_data
    first._update_config(text)  # does), its entry built by Gradio
    assert first.config_values[text]["props"]["value"] == "replaced"
    assert SessionState(demo).config_values[text]["props"]["value"] == untouched
