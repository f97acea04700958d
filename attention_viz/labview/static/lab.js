/* The √d_k lab, drawn in the browser as SVG from the numbers the server sends (service/lab_view.py).
 *
 *   const lab = AttentionLab.mount(element, data, {alsoFade: ["#lab_numbers"], ask});
 *                                  // ask(inputs): a promise of the server's answer {view, numbers}, or null
 *   lab.markPending({d_k, n_keys, scaled});   // the controls asked for these: fade, say which, until drawn
 *   lab.setData(next);             // draw new numbers; current again once they are what was asked for
 *   lab.markStale({d_k, n_keys, scaled});     // a request was refused; these are the controls' values now:
 *                                  // if the view does not draw them, it says its numbers are not current
 *   lab.markCurrent();             // a request succeeded (its numbers may equal the ones shown)
 *   inputs = await lab.turn(inputs);  // before a request leaves: resolves once those in flight are answered,
 *                                     // with the inputs to send (the latest request's: every waiting one asks the same)
 *   answer = await lab.ask({d_k, n_keys, scaled});  // options.ask's answer (null without one)
 *   AttentionLab.mountStudy(element, studyData);   // the training study's two charts (study.js, loaded after)
 *   const own = AttentionLab.mountOwn(element, data); // one head's own q·k against the law (service/qk_view.py):
 *   own.setData(next); own.markStale(); own.markCurrent();   // drawn; a request refused; one answered
 *
 * No library, nothing fetched: every chart is drawn at the width its box has (ResizeObserver), with
 * text at 12-13 px whatever the width, so labels stay legible and inside the SVG on a phone.
 * Defined once per page; later copies of this script leave window.AttentionLab as it is.
 */
(function () {
  "use strict";
  if (window.AttentionLab) return;
  // the charts' pieces, shared with heads.js's prune curve (charts.js, loaded first)
  const {svgEl, htmlEl, label, fmt, niceCeil, linearTicks, logTicks, chart, legend, panel, plotBox, redrawOnWidth} =
    window.AttentionCharts;
  const TOP_BARS = 20; // softmax bars drawn (the largest weights)
  const TURN_WAIT_MS = 20000; // the longest a request waits for the answer to the one before it

  function stepPath(c, edges, heights) {
    let d = `M${c.x(edges[0])},${c.y(0)}`;
    heights.forEach((h, i) => { d += `V${c.y(h)}H${c.x(edges[i + 1])}`; });
    return d + `V${c.y(0)}`;
  }

  // ---------------------------------------------------------------- the panels

  function drawHistogram(box, h) {
    const n = h.samples, edges = h.edges, width = edges[1] - edges[0];
    const bars = h.counts.map((k) => k / (n * width));
    const theory = h.theory.map((p) => p / width);
    const sd = h.normal_sd, peak = 1 / (sd * Math.sqrt(2 * Math.PI));
    const top = niceCeil(Math.max(...bars, ...theory, peak) * 1.08);
    const lo = edges[0], hi = edges[edges.length - 1];
    const c = chart(box, { name: "histogram", height: 270, xDomain: [lo, hi], yDomain: [0, top],
      xTicks: linearTicks(lo, hi, box.clientWidth < 420 ? 4 : 8), yTicks: linearTicks(0, top, 4),
      xTitle: h.variable, yTitle: "density", aria: `histogram of ${n} samples of ${h.variable} with the exact law` });
    bars.forEach((b, i) => {
      const x0 = c.x(edges[i]), x1 = c.x(edges[i + 1]);
      svgEl("rect", { x: x0, width: Math.max(x1 - x0 - 0.5, 0.5), y: c.y(b), height: c.y(0) - c.y(b),
        class: "avl-bar", "data-role": "bar" }, c.plot);
    });
    const pts = [];
    for (let i = 0; i <= 240; i++) {
      const v = lo + ((hi - lo) * i) / 240;
      pts.push(`${c.x(v).toFixed(1)},${c.y(peak * Math.exp(-0.5 * (v / sd) * (v / sd))).toFixed(1)}`);
    }
    svgEl("polyline", { points: pts.join(" "), class: "avl-normal", "data-role": "normal" }, c.plot);
    svgEl("path", { d: stepPath(c, edges, theory), class: "avl-theory", "data-role": "theory" }, c.plot);
  }

  function drawLogits(box, q, scaled) {
    const n = q.logits.length, limit = niceCeil(q.limit);
    const c = chart(box, { name: "logits", height: 230, xDomain: [0, n], yDomain: [-limit, limit],
      xTicks: rankTicks(n, box.clientWidth).map((r) => r - 0.5), xFmt: (v) => fmt(v + 0.5),
      yTicks: linearTicks(-limit, limit, 4), xTitle: "key, sorted by logit (largest first)",
      yTitle: scaled ? "q·k / √d_k" : "q·k", aria: `${n} logits on a fixed scale of ±${limit}` });
    const zero = c.y(0);
    if (n <= 128) {
      q.logits.forEach((z, i) => {
        const x0 = c.x(i), x1 = c.x(i + 1), py = c.y(z);
        svgEl("rect", { x: x0, width: Math.max(x1 - x0 - (n <= 40 ? 1 : 0), 0.6), y: Math.min(py, zero),
          height: Math.max(Math.abs(zero - py), 1), class: "avl-logit", "data-role": "logit" }, c.plot);
      });
    } else {
      let d = `M${c.x(0)},${zero}`;
      q.logits.forEach((z, i) => { d += `L${c.x(i)},${c.y(z)}L${c.x(i + 1)},${c.y(z)}`; });
      svgEl("path", { d: d + `L${c.x(n)},${zero}Z`, class: "avl-logit", "data-role": "logit" }, c.plot);
    }
    svgEl("line", { x1: c.area.x0, x2: c.area.x1, y1: zero, y2: zero, class: "avl-zero" }, c.plot);
  }

  function rankTicks(n, width) {
    const wanted = width < 420 ? 4 : 6;
    const ticks = [1, ...linearTicks(0, n, wanted).filter((v) => v >= 2 && v <= n)];
    if (n - ticks[ticks.length - 1] > n / (wanted * 2)) ticks.push(n);
    return ticks;
  }

  function drawSoftmax(box, q) {
    const n = q.weights.length, k = Math.min(n, TOP_BARS);
    const c = chart(box, { name: "softmax", height: 220, xDomain: [0, k], yDomain: [0, 1.18],
      xTicks: rankTicks(k, box.clientWidth).map((r) => r - 0.5), xFmt: (v) => fmt(v + 0.5),
      yTicks: [0, 0.25, 0.5, 0.75, 1], yFmt: (v) => String(v),
      xTitle: n > k ? `the ${k} largest of ${n} weights` : "key, sorted by weight", yTitle: "softmax weight",
      aria: `the ${k} largest softmax weights of ${n}` });
    for (let i = 0; i < k; i++) {
      const w = q.weights[i], x0 = c.x(i), x1 = c.x(i + 1), py = c.y(w);
      svgEl("rect", { x: x0 + 1, width: Math.max(x1 - x0 - 2, 1), y: py, height: Math.max(c.y(0) - py, 1.5),
        class: "avl-weight", "data-role": "weight" }, c.plot);
      // The largest weight is labelled; the next two where their bars are wide enough for the text.
      if (i === 0 || (i < 3 && x1 - x0 >= 34 && w >= 0.005)) label(c.plot, i ? (x0 + x1) / 2 : x0 + 1, py - 5,
        fmt(w, 2), { "text-anchor": i ? "middle" : "start", class: "avl-value", "data-role": "weight-label" });
    }
    const u = c.y(1 / n);
    svgEl("line", { x1: c.area.x0, x2: c.area.x1, y1: u, y2: u, class: "avl-uniform", "data-role": "uniform" }, c.plot);
  }

  function drawCumulative(box, q) {
    const n = q.weights.length;
    let total = 0, r90 = n;
    const sums = q.weights.map((w, i) => { total += w; if (total >= 0.9 && r90 === n && i < n) r90 = i + 1; return total; });
    const c = chart(box, { name: "cumulative", height: 190, xDomain: [0, n], yDomain: [0, 1], pad: 5,
      xTicks: [0, ...rankTicks(n, box.clientWidth).filter((r) => r > 1)], yTicks: [0, 0.5, 0.9, 1],
      yFmt: (v) => (v === 1 ? "" : String(v)), // the top's gridline, unlabelled: "1" would sit on "0.9"
      xTitle: "number of keys, largest weights first", yTitle: "weight held",
      aria: `90% of the weight on ${r90} of ${n} keys` });
    svgEl("line", { x1: c.x(0), y1: c.y(0), x2: c.x(n), y2: c.y(1), class: "avl-uniform" }, c.plot);
    let d = `M${c.x(0)},${c.y(0)}`;
    sums.forEach((s, i) => { d += `L${c.x(i + 1)},${c.y(s)}`; });
    svgEl("path", { d: d, class: "avl-cumulative", "data-role": "cumulative" }, c.plot);
    svgEl("circle", { cx: c.x(r90), cy: c.y(sums[r90 - 1]), r: 4, class: "avl-mark" }, c.plot);
    return r90;
  }

  const SWEEP = [ // statistic, caption, y axis title, log y
    ["logit_var", "Variance of the logits (theory: d_k, and 1)", "variance", true],
    ["max_weight", "Largest softmax weight, median over queries", "max weight", false],
    ["entropy", "Softmax entropy, median (dotted: uniform)", "entropy, nats", false],
    ["grad_norm", "‖∂softmax/∂logits‖, median: the gradient", "gradient norm", true],
  ];

  function drawSweepPanel(box, s, stat, title, logY, dK, scaled) {
    const xs = s.d_k, series = [s.unscaled[stat], s.scaled[stat]];
    const values = [...series[0], ...series[1]].map((v) => Math.max(v, 1e-30));
    let yDomain, yTicks;
    if (logY) {
      const ticks = logTicks(Math.min(...values), Math.max(...values), 5);
      yDomain = [ticks[0], ticks[ticks.length - 1]]; yTicks = ticks;
    } else {
      const top = stat === "entropy" ? s.max_entropy : 1;
      yDomain = [0, top * 1.02]; yTicks = linearTicks(0, top, 3);
    }
    const wide = box.clientWidth >= 330;
    const c = chart(box, { name: "sweep-" + stat, height: 200, xDomain: [1, 4096], xLog: true, yLog: logY, pad: 4,
      xTicks: wide ? [1, 4, 16, 64, 256, 1024, 4096] : [1, 16, 256, 4096], xFmt: String, yDomain: yDomain, yTicks: yTicks,
      xTitle: "d_k (log scale)", yTitle: title, aria: `${title} against d_k, both modes` });
    if (stat === "logit_var") {
      svgEl("polyline", { points: `${c.x(1)},${c.y(1)} ${c.x(4096)},${c.y(4096)}`, class: "avl-uniform" }, c.plot);
    } else if (stat !== "grad_norm") {
      const ref = stat === "entropy" ? s.max_entropy : 1 / s.n_keys;
      svgEl("line", { x1: c.area.x0, x2: c.area.x1, y1: c.y(ref), y2: c.y(ref), class: "avl-uniform" }, c.plot);
    }
    const px = c.x(dK);
    svgEl("line", { x1: px, x2: px, y1: c.area.y0, y2: c.area.y1, class: "avl-marker", "data-role": "marker" }, c.plot);
    ["unscaled", "scaled"].forEach((mode, m) => {
      const pts = xs.map((d, i) => [c.x(d), c.y(Math.max(series[m][i], yDomain[0]))]);
      const current = (mode === "scaled") === scaled ? " avl-current" : "";
      svgEl("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: `avl-line avl-${mode}${current}`,
        "data-role": mode }, c.plot);
      pts.forEach((p) => svgEl("circle", { cx: p[0], cy: p[1], r: 2.5, class: `avl-dot avl-${mode}` }, c.plot));
    });
  }

  // ---------------------------------------------------------------- the view

  function histogramPanel(grid, name, title, labels, d, note) {
    /* a panel for drawHistogram: its legend (labels: the samples', the law's; then the normal at d's d_k), its plot
       box (returned) and the note under it (the lab's q·k samples, and a model's own) */
    const section = panel(grid, name, title);
    legend(section, [["avl-bar", labels[0]], ["avl-theory", labels[1]],
      ["avl-normal", d.scaled ? "normal N(0, 1)" : `normal N(0, d_k = ${d.d_k})`]]);
    const box = plotBox(section, name);
    htmlEl("p", "avl-note", section, note);
    return box;
  }

  function modeText(data) {
    return `d_k = ${data.d_k} · ${data.n_keys} keys · ${data.scaled ? "scaled by 1/√d_k" : "unscaled"}`;
  }

  function mount(root, data, options) {
    options = options || {};
    root.replaceChildren();
    const view = htmlEl("div", "av-lab", root);
    view.dataset.state = "empty";
    const heading = htmlEl("p", "avl-heading", view);
    const status = htmlEl("p", "avl-status", view);
    status.setAttribute("role", "status");
    status.hidden = true;
    const grid = htmlEl("div", "avl-grid", view);
    let current = null;

    function render() {
      if (!current) {
        heading.textContent = "No numbers yet.";
        grid.replaceChildren();
        return;
      }
      const d = current, q = d.query, h = d.histogram;
      heading.textContent = modeText(d);
      grid.replaceChildren();
      const out = h.below + h.above;
      const hb = histogramPanel(grid, "histogram", `${h.samples.toLocaleString("en")} samples of ${h.variable} against the exact law`,
        ["samples", "exact law, per bin"], d,
        `mean ${fmt(h.mean)}, variance ${fmt(h.variance, 4)} (theory ${fmt(h.theory_variance, 4)}); ` +
        `${out ? fmt((100 * out) / h.samples, 2) + "% of samples beyond the axis; " : ""}` +
        `distance to the law ${fmt(h.tv_distance, 2)}, sampling noise alone ≈ ${fmt(h.tv_noise, 2)}.`);
      const lp = panel(grid, "logits", `The typical query's ${d.n_keys} logits (of ${q.n_queries} queries, the one ` +
        `whose largest unscaled weight is the median), on one scale for both modes`);
      const lb = plotBox(lp, "logits");
      htmlEl("p", "avl-note", lp, `Spread (standard deviation) ${fmt(q.logit_sd)}: about √d_k = ${fmt(Math.sqrt(d.d_k))} ` +
        `unscaled, 1 scaled. The axis stays at ±${fmt(niceCeil(q.limit))} when you switch.`);
      const sp = panel(grid, "softmax", "Its softmax: the largest weights, and where the weight goes");
      legend(sp, [["avl-weight", "weight"], ["avl-uniform", `uniform 1/${d.n_keys}`]]);
      const sb = plotBox(sp, "softmax");
      const cb = plotBox(sp, "cumulative");
      const note = htmlEl("p", "avl-note", sp);
      const wp = panel(grid, "sweep", `Over d_k, ${d.sweep.n_queries} queries × ${d.sweep.n_keys} keys per point`, "avl-wide");
      legend(wp, [["avl-unscaled", "unscaled q·k"], ["avl-scaled", "scaled q·k / √d_k"], ["avl-marker", `d_k = ${d.d_k}`],
        ["avl-uniform", "theory / uniform softmax"]]);
      const sweepGrid = htmlEl("div", "avl-sweep-grid", wp);
      const boxes = SWEEP.map(([stat, caption]) => {
        const cell = htmlEl("div", "avl-sweep-cell", sweepGrid);
        htmlEl("p", "avl-caption", cell, caption);
        return plotBox(cell, "sweep-" + stat);
      });
      // Draw once every box has its width (the grid is laid out by now).
      drawHistogram(hb, h);
      drawLogits(lb, q, d.scaled);
      drawSoftmax(sb, q);
      const r90 = drawCumulative(cb, q);
      note.textContent = `Largest weight ${fmt(q.max_weight)}; 90% of the weight on ${r90} of ${d.n_keys} keys; ` +
        `entropy ${fmt(q.entropy)} of ${fmt(q.max_entropy)} nats; gradient norm ${fmt(q.grad_norm)}.`;
      SWEEP.forEach(([stat, , title, logY], i) => drawSweepPanel(boxes[i], d.sweep, stat, title, logY, d.d_k, d.scaled));
    }
    const redraw = redrawOnWidth(view, render);

    function fade(on) {
      for (const selector of options.alsoFade || []) {
        const e = document.querySelector(selector);
        if (!e) continue;
        if (on) e.setAttribute("data-av-stale", "true"); else e.removeAttribute("data-av-stale");
        e.style.opacity = on ? "0.35" : "";
      }
    }
    function setState(state, message) {
      view.dataset.state = state;
      status.hidden = !message;
      status.textContent = message || "";
      fade(state === "stale");
    }

    // Answers may come back in another order than their requests left (leaving the keys' box fires a request
    // with the old values), so the marks follow the controls, not the last answer: `wanted` is what the
    // controls asked for last, and the view is current only when it draws exactly that.
    let wanted = null, refused = false;
    const matches = (d, inputs) => !!d && !!inputs && Number(inputs.d_k) === d.d_k &&
      Number(inputs.n_keys) === d.n_keys && !!inputs.scaled === d.scaled;
    function settle() {
      if (!current) return setState("empty");
      if (!wanted || matches(current, wanted)) { refused = false; return setState("ready"); }
      if (refused) {
        return setState("stale", "Not updated: the last change was refused (see the message). " +
          `The charts and the table still show ${modeText(current)}.`);
      }
      setState("pending", `Computing ${modeText(Object.assign({}, current, wanted))}…`);
    }

    // One batch in flight at a time: two requests that leave together may reach the server in either order, and
    // the one that arrives last is answered last and drawn last, whatever the controls say now. So a request that
    // finds others in flight waits until all of them are answered (or refused); then every request that waited
    // leaves at once, each sending the latest request's inputs: equal answers may come back in any order, and a
    // burst of changes costs one more wait in the server's line, not one per change. A wait is given up after
    // TURN_WAIT_MS, so a lost answer (a dropped connection) cannot hold the lab forever.
    let inflight = 0, turnTimer = 0, latest = null;
    const waiting = [];
    function leave(count) {
      inflight += count;
      window.clearTimeout(turnTimer);
      if (inflight > 0) turnTimer = window.setTimeout(() => { inflight = 0; release(); }, TURN_WAIT_MS);
    }
    function release() {
      const go = waiting.splice(0);
      leave(go.length);
      go.forEach((resolve) => resolve());
    }
    function answered() {
      inflight = Math.max(0, inflight - 1);
      if (inflight === 0) release();
    }

    const api = {
      turn(inputs) {
        /* resolves when this request may leave, with the inputs it should send: those of the latest request */
        latest = inputs;
        return new Promise((resolve) => {
          const go = () => resolve(latest);
          if (inflight === 0) { leave(1); go(); } else waiting.push(go);
        });
      },
      setData(next) {
        current = next && typeof next === "object" && next.histogram ? next : null;
        settle();
        redraw();
      },
      markPending(inputs) { wanted = inputs || null; settle(); },
      markStale(inputs) { wanted = inputs || {}; refused = true; settle(); answered(); },  // no inputs: never current
      markCurrent() { settle(); answered(); },
      ask(inputs) { return options.ask ? options.ask(inputs) : Promise.resolve(null); },
      get data() { return current; },
      get state() { return view.dataset.state; },
    };
    view.avLab = api;
    api.setData(data);
    return api;
  }

  // ---------------------------------------------------------------- this model's own q·k (service/qk_view.py)

  function ownText(d) {
    return `${d.label} · ${d.key}, head ${d.head} · ${d.scaled ? "scaled by 1/√d_k" : "unscaled"}`;
  }

  function mountOwn(root, data) {
    /* one head's logits against footnote 4's law (drawHistogram, the lab's own chart) and its table of numbers */
    root.replaceChildren();
    const view = htmlEl("div", "av-lab av-own", root);
    view.dataset.state = "empty";
    const heading = htmlEl("p", "avl-heading", view);
    const status = htmlEl("p", "avl-status", view);
    status.setAttribute("role", "status");
    status.hidden = true;
    const grid = htmlEl("div", "avl-grid", view);
    let current = null;

    function render() {
      grid.replaceChildren();
      if (!current) { heading.textContent = "No numbers yet."; return; }
      const d = current, h = d.histogram;
      heading.textContent = ownText(d);
      const out = h.below + h.above;
      const hb = histogramPanel(grid, "own-histogram", `This head's ${h.samples.toLocaleString("en")} logits ${h.variable} ` +
        "against footnote 4's law at its d_k", ["this head (every query, key pair)", "footnote 4's exact law, per bin"], d,
        `mean ${fmt(h.mean)}, variance ${fmt(h.variance, 4)} (footnote 4: ` +
        `${fmt(h.theory_variance, 4)}); ${out ? fmt((100 * out) / h.samples, 2) + "% beyond the axis; " : ""}` +
        `distance to the law ${fmt(h.tv_distance, 2)}. Measured on ${d.texts}.`);
      const tp = panel(grid, "own-numbers", `${d.key}, head ${d.head}: footnote 4 on its own q and k`);
      const table = htmlEl("table", "avl-table", tp);
      table.dataset.role = "own-numbers";
      const head = htmlEl("tr", "", htmlEl("thead", "", table));
      d.numbers.headers.forEach((text) => { htmlEl("th", "", head, text).setAttribute("scope", "col"); });
      const body = htmlEl("tbody", "", table);
      d.numbers.data.forEach((row) => {
        const tr = htmlEl("tr", "", body);
        row.forEach((cell, i) => {
          const c = htmlEl(i ? "td" : "th", "", tr, String(cell));
          if (!i) c.setAttribute("scope", "row");
        });
      });
      drawHistogram(hb, h);
    }
    const redraw = redrawOnWidth(view, render);
    function setState(state, message) {
      view.dataset.state = state;
      status.hidden = !message;
      status.textContent = message || "";
    }
    const api = {
      setData(next) {
        current = next && typeof next === "object" && next.histogram ? next : null;
        setState(current ? "ready" : "empty");
        redraw();
      },
      markStale() {
        if (current) setState("stale", `Not updated: the last change was refused (see the message). Shown: ${ownText(current)}.`);
      },
      markCurrent() { if (current) setState("ready"); },
      get data() { return current; },
      get state() { return view.dataset.state; },
    };
    view.avOwn = api;
    api.setData(data);
    return api;
  }

  // a standalone page's view (labview.page): mounted in the first element `selector` finds
  const mountAt = (selector, data) => mount(document.querySelector(selector), data);

  window.AttentionLab = { mount: mount, mountAt: mountAt, mountOwn: mountOwn, format: fmt };
})();
