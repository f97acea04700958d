"""The page's browser code, loaded once per page: every static script as its own <script> in the page's <head>.

    demo.launch(head=scripts.head(), ...)     # page.launch does this; a test's own Blocks with these views too

Gradio 6 puts `launch(head=...)` into the page's config once, and its front end adds those scripts to the document
(in order, each run as it is added) before it draws any component, so every gr.HTML's `js_on_load` and every event's
`js` finds the views' objects (window.AttentionExplorer, ...) and static/page.js's `window.attentionViz` defined.
Nothing is inlined per component: a js_on_load or an event's js is one call of a function of page.js, built here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from attention_viz import labview
from attention_viz.explorer.html import CHARTS, EXPLORER, LONG, SHARED, asset

# In load order: what every view needs, the explorer, the charts' pieces and the other views, then the page's calls.
SCRIPTS = (*(("explorer", name) for name in (*SHARED, *EXPLORER, CHARTS, "steps.js", "heads.js", *LONG)),
           ("labview", "lab.js"), ("labview", "study.js"), ("labview", "training.js"), ("webui", "page.js"))


def text(package: str, name: str) -> str:
    """The text of one of SCRIPTS."""
    if package == "explorer":
        return asset(name)
    if package == "labview":
        return labview.asset(name)
    return resources.files("attention_viz.webui").joinpath("static", name).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def head() -> str:
    """Every script of SCRIPTS once, as <script> elements for the page's <head> (launch's `head`)."""
    return "\n".join(f"<script data-av=\"{name}\">{_inline(text(package, name))}</script>" for package, name in SCRIPTS)


def _inline(script: str) -> str:
    """Script text that cannot end its own <script> element early."""
    return script.replace("</", "<\\/")


def call(function: str, *args: object, params: str = "") -> str:
    """An event's js: `(params) => attentionViz.function(args)`; each arg is JSON, or a str wrapped in Raw (a name of
    the event's own, such as `args`)."""
    listed = ", ".join(arg if isinstance(arg, Raw) else json.dumps(arg, ensure_ascii=False) for arg in args)
    return f"({params}) => attentionViz.{function}({listed})"


def on_load(function: str, options: object = None, trigger: bool = False, server: bool = False) -> str:
    """A gr.HTML's js_on_load: `attentionViz.function(element, props, watch, options)`; trigger: `trigger` too, last
    (the view triggers events of its component: a name it triggers must be among `options`' strings, which is how
    Gradio's gr.HTML finds the component's custom events); server: `server` too, last (the component's
    server_functions, each an async method of it)."""
    tail = "" if options is None else ", " + json.dumps(options, ensure_ascii=False)
    return (f"attentionViz.{function}(element, props, watch{tail}{', trigger' if trigger else ''}"
            f"{', server' if server else ''})")


class Raw(str):
    """A JavaScript name passed as it is by call() (not as a JSON string)."""
