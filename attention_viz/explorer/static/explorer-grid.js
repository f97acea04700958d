/* explorer-grid.js: the grid of every layer x head of the chosen kind (a canvas per head, a pixel per weight), its
 * tiles' badges (the strongest pattern, the importance), the selected tile, and the colour bar's legend.
 *
 *   AttentionExplorer.grid.draw(x, rebuild)   AttentionExplorer.grid.markSelected(x)   AttentionExplorer.grid.legend(x)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.grid) return;
  const {escapeHtml} = global.AttentionShared;

  const MASKED = [200, 200, 200];
  const FUTURE = [242, 242, 242]; // a cell its step has not computed yet
  const SHORT = {alignment: "align", previous: "prev", first: "first", duplicate: "dup", eos: "eos"}; // tile badges
  const CLEAR = 0.5; // a head "does" a pattern when more than half its weight goes there

  function tilesHtml(x, k) {
    /* the rows of tiles of kind k: in "switch heads off" mode a layer's label is a button that switches its row */
    const run = E.run, data = x.data;
    let html = "";
    for (let l = 0; l < k.layers; l++) {
      const rowLabel = x.cutting ? `<button type="button" class="av-row-label av-row-cut" data-row="${l}" ` +
        `aria-label="layer ${l}: switch all its heads ${run.layerOff(x, k, l) ? "on" : "off"}">L${l}</button>`
        : `<span class="av-row-label">L${l}</span>`;
      html += `<div class="av-layer-row">${rowLabel}<div class="av-tiles">`;
      for (let h = 0; h < data.H; h++) {
        const off = run.isOff(x, k, l, h);
        html += `<div class="av-tile${off ? " av-off" : ""}" role="button" tabindex="0" data-kind="${k.kind}" ` +
          `data-layer="${l}" data-head="${h}" title="layer ${l}, head ${h}${off ? ", switched off" : ""}">` +
          `<span class="av-canvas"><canvas width="${k.K}" height="${k.Q}" style="aspect-ratio:${k.K}/${k.Q}">` +
          `</canvas><i class="av-step-mark" hidden></i>${off ? '<i class="av-off-mark">off</i>' : ""}</span>` +
          `<span class="av-tile-name">H${h}${badge(k, l, h)}${impBadge(x, k, l, h)}</span></div>`;
      }
      html += "</div></div>";
    }
    return html;
  }

  function paint(x, k, t, tile) {
    /* one tile's canvas: a pixel per weight, masked cells grey, cells not computed yet at step t lighter */
    const run = E.run, l = +tile.dataset.layer, h = +tile.dataset.head;
    const offset = h * k.Q * k.K, w = run.weightsOf(x, k, l), maxima = run.rowMaxima(w, offset, k.Q, k.K);
    const tone = run.toneOf(x, k);
    global.AttentionPalette.paint(tile.querySelector("canvas").getContext("2d"), k.Q, k.K, (q, j) =>
      (run.future(k, t, q, j) ? FUTURE : k.allowed[q][j] ? tone(w[offset + q * k.K + j], maxima[q]) : MASKED));
  }

  function draw(x, rebuild) {
    /* one canvas per (layer, head): a pixel per weight, scaled up by CSS; the tiles are built for a new kind
       (rebuild), and repainted where they are for a new colour scale or decode step, or a kind shown before */
    const run = E.run, ui = x.ui, k = x.data.kinds[x.state.kind], t = run.stepping(x, k);
    const key = `${x.state.scale} ${t} ${run.flowing(x, k)} ${run.biasing(x, k)} ${run.stacked(x, k) && x.state.show}`;
    let tiles = ui.grid.querySelectorAll(".av-tile");
    if (!rebuild && tiles.length && x.gridPainted === key) { markSelected(x); return; } // a kept kind, as it was
    if (rebuild || !tiles.length) {
      ui.grid.innerHTML = tilesHtml(x, k);
      tiles = ui.grid.querySelectorAll(".av-tile");
    }
    const mark = t >= 0 ? `top:${100 * t / k.Q}%;height:${100 / k.Q}%` : "";
    tiles.forEach((tile) => {
      const step = tile.querySelector(".av-step-mark");
      step.hidden = t < 0; step.style.cssText = mark;
      paint(x, k, t, tile);
    });
    x.gridPainted = key;
    markSelected(x);
  }

  function badge(k, l, h) {
    /* the head's strongest pattern when it takes more than half its weight: " · align .97" */
    if (!k.scores) return "";
    let best = null;
    for (const [name, values] of Object.entries(k.scores.values)) {
      const v = values[l][h];
      if (v !== null && v > CLEAR && (!best || v > best[1])) best = [name, v];
    }
    return best ? `<b class="av-badge" title="${escapeHtml(k.scores.labels[best[0]])}: ${best[1].toFixed(2)} of its weight">` +
      `${SHORT[best[0]] || best[0]} ${best[1].toFixed(2).replace(/^0/, "")}</b>` : "";
  }

  function impBadge(x, k, l, h) {
    /* the head's importance (set by setImportance for this run's model): " · Δ.12" */
    const importance = x.importance, model = x.data.payload.settings && x.data.payload.settings.model;
    if (!importance || (importance.model && model && importance.model !== model)) return "";
    const values = importance.values[E.run.keyOf(k.kind, l)];
    if (!values || values[h] === null || values[h] === undefined) return "";
    const v = values[h];
    return `<b class="av-imp${v > importance.high ? " av-imp-high" : ""}" title="${escapeHtml(importance.label)}: ` +
      `${v.toFixed(4)}">Δ${v.toFixed(importance.digits).replace(/^(-?)0\./, "$1.")}</b>`;
  }

  function markSelected(x) {
    x.ui.grid.querySelectorAll(".av-tile").forEach((tile) => {
      const on = +tile.dataset.layer === x.state.layer && +tile.dataset.head === x.state.head;
      tile.classList.toggle("av-selected", on);
      tile.setAttribute("aria-pressed", on ? "true" : "false");
    });
  }

  function biasLegend(k) {
    /* the diverging bar of a position bias: −range, 0, +range, and what B is */
    const run = E.run, r = k.bias.range, digits = r >= 10 ? 1 : 2;
    const stops = Array.from({length: 11}, (_, i) => run.css(run.BIAS_LUT[Math.round(i * (run.BIAS_LUT.length - 1) / 10)]));
    return `<span class="av-colourbar"><span class="av-bar" style="background:linear-gradient(90deg,${stops.join(",")})">` +
      `</span><span class="av-ticks"><span>−${r.toFixed(digits)}</span><span>0</span><span>+${r.toFixed(digits)}</span>` +
      `</span></span><span class="av-scale-name">position bias B added to QKᵀ·s before the softmax: blue lowers a ` +
      `score, red raises it (±the largest |B| of ${escapeHtml(k.label)})</span>`;
  }

  function legend(x) {
    /* the colour bar under the grid, with the scale's ticks and name, and the masked cells' key */
    const run = E.run, data = x.data;
    if (data && run.biasing(x, data.kinds[x.state.kind])) {
      x.ui.legend.innerHTML = biasLegend(data.kinds[x.state.kind]) +
        `<span class="av-masked-key"><span class="av-swatch av-masked"></span>masked: may not attend (weight 0)</span>`;
      return;
    }
    const stops = Array.from({length: 11}, (_, i) => run.css(run.colour(i / 10))).join(",");
    const ticks = {linear: ["0", "0.5", "1"], log: ["≤0.001", "0.03", "1"], row: ["0", "½ row max", "row max"]}[x.state.scale];
    x.ui.legend.innerHTML = `<span class="av-colourbar"><span class="av-bar" style="background:linear-gradient(90deg,${stops})">` +
      `</span><span class="av-ticks">${ticks.map((t) => `<span>${t}</span>`).join("")}</span></span>` +
      `<span class="av-scale-name">${E.scales[x.state.scale]}${data && run.flowing(x, data.kinds[x.state.kind]) ? " · what flows, share of the row" : ""}` +
      `${data && run.stacked(x, data.kinds[x.state.kind]) ? ` · ${run.STACK_SHOWS[x.state.show]}, share of the input token` : ""}</span>` +
      `<span class="av-masked-key"><span class="av-swatch av-masked"></span>masked: may not attend (weight 0)</span>`;
  }

  E.grid = {draw: draw, markSelected: markSelected, legend: legend, CLEAR: CLEAR};
})(window);
