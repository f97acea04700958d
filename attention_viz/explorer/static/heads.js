/* Which heads matter (attention_viz.service.heads_view, format "attention_viz.importance/1"), drawn from its
   numbers: per attention kind a layer x head table of what each head alone costs when switched off, and the prune
   curve (metric against heads left, least important removed first) as SVG, exact numbers on hover. A partial
   payload (one with "progress", while a real model is scored) draws its progress line and the tables with the heads
   not scored yet as pending cells ("…"); the curve and the summary come with the payload. The curve is drawn with
   charts.js's pieces (as the lab's charts), escaping and the notes' Markdown are shared.js's, both loaded first.
   window.AttentionHeads.mount(element, payload, {empty, unscored}) -> {setPayload, markStale, setEmpty, root}. */
(function (global) {
  "use strict";
  if (global.AttentionHeads) return;
  const {escapeHtml, inline, mapKey} = global.AttentionShared; // shared.js, loaded first
  const W = 560, H = 230, PAD = {left: 56, right: 14, top: 12, bottom: 40}; // the prune curve's viewBox and margins

  function fmt(data, v) { return data.unit === "points" ? `${v.toFixed(1)}` : v.toFixed(3); }

  function tables(data) {
    const top = Math.max(1e-9, ...Object.values(data.drop).flat().filter((v) => v !== null));
    return data.kinds.map((k) => {
      let rows = "";
      for (let l = 0; l < k.layers; l++) {
        const key = mapKey(k.kind, l);
        rows += `<tr><th scope="row">L${l}</th>` + data.drop[key].map((v, h) => {
          if (v === null) return `<td class="av-pending" title="${escapeHtml(key)} head ${h}: not scored yet">…</td>`;
          const share = Math.max(0, Math.min(1, v / top));
          const extra = data.loss_rise ? `; loss +${data.loss_rise[key][h].toFixed(4)} nats` : "";
          const gradient = data.gradient[key][h];
          const title = `${key} head ${h}: ${data.metric} lost ${v.toFixed(4)} ${data.unit}${extra}` +
            (gradient === null ? "" : `; gradient ${gradient.toPrecision(3)}`);
          return `<td title="${escapeHtml(title)}" style="--share:${share.toFixed(3)}"${share > 0.5 ? ' class="av-hot"' : ""}>` +
            `${fmt(data, v)}</td>`;
        }).join("") + "</tr>";
      }
      const heads = Array.from({length: data.n_heads}, (_, h) => `<th scope="col">H${h}</th>`).join("");
      // the caption wraps above the table's own scroll box: a phone scrolls the table, never the page or its title
      return `<div class="av-imp-box"><div class="av-imp-caption">${escapeHtml(k.label)}: ${escapeHtml(data.metric)} ` +
        `lost (${escapeHtml(data.unit)}) with each head alone off</div><div class="av-imp-scroll">` +
        `<table class="av-imp-table" aria-label="${escapeHtml(k.label)}: ${escapeHtml(data.metric)} lost with each ` +
        `head alone off"><thead><tr><th></th>${heads}</tr></thead><tbody>${rows}</tbody></table></div>` +
        `<div class="av-imp-more" hidden>⇆ scroll the table sideways for the rest</div></div>`;
    }).join("");
  }

  function curve(data) {
    /* the prune curve as an SVG in its figure (charts.js's pieces): the metric against heads left, a dot per point
       (its numbers on hover and focus), the dashed line of the tolerance, the large dot where the heads that can go end */
    const {svgEl, htmlEl, label, scale} = global.AttentionCharts;
    const n = data.prune.length, lo = Math.min(...data.prune), hi = Math.max(...data.prune, data.baseline);
    const x = (k) => scale(0, 1, PAD.left, W - PAD.right)(n > 1 ? k / (n - 1) : 0);
    const y = scale(lo, lo + (hi - lo || 1), H - PAD.bottom, PAD.top);
    const figure = htmlEl("figure", "av-prune");
    htmlEl("figcaption", "", figure, "The prune curve: heads removed one at a time, least important first " +
      `(${data.metric} against heads left; dashed: one ${data.unit === "points" ? "point" : "hundredth of a nat"} ` +
      `below every head on; the large dot: ${data.can_go} removed)`);
    const svg = svgEl("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "prune curve"},
      htmlEl("div", "av-prune-box", figure));
    svgEl("line", {class: "av-axis", x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: H - PAD.bottom}, svg);
    svgEl("line", {class: "av-axis", x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom}, svg);
    const limit = data.unit === "points" ? data.baseline - 1 : data.baseline - 0.01;
    if (limit >= lo) svgEl("line", {class: "av-limit", x1: PAD.left, x2: W - PAD.right, y1: y(limit), y2: y(limit)}, svg);
    for (const v of [lo, (lo + hi) / 2, hi]) label(svg, PAD.left - 6, y(v) + 4, fmt(data, v), {"text-anchor": "end"});
    for (const k of [0, Math.floor((n - 1) / 2), n - 1]) {
      label(svg, x(k), H - PAD.bottom + 16, String(data.total - k), {"text-anchor": "middle"});
    }
    label(svg, (W + PAD.left) / 2, H - 6, "heads left", {"text-anchor": "middle"});
    svgEl("polyline", {points: data.prune.map((v, k) => `${x(k).toFixed(1)},${y(v).toFixed(1)}`).join(" ")}, svg);
    data.prune.forEach((v, k) => {
      const off = data.order.slice(0, k).map(([key, h]) => `${key} ${h}`);
      const text = `${k} off, ${data.total - k} left: ${data.metric} ${v.toFixed(4)}` + (k ? `; last off: ${off[off.length - 1]}` : "");
      const dot = svgEl("circle", {cx: x(k).toFixed(1), cy: y(v).toFixed(1), r: k === data.can_go ? 5 : 3,
        class: k === data.can_go ? "av-can-go" : "", "data-k": k, tabindex: 0, "aria-label": text}, svg);
      svgEl("title", {}, dot).textContent = text;
    });
    htmlEl("div", "av-prune-more", figure, "⇆ scroll the curve sideways for the rest");
    htmlEl("div", "av-prune-tip", figure).setAttribute("role", "status");
    return figure;
  }

  // say where a table is wider than its box (a phone, or many heads): its right part is a scroll away
  function markScrolling(root) {
    for (const box of root.querySelectorAll(".av-imp-box")) {
      const scroll = box.querySelector(".av-imp-scroll");
      box.querySelector(".av-imp-more").hidden = scroll.scrollWidth <= scroll.clientWidth + 1;
    }
  }

  function mount(element, payload, opts) {
    const root = document.createElement("div");
    root.className = "av-hv av-heads";
    element.appendChild(root);
    const view = {root: root, setPayload: setPayload, markStale: markStale, setEmpty: setEmpty};
    let shown = payload, empty = opts.unscored || opts.empty || ""; // unscored: why this model's heads cannot be
    function setPayload(data) {
      shown = data;
      root.classList.remove("av-stale");
      if (!data || !data.drop) { root.innerHTML = `<p class="av-empty">${escapeHtml(empty)}</p>`; return; }
      if (data.progress) {  // a real model being scored: what is scored so far
        const p = data.progress, [done, total] = p.curve ? [p.curve.done, p.curve.total] : [p.done, p.total];
        root.innerHTML = `<div class="av-stale-note" role="status" hidden></div><h4>${escapeHtml(data.title)}</h4>` +
          `<p class="av-progress" role="status"><progress max="${total}" value="${done}" aria-label="` +
          `${p.curve ? "prune curve points scored" : "heads scored"}"></progress> ${inline(data.text)}</p>` +
          `<div class="av-imp-tables">${tables(data)}</div>`;
        markScrolling(root);
        return;
      }
      root.innerHTML = `<div class="av-stale-note" role="status" hidden></div><h4>${escapeHtml(data.title)}</h4>` +
        data.text.split("\n\n").map((p) => `<p>${inline(p)}</p>`).join("") +
        `<div class="av-imp-tables">${tables(data)}</div>`;
      root.insertBefore(curve(data), root.querySelector(".av-imp-tables"));
      markScrolling(root);
      const tip = root.querySelector(".av-prune-tip");
      const show = (event) => { const c = event.target.closest("circle"); if (c) tip.textContent = c.getAttribute("aria-label"); };
      root.querySelector("svg").addEventListener("mouseover", show);
      root.querySelector("svg").addEventListener("focusin", show);
    }
    function setEmpty(text) {
      /* what it says while it has no scores: why they cannot be asked for this model, or (text empty) opts.empty */
      empty = text || opts.empty || "";
      if (!shown || !shown.drop) setPayload(shown);
    }
    function markStale(message) {
      root.classList.toggle("av-stale", !!message);
      const note = root.querySelector(".av-stale-note");
      if (note) { note.hidden = !message; note.textContent = message || ""; }
    }
    new ResizeObserver(() => markScrolling(root)).observe(root);
    element.avView = view;
    root.avView = view;
    setPayload(payload);
    return view;
  }
  global.AttentionHeads = {mount: mount};
})(window);
