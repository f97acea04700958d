/* long.js: a real model's reading of a page (explorer/long_pack.py's payload): every head's summaries as layer x head
 * grids, the chosen head's overview on a canvas, a dragged rectangle of it opened as a region with exact weights.
 *
 *   const view = AttentionLong.mount(element, payload, {ask})   // ask(request) -> Promise of the server's answer:
 *       {run, what: "overview" | "region", key, head, reduce, sink, rows: [r0, r1], cols: [c0, c1]} -> a packed
 *       overview or region (long_pack.py), or {error}. Without ask (the notebook), the payload's `offline`
 *       overviews answer, and a region is drawn from their blocks (said under it).
 *   view.setPayload(payload); view.markStale(message | null)
 *   AttentionLong.mountAll(document)    // every [data-av-long] element, its payload in the script its value names
 *
 * Loaded after palette.js and shared.js; defined once per page. Drawing only: every number comes from the payload.
 */
(function (global) {
  "use strict";
  if (global.AttentionLong) return;
  const P = global.AttentionPalette, S = global.AttentionShared;
  const esc = (s) => S.escapeHtml(s);
  const REGION_MAX = 256, CLICK_SIDE = 48;
  const GRIDS = [  // each statistic's grid: its name, its title, how its colour bar's top is written
    ["first_token", "weight on the first token (the sink)", (v) => fmt(v)],  // a weight, as the maps' bars
    ["entropy", "entropy (nats)", (v) => v.toFixed(2)],
    ["mean_distance", "mean distance (tokens)", (v) => v.toFixed(1)],  // as the chosen head's line
  ];

  // an overview's cells as floats (uint16 of cell / top), a region's as they came (float32)
  const cells = (o) => o.values || (o.values = o.side
    ? Float32Array.from(new Uint16Array(S.bytes(o.data).buffer), (v) => (v / 65535) * o.top)
    : new Float32Array(S.bytes(o.data).buffer));
  const fmt = (v) => (v === 0 ? "0" : v >= 0.001 ? v.toFixed(5) : v.toExponential(3));

  function markup() {
    return `<div class="av-long-head"><p class="av-long-title"></p><p class="av-long-note"></p>
        <p class="av-long-stale" role="status" hidden></p></div>
      <section class="av-long-summary" aria-label="every head's summary">
        <p class="av-long-help">Every head of every layer (rows: layers, columns: heads). Click a cell to see that head.</p>
        <div class="av-long-grids"></div></section>
      <section class="av-long-over" aria-label="the chosen head's whole map">
        <div class="av-long-controls">
          <label>cells <select class="av-long-reduce"><option value="max">block max</option>
            <option value="mean">block mean</option></select></label>
          <label><input type="checkbox" class="av-long-sink"> leave out the first token (rows renormalised)</label>
          <label>labels <select class="av-long-labels"><option value="words">words</option>
            <option value="pieces">pieces</option></select></label>
          <label>colour <select class="av-long-colour"><option value="log">log: 3 decades under the map's top</option>
            <option value="top">linear: 0 → the map's top</option>
            <option value="p99">linear: 0 → its 99th percentile</option></select></label></div>
        <p class="av-long-chosen"></p>
        <div class="av-long-overbox"><canvas class="av-long-overview" aria-label="overview: drag a rectangle to open it, or move a square with the arrow keys and press Enter"></canvas>
          <div class="av-long-drag" hidden></div></div>
        <div class="av-long-legend"></div>
        <p class="av-long-tip av-long-overtip" aria-live="polite">Drag a rectangle on the map (or click; or the arrow keys and Enter) to open that region.</p>
      </section>
      <section class="av-long-region" aria-label="the opened region" hidden>
        <p class="av-long-regiontitle"></p><p class="av-long-regionnote"></p>
        <div class="av-long-regionbox"><canvas class="av-long-regioncanvas"></canvas></div>
        <div class="av-long-legend av-long-regionlegend"></div>
        <p class="av-long-tip av-long-regiontip" aria-live="polite"></p></section>`;
  }

  function legend(top, caption, format = fmt, bottom = 0, log = false) {
    /* a colour bar: its ends (bottom → top; log: each third of the bar ×10) and what it is */
    const stops = Array.from({length: 11}, (_, i) => P.css(P.viridis(i / 10))).join(", ");
    return `<span class="av-long-bar" style="background: linear-gradient(to right, ${stops})"></span>
      <span class="av-long-ends">${log ? `≤ ${esc(format(bottom))}` : "0"} → ${esc(format(top))}${log ? " (log: ×10 a third)" : ""}</span>
      <span class="av-long-caption">${esc(caption)}</span>`;
  }

  function label(view, i, from) {
    /* position i's label: its piece, or (words) its word at the word's first piece (or at `from`, where a region
       starts) and "…" after */
    const p = view.state.payload;
    if (view.$(".av-long-labels").value === "pieces") return S.shown(p.pieces[i]);
    const w = p.wordOf[i];
    return i > (from || 0) && p.wordOf[i - 1] === w ? "…" : p.words[w];
  }
  function said(view, i) {
    /* position i for a tip: its index and its piece or word */
    const p = view.state.payload;
    return `${i} “${view.$(".av-long-labels").value === "pieces" ? label(view, i) : p.words[p.wordOf[i]]}”`;
  }

  function request(view, extra) {
    const p = view.state.payload;
    return Object.assign({run: p.run, key: view.state.key, head: view.state.head, reduce: view.$(".av-long-reduce").value,
      sink: !view.$(".av-long-sink").checked}, extra);
  }
  async function ask(view, extra) {
    /* the answer to a request, or null (a newer request was made meanwhile, or the answer was an error: said) */
    const n = ++view.state.asked, asked = request(view, extra);
    let answer;
    try {
      answer = view.opts.ask ? await view.opts.ask(asked) : offline(view, asked);
    } catch (e) {
      answer = {error: "The server did not answer this view: try again."};
    }
    if (n !== view.state.asked) return null;
    if (!answer || answer.error) { markStale(view, answer ? answer.error : "No answer."); return null; }
    markStale(view, null);
    return answer;
  }

  function offline(view, asked) {
    /* the notebook: the embedded overviews (block max, sink kept) answer; a region is drawn from their blocks */
    const o = view.state.payload.offline, over = o.maps[asked.key][asked.head];
    if (asked.what === "overview") return over;
    const [r0, r1] = asked.rows, [c0, c1] = asked.cols, v = cells(over), b = over.block;
    const out = new Float32Array((r1 - r0) * (c1 - c0));
    for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) {
      out[(r - r0) * (c1 - c0) + (c - c0)] = v[Math.floor(r / b) * over.side + Math.floor(c / b)];
    }
    return {rows: asked.rows, cols: asked.cols, values: out, block: b, sink: true};
  }

  function drawGrids(view) {
    const p = view.state.payload, H = p.heads;
    view.$(".av-long-grids").innerHTML = GRIDS.map(([name, title, format]) => {
      const values = p.stats[name], top = Math.max(1e-12, ...values.flat());
      const rows = values.map((row, l) => `<div class="av-long-row"><span class="av-long-layer">${l}</span>${row.map((v, h) => {
        const rgb = P.viridis(v / top);
        return `<button type="button" class="av-long-cell" data-key="${esc(p.keys[l])}" data-head="${h}"
          style="background:${P.css(rgb)}" title="${esc(p.keys[l])} head ${h}: ${esc(v.toFixed(3))}"
          aria-label="${esc(p.keys[l])} head ${h}, ${esc(title)} ${esc(v.toFixed(3))}"></button>`;
      }).join("")}</div>`).join("");
      return `<figure class="av-long-grid" data-stat="${name}"><figcaption>${esc(title)}</figcaption>
        <div class="av-long-heads"><span class="av-long-layer">L\\h</span>${Array.from({length: H}, (_, h) =>
          `<span class="av-long-hlabel">${h}</span>`).join("")}</div>${rows}
        <div class="av-long-legend">${legend(top, "", format)}</div></figure>`;
    }).join("");
    view.element.querySelectorAll(".av-long-cell").forEach((cell) => cell.addEventListener("click", () =>
      choose(view, cell.dataset.key, Number(cell.dataset.head))));
    view.element.querySelectorAll(".av-long-grid").forEach((grid) => grid.addEventListener("keydown", (e) => {
      /* one tab stop a grid (the chosen head); the arrow keys move through the layers and heads */
      const step = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]}[e.key];
      if (!step || !e.target.classList.contains("av-long-cell")) return;
      e.preventDefault();
      const l = Math.min(Math.max(p.keys.indexOf(e.target.dataset.key) + step[0], 0), p.keys.length - 1);
      const h = Math.min(Math.max(Number(e.target.dataset.head) + step[1], 0), H - 1);
      choose(view, p.keys[l], h).then(() => {});
      const next = grid.querySelector(`.av-long-cell[data-key="${CSS.escape(p.keys[l])}"][data-head="${h}"]`);
      if (next) next.focus();
    }));
  }

  function markChosen(view) {
    view.element.querySelectorAll(".av-long-cell").forEach((cell) => {
      const on = cell.dataset.key === view.state.key && Number(cell.dataset.head) === view.state.head;
      cell.classList.toggle("av-long-on", on);
      cell.setAttribute("aria-pressed", on ? "true" : "false");
      cell.tabIndex = on ? 0 : -1;
    });
    const p = view.state.payload, l = p.keys.indexOf(view.state.key);
    const f = (name) => p.stats[name][l][view.state.head];
    view.$(".av-long-chosen").textContent = `${view.state.key}, head ${view.state.head}: sink ${f("first_token").toFixed(3)}, ` +
      `entropy ${f("entropy").toFixed(2)} nats, mean distance ${f("mean_distance").toFixed(1)} tokens, ` +
      `previous token ${f("previous_token").toFixed(3)}`;
  }

  async function choose(view, key, head) {
    view.state.key = key; view.state.head = head;
    markChosen(view);
    const answer = await ask(view, {what: "overview"});
    if (!answer) return;
    drawOverview(view, answer);
    const region = view.state.region;  // the open region follows, for this head
    if (region) openRegion(view, region.rows, region.cols);
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
    const canvas = view.$(".av-long-overview"), n = o.side, values = cells(o), scale = colourScale(view, values, o.top);
    canvas.width = n; canvas.height = n;
    P.paint(canvas.getContext("2d"), n, n, (r, c) => P.viridis(scale.level(values[r * n + c])));
    const what = o.block === 1 ? "each cell one weight" : `each cell the ${o.reduce} of a ${o.block} x ${o.block} block of weights`;
    const sink = o.sink ? "" : "; the first token left out of every row, the rest renormalised";
    view.$(".av-long-overbox").nextElementSibling.innerHTML = legend(scale.top,
      `queries down, keys across; ${what}${sink}; ${scale.said}`, fmt, scale.bottom, scale.log);
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
      const v = cells(o)[Math.floor(at.row / b) * o.side + Math.floor(at.col / b)];
      view.$(".av-long-overtip").textContent = b === 1
        ? `query ${said(view, at.row)} → key ${said(view, at.col)}: ${fmt(v)}`
        : `queries ${Math.floor(at.row / b) * b}-${Math.min(view.state.payload.length, (Math.floor(at.row / b) + 1) * b) - 1}` +
          ` → keys ${Math.floor(at.col / b) * b}-${Math.min(view.state.payload.length, (Math.floor(at.col / b) + 1) * b) - 1}:` +
          ` block ${o.reduce} ${fmt(v)} (drag to open exact weights)`;
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
        openRegion(view, [cursor.row, cursor.row + side], [cursor.col, cursor.col + side]);
      }
    });
    canvas.addEventListener("pointerup", (e) => {
      if (!start) return;
      const end = position(view, e), moved = Math.abs(end.row - start.row) + Math.abs(end.col - start.col) > 0;
      const r = moved ? rect(start, end) : {rows: around(view, start.row), cols: around(view, start.col)};
      start = null;
      show(r);
      openRegion(view, r.rows, r.cols);
    });
  }

  async function openRegion(view, rows, cols) {
    const answer = await ask(view, {what: "region", rows: rows, cols: cols});
    if (answer) drawRegion(view, answer);
  }

  function drawRegion(view, g) {
    view.state.region = g;
    const [r0, r1] = g.rows, [c0, c1] = g.cols, R = r1 - r0, C = c1 - c0, values = cells(g);
    const section = view.$(".av-long-region");
    section.hidden = false;
    const scale = colourScale(view, values, values.reduce((a, b) => Math.max(a, b), 0));
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
    for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) {
      ctx.fillStyle = P.css(P.viridis(scale.level(values[r * C + c])));
      ctx.fillRect(gutter + c * cell, gutter + r * cell, cell, cell);
    }
    if (labels) {
      const size = Math.min(12, Math.max(10, cell - 2));
      ctx.font = `${size}px sans-serif`; ctx.fillStyle = "#111"; ctx.textBaseline = "middle";
      const cut = (s) => (s.length > 11 ? s.slice(0, 10) + "…" : s);
      if (cell >= 8) {
        ctx.textAlign = "right";
        for (let r = 0; r < R; r++) ctx.fillText(cut(label(view, r0 + r, r0)), gutter - 3, gutter + r * cell + cell / 2);
        ctx.save(); ctx.textAlign = "left";
        for (let c = 0; c < C; c++) {
          ctx.save(); ctx.translate(gutter + c * cell + cell / 2, gutter - 3); ctx.rotate(-Math.PI / 2);
          ctx.fillText(cut(label(view, c0 + c, c0)), 0, 0); ctx.restore();
        }
        ctx.restore();
      }
    }
    view.state.cell = {size: cell, gutter: gutter};
    const exact = !g.block || g.block === 1;
    view.$(".av-long-regiontitle").textContent = `Queries ${r0}-${r1 - 1} (down) x keys ${c0}-${c1 - 1} (across) of ${view.state.key}, head ${view.state.head}` +
      (g.sink === false ? "; the first token left out of every row, the rest renormalised" : "");
    view.$(".av-long-regionnote").textContent = g.block
      ? (g.block === 1 ? "Offline: each cell one weight, kept to 1/65,535 of this map's top; the app, or run.region, gives them exactly."
        : `Offline: blocks of ${g.block} x ${g.block} tokens (each the block's max), not exact weights; the app, or run.region, gives them exactly.`)
      : "Exact weights, recomputed for this region.";
    view.$(".av-long-regionlegend").innerHTML = legend(scale.top,
      (exact ? scale.said : `${scale.said} (blocks)`).replace("map", "region"), fmt, scale.bottom, scale.log);
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
      const v = cells(g)[r * C + c];
      view.$(".av-long-regiontip").textContent = `query ${said(view, g.rows[0] + r)} → key ${said(view, g.cols[0] + c)}: ` +
        `${g.block && g.block > 1 ? "block max " : "weight "}${fmt(v)}`;
    });
  }

  function markStale(view, message) {
    const el = view.$(".av-long-stale");
    el.hidden = !message;
    el.textContent = message || "";
    view.element.classList.toggle("av-long-isstale", !!message);
  }

  function setPayload(view, p) {
    if (!p || p.kind !== "long") { view.element.classList.toggle("av-long-empty", true); return; }
    view.element.classList.toggle("av-long-empty", false);
    view.state.payload = p; view.state.region = null;
    markStale(view, null);
    view.$(".av-long-title").textContent = p.title || `${p.length} tokens`;
    view.$(".av-long-note").textContent = p.note || `Read all ${p.read.toLocaleString("en")} tokens.`;
    const offline = !view.opts.ask;
    view.$(".av-long-reduce").disabled = offline; view.$(".av-long-sink").disabled = offline;
    if (offline) view.$(".av-long-help").textContent += " Offline: the overviews are block maxima with the first token kept.";
    view.$(".av-long-region").hidden = true; view.$(".av-long-drag").hidden = true;
    drawGrids(view);
    const o = p.overview || (p.offline && p.offline.maps[p.keys[Math.floor(p.keys.length / 2)]][0]);
    view.state.key = o.key; view.state.head = o.head;
    markChosen(view);
    drawOverview(view, o);
  }

  function mount(element, payload, opts) {
    /* the view in `element`: its markup, its controls wired, the payload drawn; returns {setPayload, markStale,
       state, root}. Each part above takes the view: {element, opts, $ (a selector's element in it), state} */
    element.classList.add("av-long");
    element.innerHTML = markup();
    const view = {element: element, opts: opts || {}, $: (sel) => element.querySelector(sel),
      state: {payload: null, key: null, head: 0, overview: null, region: null, asked: 0}};
    const $ = view.$, state = view.state;
    ["av-long-reduce", "av-long-sink"].forEach((c) => $(`.${c}`).addEventListener("change", () =>
      choose(view, state.key, state.head)));
    $(".av-long-labels").addEventListener("change", () => { if (state.region) drawRegion(view, state.region); });
    $(".av-long-colour").addEventListener("change", () => {  // drawn again from the numbers it has: no request
      if (state.overview) drawOverview(view, state.overview);
      if (state.region) drawRegion(view, state.region);
    });
    wireDrag(view);
    wireRegion(view);
    const api = {setPayload: (p) => setPayload(view, p), markStale: (message) => markStale(view, message), state: state,
      root: element};
    element.avLong = api;
    setPayload(view, payload);
    return api;
  }

  function mountAll(doc) {
    doc.querySelectorAll("[data-av-long]").forEach((element) => {
      if (element.avLong) return;
      const data = doc.getElementById(element.dataset.avLong);
      mount(element, data ? JSON.parse(data.textContent) : null, {});
    });
  }

  global.AttentionLong = {mount: mount, mountAll: mountAll};
})(window);
