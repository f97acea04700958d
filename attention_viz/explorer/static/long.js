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

  function bytes(b64) {
    const raw = atob(b64), out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out.buffer;
  }
  // an overview's cells as floats (uint16 of cell / top), a region's as they came (float32)
  const cells = (o) => o.values || (o.values = o.side
    ? Float32Array.from(new Uint16Array(bytes(o.data)), (v) => (v / 65535) * o.top)
    : new Float32Array(bytes(o.data)));
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

  function mount(element, payload, opts) {
    opts = opts || {};
    element.classList.add("av-long");
    element.innerHTML = markup();
    const $ = (sel) => element.querySelector(sel);
    const state = {payload: null, key: null, head: 0, overview: null, region: null, asked: 0};

    function label(i, from) {
      /* position i's label: its piece, or (words) its word at the word's first piece (or at `from`, where a region
         starts) and "…" after */
      const p = state.payload;
      if ($(".av-long-labels").value === "pieces") return S.shown(p.pieces[i]);
      const w = p.wordOf[i];
      return i > (from || 0) && p.wordOf[i - 1] === w ? "…" : p.words[w];
    }
    const said = (i) => `${i} “${$(".av-long-labels").value === "pieces" ? label(i) : state.payload.words[state.payload.wordOf[i]]}”`;

    function request(extra) {
      const p = state.payload;
      return Object.assign({run: p.run, key: state.key, head: state.head, reduce: $(".av-long-reduce").value,
        sink: !$(".av-long-sink").checked}, extra);
    }
    async function ask(extra) {
      /* the answer to a request, or null (a newer request was made meanwhile, or the answer was an error: said) */
      const n = ++state.asked, asked = request(extra);
      let answer;
      try {
        answer = opts.ask ? await opts.ask(asked) : offline(asked);
      } catch (e) {
        answer = {error: "The server did not answer this view: try again."};
      }
      if (n !== state.asked) return null;
      if (!answer || answer.error) { markStale(answer ? answer.error : "No answer."); return null; }
      markStale(null);
      return answer;
    }

    function offline(asked) {
      /* the notebook: the embedded overviews (block max, sink kept) answer; a region is drawn from their blocks */
      const o = state.payload.offline, over = o.maps[asked.key][asked.head];
      if (asked.what === "overview") return over;
      const [r0, r1] = asked.rows, [c0, c1] = asked.cols, v = cells(over), b = over.block;
      const out = new Float32Array((r1 - r0) * (c1 - c0));
      for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) {
        out[(r - r0) * (c1 - c0) + (c - c0)] = v[Math.floor(r / b) * over.side + Math.floor(c / b)];
      }
      return {rows: asked.rows, cols: asked.cols, values: out, block: b, sink: true};
    }

    function drawGrids() {
      const p = state.payload, H = p.heads;
      $(".av-long-grids").innerHTML = GRIDS.map(([name, title, format]) => {
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
      element.querySelectorAll(".av-long-cell").forEach((cell) => cell.addEventListener("click", () =>
        choose(cell.dataset.key, Number(cell.dataset.head))));
      element.querySelectorAll(".av-long-grid").forEach((grid) => grid.addEventListener("keydown", (e) => {
        /* one tab stop a grid (the chosen head); the arrow keys move through the layers and heads */
        const step = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]}[e.key];
        if (!step || !e.target.classList.contains("av-long-cell")) return;
        e.preventDefault();
        const l = Math.min(Math.max(p.keys.indexOf(e.target.dataset.key) + step[0], 0), p.keys.length - 1);
        const h = Math.min(Math.max(Number(e.target.dataset.head) + step[1], 0), H - 1);
        choose(p.keys[l], h).then(() => {});
        const next = grid.querySelector(`.av-long-cell[data-key="${CSS.escape(p.keys[l])}"][data-head="${h}"]`);
        if (next) next.focus();
      }));
    }

    function markChosen() {
      element.querySelectorAll(".av-long-cell").forEach((cell) => {
        const on = cell.dataset.key === state.key && Number(cell.dataset.head) === state.head;
        cell.classList.toggle("av-long-on", on);
        cell.setAttribute("aria-pressed", on ? "true" : "false");
        cell.tabIndex = on ? 0 : -1;
      });
      const p = state.payload, l = p.keys.indexOf(state.key);
      const f = (name) => p.stats[name][l][state.head];
      $(".av-long-chosen").textContent = `${state.key}, head ${state.head}: sink ${f("first_token").toFixed(3)}, ` +
        `entropy ${f("entropy").toFixed(2)} nats, mean distance ${f("mean_distance").toFixed(1)} tokens, ` +
        `previous token ${f("previous_token").toFixed(3)}`;
    }

    async function choose(key, head) {
      state.key = key; state.head = head;
      markChosen();
      const answer = await ask({what: "overview"});
      if (!answer) return;
      drawOverview(answer);
      if (state.region) openRegion(state.region.rows, state.region.cols);  // the open region follows, for this head
    }

    function paint(canvas, values, rows, cols, scale) {
      const image = canvas.getContext("2d").createImageData(cols, rows);
      for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
        const rgb = P.viridis(scale.level(values[r * cols + c])), at = 4 * (r * cols + c);
        image.data[at] = rgb[0]; image.data[at + 1] = rgb[1]; image.data[at + 2] = rgb[2]; image.data[at + 3] = 255;
      }
      return image;
    }

    function colourScale(values, top) {
      /* the colour scale chosen: {level(v) -> 0..1, top, bottom, log, said}. "log" (the default): 3 decades under the
         map's top, so a sharp head's lines stand out and a spread head's rest still shows; "top": linear 0 → the
         map's top; "p99": linear 0 → its cells' 99th percentile, brighter cells drawn at the top colour */
      const chosen = $(".av-long-colour").value, linear = (t) => (v) => (t > 0 ? Math.min(v / t, 1) : 0);
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

    function drawOverview(o) {
      state.overview = o;
      const canvas = $(".av-long-overview"), n = o.side, values = cells(o), scale = colourScale(values, o.top);
      canvas.width = n; canvas.height = n;
      canvas.getContext("2d").putImageData(paint(canvas, values, n, n, scale), 0, 0);
      const what = o.block === 1 ? "each cell one weight" : `each cell the ${o.reduce} of a ${o.block} x ${o.block} block of weights`;
      const sink = o.sink ? "" : "; the first token left out of every row, the rest renormalised";
      $(".av-long-overbox").nextElementSibling.innerHTML = legend(scale.top,
        `queries down, keys across; ${what}${sink}; ${scale.said}`, fmt, scale.bottom, scale.log);
    }

    // -- the overview's drag: a rectangle of positions, at most REGION_MAX a side
    function position(event) {
      const canvas = $(".av-long-overview"), box = canvas.getBoundingClientRect(), T = state.payload.length;
      const x = Math.min(Math.max((event.clientX - box.left) / box.width, 0), 0.999999);
      const y = Math.min(Math.max((event.clientY - box.top) / box.height, 0), 0.999999);
      return {col: Math.floor(x * T), row: Math.floor(y * T), box: box};
    }
    function span(a, b) {
      let lo = Math.min(a, b), hi = Math.max(a, b) + 1;
      if (hi - lo > REGION_MAX) { if (b < a) lo = hi - REGION_MAX; else hi = lo + REGION_MAX; }
      return [lo, hi];
    }
    function around(i) {
      const T = state.payload.length, side = Math.min(CLICK_SIDE, T);
      const lo = Math.min(Math.max(0, i - side / 2), T - side);
      return [Math.floor(lo), Math.floor(lo) + side];
    }
    function wireDrag() {
      const canvas = $(".av-long-overview"), drag = $(".av-long-drag");
      let start = null;
      function rect(a, b) {
        const rows = span(a.row, b.row), cols = span(a.col, b.col);
        return {rows: rows, cols: cols};
      }
      function show(r) {
        const T = state.payload.length, box = canvas.getBoundingClientRect(), outer = canvas.parentElement.getBoundingClientRect();
        Object.assign(drag.style, {left: `${box.left - outer.left + (r.cols[0] / T) * box.width}px`,
          top: `${box.top - outer.top + (r.rows[0] / T) * box.height}px`,
          width: `${Math.max(2, ((r.cols[1] - r.cols[0]) / T) * box.width)}px`,
          height: `${Math.max(2, ((r.rows[1] - r.rows[0]) / T) * box.height)}px`});
        drag.hidden = false;
      }
      canvas.addEventListener("pointerdown", (e) => {
        if (!state.overview) return;
        start = position(e);
        canvas.setPointerCapture(e.pointerId);
        show(rect(start, start));
      });
      canvas.addEventListener("pointermove", (e) => {
        if (start) { show(rect(start, position(e))); return; }
        if (!state.overview) return;
        const at = position(e), o = state.overview, b = o.block;
        const v = cells(o)[Math.floor(at.row / b) * o.side + Math.floor(at.col / b)];
        $(".av-long-overtip").textContent = b === 1
          ? `query ${said(at.row)} → key ${said(at.col)}: ${fmt(v)}`
          : `queries ${Math.floor(at.row / b) * b}-${Math.min(state.payload.length, (Math.floor(at.row / b) + 1) * b) - 1}` +
            ` → keys ${Math.floor(at.col / b) * b}-${Math.min(state.payload.length, (Math.floor(at.col / b) + 1) * b) - 1}:` +
            ` block ${o.reduce} ${fmt(v)} (drag to open exact weights)`;
      });
      canvas.tabIndex = 0;
      let cursor = null;  // by keyboard: a square moved by the arrow keys, opened with Enter
      canvas.addEventListener("keydown", (e) => {
        if (!state.overview) return;
        const T = state.payload.length, side = Math.min(CLICK_SIDE, T), by = Math.max(1, Math.round(T / 32));
        const step = {ArrowLeft: [0, -by], ArrowRight: [0, by], ArrowUp: [-by, 0], ArrowDown: [by, 0]}[e.key];
        if (!step && e.key !== "Enter") return;
        e.preventDefault();
        cursor = cursor || {row: 0, col: 0};
        if (step) {
          cursor = {row: Math.min(Math.max(cursor.row + step[0], 0), T - side), col: Math.min(Math.max(cursor.col + step[1], 0), T - side)};
          show({rows: [cursor.row, cursor.row + side], cols: [cursor.col, cursor.col + side]});
        } else {
          openRegion([cursor.row, cursor.row + side], [cursor.col, cursor.col + side]);
        }
      });
      canvas.addEventListener("pointerup", (e) => {
        if (!start) return;
        const end = position(e), moved = Math.abs(end.row - start.row) + Math.abs(end.col - start.col) > 0;
        const r = moved ? rect(start, end) : {rows: around(start.row), cols: around(start.col)};
        start = null;
        show(r);
        openRegion(r.rows, r.cols);
      });
    }

    async function openRegion(rows, cols) {
      const answer = await ask({what: "region", rows: rows, cols: cols});
      if (answer) drawRegion(answer);
    }

    function drawRegion(g) {
      state.region = g;
      const [r0, r1] = g.rows, [c0, c1] = g.cols, R = r1 - r0, C = c1 - c0, values = cells(g);
      const section = $(".av-long-region");
      section.hidden = false;
      const scale = colourScale(values, values.reduce((a, b) => Math.max(a, b), 0));
      const box = $(".av-long-regionbox"), width = Math.max(200, Math.min(640, box.clientWidth || 640));
      const labels = Math.max(R, C) <= 64, gutter = labels ? 84 : 0;
      // labelled cells at least 12 px (their labels readable; a narrow screen scrolls the region sideways)
      const cell = Math.max(labels ? 12 : 1, Math.floor((width - gutter) / Math.max(R, C)));
      const canvas = $(".av-long-regioncanvas"), ratio = global.devicePixelRatio || 1;
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
          for (let r = 0; r < R; r++) ctx.fillText(cut(label(r0 + r, r0)), gutter - 3, gutter + r * cell + cell / 2);
          ctx.save(); ctx.textAlign = "left";
          for (let c = 0; c < C; c++) {
            ctx.save(); ctx.translate(gutter + c * cell + cell / 2, gutter - 3); ctx.rotate(-Math.PI / 2);
            ctx.fillText(cut(label(c0 + c, c0)), 0, 0); ctx.restore();
          }
          ctx.restore();
        }
      }
      state.cell = {size: cell, gutter: gutter};
      const exact = !g.block || g.block === 1;
      $(".av-long-regiontitle").textContent = `Queries ${r0}-${r1 - 1} (down) x keys ${c0}-${c1 - 1} (across) of ${state.key}, head ${state.head}` +
        (g.sink === false ? "; the first token left out of every row, the rest renormalised" : "");
      $(".av-long-regionnote").textContent = g.block
        ? (g.block === 1 ? "Offline: each cell one weight, kept to 1/65,535 of this map's top; the app, or run.region, gives them exactly."
          : `Offline: blocks of ${g.block} x ${g.block} tokens (each the block's max), not exact weights; the app, or run.region, gives them exactly.`)
        : "Exact weights, recomputed for this region.";
      $(".av-long-regionlegend").innerHTML = legend(scale.top,
        (exact ? scale.said : `${scale.said} (blocks)`).replace("map", "region"), fmt, scale.bottom, scale.log);
      $(".av-long-regiontip").textContent = "Point at a cell for its weight.";
    }

    function wireRegion() {
      const canvas = $(".av-long-regioncanvas");
      canvas.addEventListener("pointermove", (e) => {
        const g = state.region;
        if (!g) return;
        const box = canvas.getBoundingClientRect(), x = e.clientX - box.left - state.cell.gutter, y = e.clientY - box.top - state.cell.gutter;
        const c = Math.floor(x / state.cell.size), r = Math.floor(y / state.cell.size);
        const R = g.rows[1] - g.rows[0], C = g.cols[1] - g.cols[0];
        if (r < 0 || c < 0 || r >= R || c >= C) return;
        const v = cells(g)[r * C + c];
        $(".av-long-regiontip").textContent = `query ${said(g.rows[0] + r)} → key ${said(g.cols[0] + c)}: ` +
          `${g.block && g.block > 1 ? "block max " : "weight "}${fmt(v)}`;
      });
    }

    function markStale(message) {
      const el = $(".av-long-stale");
      el.hidden = !message;
      el.textContent = message || "";
      element.classList.toggle("av-long-isstale", !!message);
    }

    function setPayload(p) {
      if (!p || p.kind !== "long") { element.classList.toggle("av-long-empty", true); return; }
      element.classList.toggle("av-long-empty", false);
      state.payload = p; state.region = null;
      markStale(null);
      $(".av-long-title").textContent = p.title || `${p.length} tokens`;
      $(".av-long-note").textContent = p.note || `Read all ${p.read.toLocaleString("en")} tokens.`;
      const offline = !opts.ask;
      $(".av-long-reduce").disabled = offline; $(".av-long-sink").disabled = offline;
      if (offline) $(".av-long-help").textContent += " Offline: the overviews are block maxima with the first token kept.";
      $(".av-long-region").hidden = true; $(".av-long-drag").hidden = true;
      drawGrids();
      const o = p.overview || (p.offline && p.offline.maps[p.keys[Math.floor(p.keys.length / 2)]][0]);
      state.key = o.key; state.head = o.head;
      markChosen();
      drawOverview(o);
    }

    ["av-long-reduce", "av-long-sink"].forEach((c) => $(`.${c}`).addEventListener("change", () => choose(state.key, state.head)));
    $(".av-long-labels").addEventListener("change", () => { if (state.region) drawRegion(state.region); });
    $(".av-long-colour").addEventListener("change", () => {  // drawn again from the numbers it has: no request
      if (state.overview) drawOverview(state.overview);
      if (state.region) drawRegion(state.region);
    });
    wireDrag();
    wireRegion();
    const view = {setPayload: setPayload, markStale: markStale, state: state, root: element};
    element.avLong = view;
    setPayload(payload);
    return view;
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
