"""The browser-side views: a run packed into compact numbers (pack), drawn by static/explorer.js.

pack.pack(maps, source_tokens, target_tokens, masks, output, notes) -> payload (JSON-able dict)
html.explorer_html(payload, root_id="explorer")                     -> offline HTML, JS and CSS inlined
notebook.show(model, "text") / show(maps, tokens, ...)               -> the explorer inline in Jupyter
"""

from attention_viz.explorer.html import asset, explorer_html, head_view_id
from attention_viz.explorer.notebook import View, run_model, show
from attention_viz.explorer.pack import FORMAT, QUANT, default_masks, pack, payload_bytes, to_json, unpack

__all__ = ["FORMAT", "QUANT", "View", "asset", "default_masks", "explorer_html", "head_view_id", "pack",
           "payload_bytes", "run_model", "show", "to_json", "unpack"]
