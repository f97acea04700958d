"""The browser-side views: a run packed into compact numbers (pack), drawn by static/explorer.js; one head's
steps and comparisons as numbers (steps), drawn by static/steps.js.

pack.pack(maps, source_tokens, target_tokens, masks, output, notes) -> payload (JSON-able dict)
html.explorer_html(payload, root_id="explorer")                     -> offline HTML, JS and CSS inlined
html.steps_html(payload)                                             -> a steps or compare payload, offline HTML
steps.pack_steps(...), steps.pack_compare(...)                       -> one head's steps / comparison payload
notebook.show(model, "text") / show(maps, tokens, ...)               -> the explorer inline in Jupyter
"""

from attention_viz.explorer.html import asset, explorer_html, head_view_id, steps_html
from attention_viz.explorer.notebook import View, run_model, show
from attention_viz.explorer.pack import (FORMAT, QUANT, default_masks, pack, payload_bytes, to_json, unpack,
                                        unpack_biases)
from attention_viz.explorer.steps import (
    COMPARE_FORMAT,
    STEPS_FORMAT,
    compare_arrays,
    pack_compare,
    pack_steps,
    steps_arrays,
)

__all__ = ["COMPARE_FORMAT", "FORMAT", "QUANT", "STEPS_FORMAT", "View", "asset", "compare_arrays", "default_masks",
           "explorer_html", "head_view_id", "pack", "pack_compare", "pack_steps", "payload_bytes", "run_model",
           "show", "steps_arrays", "steps_html", "to_json", "unpack", "unpack_biases"]
