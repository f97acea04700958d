/* explorer.js: draws one packed run (attention_viz/explorer/pack.py) in the browser.
 *
 *   AttentionExplorer.mount(container, payload, {rootId: "explorer", headViewId: "head_view"})
 *     -> controller {select(kind, layer, head), setScale(name),
 *                    setShow("weights" | "flows" | "rollout" | "flow" | "bias"),
 *                    setPayload(payload (object or JSON) or null), setStep(t or null), play(), pause(),
 *                    openOn({kind, layer, head}) (now, and for the next run), markStale(message or null),
 *                    state: {kind, layer, head, scale, show}}
 *
 * Builds, inside `container` only (it gets the class av-explorer):
 *   #<rootId>      the controls (kind, layer, head, colour scale, and what the maps show: the weights, or what
 *                  flows, when the payload has the value norms; a self-attention stack's rollout or attention
 *                  flow, one [T, T] map drawn in the head view with the grid hidden, when it has them), the grid of every layer x head of
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
 * else "<rootId>-decode-step"; scoresId to "alignment", else "<rootId>-alignment". Every view change is
 * drawn here from the kept numbers: no request leaves the page.
 * Each redraw is timed between performance marks: measures "explorer-redraw" (script time) and
 * "explorer-frame" (until the next frame), detail {root, reason} (reason: tile, kind, layer, head, scale,
 * show, payload, api).
 * On a root 720 px wide or more (explorer.css) the head sits beside the grid, or under it when too wide for that, and
 * says when it scrolls sideways. AttentionExplorer.reveal(views) scrolls a page's view into sight (a lesson's step).
 * Nothing global but `window.AttentionExplorer` (beside what every view shares: palette.js, shared.js); two roots on
 * one page never see each other.
 *
 * The explorer's parts, each a file loaded before this one (explorer-*.js, each adding one object to
 * window.AttentionExplorer), share one mounted explorer's context `x` (its root, elements, options, state and kept run):
 *   run (the numbers), grid, head (the head view), kept (kinds shown before), scores, decode (the step bar),
 *   headsOff (switching heads off), tips (hover); this file builds the markup, keeps the state and wires the controls.
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.mount) return; // already loaded by another fragment on this page
  const {escapeHtml, inline, stepBarHtml} = global.AttentionShared; // shared.js, loaded first

  const SCALES = {
    linear: "linear (0 → 1)",
    log: "log (0.001 → 1)",
    row: "per row (0 → row's max)",
  };
  // what the maps show: the weights α, or what flows (Kobayashi et al. 2020): α_ij·‖v_j W_O^h‖, as each row's
  // share (the server sends ‖v_j W_O^h‖ per head and key; a run without them offers the weights only)
  // ... or a self-attention stack read as one mixing (Abnar & Zuidema 2020): its rollout, or its attention flow
  // ... or the position bias B a model adds to QKᵀ (T5's relative positions, ALiBi), a signed map of its own
  const SHOWS = {weights: "attention weights α", flows: "what flows (α·‖v W_O‖)", rollout: "rollout of the stack",
    flow: "attention flow of the stack", bias: "position bias B (added to QKᵀ)"};
  // a view the payload offers but this run cannot show stays listed, disabled, and the line under the controls says why
  const FLOWS_OFF = "What flows is off for this run: with the causal mask off, the decoder's maps change at every " +
    "decode step, and the value norms are the finished run's.";
  const BIAS_OFF = "The position bias is switched off for this run (B = 0): switch it on to see it.";
  const MAX_MEASURES = 2000; // performance measures kept before they are cleared (a long session stays small)

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
        <span class="av-show-why" role="note" hidden></span>
        <span class="av-cut-box" hidden><button type="button" class="av-cut" aria-pressed="false">✂ switch heads off</button>
          <button type="button" class="av-cut-kind" hidden>this kind off</button>
          <button type="button" class="av-cut-none" hidden>every head on</button></span>
      </div>
      <div class="av-decode" id="${escapeHtml(stepId)}" data-step="all" hidden>
        ${stepBarHtml({prev: "previous step", next: "next step", slider: "decode step",
          status: '<div class="av-step-text" role="status"></div>'})}
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
      scale: $(".av-scale"), show: $(".av-show"), showBox: $(".av-show-box"), showWhy: $(".av-show-why"), grid: $(".av-grid"), legend: $(".av-legend"), stats: $(".av-stats"),
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


  function timer(rootName) {
    /* x.timed(reason, draw): a redraw between performance marks: measures "explorer-redraw" (the script's work) and
       "explorer-frame" (until the next frame is painted), detail {root, reason}; benchmarks/explorer.py reads them */
    return (reason, draw) => {
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
    };
  }

  function context(root, opts) {
    /* one mounted explorer: its markup and elements, options, state, and (x.data) the run it keeps */
    const rootName = opts.rootId || "explorer";
    const main = rootName === "explorer";
    const ui = shell(root, rootName, opts.headViewId || (main ? "head_view" : rootName + "-head"),
      opts.stepId || (main ? "decode_step" : rootName + "-decode-step"),
      opts.scoresId || (main ? "alignment" : rootName + "-alignment"));
    // step: null = the finished run, t = the decode step that writes target token t
    const state = {kind: null, layer: 0, head: 0, scale: opts.scale in SCALES ? opts.scale : "linear", step: null,
      show: "weights"};
    ui.scale.innerHTML = options(Object.entries(SCALES));
    ui.show.innerHTML = options(Object.entries(SHOWS));
    return {root: root, ui: ui, opts: opts, state: state, rootName: rootName, timed: timer(rootName),
      data: null, pending: null, // pending: the head the next run opens on (openOn)
      cutting: false, // "switch heads off" mode: a click on a tile, a layer or the kind switches it (opts.switchable)
      importance: null, // {model, values: {key: [H]}, label, digits}: each head's importance, drawn as badges
      table: null, // {kind, cells: [[td, index in the head, query row]]}: the head view's skeleton
      map: null, // {kind, ...AttentionHeadMap.build}: the head view of a large head
      gridPainted: null, // the colour scale and decode step the grid's tiles were painted for
      kept: new Map(), headViewId: ui.view.id, scoresId: ui.scores.id, wideCheck: 0, bar: null};
  }

  function summary(x) {
    const p = x.data.payload;
    const notes = p.notes.map((n) => `<li>${inline(n)}</li>`).join("");
    x.ui.summary.innerHTML = (p.title ? `<div class="av-title">${escapeHtml(p.title)}</div>` : "") +
      `<div class="av-output">output: <code>${escapeHtml(p.output)}</code></div>` +
      (notes ? `<ul class="av-notes">${notes}</ul>` : "");
  }

  function syncControls(x) {
    const ui = x.ui, state = x.state, data = x.data, k = data.kinds[state.kind];
    ui.kind.value = state.kind;
    write(ui.layer, options(Array.from({length: k.layers}, (_, l) => [l, `${l}`])));
    write(ui.head, options(Array.from({length: data.H}, (_, h) => [h, `${h}`])));
    ui.layer.value = state.layer; ui.head.value = state.head; ui.scale.value = state.scale;
    ui.showBox.hidden = data.shows.length < 2; ui.show.value = state.show;
    x.root.classList.toggle("av-stacked", E.run.stacked(x, k)); // one map for the stack: no grid of heads
  }

  function select(x, kind, layer, head, reason) {
    /* choose a head; a new kind redraws the grid, the same kind only moves the selection */
    const data = x.data, state = x.state;
    if (!data) return;
    if (reason !== "payload" && reason !== "api") x.pending = null; // the user's own choice wins over a lesson's
    const before = state.kind;
    state.kind = kind in data.kinds ? kind : data.order[0];
    const newKind = state.kind !== before;
    const k = data.kinds[state.kind];
    state.layer = Math.min(Math.max(+layer || 0, 0), k.layers - 1);
    state.head = Math.min(Math.max(+head || 0, 0), data.H - 1);
    x.timed(reason || "select", () => {
      syncControls(x);
      if (newKind) {
        E.kept.keep(x, before);
        const shownBefore = E.kept.restore(x, state.kind); // this kind's tiles and head view, kept from an earlier visit
        E.grid.draw(x, !shownBefore); E.scores.draw(x);
      } else { E.grid.markSelected(x); E.scores.mark(x); }
      E.head.draw(x); E.scores.stats(x); E.decode.draw(x); E.headsOff.note(x);
    });
    x.root.dispatchEvent(new CustomEvent("explorer:select", {detail: {kind: state.kind, layer: state.layer, head: state.head}}));
  }

  function markStale(x, message) {
    /* say at once that what is drawn is not for the current input (message), or clear that (null); while
       stale, the run's output and notes are hidden (they would claim to be the current input's) */
    const ui = x.ui, data = x.data;
    x.root.classList.toggle("av-stale", !!message);
    x.root.classList.remove("av-switching");
    ui.stale.hidden = !message;
    ui.stale.textContent = message ? String(message) + (data && data.payload.title ? ` Shown: ${data.payload.title}.` : "") : "";
  }

  function setScale(x, scale) {
    x.state.scale = scale in SCALES ? scale : "linear";
    if (!x.data) return;
    x.timed("scale", () => { x.ui.scale.value = x.state.scale; E.grid.draw(x); E.head.draw(x); E.grid.legend(x); });
  }

  const showable = (data, show) => data.shows.includes(show) && !(show in data.showOff);

  function setShow(x, show) {
    x.state.show = show in SHOWS && (!x.data || showable(x.data, show)) ? show : "weights";
    if (!x.data) return;
    x.timed("show", () => { syncControls(x); E.grid.draw(x); E.head.draw(x); E.grid.legend(x); E.scores.stats(x); });
  }

  function setPayload(x, next) {
    /* a new run (from the server): keep kind, layer, head and scale where the new run has them */
    const ui = x.ui, state = x.state, opts = x.opts;
    if (typeof next === "string") next = next.trim() ? JSON.parse(next) : null;
    x.table = x.map = x.gridPainted = null; // new tokens: a new skeleton, new tiles
    E.kept.forget(x);
    x.bar.pause();
    state.step = null; // a new run shows its finished decode
    markStale(x, null);
    x.root.classList.toggle("av-empty", !next || !next.kinds);
    if (!next || !next.kinds) { // nothing to show yet (the app before its first run)
      x.data = null;
      ui.summary.textContent = "No run to show yet.";
      ui.grid.innerHTML = ui.view.innerHTML = "";
      write(ui.stats, "");
      ui.decode.hidden = ui.scores.hidden = true;
      return;
    }
    const data = x.data = E.run.prepare(next);
    // what this payload offers: the weights; what flows (with the value norms); a stack's rollout and flow (with
    // stacks); showOff: those this run cannot show, each with why (listed, disabled, the reason under the controls)
    const stacks = Object.values(data.kinds).filter((k) => k.stack);
    const norms = Object.values(data.kinds).some((k) => k.norms);
    const biased = Object.values(data.kinds).some((k) => k.bias) || next.position_bias === false;
    data.shows = ["weights", ...(norms ? ["flows"] : []), ...(stacks.length ? ["rollout", "flow"] : []),
      ...(biased ? ["bias"] : [])];
    data.showOff = {};
    if (next.position_bias === false) data.showOff.bias = BIAS_OFF;
    if (norms && !data.canFlow) data.showOff.flows = FLOWS_OFF;
    if (stacks.length && !stacks.some((k) => k.stack.flow)) {
      data.showOff.flow = stacks.map((k) => k.stack.flowNote).find(Boolean) || "No attention flow for this run.";
    }
    write(ui.show, data.shows.map((s) => `<option value="${escapeHtml(s)}"${s in data.showOff ? " disabled" : ""}>` +
      `${escapeHtml(SHOWS[s])}${s in data.showOff ? " (off)" : ""}</option>`).join(""));
    ui.showWhy.hidden = !Object.keys(data.showOff).length;
    write(ui.showWhy, Object.values(data.showOff).map(escapeHtml).join(" "));
    ui.show.title = Object.values(data.showOff).join(" ");  // the same reason on the pointer
    if (!showable(data, state.show)) state.show = "weights";
    ui.kind.innerHTML = options(data.order.map((kind) => [kind, data.kinds[kind].label]));
    summary(x); E.grid.legend(x);
    x.root.classList.remove("av-switching");
    // the first run opens where the options or the run say (the run: its last cross-attention layer); later
    // runs keep the kind, layer and head chosen, where they have them
    const first = state.kind === null, open = next.opening || {};
    let kind = !first && state.kind in data.kinds ? state.kind
      : (opts.kind in data.kinds ? opts.kind : (open.kind in data.kinds ? open.kind : data.order[0]));
    let layer = first ? (opts.layer !== undefined ? opts.layer : (open.layer || 0)) : state.layer;
    let head = first ? (opts.head !== undefined ? opts.head : (open.head || 0)) : state.head;
    if (x.pending && x.pending.kind in data.kinds) { ({kind, layer, head} = x.pending); x.pending = null; }
    state.kind = null; // forces the grid
    select(x, kind, layer, head, "payload");
  }

  function picks(x, container, selector, reason) {
    /* a click, Enter or Space on a [data-layer][data-head] element under `container` selects that head */
    container.addEventListener("click", (event) => {
      const item = event.target.closest(selector);
      if (item) select(x, x.state.kind, +item.dataset.layer, +item.dataset.head, reason);
    });
    container.addEventListener("keydown", (event) => {
      const item = event.target.closest(selector);
      if (item && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); item.click(); }
    });
  }

  function wire(x) {
    /* one listener per control, all on this root's own elements */
    const ui = x.ui, state = x.state;
    ui.kind.addEventListener("change", () => select(x, ui.kind.value, state.layer, state.head, "kind"));
    ui.layer.addEventListener("change", () => select(x, state.kind, +ui.layer.value, state.head, "layer"));
    ui.head.addEventListener("change", () => select(x, state.kind, state.layer, +ui.head.value, "head"));
    ui.scale.addEventListener("change", () => setScale(x, ui.scale.value));
    ui.show.addEventListener("change", () => setShow(x, ui.show.value));
    E.decode.wire(x);
    E.headsOff.wire(x); // before the grid's own clicks: in its mode it stops them
    picks(x, ui.grid, ".av-tile", "tile");
    picks(x, ui.scorePanels, "tr[data-layer]", "score");
    E.tips.wire(x);
    E.head.watchWidth(x);
  }

  function mount(root, payload, opts) {
    opts = opts || {};
    if (typeof payload === "string") payload = JSON.parse(payload);
    const x = context(root, opts);
    wire(x);
    const controller = {
      select: (kind, layer, head) => select(x, kind, layer, head, "api"),
      setScale: (scale) => setScale(x, scale), setShow: (show) => setShow(x, show),
      setPayload: (next) => setPayload(x, next), markStale: (message) => markStale(x, message),
      state: x.state, scales: Object.keys(SCALES),
      setCutting: (on) => E.headsOff.setCutting(x, on), askedOff: () => x.askedOff || {},
      setImportance: (imp) => {
        /* badges of each head's importance: {model, values: {key: [H]}, label, digits, high}; null clears */
        x.importance = imp && imp.values ? Object.assign({digits: 2, high: Infinity, label: "importance"}, imp) : null;
        if (x.data) { x.gridPainted = null; E.grid.draw(x, true); }
      },
      setStep: (step) => { x.bar.pause(); E.decode.setStep(x, step, "api"); }, play: () => x.bar.play(),
      pause: () => x.bar.pause(),
      openOn: (target) => {
        x.pending = target;
        if (x.data && target.kind in x.data.kinds) select(x, target.kind, target.layer, target.head, "api");
      },
    };
    root.avExplorer = controller;
    setPayload(x, payload);
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

  function reveal(views, bar) {
    /* bring a view into sight once the page has drawn what changed (two frames): of `views`, each a list of
       selectors whose boxes together are the view, the first on show that fits the screen, else the first on show;
       scrolled as little as it takes, so text above it stays when both fit; a view taller than the screen comes to
       its top. With `bar` (a selector: a bar that stays at the top of the screen, a guided lesson's), into the part
       of the screen below the bar; a sticky bar moves with the page until it sticks, so the view is measured again
       after each scroll. A lesson's step calls it. */
    const box = (parts) => {
      const boxes = parts.map((sel) => document.querySelector(sel)).filter((e) => e && e.getClientRects().length)
        .map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0 && r.height > 0);
      return boxes.length ? [Math.min(...boxes.map((r) => r.top)), Math.max(...boxes.map((r) => r.bottom))] : null;
    };
    const barBox = () => {
      const e = bar && document.querySelector(bar);
      return e && e.getClientRects().length ? e.getBoundingClientRect() : {bottom: 0, height: 0};
    };
    const barEnd = () => Math.max(0, barBox().bottom);
    const place = (parts) => {
      for (let turn = 0; turn < 3; turn++) {
        const [top, bottom] = box(parts), from = barEnd(), room = global.innerHeight;
        const end = Math.min(bottom, top + room - from - 16);
        if (top >= from && end <= room) return;
        const before = global.scrollY;
        global.scrollBy({top: end > room ? end - room + 8 : top - from - 8, behavior: "instant"});
        if (global.scrollY === before) return;
      }
    };
    global.requestAnimationFrame(() => global.requestAnimationFrame(() => {
      const room = global.innerHeight - barBox().height - 16, fits = (b) => b && b[1] - b[0] <= room;
      const parts = views.find((p) => fits(box(p))) || views.find(box);
      if (!parts) return;
      place(parts);
      // a view drawn late (a chart drawn at its width once its tab shows) moves what is below it: placed again in
      // each frame for a second and a half, while the page stays where this left it (not once the person scrolls)
      let left = global.scrollY;
      const until = global.performance.now() + 1500;
      const again = () => {
        if (global.scrollY !== left || global.performance.now() > until || !box(parts)) return;
        place(parts);
        left = global.scrollY;
        global.requestAnimationFrame(again);
      };
      global.requestAnimationFrame(again);
    }));
  }

  Object.assign(E, {mount: mount, mountAll: mountAll, colour: E.run.colour, scales: SCALES, ink: E.run.ink, reveal: reveal,
    write: write});
})(window);
