"""One head's attention as an HTML table: a heatmap whose cells hold the weights as text.

The browser draws it, so nothing is rasterised or encoded on the server (timings: see
docs/benchmarks.md); the values stay selectable text, every cell
has its exact weight as a tooltip, and the page stays sharp at any zoom. Colours are the same
viridis table as the images (raster.colormap_lut); masked cells are grey and empty.

Tokens are user text: every one is HTML-escaped, and so are the braces and dollar signs a
template engine could read.
"""

from __future__ import annotations

import html
from functools import lru_cache

import numpy as np

from attention_viz.draw.raster import (
    ANNOTATE_MAX,
    MASKED_RGB,
    WEIGHT_CMAP,
    as_matrix,
    colormap_lut,
    colour_index,
    display_token,
    is_light,
    to_numpy,
)

MAX_TABLE_TOKENS = 64  # a table of 64 × 64 cells is ~300 KB of HTML; longer inputs are drawn as images
BAR_STOPS = 11  # colour stops of the colour bar's gradient
ROW_HEIGHT = {True: 22, False: 14}  # pixels per query row, with and without values (STYLE's td height)

STYLE = """<style>
.av-head{font-family:system-ui,sans-serif;font-size:12px;color:#000;background:#fff;padding:6px;display:inline-block}
.av-title{text-align:center;font-weight:600;margin-bottom:4px;white-space:pre-line}
.av-row{display:flex;align-items:stretch;gap:6px}
.av-axis{writing-mode:vertical-rl;transform:rotate(180deg);text-align:center}
.av-map{border-collapse:collapse;table-layout:fixed}
.av-map td{padding:0;text-align:center;font:11px ui-monospace,monospace;width:38px;min-width:38px;height:22px}
.av-map.av-small td{width:14px;min-width:14px;height:14px;font-size:0}
.av-map th{font-weight:400;padding:0 3px;white-space:pre;line-height:1}
.av-map.av-small th{font-size:10px}
.av-map thead th{vertical-align:bottom}
.av-map th.av-v{writing-mode:vertical-rl;transform:rotate(180deg);padding:3px 0}
.av-map td.av-m{background:%(masked)s}
.av-keys{text-align:center;margin-bottom:2px}
.av-map td.av-barcell{width:auto;padding-left:8px;background:#fff;vertical-align:top}
.av-bar{display:flex;gap:3px;font-size:11px;line-height:1}
.av-bar div:first-child{width:12px;box-sizing:border-box;border:1px solid #000}
.av-bar div:last-child{display:flex;flex-direction:column;justify-content:space-between;margin:-5px 0}
</style>""" % {"masked": "#%02x%02x%02x" % MASKED_RGB}


@lru_cache(maxsize=4)
def _palette(cmap: str) -> tuple[list[str], np.ndarray]:
    """The colormap as 256 CSS colours, and whether each is light (dark text on it) or dark."""
    lut = colormap_lut(cmap)  # (256, 3)
    colours = ["#%02x%02x%02x" % tuple(int(c) for c in rgb) for rgb in lut]
    light = is_light(lut)  # (256,)
    return colours, light


def _text(token: str) -> str:
    """A token as safe HTML text: escaped, with { } $ as character references."""
    escaped = html.escape(display_token(token), quote=True)
    return escaped.replace("{", "&#123;").replace("}", "&#125;").replace("$", "&#36;")


def head_table(
    weights: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    mask: np.ndarray | None = None,
    per_head_max: bool = False,
    annotate: bool | None = None,
) -> str:
    """One head's weights [Q, K] as an HTML heatmap: tokens on both axes, a colour bar and, when small, values.

    Args:
        weights: [Q, K] attention weights in [0, 1] (leading axes of size 1 are dropped).
        title: written above the map; newlines start new lines.
        mask: optional bool [Q, K], True = may attend; blocked cells are grey and empty.
        per_head_max: colours run 0 → this head's max instead of 0 → 1.
        annotate: write each weight in its cell; None does so up to ANNOTATE_MAX × ANNOTATE_MAX.
    """
    w = as_matrix(weights, "weights")  # (Q, K)
    n_q, n_k = w.shape
    if len(query_tokens) != n_q or len(key_tokens) != n_k:
        raise ValueError(f"a {n_q} × {n_k} map needs {n_q} query and {n_k} key tokens, "
                         f"got {len(query_tokens)} and {len(key_tokens)}")
    if max(n_q, n_k) > MAX_TABLE_TOKENS:
        raise ValueError(f"a table shows at most {MAX_TABLE_TOKENS} tokens each way, got {n_q} × {n_k}")
    if mask is not None:
        w = np.where(np.broadcast_to(to_numpy(mask).astype(bool), w.shape), w, np.nan)
    annotate = max(n_q, n_k) <= ANNOTATE_MAX if annotate is None else annotate
    peak = float(np.nanmax(w)) if np.isfinite(w).any() else 0.0
    vmax = peak if per_head_max and peak > 0 else 1.0
    colours, light = _palette(WEIGHT_CMAP)
    index = colour_index(w.astype(np.float32), vmax)  # (Q, K)

    keys = [_text(token) for token in key_tokens]
    vertical = max(len(display_token(token)) for token in key_tokens) > 2
    key_class = ' class="av-v"' if vertical else ""
    rows = ["<thead><tr><th></th>" + "".join(f"<th{key_class}>{k}</th>" for k in keys) + "</tr></thead><tbody>"]
    for i in range(n_q):
        cells = []
        for j in range(n_k):
            value = w[i, j]
            if np.isnan(value):
                cells.append(f'<td class="av-m" title="query {i} → key {j}: masked"></td>')
                continue
            c = index[i, j]
            text = f"{value:.2f}" if annotate else ""
            cells.append(f'<td style="background:{colours[c]};color:{"#000" if light[c] else "#fff"}" '
                         f'title="query {i} → key {j}: {value:.4f}">{text}</td>')
        if i == 0:  # the colour bar: one cell beside every row, as tall as the map
            cells.append(_colour_bar(colours, vmax, n_q, ROW_HEIGHT[annotate]))
        rows.append(f"<tr><th>{_text(query_tokens[i])}</th>{''.join(cells)}</tr>")
    rows.append("</tbody>")
    size = "" if annotate else " av-small"
    return (
        f'{STYLE}<div class="av-head"><div class="av-title">{html.escape(title)}</div>'
        f'<div class="av-keys">key (position) →</div>'
        f'<div class="av-row"><div class="av-axis">query (position)</div>'
        f'<table class="av-map{size}">{"".join(rows)}</table></div></div>'
    )


def _colour_bar(colours: list[str], vmax: float, n_rows: int, row_height: int) -> str:
    """A table cell spanning every row: the colormap from 0 (bottom) to vmax (top), with five ticks."""
    stops = ", ".join(colours[round(s * 255 / (BAR_STOPS - 1))] for s in range(BAR_STOPS))
    ticks = "".join(f"<span>{vmax * f:.2g}</span>" for f in (1.0, 0.75, 0.5, 0.25, 0.0))
    return (f'<td rowspan="{n_rows}" class="av-barcell"><div class="av-bar" style="height:{n_rows * row_height}px">'
            f'<div style="background:linear-gradient(to top, {stops})"></div><div>{ticks}</div></div></td>')
