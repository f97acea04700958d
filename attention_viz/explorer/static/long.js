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
 * Its parts, each a file loaded before this one (explorer/html.py LONG), each adding one object to AttentionLong:
 * long-run.js (numbers, labels, answers), long-grids.js, long-overview.js, long-region.js; each takes the view
 * {element, opts, $, state} that mount makes. Loaded after palette.js and shared.js; defined once per page. Drawing
 * only: every number comes from the payload.
 */
(function (global) {
  "use strict";
  const L = global.AttentionLong = global.AttentionLong || {};
  if (L.mount) return;

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

  function setPayload(view, p) {
    if (!p || p.kind !== "long") { view.element.classList.toggle("av-long-empty", true); return; }
    view.element.classList.toggle("av-long-empty", false);
    view.state.payload = p; view.state.region = null;
    L.run.markStale(view, null);
    view.$(".av-long-title").textContent = p.title || `${p.length} tokens`;
    view.$(".av-long-note").textContent = p.note || `Read all ${p.read.toLocaleString("en")} tokens.`;
    const offline = !view.opts.ask;
    view.$(".av-long-reduce").disabled = offline; view.$(".av-long-sink").disabled = offline;
    view.$(".av-long-labels").closest("label").hidden = !!p.seconds;  // a recording's labels are its times: no choice
    if (offline) view.$(".av-long-help").textContent += " Offline: the overviews are block maxima with the first token kept.";
    view.$(".av-long-region").hidden = true; view.$(".av-long-drag").hidden = true;
    L.grids.draw(view);
    const o = p.overview || (p.offline && p.offline.maps[p.keys[Math.floor(p.keys.length / 2)]][0]);
    view.state.key = o.key; view.state.head = o.head;
    L.grids.markChosen(view);
    L.overview.draw(view, o);
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
      L.overview.choose(view, state.key, state.head)));
    $(".av-long-labels").addEventListener("change", () => { if (state.region) L.region.draw(view, state.region); });
    $(".av-long-colour").addEventListener("change", () => {  // drawn again from the numbers it has: no request
      if (state.overview) L.overview.draw(view, state.overview);
      if (state.region) L.region.draw(view, state.region);
    });
    L.overview.wire(view);
    L.region.wire(view);
    const api = {setPayload: (p) => setPayload(view, p), markStale: (message) => L.run.markStale(view, message), state: state,
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

  Object.assign(L, {mount: mount, mountAll: mountAll});
})(window);
