/* explorer.js: draws one packed run (attention_viz/explorer/pack.py) in the browser.
 *
 *   AttentionExplorer.mount(container, payload, {rootId: "explorer", headViewId: "head_view"})
 *     -> controller {select(kind, layer, head), setScale(name), setShow("weights" | "flows"),
 *                    setPayload(payload (object or JSON) or null), setStep(t or null), play(), pause(),
 *                    openOn({kind, layer, head}) (now, and for the next run), markStale(message or null),
 *                    state: {kind, layer, head, scale, show}}
 *
 * Builds, inside `container` only (it gets the class av-explorer):
 *   #<rootId>      the controls (kind, layer, head, colour scale, and what the maps show: the weights, or what
 *                  flows, when the payload has the value norms), the grid of every layer x head of
 *                  the chosen kind (each tile a [data-kind][data-layer][data-head] element that selects
 *                  its head on click), the legend and the chosen head's statistics;
 *   #<headViewId>  the chosen head (the same three data attributes, token labels on both axes, values as
 *                  text, exact weight on hover): a table, or above 600 cells a canvas with the values as
 *                  lines of text over it (headmap.js, loaded first); a sibling of #<rootId>, so that
 *                  `#explorer [data-layer][data-head]` finds tiles only;
 *   #<stepId>      (a run with a decode) the decode step by step: play/pause, a step slider whose last
 *                  position is the finished run, data-step "all" or t; at step t the row of every decoder
 *                  map that writes token t is marked in the grid and the head view, later rows are blank;
 *   #<scoresId>    (a run with scores) what to look for, and every head's pattern scores as a table whose
 *                  rows [data-layer][data-head] select their head.
 * headViewId defaults to "head_view" for the root "explorer", else "<rootId>-head"; stepId to "decode_step",
 * else "<rootId>-decode-step"; scoresId to "alignment", else "<rootId>-alignment". Every view change is drawn here from the kept numbers: no request leaves the page.
 * Each redraw is timed between performance marks: measures "explorer-redraw" (script time) and
 * "explorer-frame" (until the next frame), detail {root, reason} (reason: tile, kind, layer, head, scale,
 * show, payload, api).
 * On a root 720 px wide or more (explorer.css) the head sits beside the grid, or under it when too wide for that, and
 * says when it scrolls sideways. AttentionExplorer.reveal(views) scrolls a page's view into sight (a lesson's step).
 * Nothing global but `window.AttentionExplorer`; two roots on one page never see each other.
 */
(function (global) {
  "use strict";
  if (global.AttentionExplorer) return; // already loaded by another fragment on this page

  const {viridis: colour, ink, css} = global.AttentionPalette; // palette.js, loaded first
  const MASKED = [200, 200, 200];
  const FUTURE = [242, 242, 242]; // a cell its step has not computed yet
  const PLAY_MS = 900; // one decode step per this many milliseconds while playing
  // the play button's words; the pause mark is two bars drawn by CSS (Debian's fonts have no ⏸, drawn as a box)
  const PLAY = "▶ play", PAUSE = '<span class="av-pause-mark" aria-hidden="true"></span> pause';
  // what a map's rows and columns are: the decoder's rows are its inputs (<bos> and the output so far), each writing
  // the next output token, so a row is labelled with the token before the one it writes
  const AXES = {source: "source tokens", target: "the decoder's inputs"};
  const SHORT = {alignment: "align", previous: "prev", first: "first", eos: "eos"}; // tile badges
  const CLEAR = 0.5; // a head "does" a pattern when more than half its weight goes there
  const LOG_FLOOR = 1e-3; // the log scale's bottom: 0.001 and below share the darkest colour
  const SCALES = {
    linear: "linear (0 → 1)",
    log: "log (0.001 → 1)",
    row: "per row (0 → row's max)",
  };
  // what the maps show: the weights α, or what flows (Kobayashi et al. 2020): α_ij·‖v_j W_O^h‖, as each row's
  // share (the server sends ‖v_j W_O^h‖ per head and key; a run without them offers the weights only)
  const SHOWS = {weights: "attention weights α", flows: "what flows (α·‖v W_O‖)"};
  const STATS = [["entropy", "entropy", "nats"], ["max_weight", "max weight", ""],
    ["mean_distance", "mean distance", "positions"], ["diagonal", "on diagonal", ""]];
  const BIG = 64; // more keys than this: small cells without text (values on hover only)
  const TIGHT = 16; // more keys than this: narrower cells, in a smaller font (a date in words fits a laptop's screen)
  // a head of more cells than this is drawn on a canvas with its numbers as lines of text (headmap.js): a
  // table lays each of its cells out again on every redraw, ~40 ms for the app's widest head (33 x 49)
  const TABLE_CELLS = 600;
  const MAX_MEASURES = 2000; // performance measures kept before they are cleared (a long session stays small)

  // 256 steps of the colour bar, computed once: redraws only look colours up
  const LEVELS = 256;
  const LUT = Array.from({length: LEVELS}, (_, i) => colour(i / (LEVELS - 1)));
  const LUT_CSS = LUT.map((rgb) => `background:${css(rgb)};color:${ink(rgb)}`);
  const level = (t) => Math.round(Math.min(Math.max(t, 0), 1) * (LEVELS - 1));
  const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const shown = (token) => (token === " " ? "␣" : token); // a space label must stay visible
  // notes may use **bold** and `code` (Markdown's, as the app's notes do): escaped first, so nothing else is HTML;
  // a code span is fenced by a run of backticks longer than any inside it (one space of padding each side
  // dropped), and what it holds is shown as it is
  const codeSpan = (body) => `<code>${body.length >= 2 && body[0] === " " && body[body.length - 1] === " " &&
    body.trim() ? body.slice(1, -1) : body}</code>`;
  const inline = (s) => escapeHtml(s).replace(/(?<!`)(`+)(?!`)([\s\S]*?[^`])\1(?!`)|\*\*([^*`]+)\*\*/g,
    (m, fence, body, bold) => (fence ? codeSpan(body) : `<b>${bold}</b>`));

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
        norms: entry.norms || null, // [layer][head][key]: ‖v_j W_O^h‖
        allowed: entry.mask.map((row) => Array.from(row, (c) => c === "1")),
      });
    }
    const off = {}; // map key -> Set of heads switched off in this run
    for (const [key, heads] of Object.entries(payload.heads_off || {})) off[key] = new Set(heads);
    return {payload: payload, kinds: kinds, order: payload.kinds.map((e) => e.kind), H: payload.n_heads,
      decode: payload.decode || null, stepWeights: new Map(), flows: new Map(), off: off, ablation: payload.ablation || "zero",
      // what flows needs every map's norms; decoder maps that change every step (no causal mask) have none per step
      canFlow: payload.kinds.every((e) => !!e.norms) && !(payload.decode && payload.decode.per_step)};
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

  function shell(root, rootId, headViewId, stepId, scoresId) {
    /* the static markup of one explorer; every later lookup goes through `root` (the container) */
    root.classList.add("av-explorer");
    root.innerHTML = `<div class="av-frame"><div class="av-browse" id="${escapeHtml(rootId)}">
      <div class="av-stale-note" role="status" hidden></div>
      <div class="av-summary"></div>
      <div class="av-controls">
        <label>Attention <select class="av-kind"></select></label>
        <label>Layer <select class="av-layer"></select></label>
        <label>Head <select class="av-headsel"></select></label>
        <label>Colour <select class="av-scale"></select></label>
        <label class="av-show-box" hidden>Show <select class="av-show"></select></label>
        <span class="av-cut-box" hidden><button type="button" class="av-cut" aria-pressed="false">✂ switch heads off</button>
          <button type="button" class="av-cut-kind" hidden>this kind off</button>
          <button type="button" class="av-cut-none" hidden>every head on</button></span>
      </div>
      <div class="av-decode" id="${escapeHtml(stepId)}" data-step="all" hidden>
        <button type="button" class="av-play">▶ play</button>
        <button type="button" class="av-prev" aria-label="previous step">◀</button>
        <input type="range" class="av-step" min="0" max="0" value="0" aria-label="decode step">
        <button type="button" class="av-next" aria-label="next step">▶</button>
        <div class="av-step-text" role="status"></div>
      </div>
      <div class="av-off-note" role="status" hidden></div>
      <div class="av-grid" aria-label="every layer and head; click a map to open it"></div>
      <div class="av-legend"></div>
      <div class="av-stats"></div></div>
      <div class="av-head-views"><div class="av-head-more" role="note" hidden>⇆ wider than its box: scroll the head sideways for the rest</div>
        <div class="av-head-view" id="${escapeHtml(headViewId)}" tabindex="0"></div></div>
      <div class="av-score-panels"><div class="av-scores" id="${escapeHtml(scoresId)}" hidden></div></div></div>
      <div class="av-tip" role="tooltip" hidden></div>`;
    const $ = (sel) => root.querySelector(sel);
    return {stale: $(".av-stale-note"), summary: $(".av-summary"), kind: $(".av-kind"), layer: $(".av-layer"), head: $(".av-headsel"),
      scale: $(".av-scale"), show: $(".av-show"), showBox: $(".av-show-box"), grid: $(".av-grid"), legend: $(".av-legend"), stats: $(".av-stats"),
      views: $(".av-head-views"), view: $(".av-head-view"), more: $(".av-head-more"), tip: $(".av-tip"), decode: $(".av-decode"), play: $(".av-play"),
      prev: $(".av-prev"), next: $(".av-next"), step: $(".av-step"), stepText: $(".av-step-text"),
      scorePanels: $(".av-score-panels"), scores: $(".av-scores"), cutBox: $(".av-cut-box"), cut: $(".av-cut"),
      cutKind: $(".av-cut-kind"), cutNone: $(".av-cut-none"), offNote: $(".av-off-note")};
  }

  const options = (items) => items.map(([v, t]) => `<option value="${escapeHtml(v)}">${escapeHtml(t)}</option>`).join("");
  const written = new WeakMap(); // element -> the markup write() last put in it
  function write(el, html) {
    /* el's markup, set only when it differs from what write() put there last: a part of the view that a change
       leaves as it was (the layer and head lists, the step's text) is not parsed and laid out again */
    if (written.get(el) === html) return;
    el.innerHTML = html;
    written.set(el, html);
  }

  function mount(root, payload, opts) {
    opts = opts || {};
    if (typeof payload === "string") payload = JSON.parse(payload);
    const rootName = opts.rootId || "explorer";
    const main = rootName === "explorer";
    const ui = shell(root, rootName, opts.headViewId || (main ? "head_view" : rootName + "-head"),
      opts.stepId || (main ? "decode_step" : rootName + "-decode-step"),
      opts.scoresId || (main ? "alignment" : rootName + "-alignment"));
    let data = null, timer = null, pending = null; // pending: the head the next run opens on (openOn)
    let cutting = false; // "switch heads off" mode: a click on a tile, a layer or the kind switches it (opts.switchable)
    let importance = null; // {model, values: {key: [H]}, label, digits}: each head's importance, drawn as badges
    ui.cutBox.hidden = !opts.switchable;
    // step: null = the finished run, t = the decode step that writes target token t
    const state = {kind: null, layer: 0, head: 0, scale: opts.scale in SCALES ? opts.scale : "linear", step: null,
      show: "weights"};
    ui.scale.innerHTML = options(Object.entries(SCALES));
    ui.show.innerHTML = options(Object.entries(SHOWS));

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

    function stepping(k) {
      /* the current step when it changes what this kind shows (decoder maps), else -1 */
      return state.step !== null && data.decode && k.queries === "target" ? state.step : -1;
    }
    const future = (k, t, q, j) => t >= 0 && (q > t || (k.keys === "target" && j > t)); // not computed at step t

    const flowing = (k) => state.show === "flows" && data.canFlow && !!k.norms;
    const weightsOf = (k, l) => (flowing(k) ? flowsAt(k, l, stepping(k)) : weightsAt(k, l, stepping(k)));
    function flowsAt(k, l, t) {
      /* [H * Q * K] what flows at step t: α_qj·‖v_j W_O^h‖ over its row's sum (a row that moves nothing: 0) */
      const id = `${t}|${k.kind}|${l}`;
      if (!data.flows.has(id)) {
        const w = weightsAt(k, l, t), norms = k.norms[l], out = new Float32Array(w.length);
        for (let h = 0; h < data.H; h++) {
          for (let q = 0; q < k.Q; q++) {
            const row = (h * k.Q + q) * k.K;
            let sum = 0;
            for (let j = 0; j < k.K; j++) sum += (out[row + j] = w[row + j] * norms[h][j]);
            for (let j = 0; j < k.K; j++) out[row + j] = sum > 0 ? out[row + j] / sum : 0;
          }
        }
        data.flows.set(id, out);
      }
      return data.flows.get(id);
    }
    function weightsAt(k, l, t) {
      /* [H * Q * K] weights of layer l at step t (-1: the finished run): the run's own, or (a run decoded
         without the causal mask) step t's maps placed in rows 0..t, zeros elsewhere */
      if (t < 0 || !data.decode || !data.decode.per_step) return k.weights[l];
      const id = `${t}|${k.kind}|${l}`;
      if (!data.stepWeights.has(id)) {
        const width = k.keys === "target" ? t + 1 : k.K, small = decode(data.decode.steps[t][k.kind][l], data.payload.quant);
        const full = new Float32Array(data.H * k.Q * k.K);
        for (let h = 0; h < data.H; h++) {
          for (let q = 0; q <= t; q++) {
            for (let j = 0; j < width; j++) full[(h * k.Q + q) * k.K + j] = small[(h * (t + 1) + q) * width + j];
          }
        }
        data.stepWeights.set(id, full);
      }
      return data.stepWeights.get(id);
    }

    function drawGrid(rebuild) {
      /* one canvas per (layer, head): a pixel per weight, scaled up by CSS; the tiles are built for a new kind
         (rebuild), and repainted where they are for a new colour scale or decode step, or a kind shown before */
      const k = data.kinds[state.kind], t = stepping(k), key = `${state.scale} ${t} ${flowing(k)}`;
      let tiles = ui.grid.querySelectorAll(".av-tile");
      if (!rebuild && tiles.length && gridPainted === key) { markSelected(); return; } // a kept kind, as it was
      if (rebuild || !tiles.length) {
        let html = "";
        for (let l = 0; l < k.layers; l++) {
          const rowLabel = cutting ? `<button type="button" class="av-row-label av-row-cut" data-row="${l}" ` +
            `aria-label="layer ${l}: switch all its heads ${layerOff(k, l) ? "on" : "off"}">L${l}</button>`
            : `<span class="av-row-label">L${l}</span>`;
          html += `<div class="av-layer-row">${rowLabel}<div class="av-tiles">`;
          for (let h = 0; h < data.H; h++) {
            const off = isOff(k, l, h);
            html += `<div class="av-tile${off ? " av-off" : ""}" role="button" tabindex="0" data-kind="${k.kind}" ` +
              `data-layer="${l}" data-head="${h}" title="layer ${l}, head ${h}${off ? ", switched off" : ""}">` +
              `<span class="av-canvas"><canvas width="${k.K}" height="${k.Q}" style="aspect-ratio:${k.K}/${k.Q}">` +
              `</canvas><i class="av-step-mark" hidden></i>${off ? '<i class="av-off-mark">off</i>' : ""}</span>` +
              `<span class="av-tile-name">H${h}${badge(k, l, h)}${impBadge(k, l, h)}</span></div>`;
          }
          html += "</div></div>";
        }
        ui.grid.innerHTML = html;
        tiles = ui.grid.querySelectorAll(".av-tile");
      }
      const mark = t >= 0 ? `top:${100 * t / k.Q}%;height:${100 / k.Q}%` : "";
      tiles.forEach((tile) => {
        const step = tile.querySelector(".av-step-mark");
        step.hidden = t < 0; step.style.cssText = mark;
        const l = +tile.dataset.layer, h = +tile.dataset.head;
        const canvas = tile.querySelector("canvas"), ctx = canvas.getContext("2d");
        const image = ctx.createImageData(k.K, k.Q), pixels = image.data;
        const offset = h * k.Q * k.K, w = weightsOf(k, l), maxima = rowMaxima(w, offset, k.Q, k.K);
        for (let q = 0; q < k.Q; q++) {
          const allowed = k.allowed[q];
          for (let j = 0; j < k.K; j++) {
            const rgb = future(k, t, q, j) ? FUTURE
              : (allowed[j] ? LUT[level(position(state.scale, w[offset + q * k.K + j], maxima[q]))] : MASKED);
            const p = 4 * (q * k.K + j);
            pixels[p] = rgb[0]; pixels[p + 1] = rgb[1]; pixels[p + 2] = rgb[2]; pixels[p + 3] = 255;
          }
        }
        ctx.putImageData(image, 0, 0);
      });
      gridPainted = key;
      markSelected();
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

    const keyOf = (kind, l) => { const [stack, name] = kind.split("."); return `${stack}.${l}.${name}`; };
    const isOff = (k, l, h) => !!(data.off[keyOf(k.kind, l)] && data.off[keyOf(k.kind, l)].has(h));
    const layerOff = (k, l) => !!data.off[keyOf(k.kind, l)] && data.off[keyOf(k.kind, l)].size === data.H;
    const kindOff = (k) => Array.from({length: k.layers}, (_, l) => l).every((l) => layerOff(k, l));

    function impBadge(k, l, h) {
      /* the head's importance (set by setImportance for this run's model): " · Δ.12" */
      const model = data.payload.settings && data.payload.settings.model;
      if (!importance || (importance.model && model && importance.model !== model)) return "";
      const values = importance.values[keyOf(k.kind, l)];
      if (!values || values[h] === null || values[h] === undefined) return "";
      const v = values[h];
      return `<b class="av-imp${v > importance.high ? " av-imp-high" : ""}" title="${escapeHtml(importance.label)}: ` +
        `${v.toFixed(4)}">Δ${v.toFixed(importance.digits).replace(/^(-?)0\./, "$1.")}</b>`;
    }

    function offText(off) {
      /* heads off as the server reads them: "decoder.1.cross_attn: 0 2; encoder.0.self_attn: all", in run order */
      const parts = [];
      for (const kind of data.order) {
        for (let l = 0; l < data.kinds[kind].layers; l++) {
          const heads = off[keyOf(kind, l)];
          if (heads && heads.size) {
            parts.push(`${keyOf(kind, l)}: ${heads.size === data.H ? "all" : [...heads].sort((a, b) => a - b).join(" ")}`);
          }
        }
      }
      return parts.join("; ");
    }

    function switchHeads(changes, on) {
      /* ask for a run with these (key, head) pairs switched off (on = false) or back on: an "explorer:heads-off"
         event whose detail.text the page sends to the server; the view changes when the run comes back */
      const off = {};
      for (const [key, heads] of Object.entries(data.off)) off[key] = new Set(heads);
      for (const [key, h] of changes) {
        off[key] = off[key] || new Set();
        if (on) off[key].delete(h); else off[key].add(h);
      }
      root.classList.add("av-switching");
      root.dispatchEvent(new CustomEvent("explorer:heads-off", {detail: {text: offText(off)}}));
    }
    const headsOf = (k, layers) => layers.flatMap((l) => Array.from({length: data.H}, (_, h) => [keyOf(k.kind, l), h]));

    function setCutting(on) {
      cutting = !!on && !!opts.switchable;
      ui.cut.setAttribute("aria-pressed", cutting ? "true" : "false");
      ui.cutKind.hidden = ui.cutNone.hidden = !cutting;
      root.classList.toggle("av-cutting", cutting);
      if (data) { drawGrid(true); drawOffNote(); }
    }

    function drawOffNote() {
      const k = data.kinds[state.kind], n = Object.values(data.off).reduce((a, s) => a + s.size, 0);
      ui.cutKind.textContent = kindOff(k) ? `${k.label}: every head on` : `${k.label}: all off`;
      const how = data.ablation === "mean" ? "its mean output" : "0";
      const text = n ? `${n} head${n > 1 ? "s" : ""} switched off (marked off): their maps are still computed; what ` +
        `each passes to W_O is ${how}.` : "";
      const hint = cutting ? " Click a tile to switch that head off or on, a layer's L to switch its row, or the " +
        "buttons above; the model reruns." : "";
      ui.offNote.hidden = !(text || hint);
      ui.offNote.textContent = text + hint;
    }

    function drawScores() {
      /* what to look for (the server's sentence, from this run's numbers) and every head's scores; a kind shown
         before brings its panel back as it was (see keep) */
      const k = data.kinds[state.kind], sc = k.scores;
      ui.scores.hidden = !sc;
      if (!sc || ui.scores.firstChild) { markScore(); return; }
      const names = Object.keys(sc.values);
      const best = names.map((n) => Math.max(...sc.values[n].flat().map((v) => (v === null ? -1 : v))));
      let rows = "";
      for (let l = 0; l < k.layers; l++) {
        for (let h = 0; h < data.H; h++) {
          rows += `<tr data-layer="${l}" data-head="${h}" tabindex="0"><th>L${l}·H${h}</th>` + names.map((n, i) => {
            const v = sc.values[n][l][h];
            return v === null ? "<td>–</td>" : `<td class="${v === best[i] ? "av-best" : ""}${v > CLEAR ? " av-clear" : ""}">${v.toFixed(2)}</td>`;
          }).join("") + "</tr>";
        }
      }
      ui.scores.innerHTML = `<p class="av-look-for">${inline(sc.look_for)}</p><p class="av-this-head"></p>` +
        `<div class="av-score-box"><table class="av-score-table"><thead><tr><th>head</th>` +
        names.map((n) => `<th title="even spread would score ${sc.chance[n]}">${escapeHtml(sc.labels[n])}</th>`).join("") +
        `</tr><tr class="av-chance"><th>even spread</th>${names.map((n) => `<td>${(sc.chance[n] || 0).toFixed(2)}</td>`).join("")}` +
        `</tr></thead><tbody>${rows}</tbody></table></div>`;
      markScore();
    }

    function markScore() {
      const sc = data && data.kinds[state.kind].scores;
      if (!sc) return;
      ui.scores.querySelectorAll("tbody tr").forEach((tr) => {
        tr.classList.toggle("av-selected", +tr.dataset.layer === state.layer && +tr.dataset.head === state.head);
      });
      const parts = Object.keys(sc.values).map((n) => {
        const v = sc.values[n][state.layer][state.head];
        return `${escapeHtml(sc.labels[n])} ${v === null ? "–" : v.toFixed(2)}`;
      });
      write(ui.scores.querySelector(".av-this-head"), `<b>This head, L${state.layer}·H${state.head}:</b> ${parts.join(" · ")}`);
      const box = ui.scores.querySelector(".av-score-box"), row = box && box.querySelector("tbody tr.av-selected");
      if (row) requestAnimationFrame(() => keepInView(box, row)); // read once the frame lays it out, not now
    }

    function keepInView(box, row) {
      /* scroll the scores' own box (never the page) so that the selected head's row shows below its sticky head */
      const b = box.getBoundingClientRect(), r = row.getBoundingClientRect();
      const top = b.top + box.querySelector("thead").getBoundingClientRect().height;
      if (r.top < top) box.scrollTop -= top - r.top;
      else if (r.bottom > b.bottom) box.scrollTop += r.bottom - b.bottom;
    }

    function drawStep() {
      /* the step bar: where the decode is, what it writes, and where the chosen head looks for it */
      const d = data.decode, n = d ? d.written.length : 0;
      ui.decode.hidden = !d;
      if (!d) return;
      const t = state.step;
      ui.step.max = n; ui.step.value = t === null ? n : t;
      ui.decode.dataset.step = t === null ? "all" : t;
      write(ui.play, timer ? PAUSE : PLAY);
      ui.play.setAttribute("aria-pressed", timer ? "true" : "false");
      if (t === null) {
        write(ui.stepText, `Finished: all ${n} steps of the greedy decode. Press play or move the slider ` +
          "to see each output token being written.");
        return;
      }
      const k = data.kinds[state.kind], so = d.written.slice(0, t).map(shown).join("");
      let text = `<b>Step ${t + 1} of ${n}</b>: output so far <code>${escapeHtml(so) || "(nothing)"}</code>, ` +
        `writing <code>${escapeHtml(shown(d.written[t]))}</code>.`;
      if (k.queries !== "target") {
        text += ` ${escapeHtml(k.label)} ran once, before the first step: it is the same at every step.`;
      } else {
        const w = weightsOf(k, state.layer), row = (state.head * k.Q + t) * k.K;
        let top = 0;
        for (let j = 1; j < k.K; j++) if (w[row + j] > w[row + top]) top = j;
        text += ` Head L${state.layer}·H${state.head} looks most at ${k.keys} ${top} ` +
          `<code>${escapeHtml(shown(k.keyTokens[top]))}</code> (${w[row + top].toFixed(2)}).`;
        if (d.per_step && t > 0) {
          const before = weightsAt(k, state.layer, t), prev = weightsAt(k, state.layer, t - 1);
          let moved = 0;
          for (let q = 0; q < t; q++) {
            for (let j = 0; j < k.K; j++) {
              const i = (state.head * k.Q + q) * k.K + j;
              moved = Math.max(moved, Math.abs(before[i] - prev[i]));
            }
          }
          text += ` <span class="av-changed">Causal mask off: the earlier rows are recomputed at every step, and ` +
            `this head's moved by up to ${moved.toFixed(2)} since step ${t}.</span>`;
        } else if (t > 0) {
          text += " The rows above were computed at their own steps and stay as they were: the causal mask hides later tokens.";
        }
      }
      write(ui.stepText, text);
    }

    function setStep(step, reason) {
      /* show the decode at step t (0-based), or the finished run (null or past the last step) */
      if (!data || !data.decode) return;
      const n = data.decode.written.length;
      state.step = step === null || step === undefined || +step >= n ? null : Math.max(0, Math.floor(+step) || 0);
      timed(reason || "step", () => { drawGrid(); drawHead(); drawStep(); });
      root.dispatchEvent(new CustomEvent("explorer:step", {detail: {step: state.step}}));
    }

    function stopPlaying() {
      if (timer) { clearInterval(timer); timer = null; }
      if (data && data.decode) { write(ui.play, "▶ play"); ui.play.setAttribute("aria-pressed", "false"); }
    }

    function play() {
      /* advance one step per PLAY_MS until the finished run; a second press pauses */
      if (timer) { stopPlaying(); return; }
      if (!data || !data.decode) return;
      if (state.step === null) setStep(0, "play");
      timer = setInterval(() => {
        const next = state.step === null ? null : state.step + 1;
        if (next === null || next >= data.decode.written.length) { stopPlaying(); setStep(null, "play"); return; }
        setStep(next, "play");
      }, PLAY_MS);
      write(ui.play, PAUSE); ui.play.setAttribute("aria-pressed", "true");
    }

    function markSelected() {
      ui.grid.querySelectorAll(".av-tile").forEach((tile) => {
        const on = +tile.dataset.layer === state.layer && +tile.dataset.head === state.head;
        tile.classList.toggle("av-selected", on);
        tile.setAttribute("aria-pressed", on ? "true" : "false");
      });
    }

    let table = null; // {kind, cells: [[td, index in the head, query row]]}: the head view's skeleton
    let map = null; // {kind, ...AttentionHeadMap.build}: the head view of a large head
    let gridPainted = null; // the colour scale and decode step the grid's tiles were painted for
    // kind -> {grid, page, table, map, painted, scores}: the kinds shown before in this run: their tiles, detached
    // from the page, and their head view and scores, hidden where they are (their text and tables keep their
    // layout; laying out a wide head's text or a table of 32 heads again costs a frame); showing a kind again puts
    // them back (new canvases cost a frame on a wide run) and repaints them only if the head, colour scale or
    // decode step changed meanwhile
    const kept = new Map();
    const headViewId = ui.view.id, scoresId = ui.scores.id;
    function hideKept(el) { // out of the flow, unseen, unreachable, and no longer the element of its id
      el.removeAttribute("id"); el.classList.add("av-kept"); el.inert = true;
    }
    function keep(kind) {
      /* the head view and the scores stay where they are, hidden, so that they come back without a new layout;
         fresh empty ones take their ids */
      if (kind === null || !ui.grid.firstChild) return;
      const page = ui.view;
      page.removeAttribute("tabindex"); page.removeAttribute("aria-label");
      delete page.dataset.kind; delete page.dataset.layer; delete page.dataset.head;
      hideKept(page);
      const scores = ui.scores;
      hideKept(scores);
      scores.querySelectorAll("tr.av-selected").forEach((tr) => tr.classList.remove("av-selected"));
      kept.set(kind, {grid: Array.from(ui.grid.childNodes), page: page, table: table, map: map, painted: gridPainted,
        scores: scores});
      ui.grid.replaceChildren(); table = map = gridPainted = null;
      ui.scores = document.createElement("div");
      ui.scores.className = "av-scores"; ui.scores.id = scoresId; ui.scores.hidden = true;
      ui.scorePanels.append(ui.scores);
      ui.view = document.createElement("div");
      ui.view.className = "av-head-view"; ui.view.id = headViewId; ui.view.tabIndex = 0;
      ui.views.append(ui.view);
    }
    function restore(kind) {
      const was = kept.get(kind);
      if (!was) return false;
      kept.delete(kind);
      ui.view.remove();
      ui.view = was.page; ui.view.classList.remove("av-kept"); ui.view.inert = false;
      ui.view.id = headViewId; ui.view.tabIndex = 0;
      ui.grid.replaceChildren(...was.grid); table = was.table; map = was.map;
      gridPainted = was.painted;
      ui.scores.remove();
      ui.scores = was.scores; ui.scores.classList.remove("av-kept"); ui.scores.inert = false; ui.scores.id = scoresId;
      return true;
    }
    function forget() {
      for (const was of kept.values()) { was.page.remove(); was.scores.remove(); }
      kept.clear();
      ui.scores.innerHTML = "";
    }

    function buildTable(k) {
      /* the head view's skeleton for one kind: labels and masked cells stay, value cells are refilled */
      const small = k.K > BIG, tight = !small && k.K > TIGHT;
      const parts = [`<div class="av-caption"></div><table class="av-map${small ? " av-small" : ""}` +
        `${tight ? " av-tight" : ""}"><thead><tr>` +
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
      const cells = [], hidden = [];
      ui.view.querySelectorAll("td").forEach((td) => {
        const q = +td.dataset.q, j = +td.dataset.k;
        (td.classList.contains("av-masked") ? hidden : cells).push([td, q * k.K + j, q, j]);
      });
      table = {kind: k.kind, small: small, cells: cells, hidden: hidden, rows: ui.view.querySelectorAll("tbody tr"),
        caption: ui.view.querySelector(".av-caption"),
        shown: cells.map(() => ({cls: null, css: null, title: null, text: null}))}; // what each cell shows now
    }

    let wideCheck = 0;
    function sayWide() {
      /* on a wide root, a head too wide for the room beside the grid goes under it, across the root; a head wider
         than its box then says that it scrolls sideways (the note above it) */
      wideCheck = 0;
      const frame = ui.grid.parentElement.parentElement, head = ui.view.querySelector(".av-map, .av-hm");
      if (head && getComputedStyle(frame).display === "grid") {
        frame.classList.toggle("av-head-below", head.offsetWidth > frame.clientWidth - ui.grid.offsetWidth - 20);
      }
      ui.more.hidden = !(ui.view.scrollWidth > ui.view.clientWidth + 1);
    }
    function sayWideSoon() {
      /* at the next frame, when the view is laid out anyway: no layout forced in the middle of a redraw */
      if (!wideCheck) wideCheck = global.requestAnimationFrame(sayWide);
    }
    if (global.ResizeObserver) new global.ResizeObserver(sayWideSoon).observe(ui.views);

    function drawHead() {
      /* the chosen head: values as text (2 decimals) where they fit, 4 decimals in the title and on hover */
      const k = data.kinds[state.kind], w = weightsOf(k, state.layer), offset = state.head * k.Q * k.K;
      const t = stepping(k), large = k.Q * k.K > TABLE_CELLS && global.AttentionHeadMap;
      if (large && (!map || map.kind !== k.kind)) {
        table = null;
        map = Object.assign(global.AttentionHeadMap.build(ui.view, {queryTokens: k.queryTokens,
          keyTokens: k.keyTokens, small: k.K > BIG, label: shown}), {kind: k.kind});
      } else if (!large && (!table || table.kind !== k.kind)) {
        map = null;
        buildTable(k);
      }
      const view = ui.view;
      view.dataset.kind = k.kind; view.dataset.layer = state.layer; view.dataset.head = state.head;
      view.setAttribute("aria-label", `${k.label}, layer ${state.layer}, head ${state.head}`);
      (large ? map : table).caption.innerHTML = `${escapeHtml(k.label)} · layer ${state.layer} · head ${state.head} ` +
        (isOff(k, state.layer, state.head) ? `<b class="av-off-caption">switched off</b> ` : "") +
        (flowing(k) ? `<b class="av-flow-caption">what flows</b> (each row's share of α·‖v W_O‖) ` : "") +
        `<span>(rows: queries, ${AXES[k.queries] || k.queries}` +
        (k.queries === "target" ? ", each row writing the next output token" : "") +
        `; columns: keys, ${AXES[k.keys] || k.keys})</span>`;
      sayWideSoon();
      const painted = `${state.layer} ${state.head} ${state.scale} ${t} ${flowing(k)}`; // what the view's cells show
      if ((large ? map : table).painted === painted) return; // a kept kind's head view, as it was left
      (large ? map : table).painted = painted;
      const maxima = rowMaxima(w, offset, k.Q, k.K);
      if (large) {
        map.draw((q, j) => {
          if (future(k, t, q, j)) return false;
          if (!k.allowed[q][j]) return null;
          const value = w[offset + q * k.K + j];
          return [LUT[level(position(state.scale, value, maxima[q]))], value.toFixed(2)];
        }, t);
        return;
      }
      // each cell is written only where it changes: a head switch leaves most "0.00" cells as they are, and
      // every write would lay the table out again (the widest table has ~1,400 cells)
      const drawn = table.shown;
      table.cells.forEach(([td, index, q, j], c) => {
        let css, text, title, cls;
        if (future(k, t, q, j)) {
          css = ""; text = ""; title = `not computed yet at step ${t + 1}`; cls = "av-future";
        } else {
          const value = w[offset + index];
          css = LUT_CSS[level(position(state.scale, value, maxima[q]))]; title = value.toFixed(4); cls = "";
          text = table.small ? "" : value.toFixed(2);
        }
        const was = drawn[c];
        if (was.cls !== cls) { td.className = cls; was.cls = cls; }
        if (was.css !== css) { td.style.cssText = css; was.css = css; }
        if (was.title !== title) { td.title = title; was.title = title; }
        if (was.text !== text) { td.textContent = text; was.text = text; }
      });
      for (const [td, , q, j] of table.hidden) td.classList.toggle("av-future", future(k, t, q, j));
      table.rows.forEach((tr, q) => tr.classList.toggle("av-now", q === t));
    }

    function drawLegend() {
      const stops = Array.from({length: 11}, (_, i) => css(colour(i / 10))).join(",");
      const ticks = {linear: ["0", "0.5", "1"], log: ["≤0.001", "0.03", "1"], row: ["0", "½ row max", "row max"]}[state.scale];
      ui.legend.innerHTML = `<span class="av-colourbar"><span class="av-bar" style="background:linear-gradient(90deg,${stops})">` +
        `</span><span class="av-ticks">${ticks.map((t) => `<span>${t}</span>`).join("")}</span></span>` +
        `<span class="av-scale-name">${SCALES[state.scale]}${data && flowing(data.kinds[state.kind]) ? " · what flows, share of the row" : ""}</span>` +
        `<span class="av-masked-key"><span class="av-swatch av-masked"></span>masked: may not attend (weight 0)</span>`;
    }

    function drawStats() {
      const k = data.kinds[state.kind], s = k.stats;
      write(ui.stats, (flowing(k) ? "<span>of the weights α:</span>" : "") + STATS.map(([key, label, unit]) =>
        `<span><b>${label}</b> ${s[key][state.layer][state.head].toFixed(3)}${unit ? " " + unit : ""}</span>`).join(""));
    }

    function syncControls() {
      const k = data.kinds[state.kind];
      ui.kind.value = state.kind;
      write(ui.layer, options(Array.from({length: k.layers}, (_, l) => [l, `${l}`])));
      write(ui.head, options(Array.from({length: data.H}, (_, h) => [h, `${h}`])));
      ui.layer.value = state.layer; ui.head.value = state.head; ui.scale.value = state.scale;
      ui.showBox.hidden = !data.canFlow; ui.show.value = state.show;
    }

    function select(kind, layer, head, reason) {
      /* choose a head; a new kind redraws the grid, the same kind only moves the selection */
      if (!data) return;
      if (reason !== "payload" && reason !== "api") pending = null; // the user's own choice wins over a lesson's
      const before = state.kind;
      state.kind = kind in data.kinds ? kind : data.order[0];
      const newKind = state.kind !== before;
      const k = data.kinds[state.kind];
      state.layer = Math.min(Math.max(+layer || 0, 0), k.layers - 1);
      state.head = Math.min(Math.max(+head || 0, 0), data.H - 1);
      timed(reason || "select", () => {
        syncControls();
        if (newKind) {
          keep(before);
          const shownBefore = restore(state.kind); // this kind's tiles and head view, kept from an earlier visit
          drawGrid(!shownBefore); drawScores();
        } else { markSelected(); markScore(); }
        drawHead(); drawStats(); drawStep(); drawOffNote();
      });
      root.dispatchEvent(new CustomEvent("explorer:select", {detail: {kind: state.kind, layer: state.layer, head: state.head}}));
    }

    function markStale(message) {
      /* say at once that what is drawn is not for the current input (message), or clear that (null); while
         stale, the run's output and notes are hidden (they would claim to be the current input's) */
      root.classList.toggle("av-stale", !!message);
      root.classList.remove("av-switching");
      ui.stale.hidden = !message;
      ui.stale.textContent = message ? String(message) + (data && data.payload.title ? ` Shown: ${data.payload.title}.` : "") : "";
    }

    function setScale(scale) {
      if (!data) { state.scale = scale in SCALES ? scale : "linear"; return; }
      state.scale = scale in SCALES ? scale : "linear";
      timed("scale", () => { ui.scale.value = state.scale; drawGrid(); drawHead(); drawLegend(); });
    }

    function setShow(show) {
      state.show = show in SHOWS ? show : "weights";
      if (!data) return;
      timed("show", () => { ui.show.value = state.show; drawGrid(); drawHead(); drawLegend(); drawStats(); });
    }

    function setPayload(next) {
      /* a new run (from the server): keep kind, layer, head and scale where the new run has them */
      if (typeof next === "string") next = next.trim() ? JSON.parse(next) : null;
      table = map = gridPainted = null; // new tokens: a new skeleton, new tiles
      forget();
      stopPlaying();
      state.step = null; // a new run shows its finished decode
      markStale(null);
      root.classList.toggle("av-empty", !next || !next.kinds);
      if (!next || !next.kinds) { // nothing to show yet (the app before its first run)
        data = null;
        ui.summary.textContent = "No run to show yet.";
        ui.grid.innerHTML = ui.view.innerHTML = "";
        write(ui.stats, "");
        ui.decode.hidden = ui.scores.hidden = true;
        return;
      }
      data = prepare(next);
      ui.kind.innerHTML = options(data.order.map((kind) => [kind, data.kinds[kind].label]));
      summary(); drawLegend();
      root.classList.remove("av-switching");
      // the first run opens where the options or the run say (the run: its last cross-attention layer); later
      // runs keep the kind, layer and head chosen, where they have them
      const first = state.kind === null, open = next.opening || {};
      let kind = !first && state.kind in data.kinds ? state.kind
        : (opts.kind in data.kinds ? opts.kind : (open.kind in data.kinds ? open.kind : data.order[0]));
      let layer = first ? (opts.layer !== undefined ? opts.layer : (open.layer || 0)) : state.layer;
      let head = first ? (opts.head !== undefined ? opts.head : (open.head || 0)) : state.head;
      if (pending && pending.kind in data.kinds) { ({kind, layer, head} = pending); pending = null; }
      state.kind = null; // forces the grid
      select(kind, layer, head, "payload");
    }

    // one listener per control, all on this root's own elements
    ui.kind.addEventListener("change", () => select(ui.kind.value, state.layer, state.head, "kind"));
    ui.layer.addEventListener("change", () => select(state.kind, +ui.layer.value, state.head, "layer"));
    ui.head.addEventListener("change", () => select(state.kind, state.layer, +ui.head.value, "head"));
    ui.scale.addEventListener("change", () => setScale(ui.scale.value));
    ui.show.addEventListener("change", () => setShow(ui.show.value));
    ui.play.addEventListener("click", play);
    ui.prev.addEventListener("click", () => { stopPlaying(); setStep(Math.max(0, (state.step === null ? data.decode.written.length : state.step) - 1), "prev"); });
    ui.next.addEventListener("click", () => { stopPlaying(); setStep(state.step === null ? null : state.step + 1, "next"); });
    ui.step.addEventListener("input", () => { stopPlaying(); setStep(+ui.step.value, "step"); });
    function picks(container, selector, reason) {
      /* a click, Enter or Space on a [data-layer][data-head] element under `container` selects that head */
      container.addEventListener("click", (event) => {
        const item = event.target.closest(selector);
        if (item) select(state.kind, +item.dataset.layer, +item.dataset.head, reason);
      });
      container.addEventListener("keydown", (event) => {
        const item = event.target.closest(selector);
        if (item && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); item.click(); }
      });
    }
    // in "switch heads off" mode a tile or a layer's label switches heads instead of opening one (registered first:
    // it stops the click before `picks` sees it)
    ui.grid.addEventListener("click", (event) => {
      if (!cutting || !data) return;
      const k = data.kinds[state.kind], tile = event.target.closest(".av-tile"), row = event.target.closest(".av-row-cut");
      if (tile) switchHeads([[keyOf(k.kind, +tile.dataset.layer), +tile.dataset.head]], isOff(k, +tile.dataset.layer, +tile.dataset.head));
      else if (row) switchHeads(headsOf(k, [+row.dataset.row]), layerOff(k, +row.dataset.row));
      else return;
      event.stopImmediatePropagation();
    });
    ui.cut.addEventListener("click", () => setCutting(!cutting));
    ui.cutKind.addEventListener("click", () => {
      const k = data.kinds[state.kind];
      switchHeads(headsOf(k, Array.from({length: k.layers}, (_, l) => l)), kindOff(k));
    });
    ui.cutNone.addEventListener("click", () => { root.classList.add("av-switching"); root.dispatchEvent(new CustomEvent("explorer:heads-off", {detail: {text: ""}})); });
    picks(ui.grid, ".av-tile", "tile");
    picks(ui.scorePanels, "tr[data-layer]", "score");
    function valueText(q, j) {
      /* the hovered cell of the chosen head: its weight, and with what flows, its share, the norm and the weight */
      const k = data.kinds[state.kind], t = stepping(k), index = (state.head * k.Q + q) * k.K + j;
      const weight = weightsAt(k, state.layer, t)[index];
      if (!flowing(k)) return `weight ${weight.toFixed(4)}`;
      return `${flowsAt(k, state.layer, t)[index].toFixed(4)} of the row's flow (weight ${weight.toFixed(4)} × ` +
        `‖v W_O‖ ${k.norms[state.layer][state.head][j].toPrecision(4)})`;
    }
    // hover: the exact weight in a tooltip beside the cell (the cell's title says it too)
    function tip(q, j, what, box) {
      const k = data.kinds[state.kind];
      ui.tip.textContent = `query ${q} “${shown(k.queryTokens[q])}” → key ${j} “${shown(k.keyTokens[j])}”: ${what}`;
      const base = root.getBoundingClientRect();
      ui.tip.style.left = `${Math.max(0, Math.min(box.left - base.left, base.width - 220))}px`;
      ui.tip.style.top = `${box.bottom - base.top + 4}px`;
      ui.tip.hidden = false;
    }
    ui.views.addEventListener("mouseover", (event) => {
      const cell = event.target.closest("td");
      if (!cell || !data) return;
      const q = +cell.dataset.q, j = +cell.dataset.k;
      const what = cell.classList.contains("av-future") ? "not computed yet at this step"
        : (cell.classList.contains("av-masked") ? "masked (may not attend), weight 0" : valueText(q, j));
      tip(q, j, what, cell.getBoundingClientRect());
    });
    ui.views.addEventListener("mousemove", (event) => { // a large head: the cell under the pointer on its canvas
      const at = map && data ? map.cellAt(event) : null;
      if (!map) return;
      map.hover(at ? at.q : null, at ? at.j : null);
      if (!at) { ui.tip.hidden = true; return; }
      const k = data.kinds[state.kind], t = stepping(k);
      const what = future(k, t, at.q, at.j) ? "not computed yet at this step"
        : (!k.allowed[at.q][at.j] ? "masked (may not attend), weight 0"
          : valueText(at.q, at.j));
      tip(at.q, at.j, what, at.box);
    });
    ui.views.addEventListener("mouseleave", () => { ui.tip.hidden = true; if (map) map.hover(null); });

    const controller = {
      select: (kind, layer, head) => select(kind, layer, head, "api"),
      setScale: setScale, setShow: setShow, setPayload: setPayload, markStale: markStale, state: state, scales: Object.keys(SCALES),
      setCutting: setCutting, offText: () => (data ? offText(data.off) : ""),
      setImportance: (imp) => {
        /* badges of each head's importance: {model, values: {key: [H]}, label, digits, high}; null clears */
        importance = imp && imp.values ? Object.assign({digits: 2, high: Infinity, label: "importance"}, imp) : null;
        if (data) { gridPainted = null; drawGrid(true); }
      },
      setStep: (step) => { stopPlaying(); setStep(step, "api"); }, play: play, pause: stopPlaying,
      openOn: (target) => { pending = target; if (data && target.kind in data.kinds) select(target.kind, target.layer, target.head, "api"); },
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

  function reveal(views) {
    /* bring a view into sight once the page has drawn what changed (two frames): the first of `views` on show,
       each a list of selectors whose boxes together are the view; scrolled as little as it takes, so text above it
       stays when both fit; a view taller than the screen comes to its top. A guided lesson's step calls it. */
    global.requestAnimationFrame(() => global.requestAnimationFrame(() => {
      for (const parts of views) {
        const boxes = parts.map((sel) => document.querySelector(sel)).filter((e) => e && e.getClientRects().length)
          .map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0 && r.height > 0);
        if (!boxes.length) continue;
        const top = Math.min(...boxes.map((r) => r.top)), room = global.innerHeight;
        const end = Math.min(Math.max(...boxes.map((r) => r.bottom)), top + room - 16);
        if (top < 0 || end > room) global.scrollBy({top: end > room ? end - room + 8 : top - 8, behavior: "instant"});
        return;
      }
    }));
  }

  global.AttentionExplorer = {mount: mount, mountAll: mountAll, colour: colour, scales: SCALES, ink: ink, reveal: reveal};
})(window);
