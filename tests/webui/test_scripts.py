"""The page's browser code lives in static files, each in the served page once; Python holds no script.

- Every gr.HTML's js_on_load and every event's js in the app's config is one call of a function of page.js's
  `attentionViz`, its arguments JSON or the event's own parameters (nothing else can be parsed as such).
- No string in the package's Python (docstrings aside) is a script: none longer than a one-line call holds an arrow
  function, a `function`, or reaches into the document.
- The page that GET / serves holds each static script once (Gradio puts launch's head in the page's config once),
  and page.launch gives Gradio that head.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path

import gradio as gr
import httpx
import pytest

from attention_viz.webui import page, scripts

PACKAGE = Path(__file__).resolve().parents[2] / "attention_viz"
CALL = re.compile(r"\((?P<params>[\w., ]*)\) => attentionViz\.(?P<name>\w+)\((?P<args>.*)\)")
ON_LOAD = re.compile(r"attentionViz\.(?P<name>\w+)\(element, props(?:, watch)?(?:, (?P<args>.*))?\)")
SCRIPT_LIKE = ("=>", "function(", "function (", "querySelector", "addEventListener", "document.", "window.")
ONE_LINE_CALL = 100  # a longer string than this with any of SCRIPT_LIKE in it is a script


def exported() -> set[str]:
    """The names page.js puts on window.attentionViz."""
    source = (PACKAGE / "webui" / "static" / "page.js").read_text(encoding="utf-8")
    block = source[source.index("global.attentionViz = {"):]
    return set(re.findall(r"(\w+): \w+", block[:block.index("};")]))


def json_args(args: str, names: set[str]) -> list:
    """The call's arguments as JSON, each of the event's own parameter names read as null (raises if any is code)."""
    quoted = re.sub(r'"(?:[^"\\]|\\.)*"|\b[A-Za-z_]\w*\b',
                    lambda m: "null" if m.group(0) in names else m.group(0), args)
    return json.loads(f"[{quoted}]")


@pytest.fixture(scope="module")
def config(views):
    return page.build_app(views).get_config_file()


def test_every_event_js_and_js_on_load_is_one_call_of_page_js(config):
    names = exported()
    calls = [d["js"] for d in config["dependencies"] if d.get("js")]
    gradios = inspect.signature(gr.HTML).parameters["js_on_load"].default  # a click listener, Gradio's own
    loads = [c["props"]["js_on_load"] for c in config["components"]
             if c["props"].get("js_on_load") not in (None, gradios)]
    assert len(calls) > 20 and len(loads) >= 5  # the app's events with a js, and its drawn views
    for js in calls:
        match = CALL.fullmatch(js)
        assert match and "\n" not in js, js
        assert match["name"] in names, js
        params = {p.strip().lstrip(".") for p in match["params"].split(",") if p.strip()}
        json_args(match["args"], params)
    for js in loads:
        match = ON_LOAD.fullmatch(js)
        assert match and "\n" not in js and match["name"] in names, js
        json_args(match["args"] or "", {"trigger", "server"})  # the trigger(name, data) or the server functions, last


def python_strings(path: Path):
    """Every string constant of a module (f-strings' literal parts included) that is not a docstring."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr):
            yield node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)


def test_no_python_string_is_a_script():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in python_strings(path):
            if len(text) > ONE_LINE_CALL and any(marker in text for marker in SCRIPT_LIKE):
                found.append(f"{path.relative_to(PACKAGE)}:{line}: {text[:80]!r}")
    assert not found, "JavaScript in Python strings (write it in a static .js file):\n" + "\n".join(found)


def probe(text: str) -> str:
    """A line of a script that only that script has, in characters that every encoding of the page keeps as they are."""
    lines = [line.strip() for line in text.splitlines() if re.fullmatch(r"[\w .,()=;:+*/\[\]-]+", line.strip())]
    return max(lines, key=len)


def test_the_served_page_holds_each_script_once(views):
    from devtools.launcher import free_port

    demo = page.build_app(views)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, head=scripts.head())
    try:
        served = httpx.get(f"http://127.0.0.1:{demo.server_port or port}/", timeout=60).text
    finally:
        demo.close()
    probes = {name: probe(scripts.text(package, name)) for package, name in scripts.SCRIPTS}
    assert len(set(probes.values())) == len(probes), probes  # each probe names one script
    counts = {name: served.count(line) for name, line in probes.items()}
    assert counts == dict.fromkeys(probes, 1), counts


def test_page_launch_gives_gradio_the_scripts(views, monkeypatch):
    launched = {}

    class Demo:
        def launch(self, **kwargs):
            launched.update(kwargs)
            return None, None, None  # as Gradio's reload mode: no app to put the file cache in front of

    monkeypatch.setattr(page, "files_first", lambda app: None)
    monkeypatch.setattr(page.sessions, "share_session_configs", lambda demo: None)
    page.launch(Demo(), views)
    assert launched["head"] == scripts.head()
