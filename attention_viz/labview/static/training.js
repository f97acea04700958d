/* Training, step by step: the study's three compatibility functions at one d_k, side by side, from their snapshots
 * (service/training_view.py, format "attention_viz.training/1"); viridis as the explorer's (palette.js) and its step
 * bar (shared.js), both loaded first.
 *
 *   const view = AttentionTraining.mount(element, data, {rootId: "train_step", empty: "what to say before any data"});
 *   view.setData(next);      // another d_k: keeps the step, kind and probe where the new data has them
 *   view.setStep(i);         // the i-th snapshot (0 .. steps - 1); view.play(), view.pause()
 *   view.markStale(message); // the d_k asked for was refused: say so over what is drawn (null clears)
 *
 * #<rootId> carries data-step (the snapshot index) and data-d-k; each arm is a [data-arm] section with the probe's
 * map at that step (values as text, exact on hover), its numbers at that step, and a chart of token accuracy and
 * alignment over training with the step marked. Steps, kind, probe: drawn here, no request leaves the page.
 */
(function () {
  "use strict";
  if (window.AttentionTraining) return;
  const NS = "http://www.w3.org/2000/svg";
  const PLAY_MS = 700;
  const CHART = {w: 300, h: 150, left: 34, right: 18, top: 10, bottom: 34};
  const SERIES = [["token_acc", "token accuracy (training batch)", "#1f77b4"], ["alignment", "alignment (probes)", "#e4572e"]];
  const LOSS = [["loss", "loss (training batch, nats)", "#555"]];
  // viridis, as explorer.js and the server's images use it (palette.js, loaded first)
  const {viridis: colour, ink} = window.AttentionPalette;
  const {escapeHtml: esc, shown, bytes, stepBarHtml, stepBar} = window.AttentionShared; // shared.js, loaded first
  const pct = (v) => (v === null || v === undefined ? "–" : `${(100 * v).toFixed(0)}%`);
  const num = (v, d) => (v === null || v === undefined ? "–" : v.toFixed(d));
  // a weight in a map's cell, without its leading zero (".96", "1"): three characters leave a gap between the
  // numbers of a row in cells that still fit the three maps side by side; the exact weight is the cell's title
  const weight = (w) => (w >= 0.995 ? "1" : w.toFixed(2).replace(/^0/, ""));

  function svg(tag, attrs, parent, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function prepare(next) {
    /* each arm's maps decoded once: base64 -> bytes */
    const arms = next.arms.map((arm) => Object.assign({}, arm, {
      bytes: Object.fromEntries(Object.entries(arm.maps).map(([k, b]) => [k, bytes(b)])),
    }));
    return Object.assign({}, next, {arms: arms});
  }

  function cell(d, arm, key, s, p, h, q, k) {
    /* one weight: snapshot s, probe p, head h, query q, key k of map `key` */
    const [, P, H, Q, K] = arm.shape[key];
    return arm.bytes[key][((((s * P + p) * H + h) * Q + q) * K) + k] / d.quant;
  }

  function xAt(d, step) {
    /* a training step on the charts' log-scaled x axis */
    const last = Math.log10((d.total_steps || d.steps[d.steps.length - 1]) + 1);
    return CHART.left + (CHART.w - CHART.left - CHART.right) * Math.log10(step + 1) / last;
  }
  const y = (v, top) => CHART.top + (CHART.h - CHART.top - CHART.bottom) * (1 - v / top);

  function drawChart(el, d, arm, series, top) {
    /* lines of `series` over the log-scaled steps, y from 0 to `top`; returns the step cursor */
    for (const v of [0, top / 2, top]) {
      svg("line", {x1: CHART.left, x2: CHART.w - CHART.right, y1: y(v, top), y2: y(v, top), class: "av-grid-line"}, el);
      svg("text", {x: CHART.left - 4, y: y(v, top) + 4, "text-anchor": "end"}, el, String(+v.toFixed(2)));
    }
    const total = d.total_steps || d.steps[d.steps.length - 1];
    const ticks = [0, 10, 100, 1000].filter((s) => s <= total && xAt(d, total) - xAt(d, s) > 24 || s === total);
    for (const step of ticks.includes(total) ? ticks : [...ticks, total]) {
      svg("text", {x: xAt(d, step), y: CHART.h - CHART.bottom + 14, "text-anchor": "middle"}, el, String(step));
    }
    svg("text", {x: (CHART.left + CHART.w) / 2, y: CHART.h - 4, "text-anchor": "middle"}, el, "training step (log scale)");
    for (const [name, , stroke] of series) {
      const values = name === "alignment" ? arm.alignment : arm.train[name];
      const points = d.steps.map((s, i) => (values[i] === null ? null : `${xAt(d, s).toFixed(1)},${y(values[i], top).toFixed(1)}`))
        .filter((p) => p !== null);
      svg("polyline", {points: points.join(" "), fill: "none", stroke: stroke, "stroke-width": 2}, el);
    }
    return svg("line", {y1: CHART.top, y2: CHART.h - CHART.bottom, class: "av-cursor"}, el);
  }

  function mapHtml(d, arm, state) {
    /* one arm's map of the chosen kind and probe at the chosen step, values as text (exact on hover) */
    const kind = d.kinds.find((k) => k.key === state.key), p = state.probe, s = state.step;
    const rows = d.tokens[kind.queries][p], cols = d.tokens[kind.keys][p];
    const causal = kind.kind === "decoder.self_attn";
    let html = `<table class="av-map"><thead><tr><th class="av-corner">query ↓ key →</th>` +
      cols.map((t) => `<th>${esc(shown(t))}</th>`).join("") + "</tr></thead><tbody>";
    for (let h = 0; h < arm.heads; h++) {
      rows.forEach((qt, q) => {
        html += `<tr><th>${arm.heads > 1 ? `H${h} ` : ""}${esc(shown(qt))}</th>`;
        cols.forEach((kt, j) => {
          if (causal && j > q) { html += '<td class="av-masked" title="masked: may not attend (weight 0)"></td>'; return; }
          const w = cell(d, arm, state.key, s, p, h, q, j), rgb = colour(w);
          html += `<td style="background:rgb(${rgb});color:${ink(rgb)}" ` +
            `title="query ${q} ${esc(shown(qt))} → key ${j} ${esc(shown(kt))}: ${w.toFixed(3)}">${weight(w)}</td>`;
        });
        html += "</tr>";
      });
    }
    return html + "</tbody></table>";
  }

  function mount(root, data, opts) {
    opts = opts || {};
    root.classList.add("av-training");
    root.innerHTML = `<div class="av-train" id="${esc(opts.rootId || "train_step")}" data-step="0">
      <div class="av-train-stale" role="status" hidden></div>
      <div class="av-train-bar">
        ${stepBarHtml({prev: "previous snapshot", next: "next snapshot", slider: "training step",
          status: '<span class="av-train-status" role="status"></span>'})}
      </div>
      <div class="av-train-pick">
        <label>Attention <select class="av-kind"></select></label>
        <label>Probe <select class="av-probe"></select></label>
      </div>
      <p class="av-train-say"></p>
      <div class="av-legend">${[...SERIES, ...LOSS].map(([, label, stroke]) => `<span><i style="background:${stroke}"></i>${label}</span>`).join("")}
        <span><i class="av-cursor-key"></i>the step shown</span></div>
      <div class="av-arms"></div></div>`;
    const $ = (s) => root.querySelector(s);
    const ui = {main: $(".av-train"), stale: $(".av-train-stale"), step: $(".av-step"), status: $(".av-train-status"),
      kind: $(".av-kind"), probe: $(".av-probe"), say: $(".av-train-say"), arms: $(".av-arms")};
    const state = {step: null, key: null, probe: 0};
    let d = null, charts = [];
    // play, ◀, the slider, ▶ (shared.js): position i is the i-th snapshot
    const bar = stepBar($(".av-train-bar"), {ms: PLAY_MS, last: () => (d ? d.steps.length - 1 : null),
      position: () => state.step, show: (i) => setStep(i)});

    function build() {
      /* one section per arm: its name, numbers, map and chart (the chart's lines are drawn once per data) */
      ui.arms.innerHTML = d.arms.map((arm) => `<section class="av-arm" data-arm="${esc(arm.arm)}">
          <h4>${esc(arm.label)}</h4>
          <div class="av-arm-numbers"></div>
          <div class="av-arm-map"></div>
          <svg class="av-curve" viewBox="0 0 ${CHART.w} ${CHART.h}" role="img"
               aria-label="${esc(arm.label)}: token accuracy and alignment over training"></svg>
          <svg class="av-curve av-loss" viewBox="0 0 ${CHART.w} ${CHART.h}" role="img"
               aria-label="${esc(arm.label)}: the training loss"></svg>
          <div class="av-arm-final">${arm.status ? esc(arm.status) : (arm.heldout_exact_match === null ||
            arm.heldout_exact_match === undefined ? "training…"
            : `after ${d.steps[d.steps.length - 1]} steps, held out: <b>${pct(arm.heldout_exact_match)}</b> exact`)}</div>
        </section>`).join("");
      // the loss charts share one scale, so the arms compare at a glance
      const losses = d.arms.flatMap((arm) => arm.train.loss).filter((v) => v !== null);
      const top = Math.max(1, Math.ceil(Math.max(...losses, 0)));
      charts = [...ui.arms.querySelectorAll(".av-arm")].map((section, i) => [
        drawChart(section.querySelector(".av-curve:not(.av-loss)"), d, d.arms[i], SERIES, 1),
        drawChart(section.querySelector(".av-loss"), d, d.arms[i], LOSS, top)]);
      fitText.disconnect();
      fitText.observe(ui.arms.querySelector(".av-curve"));
    }

    // A chart is drawn in a CHART.w-wide viewBox and scaled to its panel: in a panel narrower than that (a phone),
    // its text is made larger in the viewBox so that it still shows at 11 px on the screen.
    const fitText = new ResizeObserver(([entry]) => {
      const width = entry.contentRect.width;
      if (width > 0) ui.arms.style.setProperty("--av-curve-text", `${Math.max(11, (11 * CHART.w) / width).toFixed(2)}px`);
    });

    const x = (step) => xAt(d, step);
    function drawMaps() {
      ui.arms.querySelectorAll(".av-arm").forEach((section, a) => {
        section.querySelector(".av-arm-map").innerHTML = mapHtml(d, d.arms[a], state);
      });
    }

    function drawNumbers() {
      const s = state.step, step = d.steps[s];
      ui.main.dataset.step = s;
      ui.main.dataset.dK = d.d_k;
      ui.step.max = d.steps.length - 1; ui.step.value = s;
      ui.status.innerHTML = `<b>step ${step}</b> of ${d.total_steps || d.steps[d.steps.length - 1]} (snapshot ${s + 1} ` +
        `of ${d.steps.length}), d_k ${d.d_k}`;
      ui.arms.querySelectorAll(".av-arm").forEach((section, a) => {
        const arm = d.arms[a], n = d.probes.length;
        section.querySelector(".av-arm-numbers").innerHTML =
          `loss <b>${num(arm.train.loss[s], 3)}</b> · token accuracy <b>${pct(arm.train.token_acc[s])}</b> · ` +
          `probes exact <b>${Math.round(arm.probe.exact_match[s] * n)}/${n}</b> · alignment <b>${num(arm.alignment[s], 2)}</b>`;
        for (const cursor of charts[a]) { cursor.setAttribute("x1", x(step)); cursor.setAttribute("x2", x(step)); }
      });
      const by = d.arms.map((arm) => `${arm.label} ${num(arm.alignment[s], 2)}`).join(", ");
      const last = d.arms.map((arm) => arm.alignment[d.steps.length - 1]);
      const worst = d.arms[last.indexOf(Math.min(...last))];
      ui.say.innerHTML = `At step ${step}, cross-attention's weight on the task's alignment (the character each output ` +
        `is written from; 1 = every row on it): ${esc(by)}.` + (d.arms.length > 1 ? ` After training the lowest is ` +
        `${esc(worst.label)}, ${num(Math.min(...last), 2)}, with ${pct(worst.heldout_exact_match)} of held-out strings exact.` : "");
      bar.mark();
    }

    function setStep(i) {
      if (!d) return;
      state.step = Math.min(Math.max(Math.floor(+i) || 0, 0), d.steps.length - 1);
      drawMaps(); drawNumbers();
    }

    const pause = bar.pause, play = bar.play;

    function setData(next) {
      pause();
      markStale(null);
      ui.main.classList.toggle("av-nodata", !next || !next.arms);
      if (!next || !next.arms) { d = null; ui.arms.innerHTML = ""; ui.say.textContent = opts.empty || "Choose a d_k."; return; }
      const d0 = d;
      d = prepare(next);
      ui.kind.innerHTML = d.kinds.map((k) => `<option value="${esc(k.key)}">${esc(k.label)}</option>`).join("");
      ui.probe.innerHTML = d.probes.map((p, i) => `<option value="${i}">${esc(p)}</option>`).join("");
      // a view that showed its last step follows new steps (a live run); another step shown stays
      const following = !d0 || state.step === null || state.step >= d0.steps.length - 1;
      if (!d.kinds.some((k) => k.key === state.key)) state.key = d.kinds[0].key;
      state.probe = Math.min(state.probe, d.probes.length - 1);
      ui.kind.value = state.key; ui.probe.value = state.probe;
      build();
      setStep(following ? d.steps.length - 1 : state.step);
    }

    function markStale(message) {
      ui.main.classList.toggle("av-stale", !!message);
      ui.stale.hidden = !message;
      ui.stale.textContent = message ? `${message} Shown: d_k ${d ? d.d_k : "–"}.` : "";
    }

    ui.kind.addEventListener("change", () => { state.key = ui.kind.value; drawMaps(); });
    ui.probe.addEventListener("change", () => { state.probe = +ui.probe.value; drawMaps(); });
    const controller = {setData: setData, setStep: (i) => { pause(); setStep(i); }, play: play, pause: pause,
      markStale: markStale, state: state};
    root.avTraining = controller;
    setData(data);
    return controller;
  }

  window.AttentionTraining = {mount: mount, colour: colour, ink: ink};
})();
