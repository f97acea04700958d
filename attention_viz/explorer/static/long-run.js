/* long-run.js: the long view's numbers, no drawing: a payload's cells decoded, a weight written, a position's label, and
 * what asking the server (or, in the notebook, the payload's own overviews) answers.
 *
 *   AttentionLong.run.cells(o)  .fmt(v)  .label(view, i, from)  .said(view, i)  .span(view, a, b)  .ask(view, extra)
 *   .markStale(view, m)
 * `view` is one mounted view (long.js: {element, opts, $, state}). A recording's payload has `seconds` (each
 * position's, its labels the times): span writes its positions a:b as times.
 */
(function (global) {
  "use strict";
  const L = global.AttentionLong = global.AttentionLong || {};
  if (L.run) return;
  const S = global.AttentionShared; // shared.js, loaded first
  // an overview's cells as floats (uint16 of cell / top), a region's as they came (float32)
  const cells = (o) => o.values || (o.values = o.side
    ? Float32Array.from(new Uint16Array(S.bytes(o.data).buffer), (v) => (v / 65535) * o.top)
    : new Float32Array(S.bytes(o.data).buffer));
  const fmt = (v) => (v === 0 ? "0" : v >= 0.001 ? v.toFixed(5) : v.toExponential(3));

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

  function span(view, a, b) {
    /* positions a to b - 1 as the titles write them: "8-55", or a recording's "0.16-1.12 s" (where b - 1 ends) */
    const s = view.state.payload.seconds;
    return s ? `${(a * s).toFixed(2)}-${(b * s).toFixed(2)} s` : `${a}-${b - 1}`;
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

  function markStale(view, message) {
    const el = view.$(".av-long-stale");
    el.hidden = !message;
    el.textContent = message || "";
    view.element.classList.toggle("av-long-isstale", !!message);
  }

  L.run = {cells: cells, fmt: fmt, label: label, said: said, span: span, ask: ask, markStale: markStale};
})(window);
