/* long-overview.js: the chosen head's whole map on a canvas (each cell a block's max or mean), its colour scale and bar,
 * and the drag (or click, or arrow keys and Enter) that opens a region of it.
 *
 *   AttentionLong.overview.choose(view, key, head)   .draw(view, o)   .wire(view)   .legend(top, caption, ...)
 *   AttentionLong.overview.colourScale(view, values, top)
 */
(function (global) {
  "use strict";
  const L = global.AttentionLong = global.AttentionLong || {};
  if (L.overview) return;
  const P = global.AttentionPalette, esc = global.AttentionShared.escapeHtml; // palette.js, shared.js: loaded first
  const REGION_MAX = 256, CLICK_SIDE = 48;
  function legend(top, caption, format = L.run.fmt, bottom = 0, log = false) {
    /* a colour bar: its ends (bottom → top; log: each third of the bar ×10) and what it is */
    const stops = Array.from({length: 11}, (_, i) => P.css(P.viridis(i / 10))).join(", ");
    return `<span class="av-long-bar" style="background: linear-gradient(to right, ${stops})"></span>
      <span class="av-long-ends">${log ? `≤ ${esc(format(bottom))}` : "0"} → ${esc(format(top))}${log ? " (log: ×10 a third)" : ""}</span>
      <span class="av-long-caption">${esc(caption)}</span>`;
  }

  async function choose(view, key, head) {
    view.state.key = key; view.state.head = head;
    L.grids.markChosen(view);
    const answer = await L.run.ask(view, {what: "overview"});
    if (!answer) return;
    drawOverview(view, answer);
    const region = view.state.region;  // the open region follows, for this head
    if (region) L.region.open(view, region.rows, region.cols);
  }

  function colourScale(view, values, top) {
    /* the colour scale chosen: {level(v) -> 0..1, top, bottom, log, said}. "log" (the default): 3 decades under the
       map's top, so a sharp head's lines stand out and a spread head's rest still shows; "top": linear 0 → the
       map's top; "p99": linear 0 → its cells' 99th percentile, brighter cells drawn at the top colour */
    const chosen = view.$(".av-long-colour").value, linear = (t) => (v) => (t > 0 ? Math.min(v / t, 1) : 0);
    if (chosen === "log" && top > 0) {
      const bottom = top / 1000;
      return {level: (v) => (v <= bottom ? 0 : Math.min(Math.log10(v / bottom) / 3, 1)), top: top, bottom: bottom,
        log: true, said: "colour: log scale, 3 decades under this map's top; weaker cells drawn at the bottom colour"};
    }
    if (chosen === "p99") {
      const sorted = Float32Array.from(values).sort(), at = sorted[Math.floor(0.99 * (sorted.length - 1))];
      if (at > 0) return {level: linear(at), top: at, bottom: 0, log: false,
        said: "colour: linear, 0 → the 99th percentile of its cells; brighter cells drawn at the top colour"};
      return {level: linear(top), top: top, bottom: 0, log: false,
        said: "colour: linear, 0 → this map's top (its 99th percentile is 0)"};
    }
    return {level: linear(top), top: top, bottom: 0, log: false, said: "colour: linear, 0 → this map's top"};
  }

  function drawOverview(view, o) {
    view.state.overview = o;
    const canvas = view.$(".av-long-overview"), n = o.side, values = L.run.cells(o), scale = colourScale(view, values, o.top);
    canvas.width = n; canvas.height = n;
    P.paint(canvas.getContext("2d"), n, n, (r, c) => P.viridis(scale.level(values[r * n + c])));
    const what = o.block === 1 ? "each cell one weight" : `each cell the ${o.reduce} of a ${o.block} x ${o.block} block of weights`;
    const sink = o.sink ? "" : "; the first token left out of every row, the rest renormalised";
    const T = view.state.payload.length, axes = view.state.payload.seconds
      ? `queries down, keys across, each ${L.run.span(view, 0, T)}` : "queries down, keys across";
    view.$(".av-long-overbox").nextElementSibling.innerHTML = legend(scale.top,
      `${axes}; ${what}${sink}; ${scale.said}`, L.run.fmt, scale.bottom, scale.log);
  }

  // -- the overview's drag: a rectangle of positions, at most REGION_MAX a side
  function position(view, event) {
    const canvas = view.$(".av-long-overview"), box = canvas.getBoundingClientRect(), T = view.state.payload.length;
    const x = Math.min(Math.max((event.clientX - box.left) / box.width, 0), 0.999999);
    const y = Math.min(Math.max((event.clientY - box.top) / box.height, 0), 0.999999);
    return {col: Math.floor(x * T), row: Math.floor(y * T), box: box};
  }
  function span(a, b) {
    let lo = Math.min(a, b), hi = Math.max(a, b) + 1;
    if (hi - lo > REGION_MAX) { if (b < a) lo = hi - REGION_MAX; else hi = lo + REGION_MAX; }
    return [lo, hi];
  }
  function around(view, i) {
    const T = view.state.payload.length, side = Math.min(CLICK_SIDE, T);
    const lo = Math.min(Math.max(0, i - side / 2), T - side);
    return [Math.floor(lo), Math.floor(lo) + side];
  }
  function wireDrag(view) {
    const canvas = view.$(".av-long-overview"), drag = view.$(".av-long-drag");
    let start = null;
    function rect(a, b) {
      const rows = span(a.row, b.row), cols = span(a.col, b.col);
      return {rows: rows, cols: cols};
    }
    function show(r) {
      const T = view.state.payload.length, box = canvas.getBoundingClientRect(), outer = canvas.parentElement.getBoundingClientRect();
      Object.assign(drag.style, {left: `${box.left - outer.left + (r.cols[0] / T) * box.width}px`,
        top: `${box.top - outer.top + (r.rows[0] / T) * box.height}px`,
        width: `${Math.max(2, ((r.cols[1] - r.cols[0]) / T) * box.width)}px`,
        height: `${Math.max(2, ((r.rows[1] - r.rows[0]) / T) * box.height)}px`});
      drag.hidden = false;
    }
    canvas.addEventListener("pointerdown", (e) => {
      if (!view.state.overview) return;
      start = position(view, e);
      canvas.setPointerCapture(e.pointerId);
      show(rect(start, start));
    });
    canvas.addEventListener("pointermove", (e) => {
      if (start) { show(rect(start, position(view, e))); return; }
      if (!view.state.overview) return;
      const at = position(view, e), o = view.state.overview, b = o.block;
      const v = L.run.cells(o)[Math.floor(at.row / b) * o.side + Math.floor(at.col / b)];
      view.$(".av-long-overtip").textContent = b === 1
        ? `query ${L.run.said(view, at.row)} → key ${L.run.said(view, at.col)}: ${L.run.fmt(v)}`
        : `queries ${L.run.span(view, Math.floor(at.row / b) * b, Math.min(view.state.payload.length, (Math.floor(at.row / b) + 1) * b))}` +
          ` → keys ${L.run.span(view, Math.floor(at.col / b) * b, Math.min(view.state.payload.length, (Math.floor(at.col / b) + 1) * b))}:` +
          ` block ${o.reduce} ${L.run.fmt(v)} (drag to open exact weights)`;
    });
    canvas.tabIndex = 0;
    let cursor = null;  // by keyboard: a square moved by the arrow keys, opened with Enter
    canvas.addEventListener("keydown", (e) => {
      if (!view.state.overview) return;
      const T = view.state.payload.length, side = Math.min(CLICK_SIDE, T), by = Math.max(1, Math.round(T / 32));
      const step = {ArrowLeft: [0, -by], ArrowRight: [0, by], ArrowUp: [-by, 0], ArrowDown: [by, 0]}[e.key];
      if (!step && e.key !== "Enter") return;
      e.preventDefault();
      cursor = cursor || {row: 0, col: 0};
      if (step) {
        cursor = {row: Math.min(Math.max(cursor.row + step[0], 0), T - side), col: Math.min(Math.max(cursor.col + step[1], 0), T - side)};
        show({rows: [cursor.row, cursor.row + side], cols: [cursor.col, cursor.col + side]});
      } else {
        L.region.open(view, [cursor.row, cursor.row + side], [cursor.col, cursor.col + side]);
      }
    });
    canvas.addEventListener("pointerup", (e) => {
      if (!start) return;
      const end = position(view, e), moved = Math.abs(end.row - start.row) + Math.abs(end.col - start.col) > 0;
      const r = moved ? rect(start, end) : {rows: around(view, start.row), cols: around(view, start.col)};
      start = null;
      show(r);
      L.region.open(view, r.rows, r.cols);
    });
  }

  L.overview = {choose: choose, draw: drawOverview, wire: wireDrag, legend: legend, colourScale: colourScale};
})(window);
