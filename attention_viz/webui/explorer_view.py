"""The explorer as a Gradio 6 component: a gr.HTML whose JavaScript draws every view from one packed run.

    view = explorer_view()                                   # inside gr.Blocks
    run_button.click(lambda text: explorer_value(payload_for(text)), inputs=text, outputs=view)

How Gradio 6's gr.HTML is used (read from gradio 6.31's HTML component):
- `value` is the run as a JSON string (explorer_value); `html_template` never mentions `${value}`, so a new
  value leaves the rendered template unchanged and Gradio does not morph the DOM the script built.
- `js_on_load` runs once per component with `element` (the component's root), `props` (props.value is the
  current value), `trigger` and `watch`: it loads explorer.js (which defines window.AttentionExplorer
  once per page), mounts the explorer into the template's container, and `watch("value", ...)` hands
  every later value to `setPayload`, after Gradio has stored it. Kind, layer, head and colour scale
  then change in the browser only: no event, no request.
- `css_template` is scoped by Gradio to this component (`#html-<random> { ... }`, CSS nesting), and
  every rule of explorer.css is under `.av-explorer` as well.
- A value of "" (or None) shows "No run to show yet."; `stale_js(elem_id)` is the `js=` of an event that
  marks the views as not for the current input until the next value arrives.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping

import gradio as gr

from attention_viz.explorer.html import DEFAULT_ROOT_ID, asset, head_view_id
from attention_viz.explorer.pack import to_json

MOUNT_CLASS = "av-mount"
_sent = itertools.count()


def explorer_value(payload: Mapping | None) -> str:
    """What an event returns to the explorer view: the packed run (explorer.pack) as JSON, "" for none.

    Each value carries a new "sent" number, so even the same run sent again reaches the browser's
    `watch` (Gradio skips values equal to the last) and clears a stale mark.
    """
    return "" if payload is None else to_json({**payload, "sent": next(_sent)})


def _js_on_load(root_id: str, head_view: str) -> str:
    options = json.dumps({"rootId": root_id, "headViewId": head_view})
    return (
        asset("explorer.js")
        + f"""
;(function () {{
  const mountPoint = element.querySelector(".{MOUNT_CLASS}");
  const explorer = window.AttentionExplorer.mount(mountPoint, props.value || null, {options});
  element.avExplorer = explorer;
  watch("value", () => explorer.setPayload(props.value || null));
}})();
"""
    )


def explorer_view(payload: Mapping | None = None, root_id: str = DEFAULT_ROOT_ID, elem_id: str | None = None,
                  **kwargs) -> gr.HTML:
    """A gr.HTML showing the explorer: `#<root_id>` holds the controls and grid, `#head_view` the chosen head.

    Args:
        payload: the first run to show (pack.pack's result), or None for an empty view.
        root_id: the explorer's id (the app's contract uses "explorer"; the head view is head_view_id(root_id)).
        elem_id: the component's own id (default "<root_id>_view"), e.g. to mark it stale from an event's js.
        kwargs: passed on to gr.HTML (visible, min_height, ...).
    """
    return gr.HTML(
        value=explorer_value(payload),
        html_template=f'<div class="{MOUNT_CLASS}"></div>',
        css_template=asset("explorer.css"),
        js_on_load=_js_on_load(root_id, head_view_id(root_id)),
        apply_default_css=False,
        elem_id=elem_id or f"{root_id}_view",
        padding=False,
        container=False,
        **kwargs,
    )


def stale_js(elem_id: str, message: str = "Not for the current input: the last change was refused.") -> str:
    """The `js=` of an event that marks a view stale at once, in the browser (the next value clears it)."""
    return (f"(...args) => {{ const view = document.querySelector({json.dumps('#' + elem_id + ' .av-explorer')});"
            f" if (view && view.avExplorer) view.avExplorer.markStale({json.dumps(message)}); return args; }}")
