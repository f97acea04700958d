"""server.gradio_internals: every reach into Gradio's internals is named there, checked against the installed Gradio,
and made nowhere else but there and in server/answers.py (the app's Blocks, whose reaches are named there too). A
Gradio upgrade that changes what a reach relies on fails here, naming the reach."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import gradio
import pytest

from attention_viz.server import gradio_checks, gradio_internals

PACKAGE = Path(gradio_internals.__file__).resolve().parents[1]
HOMES = {Path(gradio_internals.__file__).resolve(), Path(gradio_checks.__file__).resolve(),
         PACKAGE / "server" / "answers.py"}
# What reaches past Gradio's public API, as the source says it: a private attribute of Gradio's, the methods patched
# or overridden, Starlette's built stack, a module of Gradio's own other than its public top level.
REACH = re.compile(r"\._queue\b|\bmiddleware_stack\b|\bconfig_for_block\b|\b_update_value_in_config\b|"
                   r"\bdef preprocess_data\b|\bpending_event_ids_session\b|\bevent_queue_per_concurrency_id\b|"
                   r"\bevent_ids_to_events\b|\bactive_jobs\b|\bget_blocks\(|\._match\b|_IncludedRouter")


@pytest.mark.parametrize("reach", sorted(gradio_checks.REACHES))
def test_each_reach_is_still_what_the_installed_gradio_has(reach):
    problems = gradio_checks.CHECKS[reach]()
    assert not problems, (f"Gradio {gradio.__version__} (written against {gradio_internals.GRADIO_VERSION}) changed "
                          f"what {reach} relies on: {problems}; review server/gradio_internals.py, gradio_checks.py, "
                          f"{gradio_checks.REACHES[reach][0]}")


def test_every_reach_is_named_with_its_user_and_why_and_has_a_check():
    assert set(gradio_checks.CHECKS) == set(gradio_checks.REACHES)
    for name, (user, what, why) in gradio_checks.REACHES.items():
        assert user and len(what) > 20 and len(why) > 20, name
    assert gradio_checks.changed() == {}


def test_the_checks_fail_when_what_they_rely_on_is_gone(monkeypatch):
    """A check that cannot fail proves nothing: take away (or reshape) what some reaches rely on and see them fail."""
    from gradio import queueing
    from gradio.state_holder import SessionState

    async def push(self, payload, request):  # a reshaped Queue.push
        return None

    monkeypatch.setattr(queueing.Queue, "push", push)
    monkeypatch.setattr(queueing.Queue, "send_message", lambda self, message: None)
    monkeypatch.setattr(SessionState, "_update_value_in_config", lambda self, key: None)
    monkeypatch.setattr(gradio_internals, "GRADIO_COMPRESSES", (".html",))
    monkeypatch.setattr(gradio_checks, "_source_uses", lambda obj, *names: list(names))  # nothing found in a source
    assert set(gradio_checks.changed()) == set(gradio_checks.REACHES)


def imports_of_gradio_modules(path: Path) -> list[str]:
    """The Gradio modules a source file imports, other than `gradio` itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("gradio.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("gradio."):
                found.append(node.module)
            elif node.module == "gradio":
                found += [f"gradio.{a.name}" for a in node.names if not a.name[0].isupper()
                          and a.name not in ("themes",)]  # gr's submodules, not its classes
    return found


def test_no_other_module_reaches_into_gradio():
    """Gradio's own modules are imported, and its internals touched, in gradio_internals.py (checked in
    gradio_checks.py) and answers.py only (the
    page's modules use `import gradio as gr` and its public names)."""
    elsewhere = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in HOMES:
            continue
        relative = path.relative_to(PACKAGE.parent)
        elsewhere += [f"{relative} imports {module}" for module in imports_of_gradio_modules(path)]
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        code = re.sub(r'"""(.*?)"""', "", code, flags=re.S)  # docstrings may name a reach; code may not
        elsewhere += [f"{relative}: {match}" for match in sorted(set(REACH.findall(code)))]
    assert not elsewhere, elsewhere


def in_a_thread(coroutine):
    """asyncio.run in a thread of its own: the browser tests leave an event loop running in this one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def test_no_record_and_no_summary_of_events_where_monitoring_is_off():
    """keep_no_analytics: with the monitoring page off, events through the queue are answered as before and leave no
    record (Gradio keeps the last 10,000), and no summary is made of them in a worker thread; with the page on, both
    are left as Gradio has them."""
    import gradio as gr
    from gradio import queueing
    from gradio_client import Client

    def launched(monitoring: bool):
        with gr.Blocks() as demo:
            number = gr.Number()
            gr.Button().click(lambda x: x + 1, number, number, api_name="add")
        demo.queue()
        demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True, enable_monitoring=monitoring)
        return demo

    before = queueing.run_sync
    demo = launched(monitoring=False)
    try:
        queue = gradio_internals.queue_of(demo)
        gradio_internals.keep_no_analytics(demo)
        client = Client(demo.local_url, verbose=False)
        assert [client.predict(n, api_name="/add") for n in (1, 2, 3)] == [2, 3, 4]
        assert queue.event_analytics == {}  # Gradio's own: a record of each event
        assert queue.compute_analytics_summary([{"function": "f"}]) is queue.cached_event_analytics_summary
        assert in_a_thread(queueing.run_sync(queue.compute_analytics_summary, [])) == {"functions": {}}
        assert in_a_thread(queueing.run_sync(sum, [1, 2])) == 3  # anything else: in a worker thread, as before
    finally:
        demo.close()
        queueing.run_sync = before
    watched = launched(monitoring=True)
    try:
        gradio_internals.keep_no_analytics(watched)  # the monitoring page reads them: left alone
        queue = gradio_internals.queue_of(watched)
        assert "compute_analytics_summary" not in vars(queue)
        assert Client(watched.local_url, verbose=False).predict(1, api_name="/add") == 2
        assert len(queue.event_analytics) == 1
    finally:
        watched.close()


def test_an_idle_connection_is_kept_as_long_as_the_server_is_told():
    """keep_idle_connections: connections opened after it are closed once idle that long (uvicorn's own: 5 s), so a
    request after 1.5 s idle is answered on the same connection where the server keeps them 3 s, and finds it closed
    where it keeps them 0.5 s."""
    import socket
    import time

    import gradio as gr

    with gr.Blocks() as demo:
        gr.Number()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
    try:
        def answered_after_idle(seconds: float) -> bool:
            gradio_internals.keep_idle_connections(demo, seconds)
            with socket.create_connection(("127.0.0.1", demo.server_port), timeout=10) as connection:
                ask = f"GET /gradio_api/info HTTP/1.1\r\nHost: 127.0.0.1:{demo.server_port}\r\n\r\n".encode()
                for _ in range(2):
                    connection.sendall(ask)
                    head = b""
                    while b"\r\n\r\n" not in head:
                        chunk = connection.recv(65536)
                        if not chunk:
                            return False  # closed by the server
                        head += chunk
                    assert head.startswith(b"HTTP/1.1 200")
                    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))
                    body = head.split(b"\r\n\r\n", 1)[1]
                    while len(body) < length:
                        body += connection.recv(65536)
                    time.sleep(1.5)
                return True

        assert answered_after_idle(3.0) and not answered_after_idle(0.5)
        assert demo.server.config.timeout_keep_alive == 0.5
    finally:
        demo.close()


def test_the_dispatcher_sleeps_until_a_join_or_an_end_wakes_it():
    """wake_on_events: the dispatcher's naps are cut short by each join and by each event's end. With naps of a minute
    at the longest, three events on a line of one (the second and third can start only once the one before has
    ended) are all answered well inside that minute; and an idle queue takes a few naps, where Gradio's polls a
    thousand times a second."""
    import time

    import gradio as gr
    from gradio import queueing
    from gradio_client import Client

    with gr.Blocks() as demo:
        number = gr.Number()
        gr.Button().click(lambda x: x + 1, number, number, api_name="add", concurrency_limit=1)
    demo.queue()
    before = queueing.asyncio
    gradio_internals.wake_on_events(demo, most_s=60.0, progress_s=0.1)
    nap = gradio_internals.queue_of(demo).sleep_when_free
    taken, take = [], nap.take

    async def counted():
        taken.append(time.monotonic())
        await take()

    nap.take = counted
    try:
        demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
        client = Client(demo.local_url, verbose=False)
        jobs = [client.submit(n, api_name="/add") for n in (1, 2, 3)]
        assert [job.result(timeout=30) for job in jobs] == [2, 3, 4]  # a missed wake: a minute's wait, then failure
        quiet_from = len(taken)
        time.sleep(1.0)
        assert len(taken) - quiet_from <= 3  # idle: asleep (Gradio's own: ~1,000 looks in that second)
        assert gradio_checks.changed().get("Queue.sleep_when_free") is None
    finally:
        demo.close()
        queueing.asyncio = before


def _event(text: str, d_k: float, request: gradio.Request = None, progress=gradio.Progress()):  # an event's function
    return text


class _Handlers:
    def event(self, text: str, request: gradio.Request = None):
        return text


def test_signatures_read_once_build_the_same_components_and_entries(monkeypatch):
    """read_signatures_once: a plain function's signature and argument list are worked out once (the same object
    answered again), anything else as inspect answers it; a class's server functions found once; a gr.update's new
    component and its config entry are what Gradio builds without it, server functions included."""
    import builtins
    import inspect
    import typing

    import gradio as gr
    from gradio import blocks as gradio_blocks
    from gradio import component_meta, helpers
    from gradio import utils as gradio_utils
    from gradio.components import base as component_base

    def built() -> list[dict]:
        made = [gr.Radio(["a", "b"], value="b", label="x", info="i", render=False),
                gr.Slider(1, 9, value=3, step=2, label="s", render=False),
                gr.Dropdown([("one", 1), ("two", 2)], value=2, interactive=False, render=False),
                gr.FileExplorer(render=False)]  # (a class with a server function: no class defined here, where
        # Gradio's ComponentMeta would write a .pyi of this file beside it)
        return [{**block.get_config(), "_constructor_args": block._constructor_args,
                 "server_fns": [(fn.__name__, fn.__self__ is block) for fn in block.server_fns]} for block in made]

    monkeypatch.setattr(gradio_blocks, "inspect", inspect)
    monkeypatch.setattr(component_meta, "inspect", inspect)
    monkeypatch.setattr(helpers, "inspect", inspect)
    monkeypatch.setattr(gradio_utils, "inspect", inspect)
    monkeypatch.setattr(gradio_utils, "get_type_hints", gradio_internals.GRADIOS_GET_TYPE_HINTS)
    monkeypatch.delattr(component_base, "dir", raising=False)  # the builtin, as Gradio has it

    bound = _Handlers().event
    request = object()
    event = _event
    specials = [helpers.special_args(fn, ["t", 2.0] if fn is event else ["t"], request)[:2] for fn in (event, bound)]
    before = built()
    assert [entry["server_fns"] for entry in before] == [[], [], [], [("ls", True)]]
    gradio_internals.read_signatures_once()
    kept = gradio_blocks.inspect
    gradio_internals.read_signatures_once()  # a second call leaves the first
    assert gradio_blocks.inspect is kept and isinstance(component_meta.inspect, type(kept))
    assert built() == before
    init = gr.Radio.__init__
    assert kept.signature(init) is kept.signature(init) and kept.signature(init) == inspect.signature(init)
    spec = component_meta.inspect.getfullargspec(init)
    assert spec is component_meta.inspect.getfullargspec(init) and spec == inspect.getfullargspec(init)
    radio = gr.Radio(["a"], render=False)
    # a bound method: its function's, bound, once for every object; a class: inspect's each time
    assert kept.signature(radio.get_config) is kept.signature(gr.Radio(["b"], render=False).get_config)
    assert kept.signature(radio.get_config) == inspect.signature(radio.get_config)
    assert kept.signature(gr.Radio) is not kept.signature(gr.Radio) and kept.signature(gr.Radio) == inspect.signature(
        gr.Radio)
    assert kept.Parameter is inspect.Parameter  # the rest of the module as it is
    assert component_base.dir(gr.FileExplorer) == ["ls"] and component_base.dir(gr.Radio) == []  # per class, once
    assert component_base.dir(radio) == builtins.dir(radio)  # anything but a class: the builtin's answer
    # an event's function: special_args reads its signature and type hints (once for a plain function; a copy of
    # the hints each time, as the caller may write into them), and answers as before
    assert helpers.inspect is not inspect and gradio_utils.inspect is not inspect
    hints = gradio_utils.get_type_hints(event)
    assert hints == typing.get_type_hints(event) and hints is not gradio_utils.get_type_hints(event)
    assert gradio_internals._type_hints_of(event) is gradio_internals._type_hints_of(event)
    assert gradio_utils.get_type_hints(bound) == typing.get_type_hints(bound) and typing.get_type_hints(bound)
    assert gradio_internals._type_hints_of(_Handlers.event) is gradio_internals._type_hints_of(_Handlers.event)
    again = [helpers.special_args(fn, ["t", 2.0] if fn is event else ["t"], request)[:2] for fn in (event, bound)]
    assert again == specials and specials[0][0][2] is request and specials[0][1] == 3
