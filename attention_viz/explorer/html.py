"""The explorer as one self-contained piece of HTML: the payload, its scripts (SHARED and EXPLORER, in load order, as
one inline script) and explorer.css inlined.

No script or style is fetched from anywhere, so the result works offline, from file://, in a
notebook's iframe and in a page that already has another explorer on it: each fragment mounts
only its own root (found by id), each script defines its part of `window.AttentionExplorer` (or its own object) once
and later copies leave it as it is, and every CSS rule is scoped under `.av-explorer`. The app's page loads the same
files once each, in its head (webui/scripts.py).

Markup (built by explorer.js inside the fragment's container):
    <div class="av-explorer" data-av-root="explorer" ...>   the container, no id of its own
      <div id="explorer">   controls, grid tiles [data-kind][data-layer][data-head], legend, statistics
      <div id="head_view">  the chosen head, with the same three data attributes

steps_html does the same for one head's steps or comparison (explorer.steps) with steps.js and steps.css:
every rule of steps.css is scoped under `.av-hv`, and the script defines `window.AttentionSteps` once.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

from attention_viz.explorer.pack import to_json
from attention_viz.explorer.steps import COMPARE_FORMAT, STEPS_FORMAT

_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")
DEFAULT_ROOT_ID = "explorer"  # the app's contract: #explorer holds the grid, #head_view the chosen head
DEFAULT_HEAD_VIEW_ID = "head_view"


@lru_cache(maxsize=None)
def asset(name: str) -> str:
    """The text of a packaged static file: "explorer.js", "headmap.js", "palette.js", "explorer.css", "steps.js",
    "steps.css", "heads.js" or "heads.css"."""
    return resources.files("attention_viz.explorer").joinpath("static", name).read_text(encoding="utf-8")


# What every view's script needs first: the colours (palette.js), then escaping, labels and the step bar (shared.js).
SHARED = ("palette.js", "shared.js")
CHARTS = "charts.js"  # the SVG charts' pieces: before the views that draw charts (lab.js, heads.js), not the explorer
# The explorer, in load order: headmap.js (large heads), then its parts (each adds one object to AttentionExplorer),
# then explorer.js, which mounts them.
# A real model's reading of a page (long_pack.py's payload), after SHARED: its parts (each adds one object to
# AttentionLong), then long.js, which mounts them.
LONG = ("long-run.js", "long-grids.js", "long-overview.js", "long-region.js", "long.js")
EXPLORER = ("headmap.js", "explorer-run.js", "explorer-grid.js", "explorer-head.js", "explorer-kept.js",
            "explorer-scores.js", "explorer-decode.js", "explorer-headsoff.js", "explorer-tips.js", "explorer.js")


def script(name: str) -> str:
    """A view's script with what it needs first (SHARED), then `name` ("steps.js", or another package's script text
    given as is when it does not end in .js)."""
    return "".join(asset(shared) for shared in SHARED) + (asset(name) if name.endswith(".js") else name)


def explorer_script() -> str:
    """The explorer's scripts (EXPLORER) with what they draw with (SHARED) first."""
    return script("".join(asset(name) for name in EXPLORER))


def head_view_id(root_id: str) -> str:
    """The head view's id for a root: "head_view" for the app's "explorer", else "<root_id>-head"."""
    return DEFAULT_HEAD_VIEW_ID if root_id == DEFAULT_ROOT_ID else f"{root_id}-head"


def _check_id(name: str, value: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ValueError(f"{name} must be a letter then letters, digits, '-' or '_' (at most 64), got {value!r}")
    return value


def _script(text: str) -> str:
    """Inline script text that cannot end its own <script> element early."""
    return text.replace("</", "<\\/")


def _document(fragment: str, title: str) -> str:
    """A complete page around a fragment."""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title><style>body{{margin:0}}</style></head>\n<body>\n{fragment}</body></html>\n"
    )


def explorer_html(payload: Mapping, root_id: str = DEFAULT_ROOT_ID, head_view: str | None = None,
                  document: bool = False, title: str = "attention explorer") -> str:
    """The explorer for one packed run (pack.pack) as an HTML fragment, or a whole page with document=True.

    Args:
        payload: what pack.pack returned.
        root_id: the id of the explorer's root element; give each explorer on one page its own.
        head_view: the id of the head view (default head_view_id(root_id)).
        document: return a complete <!doctype html> page (for a file, a notebook iframe or a test).
    """
    root_id = _check_id("root_id", root_id)
    head_view = _check_id("head_view", head_view or head_view_id(root_id))
    data_id = f"{root_id}-data"
    fragment = (
        f"<style>{asset('explorer.css')}</style>\n"
        f"<div class=\"av-explorer\" data-av-root=\"{root_id}\" data-av-payload=\"{data_id}\" "
        f"data-av-head-view=\"{head_view}\"></div>\n"
        f"<script type=\"application/json\" id=\"{data_id}\">{to_json(payload)}</script>\n"
        f"<script>{_script(explorer_script())}</script>\n"
        "<script>AttentionExplorer.mountAll(document);</script>\n"
    )
    if not document:
        return fragment
    return _document(fragment, title)


def long_html(payload: Mapping, root_id: str = "long", document: bool = False, title: str = "attention at length"
              ) -> str:
    """A long run's view (long_pack: pack_long with pack_offline's overviews) as an HTML fragment, with long.js and
    long.css inlined, or a whole page with document=True; no server: its zoom is drawn from the embedded blocks."""
    root_id = _check_id("root_id", root_id)
    data_id = f"{root_id}-data"
    fragment = (
        f"<style>{asset('long.css')}</style>\n"
        f"<div id=\"{root_id}\" data-av-long=\"{data_id}\"></div>\n"
        f"<script type=\"application/json\" id=\"{data_id}\">{to_json(payload)}</script>\n"
        f"<script>{_script(script(''.join(asset(name) for name in LONG)))}</script>\n"
        "<script>AttentionLong.mountAll(document);</script>\n"
    )
    if not document:
        return fragment
    return _document(fragment, title)


def steps_html(payload: Mapping, root_id: str = "steps", document: bool = False, title: str = "attention steps") -> str:
    """One head's steps or comparison (explorer.steps: pack_steps or pack_compare) as an HTML fragment, with
    steps.js and steps.css inlined, or a whole page with document=True. The view is mounted in
    `<div id="<root_id>">`: its stepper (steps) or difference table (compare) is built inside."""
    root_id = _check_id("root_id", root_id)
    formats = {STEPS_FORMAT: "steps", COMPARE_FORMAT: "compare"}
    if payload.get("format") not in formats:
        raise ValueError(f"not a steps or compare payload: format {payload.get('format')!r}")
    data_id = f"{root_id}-data"
    fragment = (
        f"<style>{asset('steps.css')}</style>\n"
        f"<div id=\"{root_id}\"></div>\n"
        f"<script type=\"application/json\" id=\"{data_id}\">{to_json(payload)}</script>\n"
        f"<script>{_script(script('steps.js'))}</script>\n"
        f"<script>AttentionSteps.mountFrom(\"{root_id}\", \"{data_id}\", \"{formats[payload['format']]}\");</script>\n"
    )
    if not document:
        return fragment
    return _document(fragment, title)
