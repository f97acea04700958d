"""The √d_k lab as the browser draws it: static/lab.js and static/lab.css, shipped as package data.

The server sends numbers (service/lab_view.py); lab.js draws them as SVG at the width the page gives
it, with no library and nothing fetched, so it works offline. Why SVG of our own rather than
Gradio's gr.LinePlot / gr.BarPlot: those draw one kind of mark per component from a pandas table,
so the histogram could not carry the law's curve over its own bars, the sweep would be four more
components (and four tables per answer), and a stale mark across the lab would need a fifth. One
script draws every panel from one value, keeps one scale where the lesson needs it (the logits),
and redraws on a resize without asking the server.

    from attention_viz import labview
    html = labview.page(view.data)        # a whole, self-contained page (a file, a notebook's iframe)

The Gradio page loads the same script once, in its head, and each lab view's js_on_load mounts it (webui/lab_tab.py,
webui/scripts.py).
"""

from __future__ import annotations

import html
import json
from functools import lru_cache
from importlib import resources

from attention_viz.explorer.html import CHARTS, script
from attention_viz.explorer.html import asset as explorer_asset

MOUNT_CLASS = "av-lab-mount"
ASSETS = ("lab.js", "study.js", "lab.css", "training.js", "training.css")


@lru_cache(maxsize=None)
def asset(name: str) -> str:
    """The text of a packaged static file: one of ASSETS."""
    if name not in ASSETS:
        raise ValueError(f"no such asset {name!r}; there are {', '.join(ASSETS)}")
    return resources.files("attention_viz.labview").joinpath("static", name).read_text(encoding="utf-8")


def training_script() -> str:
    """training.js with the palette it draws the maps with (attention_viz.explorer's palette.js, first)."""
    return script(asset("training.js"))


def _script(text: str) -> str:
    """Inline script text that cannot end its own <script> element early."""
    return text.replace("</", "<\\/")


def page(data: dict, title: str = "√d_k lab") -> str:
    """One lab view (LabView.data) as a complete HTML page with lab.js (and the charts' pieces it draws with, first)
    and lab.css inlined: works offline."""
    payload = _script(json.dumps(data, allow_nan=False))
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><style>body{{margin:12px;font-family:sans-serif}}\n{asset('lab.css')}</style>"
        f"</head>\n<body>\n<div class=\"{MOUNT_CLASS}\"></div>\n"
        f"<script>{_script(script(explorer_asset(CHARTS) + asset('lab.js')))}</script>\n"
        f"<script>AttentionLab.mountAt('.{MOUNT_CLASS}', {payload});</script>\n"
        "</body></html>\n"
    )
