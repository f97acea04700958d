/* steps.js: draws one head's Figure 2 steps, or one comparison, from the numbers the server sent
 * (attention_viz/explorer/steps.py: formats "attention_viz.steps/1" and "attention_viz.compare/1").
 *
 *   AttentionSteps.mount(container, payload or null, {view: "steps" | "compare", empty: "text when empty"})
 *     -> controller {setPayload(payload (object or JSON) or null), markStale(message or null),
 *                    show(step) (steps: 0-4 or "scores", "scaled", "masked", "weights", "output";
 *                    compare: "difference", "a", "b"), payload() (the one drawn), state, view, root}
 *
 * Steps: one panel at a time (QKᵀ → scaled → masked → softmax → weights·V), chosen with the stepper's buttons
 * or the arrow keys (Home / End too) while the view has the focus. Compare: the difference a − b as a
 * diverging table (red: more weight with the switch on, blue: less), or either map alone; the largest change
 * is outlined. Two runs (another text or model, "pair": true): a and b each in their own tokens, a − b in a's
 * positions where the tokens align, the cells that do not align a flat grey with no value. Every cell writes its value compactly (3 significant digits, −∞ as such) in a table cell that
 * grows to fit it, so no two values overlap; hovering a cell tells its exact value. Masked cells are hatched.
 * The container gets the classes av-hv and av-steps / av-compare, and data-kind, data-layer and data-head
 * of the head it shows. Nothing global but `window.AttentionSteps`; two views never see each other.
 */
(function (global) {
  "use strict";
  if (global.AttentionSteps) return; // already loaded by another view on this page

  // viridis for weights, as the explorer; RdBu reversed (blue −1 → red +1) for signed values (palette.js, loaded first)
  const {viridis, diverging, ink, css} = global.AttentionPalette;
  const STEPS = [["scores", "QKᵀ"], ["scaled", "scaled"], ["masked", "masked"], ["weights", "softmax"],
    ["output", "weights·V"]];
  const LOGITS = ["scores", "scaled", "masked"];
  const NEGLIGIBLE = 5e-4; // a change of weight below this is written "≈0" (its exact value is on hover)

  const paint = (rgb) => `background:${css(rgb)};color:${ink(rgb)}`;
  const {escapeHtml, shown} = global.AttentionShared; // shared.js, loaded first
  const minus = (s) => s.replace(/-/g, "−");

  function fmt(v, signed) {
    /* compact: 3 significant digits, whole numbers from 100, powers of ten below 0.001 or from 10,000; −∞ */
    if (v === null || v === -Infinity) return "−∞";
    if (v === 0) return "0";
    const a = Math.abs(v);
    let s;
    if (a >= 1e4 || a < 1e-3) s = v.toExponential(1).replace(".0e", "e").replace("e+", "e");
    else if (a >= 100) s = String(Math.round(v));
    else s = v.toPrecision(3).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
    return (signed && v > 0 ? "+" : "") + minus(s);
  }
  const exact = (v, signed) => (v === null ? "−∞" : (signed && v > 0 ? "+" : "") + minus(String(v)));
  const peak = (rows) => rows.reduce((m, row) => row.reduce((n, v) => (v === null ? n : Math.max(n, Math.abs(v))), m), 0);

  function bar(colours, ticks, caption) {
    const stops = colours.map(css).join(",");
    return `<span class="av-colourbar"><span class="av-bar" style="background:linear-gradient(90deg,${stops})"></span>` +
      `<span class="av-ticks">${ticks.map((t) => `<span>${t}</span>`).join("")}</span></span>` +
      `<span class="av-scale-name">${caption}</span>`;
  }
  const signedBar = (limit, caption) => bar(Array.from({length: 11}, (_, i) => diverging(i / 5 - 1)),
    [fmt(-limit), "0", fmt(limit, true)], caption);
  const weightBar = (caption) => bar(Array.from({length: 11}, (_, i) => viridis(i / 10)), ["0", "0.5", "1"], caption);
  const maskedKey = (what) => `<span class="av-masked-key"><span class="av-swatch av-masked"></span>${what}</span>`;

  function table(rowTokens, columns, corner, cell, extra) {
    /* rows: queries; columns: [label, title]; cell(q, j) -> [text, style, class]; extra: a last column */
    const parts = [`<table class="av-tab"><thead><tr><th class="av-corner">${corner}</th>`];
    columns.forEach(([label, title]) => parts.push(`<th class="av-col" title="${escapeHtml(title)}">${escapeHtml(label)}</th>`));
    if (extra) parts.push(`<th class="av-col av-sum-head" title="${escapeHtml(extra.title)}">${extra.label}</th>`);
    parts.push("</tr></thead><tbody>");
    rowTokens.forEach((token, q) => {
      parts.push(`<tr><th class="av-row" title="query ${q}: ${escapeHtml(token)}">${escapeHtml(shown(token))}</th>`);
      for (let j = 0; j < columns.length; j++) {
        const [text, style, cls] = cell(q, j);
        parts.push(`<td class="av-v${cls ? " " + cls : ""}" data-q="${q}" data-k="${j}" style="${style}">${text}</td>`);
      }
      if (extra) parts.push(`<td class="av-sum">${extra.cell(q)}</td>`);
      parts.push("</tr>");
    });
    return parts.join("") + "</tbody></table>";
  }

  function shell(root, view) {
    root.classList.add("av-hv", view === "compare" ? "av-compare" : "av-steps");
    root.tabIndex = 0;
    const chooser = view === "compare"
      ? `<div class="av-choose" role="tablist" aria-label="what the table shows"></div>`
      : `<div class="av-choose"><button type="button" class="av-prev" aria-label="previous step">◀</button>` +
        `<div class="av-picks" role="tablist" aria-label="Figure 2's steps">` + // a tablist holds only its tabs
        STEPS.map(([key, name], i) => `${i ? '<span class="av-arrow" aria-hidden="true">→</span>' : ""}` +
          `<button type="button" role="tab" class="av-pick" data-pick="${key}">${i + 1} ${name}</button>`).join("") +
        `</div><button type="button" class="av-next" aria-label="next step">▶</button></div>`;
    root.innerHTML = `<div class="av-stale-note" role="status" hidden></div><div class="av-hv-title"></div>${chooser}` +
      `<div class="av-note"></div><div class="av-panel"></div><div class="av-legend"></div>` +
      `<div class="av-outputs"></div><div class="av-tip" role="tooltip" hidden></div>`;
    const $ = (sel) => root.querySelector(sel);
    return {stale: $(".av-stale-note"), title: $(".av-hv-title"), choose: $(".av-choose"), note: $(".av-note"),
      panel: $(".av-panel"), legend: $(".av-legend"), outputs: $(".av-outputs"), tip: $(".av-tip")};
  }

  function drawSteps(x) {
    /* one of Figure 2's steps: its panel as a table, its note and its legend */
    const {root, ui, data, state} = x;
    const key = STEPS[state.step][0], panel = data.panels.find((p) => p.key === key);
    const mask = data.mask, values = panel.values, blocked = mask.reduce((n, row) => n + row.filter((ok) => !ok).length, 0);
    root.dataset.step = key;
    ui.choose.querySelectorAll(".av-pick").forEach((b, i) => {
      b.setAttribute("aria-selected", i === state.step ? "true" : "false");
      b.classList.toggle("av-on", i === state.step);
    });
    ui.choose.querySelector(".av-prev").disabled = state.step === 0;
    ui.choose.querySelector(".av-next").disabled = state.step === STEPS.length - 1;
    const logit = peak(data.panels.filter((p) => LOGITS.includes(p.key)).flatMap((p) => p.values)) || 1;
    const out = peak(values) || 1;
    const notes = {
      scores: `<b>QKᵀ</b>: each query's dot product with each key (d_k = ${data.d_k}).`,
      scaled: `<b>scaled</b> = QKᵀ × ${escapeHtml(fmt(data.factor))} (${escapeHtml(data.scaling)}): the same colours ` +
        "as QKᵀ, so the scaling's shrinking shows.",
      masked: blocked ? `<b>masked</b>: ${blocked} of ${data.queries.length * data.keys.length} scores set to −∞ ` +
        "(hatched): those keys may not be attended to." : "<b>masked</b>: nothing is masked in this attention, so the scores pass unchanged.",
      weights: "<b>softmax</b> of each row: the attention weights. Each row sums to 1 (Σ); −∞ became exactly 0.",
      output: `<b>weights·V</b>: each query's output, the weighted sum of the values (d_v = ${data.d_v} columns).`,
    };
    ui.note.innerHTML = `Step ${state.step + 1} of 5. ${notes[key]}`;
    const masks = key === "masked" || key === "weights";
    const columns = key === "output" ? Array.from({length: data.d_v}, (_, j) => [`${j}`, `value dimension ${j}`])
      : data.keys.map((t, j) => [shown(t), `key ${j}: ${t}`]);
    const corner = key === "output" ? "query ↓ d_v →" : "query ↓ key →";
    const sum = key === "weights" ? {label: "Σ", title: "the row's sum", cell: (q) => fmt(values[q].reduce((a, b) => a + b, 0))} : null;
    ui.panel.innerHTML = table(data.queries, columns, corner, (q, j) => {
      const v = values[q][j];
      if (masks && !mask[q][j]) return [fmt(v), "", "av-masked"];
      if (key === "weights") return [fmt(v), paint(viridis(v)), ""];
      return [fmt(v), paint(diverging(v / (key === "output" ? out : logit))), ""];
    }, sum);
    ui.legend.innerHTML = key === "weights" ? weightBar("weights, 0 → 1") + (blocked ? maskedKey("masked: weight exactly 0") : "")
      : key === "output" ? signedBar(out, "this head's output, symmetric about 0")
        : signedBar(logit, "logits: one scale for QKᵀ, scaled and masked") + (key === "masked" && blocked ? maskedKey("masked: −∞") : "");
  }

  function drawCompare(x) {
    /* the difference a − b (or a, or b) as a table, the largest change outlined, with both outputs */
    const {root, ui, data, state} = x;
    const [on, off] = data.labels, show = state.show, values = data[show], largest = data.largest;
    root.dataset.show = show; root.dataset.comparison = data.comparison;
    const choices = [["difference", `${on} − ${off}`], ["a", on], ["b", off]];
    ui.choose.innerHTML = choices.map(([key, label]) => `<button type="button" role="tab" class="av-pick${key === show ? " av-on" : ""}" ` +
      `data-pick="${key}" aria-selected="${key === show}">${escapeHtml(label)}</button>`).join("");
    const limit = largest ? Math.abs(largest.value) : 1;
    const where = largest ? ` The largest change, ${escapeHtml(fmt(largest.value, true))} at query ${largest.query} ` +
      `“${escapeHtml(shown(data.queries[largest.query]))}” → key ${largest.key} “${escapeHtml(shown(data.keys[largest.key]))}”, is outlined.`
      : " This head's weights are the same either way.";
    ui.note.innerHTML = show === "difference"
      ? `<b>${escapeHtml(on)} − ${escapeHtml(off)}</b>: red, more weight ${escapeHtml(on)}; blue, less (more ${escapeHtml(off)}).${where}`
      : `<b>${escapeHtml(show === "a" ? on : off)}</b>: the weights (hatched: masked).`;
    const [maskA, maskB] = data.masks;
    ui.panel.innerHTML = table(data.queries, data.keys.map((t, j) => [shown(t), `key ${j}: ${t}`]), "query ↓ key →", (q, j) => {
      const v = values[q][j];
      const top = largest && show === "difference" && largest.query === q && largest.key === j ? " av-largest" : "";
      if (show === "difference") {
        return [v !== 0 && Math.abs(v) < NEGLIGIBLE ? "≈0" : fmt(v, true), !maskA[q][j] && !maskB[q][j] ? "" : paint(diverging(v / limit)),
          (!maskA[q][j] && !maskB[q][j] ? "av-masked" : "") + top];
      }
      const allowed = (show === "a" ? maskA : maskB)[q][j];
      return allowed ? [fmt(v), paint(viridis(v)), ""] : [fmt(v), "", "av-masked"];
    });
    const anyMasked = (m) => m.some((row) => row.some((ok) => !ok));
    ui.legend.innerHTML = show === "difference"
      ? signedBar(limit, `${escapeHtml(on)} − ${escapeHtml(off)}: blue, more weight ${escapeHtml(off)}; red, more ${escapeHtml(on)}`) +
        (largest ? '<span class="av-masked-key"><span class="av-swatch av-largest"></span>largest change</span>' : "") +
        (values.some((row) => row.some((v) => v !== 0 && Math.abs(v) < NEGLIGIBLE)) ? "<span>≈0: |change| below 0.0005</span>" : "") +
        (maskA.some((row, q) => row.some((ok, j) => !ok && !maskB[q][j])) ? maskedKey("masked either way") : "")
      : weightBar("weights, 0 → 1") + (anyMasked(show === "a" ? maskA : maskB) ? maskedKey("masked: weight exactly 0") : "");
    ui.outputs.innerHTML = `Output ${escapeHtml(on)}: <code>${escapeHtml(data.outputs[0])}</code> · ` +
      `${escapeHtml(off)}: <code>${escapeHtml(data.outputs[1])}</code>`;
  }

  function drawPair(x) {
    /* two runs (another text or model): a and b each in their own tokens, a − b where the tokens align (grey: not) */
    const {root, ui, data, state} = x;
    const [labelA, labelB] = data.labels, show = state.show, largest = data.largest;
    root.dataset.show = show; root.dataset.comparison = data.comparison;
    const choices = [["difference", "a − b"], ["a", `a: ${labelA}`], ["b", `b: ${labelB}`]];
    ui.choose.innerHTML = choices.map(([key, label]) => `<button type="button" role="tab" class="av-pick${key === show ? " av-on" : ""}" ` +
      `data-pick="${key}" aria-selected="${key === show}">${escapeHtml(label)}</button>`).join("");
    const limit = largest ? Math.abs(largest.value) : 1;
    const where = largest ? ` The largest aligned change, ${escapeHtml(fmt(largest.value, true))} at query ${largest.query} ` +
      `“${escapeHtml(shown(data.queries[largest.query]))}” → key ${largest.key} “${escapeHtml(shown(data.keys[largest.key]))}”, is outlined.`
      : "";
    ui.note.innerHTML = show === "difference"
      ? `<b>a − b</b> in a's positions: red, more weight in a (${escapeHtml(labelA)}); blue, more in b (${escapeHtml(labelB)}). ` +
        `${escapeHtml(data.unaligned)}${where}`
      : `<b>${show === "a" ? "a" : "b"}: ${escapeHtml(show === "a" ? labelA : labelB)}</b>, its own tokens (hatched: masked).`;
    const [maskA, maskB] = data.masks, b = show === "b";
    const queries = b ? data.queries_b : data.queries, keys = b ? data.keys_b : data.keys, values = data[show];
    ui.panel.innerHTML = table(queries, keys.map((t, j) => [shown(t), `key ${j}: ${t}`]), "query ↓ key →", (q, j) => {
      const v = values[q][j];
      if (show === "difference") {
        if (v === null) return ["", "", "av-unaligned"];
        const top = largest && largest.query === q && largest.key === j ? " av-largest" : "";
        return [v !== 0 && Math.abs(v) < NEGLIGIBLE ? "≈0" : fmt(v, true), paint(diverging(v / limit)), top.trim()];
      }
      return (b ? maskB : maskA)[q][j] ? [fmt(v), paint(viridis(v)), ""] : [fmt(v), "", "av-masked"];
    });
    ui.legend.innerHTML = show === "difference"
      ? signedBar(limit, "a − b: blue, more weight in b; red, more in a") +
        (largest ? '<span class="av-masked-key"><span class="av-swatch av-largest"></span>largest change</span>' : "") +
        '<span class="av-masked-key"><span class="av-swatch av-unaligned"></span>not aligned: no difference</span>'
      : weightBar("weights, 0 → 1") + ((b ? maskB : maskA).some((row) => row.some((ok) => !ok)) ? maskedKey("masked: weight exactly 0") : "");
    ui.outputs.innerHTML = `Output a: <code>${escapeHtml(data.outputs[0])}</code> · b: <code>${escapeHtml(data.outputs[1])}</code>`;
  }

  function tipText(view, data, state, q, j) {
    /* the exact value under the pointer: steps, the step's value; compare, a, b and their difference */
    const where = `query ${q} “${shown(data.queries[q])}” → `;
    let text;
    if (view === "steps") {
      const key = STEPS[state.step][0], v = data.panels.find((p) => p.key === key).values[q][j];
      const column = key === "output" ? `dimension ${j}` : `key ${j} “${shown(data.keys[j])}”`;
      const masked = !data.mask[q][j] && (key === "masked" || key === "weights") ? " (masked: may not attend)" : "";
      text = `${STEPS[state.step][1]}, ${where}${column}: ${exact(v)}${masked}`;
    } else if (data.pair) {
      const b = state.show === "b", v = data[state.show][q][j];
      const at = `query ${q} “${shown((b ? data.queries_b : data.queries)[q])}” → key ${j} “${shown((b ? data.keys_b : data.keys)[j])}”`;
      text = state.show === "difference" ? `${at}: ${v === null ? "does not align with b" : "a − b " + exact(v, true)}`
        : `${b ? "b" : "a"}, ${at}: ${exact(v)}`;
    } else {
      const [on, off] = data.labels, [maskA, maskB] = data.masks;
      const note = (ok) => (ok ? "" : " (masked)");
      text = `${where}key ${j} “${shown(data.keys[j])}”: ${on} ${exact(data.a[q][j])}${note(maskA[q][j])}; ` +
        `${off} ${exact(data.b[q][j])}${note(maskB[q][j])}; difference ${exact(data.difference[q][j], true)}`;
    }
    return text;
  }

  function mount(root, payload, opts) {
    opts = opts || {};
    const view = opts.view === "compare" ? "compare" : "steps";
    const ui = shell(root, view);
    const state = {step: 0, show: "difference"};
    let data = null;

    function identify() {
      root.dataset.kind = data.kind; root.dataset.layer = data.layer; root.dataset.head = data.head;
      root.setAttribute("aria-label", `${view === "compare" ? "comparison" : "steps"}: ${data.title}`);
    }

    function draw() {
      if (!data) return;
      identify();
      ui.title.textContent = view === "compare" ? `${data.title} · ${data.pair ? "a − b" : `${data.labels[0]} − ${data.labels[1]}`}`
        : `${data.title} · d_k = ${data.d_k} · ${data.scaling}`;
      ui.tip.hidden = true;
      const x = {root: root, ui: ui, data: data, state: state};
      if (view === "compare") (data.pair ? drawPair : drawCompare)(x); else drawSteps(x);
      if (ui.panel.scrollWidth > ui.panel.clientWidth + 1) {  // say that more columns are a scroll away
        ui.legend.insertAdjacentHTML("beforeend", '<span class="av-more">⇆ scroll the table sideways for more columns</span>');
      }
    }

    function show(which) {
      if (view === "compare") {
        state.show = ["difference", "a", "b"].includes(which) ? which : "difference";
      } else {
        const index = typeof which === "number" ? which : STEPS.findIndex(([key]) => key === which);
        state.step = Math.min(Math.max(index, 0), STEPS.length - 1);
      }
      draw();
    }

    function markStale(message) {
      /* say at once that what is drawn is not for the current input (message), or clear that (null) */
      root.classList.toggle("av-stale", !!message);
      ui.stale.hidden = !message;
      ui.stale.textContent = message ? String(message) + (data ? ` Shown: ${data.title}.` : "") : "";
    }

    function setPayload(next) {
      if (typeof next === "string") next = next.trim() ? JSON.parse(next) : null;
      markStale(null);
      data = next && (next.panels || next.difference) ? next : null;
      root.classList.toggle("av-empty", !data);
      if (!data) {
        ui.title.textContent = opts.empty || "Nothing to show yet.";
        ui.note.innerHTML = ui.panel.innerHTML = ui.legend.innerHTML = ui.outputs.innerHTML = "";
        return;
      }
      draw();
    }

    ui.choose.addEventListener("click", (event) => {
      const button = event.target.closest("button");
      if (!button || !data) return;
      if (button.classList.contains("av-prev")) show(state.step - 1);
      else if (button.classList.contains("av-next")) show(state.step + 1);
      else show(button.dataset.pick);
    });
    root.addEventListener("keydown", (event) => {
      if (!data || view !== "steps" || event.altKey || event.ctrlKey || event.metaKey) return;
      const to = {ArrowLeft: state.step - 1, ArrowRight: state.step + 1, Home: 0, End: STEPS.length - 1}[event.key];
      if (to === undefined) return;
      event.preventDefault();
      show(to);
      const current = ui.choose.querySelector(".av-pick.av-on");
      if (current && root.contains(document.activeElement) && document.activeElement.matches("button")) current.focus();
    });
    ui.panel.addEventListener("mouseover", (event) => {
      const cell = event.target.closest("td.av-v");
      if (!cell || !data) return;
      const q = +cell.dataset.q, j = +cell.dataset.k;
      const text = tipText(view, data, state, q, j);
      ui.tip.textContent = text;
      const box = cell.getBoundingClientRect(), base = root.getBoundingClientRect();
      ui.tip.style.left = `${Math.max(0, Math.min(box.left - base.left, base.width - 300))}px`;
      ui.tip.style.top = `${box.bottom - base.top + 4}px`;
      ui.tip.hidden = false;
    });
    ui.panel.addEventListener("mouseleave", () => { ui.tip.hidden = true; });
    ui.panel.addEventListener("scroll", () => { ui.tip.hidden = true; });

    const controller = {setPayload: setPayload, markStale: markStale, show: show, payload: () => data, state: state,
      view: view, root: root};
    root.avView = controller;
    setPayload(payload);
    return controller;
  }

  function mountFrom(rootId, dataId, view) {
    /* a standalone page's view: mounted in #rootId from the JSON in the <script> #dataId (explorer/html.py) */
    const data = JSON.parse(document.getElementById(dataId).textContent);
    return mount(document.getElementById(rootId), data, {view: view});
  }

  global.AttentionSteps = {mount: mount, mountFrom: mountFrom, format: fmt, exact: exact, viridis: viridis, diverging: diverging, ink: ink};
})(window);
