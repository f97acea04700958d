/* explorer.js: draws one packed run (attention_viz/explorer/pack.py) in the browser.
 *
 *   AttentionExplorer.mount(container, payload, {rootId: "explorer", headViewId: "head_view"})
 *     -> controller {select(kind, layer, head), setScale(name), setPayload(payload (object or JSON) or null),
 *                    markStale(message or null), state: {kind, layer, head, scale}}
 *
 * Builds, inside `container` only (it gets the class av-explorer):
 *   #<rootId>      the controls (kind, layer, head, colour scale), the grid of every layer x head of
 *                  the chosen kind (each tile a [data-kind][data-layer][data-head] element that selects
 *                  its head on click), the legend and the chosen head's statistics;
 *   #<headViewId>  the chosen head as a table (the same three data attributes, token labels on both
 *                  axes, values as text, exact weight on hover): a sibling of #<rootId>, so that
 *                  `#explorer [data-layer][data-head]` finds tiles only.
 * headViewId defaults to "head_view" for the root "explorer", else "<rootId>-head". Every view change is drawn here from the kept numbers: no request leaves the page.
 * Each redraw is timed between performance marks: measures "explorer-redraw" (script time) and
 * "explorer-frame" (until the next frame), detail {root, reason} (reason: tile, kind, layer, head, scale,
 * payload, api).
 * Nothing global but `window.AttentionExplorer`; two roots on one page never see each other.
 */
(function (global) {
  "use strict";
  if (global.AttentionExplorer) return; // already loaded by another fragment on this page

  // viridis, 17 stops (0, 1/16, ..., 1), as the server's images use it
  const VIRIDIS = ["440154", "48186a", "472d7b", "424086", "3b528b", "33638d", "2c728e", "26828e", "21918c",
    "1fa088", "28ae80", "3fbc73", "5ec962", "84d44b", "addc30", "d8e219", "fde725"].map(
    (hex) => [0, 2, 4].map((i) => parseInt(hex.slice(i, i + 2), 16)));
  const MASKED = [200, 200, 200];
  const LOG_FLOOR = 1e-3; // the log scale's bottom: 0.001 and below share the darkest colour
  const SCALES = {
    linear: "linear (0 → 1)",
    log: "log (0.001 → 1)",
    row: "per row (0 → row's max)",
  };
  const STATS = [["entropy", "entropy", "nats"], ["max_weight", "max weight", ""],
    ["mean_distance", "mean distance", "positions"], ["diagonal", "on diagonal", ""]];
  const BIG = 64; // more keys than this: small cells without text (values on hover only)
  const MAX_MEASURES = 2000; // performance measures kept before they are cleared (a long session stays small)

  function colour(t) {
    /* [r, g, b] of t in [0, 1] on viridis, linearly between stops */
    const x = Math.min(Math.max(t, 0), 1) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(x), VIRIDIS.length - 2), f = x - i;
    const a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return [0, 1, 2].map((c) => Math.round(a[c] + (b[c] - a[c]) * f));
  }
  const isLight = (rgb) => 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] > 140;
  const css = (rgb) => `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
  // 256 steps of the colour bar, computed once: redraws only look colours up
  const LEVELS = 256;
  const LUT = Array.from({length: LEVELS}, (_, i) => colour(i / (LEVELS - 1)));
  const LUT_CSS = LUT.map((rgb) => `background:${css(rgb)};color:${isLight(rgb) ? "#000" : "#fff"}`);
  const level = (t) => Math.round(Math.min(Math.max(t, 0), 1) * (LEVELS - 1));
  const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const shown = (token) => (token === " " ? "␣" : token); // a space label must stay visible
  // notes may use **bold** and `code` (Markdown's, as the app's notes do): escaped first, so nothing else is HTML
  const inline = (s) => escapeHtml(s).replace(/`([^`]+)`/g, "<code>$1</code>").replace(/\*\*([^*]+)\*\*/g, "<b>$1</b>");

  function decode(b64, quant) {
    /* base64 of little-endian uint16 -> Float32Array of weights */
    const bytes = atob(b64), out = new Float32Array(bytes.length / 2);
    for (let i = 0; i < out.length; i++) {
      out[i] = (bytes.charCodeAt(2 * i) | (bytes.charCodeAt(2 * i + 1) << 8)) / quant;
    }
    return out;
  }

  function prepare(payload) {
    /* decode every map once; kinds by name, each with weights[layer] = Float32Array [H * Q * K] */
    const kinds = {};
    for (const entry of payload.kinds) {
      const queries = payload.tokens[entry.queries], keys = payload.tokens[entry.keys];
      kinds[entry.kind] = Object.assign({}, entry, {
        queryTokens: queries, keyTokens: keys, Q: queries.length, K: keys.length,
        weights: entry.maps.map((b64) => decode(b64, payload.quant)),
        allowed: entry.mask.map((row) => Array.from(row, (c) => c === "1")),
      });
    }
    return {payload: payload, kinds: kinds, order: payload.kinds.map((e) => e.kind), H: payload.n_heads};
  }

  function rowMaxima(data, offset, Q, K) {
    const out = new Float32Array(Q);
    for (let q = 0; q < Q; q++) {
      let m = 0;
      for (let k = 0; k < K; k++) m = Math.max(m, data[offset + q * K + k]);
      out[q] = m;
    }
    return out;
  }
  function position(scale, w, rowMax) {
    /* where weight w sits on the colour bar (0 → 1) under a scale; `row` divides by the row's maximum */
    if (scale === "row") return rowMax > 0 ? w / rowMax : 0;
    if (scale === "log") return 1 + Math.log10(Math.max(w, LOG_FLOOR)) / -Math.log10(LOG_FLOOR);
    return w;
  }

  function shell(root, rootId, headViewId) {
    /* the static markup of one explorer; every later lookup goes through `root` (the container) */
    root.classList.add("av-explorer");
    root.innerHTML = `<div class="av-browse" id="${escapeHtml(rootId)}">
      <div class="av-stale-note" role="status" hidden></div>
      <div class="av-summary"></div>
      <div class="av-controls">
        <label>Attention <select class="av-kind"></select></label>
        <label>Layer <select class="av-layer"></select></label>
        <label>Head <select class="av-headsel"></select></label>
        <label>Colour <select class="av-scale"></select></label>
      </div>
      <div class="av-grid" aria-label="every layer and head; click a map to open it"></div>
      <div class="av-legend"></div>
      <div class="av-stats"></div></div>
      <div class="av-head-view" id="${escapeHtml(headViewId)}" tabindex="0"></div>
      <div class="av-tip" role="tooltip" hidden></div>`;
    const $ = (sel) => root.querySelector(sel);
    return {stale: $(".av-stale-note"), summary: $(".av-summary"), kind: $(".av-kind"), layer: $(".av-layer"), head: $(".av-headsel"),
      scale: $(".av-scale"), grid: $(".av-grid"), legend: $(".av-legend"), stats: $(".av-stats"),
      view: $(".av-head-view"), tip: $(".av-tip")};
  }

  const options = (items) => items.map(([v, t]) => `<option value="${escapeHtml(v)}">${escapeHtml(t)}</option>`).join("");

  function mount(root, payload, opts) {
    opts = opts || {};
    if (typeof payload === "string") payload = JSON.parse(payload);
    const rootName = opts.rootId || "explorer";
    const ui = shell(root, rootName, opts.headViewId || (rootName === "explorer" ? "head_view" : rootName + "-head"));
    let data = null;
    const state = {kind: null, layer: 0, head: 0, scale: opts.scale in SCALES ? opts.scale : "linear"};
    ui.scale.innerHTML = options(Object.entries(SCALES));

    function timed(reason, draw) {
      /* a redraw between performance marks: measures "explorer-redraw" (the script's work) and "explorer-frame"
         (until the next frame is painted), detail {root, reason}; benchmarks/explorer.py reads them */
      const start = `explorer-start:${rootName}`, end = `explorer-end:${rootName}`;
      const detail = {root: rootName, reason: reason};
      const begun = performance.mark(start).startTime;
      draw();
      performance.mark(end);
      performance.measure("explorer-redraw", {start: start, end: end, detail: detail});
      performance.clearMarks(start); performance.clearMarks(end);
      requestAnimationFrame(() => setTimeout(() => {
        performance.measure("explorer-frame", {start: begun, end: performance.now(), detail: detail});
        if (performance.getEntriesByName("explorer-frame").length > MAX_MEASURES) {
          performance.clearMeasures("explorer-redraw"); performance.clearMeasures("explorer-frame");
        }
      }, 0));
    }

    function summary() {
      const p = data.payload;
      const notes = p.notes.map((n) => `<li>${inline(n)}</li>`).join("");
      ui.summary.innerHTML = (p.title ? `<div class="av-title">${escapeHtml(p.title)}</div>` : "") +
        `<div class="av-output">output: <code>${escapeHtml(p.output)}</code></div>` +
        (notes ? `<ul class="av-notes">${notes}</ul>` : "");
    }

    function drawGrid() {
      /* one canvas per (layer, head): a pixel per weight, scaled up by CSS */
      const k = data.kinds[state.kind];
      let html = "";
      for (let l = 0; l < k.layers; l++) {
        html += `<div class="av-layer-row"><span class="av-row-label">L${l}</span><div class="av-tiles">`;
        for (let h = 0; h < data.H; h++) {
          html += `<div class="av-tile" role="button" tabindex="0" data-kind="${k.kind}" data-layer="${l}" ` +
            `data-head="${h}" title="layer ${l}, head ${h}"><canvas width="${k.K}" height="${k.Q}" ` +
            `style="aspect-ratio:${k.K}/${k.Q}"></canvas>` +
            `<span>H${h}</span></div>`;
        }
        html += "</div></div>";
      }
      ui.grid.innerHTML = html;
      ui.grid.querySelectorAll(".av-tile").forEach((tile) => {
        const l = +tile.dataset.layer, h = +tile.dataset.head;
        const canvas = tile.querySelector("canvas"), ctx = canvas.getContext("2d");
        const image = ctx.createImageData(k.K, k.Q), pixels = image.data;
        const offset = h * k.Q * k.K, w = k.weights[l], maxima = rowMaxima(w, offset, k.Q, k.K);
        for (let q = 0; q < k.Q; q++) {
          const allowed = k.allowed[q];
          for (let j = 0; j < k.K; j++) {
            const rgb = allowed[j] ? LUT[level(position(state.scale, w[offset + q * k.K + j], maxima[q]))] : MASKED;
            const p = 4 * (q * k.K + j);
            pixels[p] = rgb[0]; pixels[p + 1] = rgb[1]; pixels[p + 2] = rgb[2]; pixels[p + 3] = 255;
          }
        }
        ctx.putImageData(image, 0, 0);
      });
      markSelected();
    }

    function markSelected() {
      ui.grid.querySelectorAll(".av-tile").forEach((tile) => {
        const on = +tile.dataset.layer === state.layer && +tile.dataset.head === state.head;
        tile.classList.toggle("av-selected", on);
        tile.setAttribute("aria-pressed", on ? "true" : "false");
      });
    }

    let table = null; // {kind, cells: [[td, index in the head, query row]]}: the head view's skeleton

    function buildTable(k) {
      /* the head view's skeleton for one kind: labels and masked cells stay, value cells are refilled */
      const small = k.K > BIG;
      const parts = [`<div class="av-caption"></div><table class="av-map${small ? " av-small" : ""}"><thead><tr>` +
        `<th class="av-corner">query ↓ key →</th>`];
      k.keyTokens.forEach((t, j) => parts.push(`<th class="av-key${shown(t).length > 3 ? " av-long" : ""}" ` +
        `title="key ${j}: ${escapeHtml(t)}">${escapeHtml(shown(t))}</th>`));
      parts.push("</tr></thead><tbody>");
      for (let q = 0; q < k.Q; q++) {
        parts.push(`<tr><th class="av-query" title="query ${q}: ${escapeHtml(k.queryTokens[q])}">` +
          `${escapeHtml(shown(k.queryTokens[q]))}</th>`);
        for (let j = 0; j < k.K; j++) {
          parts.push(k.allowed[q][j] ? `<td data-q="${q}" data-k="${j}"></td>`
            : `<td class="av-masked" data-q="${q}" data-k="${j}" title="masked: may not attend (weight 0)"></td>`);
        }
        parts.push("</tr>");
      }
      ui.view.innerHTML = parts.join("") + "</tbody></table>";
      const cells = [];
      ui.view.querySelectorAll("td:not(.av-masked)").forEach((td) => {
        const q = +td.dataset.q;
        cells.push([td, q * k.K + +td.dataset.k, q]);
      });
      table = {kind: k.kind, small: small, cells: cells, caption: ui.view.querySelector(".av-caption")};
    }

    function drawHead() {
      /* the chosen head: values as text (2 decimals) where they fit, 4 decimals in the title and on hover */
      const k = data.kinds[state.kind], w = k.weights[state.layer], offset = state.head * k.Q * k.K;
      if (!table || table.kind !== k.kind) buildTable(k);
      const maxima = rowMaxima(w, offset, k.Q, k.K), view = ui.view;
      view.dataset.kind = k.kind; view.dataset.layer = state.layer; view.dataset.head = state.head;
      view.setAttribute("aria-label", `${k.label}, layer ${state.layer}, head ${state.head}`);
      table.caption.innerHTML = `${escapeHtml(k.label)} · layer ${state.layer} · head ${state.head} ` +
        `<span>(rows: queries, ${k.queries} tokens; columns: keys, ${k.keys} tokens)</span>`;
      for (const [td, index, q] of table.cells) {
        const value = w[offset + index];
        td.style.cssText = LUT_CSS[level(position(state.scale, value, maxima[q]))];
        td.title = value.toFixed(4);
        if (!table.small) td.textContent = value.toFixed(2);
      }
    }

    function drawLegend() {
      const stops = Array.from({length: 11}, (_, i) => css(colour(i / 10))).join(",");
      const ticks = {linear: ["0", "0.5", "1"], log: ["≤0.001", "0.03", "1"], row: ["0", "½ row max", "row max"]}[state.scale];
      ui.legend.innerHTML = `<span class="av-colourbar"><span class="av-bar" style="background:linear-gradient(90deg,${stops})">` +
        `</span><span class="av-ticks">${ticks.map((t) => `<span>${t}</span>`).join("")}</span></span>` +
        `<span class="av-scale-name">${SCALES[state.scale]}</span>` +
        `<span class="av-masked-key"><span class="av-swatch av-masked"></span>masked: may not attend (weight 0)</span>`;
    }

    function drawStats() {
      const s = data.kinds[state.kind].stats;
      ui.stats.innerHTML = STATS.map(([key, label, unit]) =>
        `<span><b>${label}</b> ${s[key][state.layer][state.head].toFixed(3)}${unit ? " " + unit : ""}</span>`).join("");
    }

    function syncControls() {
      const k = data.kinds[state.kind];
      ui.kind.value = state.kind;
      ui.layer.innerHTML = options(Array.from({length: k.layers}, (_, l) => [l, `${l}`]));
      ui.head.innerHTML = options(Array.from({length: data.H}, (_, h) => [h, `${h}`]));
      ui.layer.value = state.layer; ui.head.value = state.head; ui.scale.value = state.scale;
    }

    function select(kind, layer, head, reason) {
      /* choose a head; a new kind redraws the grid, the same kind only moves the selection */
      if (!data) return;
      const newKind = kind !== state.kind;
      state.kind = kind in data.kinds ? kind : data.order[0];
      const k = data.kinds[state.kind];
      state.layer = Math.min(Math.max(+layer || 0, 0), k.layers - 1);
      state.head = Math.min(Math.max(+head || 0, 0), data.H - 1);
      timed(reason || "select", () => {
        syncControls();
        if (newKind) drawGrid(); else markSelected();
        drawHead(); drawStats();
      });
      root.dispatchEvent(new CustomEvent("explorer:select", {detail: {kind: state.kind, layer: state.layer, head: state.head}}));
    }

    function markStale(message) {
      /* say at once that what is drawn is not for the current input (message), or clear that (null); while
         stale, the run's output and notes are hidden (they would claim to be the current input's) */
      root.classList.toggle("av-stale", !!message);
      ui.stale.hidden = !message;
      ui.stale.textContent = message ? String(message) + (data && data.payload.title ? ` Shown: ${data.payload.title}.` : "") : "";
    }

    function setScale(scale) {
      if (!data) { state.scale = scale in SCALES ? scale : "linear"; return; }
      state.scale = scale in SCALES ? scale : "linear";
      timed("scale", () => { ui.scale.value = state.scale; drawGrid(); drawHead(); drawLegend(); });
    }

    function setPayload(next) {
      /* a new run (from the server): keep kind, layer, head and scale where the new run has them */
      if (typeof next === "string") next = next.trim() ? JSON.parse(next) : null;
      table = null; // new tokens: a new skeleton
      markStale(null);
      root.classList.toggle("av-empty", !next || !next.kinds);
      if (!next || !next.kinds) { // nothing to show yet (the app before its first run)
        data = null;
        ui.summary.textContent = "No run to show yet.";
        ui.grid.innerHTML = ui.view.innerHTML = ui.stats.innerHTML = "";
        return;
      }
      data = prepare(next);
      ui.kind.innerHTML = options(data.order.map((kind) => [kind, data.kinds[kind].label]));
      summary(); drawLegend();
      // the first run opens where the options or the run say (the run: its last cross-attention layer); later
      // runs keep the kind, layer and head chosen, where they have them
      const first = state.kind === null, open = next.opening || {};
      const kind = !first && state.kind in data.kinds ? state.kind
        : (opts.kind in data.kinds ? opts.kind : (open.kind in data.kinds ? open.kind : data.order[0]));
      const layer = first ? (opts.layer !== undefined ? opts.layer : (open.layer || 0)) : state.layer;
      const head = first ? (opts.head !== undefined ? opts.head : (open.head || 0)) : state.head;
      state.kind = null; // forces the grid
      select(kind, layer, head, "payload");
    }

    // one listener per control, all on this root's own elements
    ui.kind.addEventListener("change", () => select(ui.kind.value, state.layer, state.head, "kind"));
    ui.layer.addEventListener("change", () => select(state.kind, +ui.layer.value, state.head, "layer"));
    ui.head.addEventListener("change", () => select(state.kind, state.layer, +ui.head.value, "head"));
    ui.scale.addEventListener("change", () => setScale(ui.scale.value));
    ui.grid.addEventListener("click", (event) => {
      const tile = event.target.closest(".av-tile");
      if (tile) select(state.kind, +tile.dataset.layer, +tile.dataset.head, "tile");
    });
    ui.grid.addEventListener("keydown", (event) => {
      const tile = event.target.closest(".av-tile");
      if (tile && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); tile.click(); }
    });
    // hover: the exact weight in a tooltip beside the cell (the cell's title says it too)
    ui.view.addEventListener("mouseover", (event) => {
      const cell = event.target.closest("td");
      if (!cell) return;
      const k = data.kinds[state.kind], q = +cell.dataset.q, j = +cell.dataset.k;
      const what = cell.classList.contains("av-masked") ? "masked (may not attend), weight 0" : `weight ${cell.title}`;
      ui.tip.textContent = `query ${q} “${shown(k.queryTokens[q])}” → key ${j} “${shown(k.keyTokens[j])}”: ${what}`;
      const box = cell.getBoundingClientRect(), base = root.getBoundingClientRect();
      ui.tip.style.left = `${Math.max(0, Math.min(box.left - base.left, base.width - 220))}px`;
      ui.tip.style.top = `${box.bottom - base.top + 4}px`;
      ui.tip.hidden = false;
    });
    ui.view.addEventListener("mouseleave", () => { ui.tip.hidden = true; });

    const controller = {
      select: (kind, layer, head) => select(kind, layer, head, "api"),
      setScale: setScale, setPayload: setPayload, markStale: markStale, state: state, scales: Object.keys(SCALES),
    };
    root.avExplorer = controller;
    setPayload(payload);
    return controller;
  }

  function mountAll(scope) {
    /* mount every [data-av-payload] root under scope whose payload sits in a <script type=application/json> */
    (scope || document).querySelectorAll("[data-av-payload]").forEach((root) => {
      if (root.avExplorer) return;
      const source = document.getElementById(root.dataset.avPayload);
      if (source) {
        mount(root, JSON.parse(source.textContent), {rootId: root.dataset.avRoot, headViewId: root.dataset.avHeadView});
      }
    });
  }

  global.AttentionExplorer = {mount: mount, mountAll: mountAll, colour: colour, scales: SCALES};
})(window);
