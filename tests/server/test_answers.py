"""server.answers: the app's Blocks answers every event as Gradio's own does, byte for byte, and leaves the session as
a later event needs it; the quick walks give what Gradio's give."""

from __future__ import annotations

import asyncio

import pytest
from gradio import processing_utils

from attention_viz.server import answers


def in_a_thread(coroutine):
    """asyncio.run in a thread of its own: the browser tests leave an event loop running in this one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_postprocess_answers_as_gradio_does_and_leaves_the_session_as_a_later_event_needs_it(tmp_path):
    """Blocks.postprocess_data's shortcuts (an output left as it is answered at once; a plain value of a component
    that passes it on postprocessed on the event loop) answer every output as Gradio's own does, byte for byte, for
    a run of answers that leave outputs alone, update them and give them values; each later answer, given what the
    earlier ones left in the session, is Gradio's too. A check of the check: a shortcut that answers a skipped gr.HTML
    as a plain update fails it."""
    import json

    import gradio as gr
    from gradio.blocks import Blocks as GradioBlocks
    from gradio.state_holder import SessionState

    with answers.Blocks() as demo:
        html, text, radio = gr.HTML("<p>a</p>"), gr.Textbox("t"), gr.Radio(["x", "y"], value="x")
        number, state, markdown = gr.Number(1), gr.State(3), gr.Markdown("m")
        button = gr.Button()
        outputs = [html, text, radio, number, state, markdown]
        button.click(lambda: None, None, outputs)
    fn = next(f for f in demo.fns.values() if len(f.outputs) == len(outputs))
    given = lambda: [  # noqa: E731 - fresh for each run: Gradio takes "value" out of an update it is given
        {html: "<b>new</b>"},                                               # the rest left as they are
        [gr.skip(), "text", gr.update(choices=["p", "q"], value="q"), 2.5, gr.skip(), "# h"],
        {radio: "p", state: 4, markdown: gr.skip()},                        # a value for the updated radio
        gr.skip(),                                                          # every output left as it is
        [{"k": [1, 2]}, None, gr.update(visible=False), None, 5, gr.update(value="v")],
        {text: gr.update(), number: 7},
        [{"rows": [[1.5, "a"], (2, None)], "nested": {"x": [{"y": 1}]}}, "t", gr.skip(), 1, 2, "m"],  # no file
        [{"image": FILE}, "t", gr.skip(), 1, 2, "m"],  # a file inside a gr.HTML's value: Gradio's walk moves it
    ]

    def run(postprocess) -> list[str]:
        """Each answer, and after it the radio's choices in the session (what a later event's value is checked by)."""
        session = SessionState(demo)
        return [json.dumps([in_a_thread(postprocess(fn, answer, session)), session[radio._id].choices], default=str)
                for answer in given()]

    FILE = {"path": str(tmp_path / "a.png"), "meta": {"_type": "gradio.FileData"}}  # noqa: N806
    (tmp_path / "a.png").write_bytes(b"png")
    ours = run(demo.postprocess_data)
    assert ours == run(lambda *a: GradioBlocks.postprocess_data(demo, *a))
    assert run(demo.postprocess_data) == ours  # again: each update's component now shared (sessions.updated)
    assert '"props"' in ours[1]  # Gradio's answer for a gr.HTML left as it is, which the shortcut must give too
    answers._SKIPPED[gr.HTML] = {"__type__": "update"}
    try:
        assert run(demo.postprocess_data) != ours
    finally:
        answers._SKIPPED.pop(gr.HTML)


FILE_URL = {"path": "/tmp/a.png", "url": "/gradio_api/file=/tmp/a.png", "meta": {"_type": "gradio.FileData"}}


@pytest.mark.parametrize("data", [
    [{"rows": [[1.5, "a"], (2, None)], "x": {"y": [1, 2, (3, 4)]}}, "text", 3, None, [], {}],
    [{"html": "<p>", "files": [FILE_URL, {"meta": {"_type": "gradio.FileData"}}]}, "text"],
    [{"path": "p", "meta": {"_type": "other"}, "url": "u"}],
    {"components": [{"props": {"value": [1, 2]}}]},  # a dict (the page's config): Gradio's walk, whatever it holds
])
def test_the_quick_root_url_walk_gives_gradios_answer(data):
    """An answer (a list of values) with no file is copied as Gradio's walk copies it (equal, every dict and list a new
    object, tuples as lists); one with a file, or the page's config (a dict), goes Gradio's way (a URL gets the root)."""
    ours, gradios = answers._add_root_url(data, "http://host", None), answers.GRADIOS_ADD_ROOT_URL(data, "http://host", None)
    assert ours == gradios and repr(ours) == repr(gradios)
    assert ours is not data and (not isinstance(data, list) or ours[0] is not data[0])
    assert answers.no_file(data) == ("http://host" not in repr(gradios))
    if answers.no_file(data) and isinstance(data, list):
        assert answers.copied(data) == gradios  # an answer with no file: copied in the one pass


class Mapping(dict):
    """A dict's subclass: Gradio's walk asks it whether it is a file."""


def test_a_file_at_any_depth_is_found():
    assert answers.no_file({"a": [1, {"b": ({"c": [2.0]},)}]})
    assert answers.copied({"a": [1, {"b": ({"c": [2.0]},)}]}) == {"a": [1, {"b": [{"c": [2.0]}]}]}
    for holder in ({"a": [1, {"b": ({"c": [FILE_URL]},)}]}, FILE_URL, [[[FILE_URL]]], [1, {"a": Mapping()}],
                   [0.5] * 1000 + [Mapping()]):  # among many floats
        assert not answers.no_file(holder)
        with pytest.raises(answers.HasFile):
            answers.copied(holder)


def test_quick_root_urls_puts_ours_in_gradios_place(monkeypatch):
    from gradio import route_utils

    monkeypatch.setattr(processing_utils, "add_root_url", answers.GRADIOS_ADD_ROOT_URL)
    monkeypatch.setattr(route_utils, "get_root_url", answers.GRADIOS_GET_ROOT_URL)
    answers.quick_root_urls()
    assert processing_utils.add_root_url is answers._add_root_url
    assert route_utils.get_root_url is answers._get_root_url


def request(path: str = "/gradio_api/queue/join", query: bytes = b"", scheme: str = "http",
            host: str = "127.0.0.1:7860", root_path: str = "", **headers: str):
    """A starlette Request of this url and these headers (x_forwarded_host= -> x-forwarded-host)."""
    from starlette.requests import Request

    raw = [(b"host", host.encode())] + [(name.replace("_", "-").encode(), value.encode())
                                       for name, value in headers.items()]
    return Request({"type": "http", "method": "POST", "scheme": scheme, "server": ("127.0.0.1", 7860),
                    "root_path": root_path, "path": root_path + path, "query_string": query, "headers": raw})


ORIGINS = [dict(), dict(query=b"a=1&b=2"), dict(scheme="https", host="example.org"), dict(root_path="/app"),
           dict(x_forwarded_host="space.hf.space"), dict(x_forwarded_host="a.org, b.org", x_forwarded_proto="https"),
           dict(x_forwarded_proto="https"), dict(x_forwarded_proto="http, https"), dict(x_gradio_server="http://gs:1"),
           dict(x_forwarded_host="", x_gradio_server=""), dict(host="[::1]:8000", path="/gradio_api/call/ping"),
           dict(path="/gradio_api/queue/join/", root_path="/deep/er")]


@pytest.mark.parametrize("root_path", [None, "", "/proxied", "https://public.example.com/app/"])
@pytest.mark.parametrize("route_path", ["/gradio_api/queue/join", "/gradio_api/call/ping", ""])
def test_the_kept_root_url_is_gradios_for_every_origin(route_path, root_path):
    """The root URL kept per origin is Gradio's own for each request (asked twice: the second from what was kept),
    and a request from another origin is not answered with the first one's."""
    answers._root_url_of.cache_clear()
    for origin in ORIGINS:
        gradios = answers.GRADIOS_GET_ROOT_URL(request(**origin), route_path, root_path)
        for _ in range(2):
            assert answers._get_root_url(request(**origin), route_path, root_path) == gradios, origin
    assert answers._root_url_of.cache_info().hits == len(ORIGINS)
