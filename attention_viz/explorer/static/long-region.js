/* long-region.js: a dragged rectangle of the overview opened as a region: its weights (exact from the server, the
 * overview's blocks offline) on a canvas, labelled by pieces or words, the weight under the pointer.
 *
 *   AttentionLong.region.open(view, rows, cols)   .draw(view, g)   .wire(view)
 */
(function (global) {
  "use strict";
  const L = global.AttentionLong = global.AttentionLong || {};
  if (L.region) return;
  const P = global.AttentionPalette; // palette.js, loaded first
  async function openRegion(view, rows, cols) {
    const answer = await L.run.ask(view, {what: "region", rows: rows, cols: cols});
    if (answer) drawRegion(view, answer);
  }

  function drawRegion(view, g) {
    view.state.region = g;
    const [r0, r1] = g.rows, [c0, c1] = g.cols, R = r1 - r0, C = c1 - c0, values = L.run.cells(g);
    const section = view.$(".av-long-region");
    section.hidden = false;
    const scale = L.overview.colourScale(view, values, values.reduce((a, b) => Math.max(a, b), 0));
    const box = view.$(".av-long-regionbox"), width = Math.max(200, Math.min(640, box.clientWidth || 640));
    const labels = Math.max(R, C) <= 64, gutter = labels ? 84 : 0;
    // labelled cells at least 12 px (their labels readable; a narrow screen scrolls the region sideways)
    const cell = Math.max(labels ? 12 : 1, Math.floor((width - gutter) / Math.max(R, C)));
    const canvas = view.$(".av-long-regioncanvas"), ratio = global.devicePixelRatio || 1;
    const w = gutter + cell * C, h = gutter + cell * R;
    canvas.width = Math.round(w * ratio); canvas.height = Math.round(h * ratio);
    canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
    const ctx = canvas.getContext("2d");
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    const one = Object.assign(global.document.createElement("canvas"), {width: C, height: R}); // a pixel a cell
    P.paint(one.getContext("2d"), R, C, (r, c) => P.viridis(scale.level(values[r * C + c])));
    ctx.imageSmoothingEnabled = false; ctx.drawImage(one, gutter, gutter, cell * C, cell * R); // each a square
    if (labels) {
      const size = Math.min(12, Math.max(10, cell - 2));
      ctx.font = `${size}px sans-serif`; ctx.fillStyle = "#111"; ctx.textBaseline = "middle";
      const cut = (s) => (s.length > 11 ? s.slice(0, 10) + "…" : s);
      if (cell >= 8) {
        ctx.textAlign = "right";
        for (let r = 0; r < R; r++) ctx.fillText(cut(L.run.label(view, r0 + r, r0)), gutter - 3, gutter + r * cell + cell / 2);
        ctx.save(); ctx.textAlign = "left";
        for (let c = 0; c < C; c++) {
          ctx.save(); ctx.translate(gutter + c * cell + cell / 2, gutter - 3); ctx.rotate(-Math.PI / 2);
          ctx.fillText(cut(L.run.label(view, c0 + c, c0)), 0, 0); ctx.restore();
        }
        ctx.restore();
      }
    }
    view.state.cell = {size: cell, gutter: gutter};
    const exact = !g.block || g.block === 1;
    const positions = view.state.payload.seconds ? ` (positions ${r0}-${r1 - 1} x ${c0}-${c1 - 1})` : "";
    view.$(".av-long-regiontitle").textContent = `Queries ${L.run.span(view, r0, r1)} (down) x keys ${L.run.span(view, c0, c1)} (across)${positions} of ${view.state.key}, head ${view.state.head}` +
      (g.sink === false ? "; the first token left out of every row, the rest renormalised" : "");
    view.$(".av-long-regionnote").textContent = g.block
      ? (g.block === 1 ? "Offline: each cell one weight, kept to 1/65,535 of this map's top; the app, or run.region, gives them exactly."
        : `Offline: blocks of ${g.block} x ${g.block} tokens (each the block's max), not exact weights; the app, or run.region, gives them exactly.`)
      : "Exact weights, recomputed for this region.";
    view.$(".av-long-regionlegend").innerHTML = L.overview.legend(scale.top,
      (exact ? scale.said : `${scale.said} (blocks)`).replace("map", "region"), L.run.fmt, scale.bottom, scale.log);
    view.$(".av-long-regiontip").textContent = "Point at a cell for its weight.";
  }

  function wireRegion(view) {
    const canvas = view.$(".av-long-regioncanvas");
    canvas.addEventListener("pointermove", (e) => {
      const g = view.state.region;
      if (!g) return;
      const box = canvas.getBoundingClientRect(), x = e.clientX - box.left - view.state.cell.gutter, y = e.clientY - box.top - view.state.cell.gutter;
      const c = Math.floor(x / view.state.cell.size), r = Math.floor(y / view.state.cell.size);
      const R = g.rows[1] - g.rows[0], C = g.cols[1] - g.cols[0];
      if (r < 0 || c < 0 || r >= R || c >= C) return;
      const v = L.run.cells(g)[r * C + c];
      view.$(".av-long-regiontip").textContent = `query ${L.run.said(view, g.rows[0] + r)} → key ${L.run.said(view, g.cols[0] + c)}: ` +
        `${g.block && g.block > 1 ? "block max " : "weight "}${L.run.fmt(v)}`;
    });
  }

  L.region = {open: openRegion, draw: drawRegion, wire: wireRegion};
})(window);
