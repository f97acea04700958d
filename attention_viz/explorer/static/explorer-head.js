/* explorer-head.js: the chosen head, its values as text: a table, or above 600 cells a canvas with the values as lines
 * of text over it (headmap.js); where it sits (beside the grid or under it) and whether it says it scrolls sideways.
 *
 *   AttentionExplorer.head.draw(x)   AttentionExplorer.head.watchWidth(x)   (once per mount: a resize re-places it)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.head) return;
  const {escapeHtml, shown} = global.AttentionShared;

  // what a map's rows and columns are: the decoder's rows are its inputs (<bos> and the output so far), each writing
  // the next output token, so a row is labelled with the token before the one it writes
  const AXES = {source: "source tokens", target: "the decoder's inputs"};
  const BIG = 64; // more keys than this: small cells without text (values on hover only)
  const TIGHT = 16; // more keys than this: narrower cells, in a smaller font (a date in words fits a laptop's screen)
  // a head of more cells than this is drawn on a canvas with its numbers as lines of text (headmap.js): a
  // table lays each of its cells out again on every redraw, ~40 ms for the app's widest head (33 x 49)
  const TABLE_CELLS = 600;

  function buildTable(x, k) {
    /* the head view's skeleton for one kind: labels and masked cells stay, value cells are refilled */
    const ui = x.ui, small = k.K > BIG, tight = !small && k.K > TIGHT;
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
    x.table = {kind: k.kind, small: small, cells: cells, hidden: hidden, rows: ui.view.querySelectorAll("tbody tr"),
      caption: ui.view.querySelector(".av-caption"),
      shown: cells.map(() => ({cls: null, css: null, title: null, text: null}))}; // what each cell shows now
  }

  function sayWide(x) {
    /* on a wide root, a head too wide for the room beside the grid goes under it, across the root; a head wider
       than its box then says that it scrolls sideways (the note above it) */
    const ui = x.ui;
    x.wideCheck = 0;
    const frame = ui.grid.parentElement.parentElement, head = ui.view.querySelector(".av-map, .av-hm");
    if (head && getComputedStyle(frame).display === "grid") {
      frame.classList.toggle("av-head-below", head.offsetWidth > frame.clientWidth - ui.grid.offsetWidth - 20);
    }
    ui.more.hidden = !(ui.view.scrollWidth > ui.view.clientWidth + 1);
  }
  function sayWideSoon(x) {
    /* at the next frame, when the view is laid out anyway: no layout forced in the middle of a redraw */
    if (!x.wideCheck) x.wideCheck = global.requestAnimationFrame(() => sayWide(x));
  }
  function watchWidth(x) {
    if (global.ResizeObserver) new global.ResizeObserver(() => sayWideSoon(x)).observe(x.ui.views);
  }

  function stackCaption(x, k) {
    /* the stack views' caption: what the map is, or why this kind shows its weights instead */
    const run = E.run, name = run.STACK_SHOWS[x.state.show];
    if (run.stacked(x, k)) {
      return `${escapeHtml(k.label)} · <b class="av-flow-caption">${name} of the whole stack</b> ` +
        `<span>(${escapeHtml(k.stack.note)} Rows: each output token of the stack; columns: its share of each input ` +
        `token; each row sums to 1.)</span>`;
    }
    const why = !k.stack ? `${name} reads a stack of self-attention; this kind is not one`
      : (k.stack.flowNote || `no ${name} for this run`);
    return `<b class="av-flow-caption">${escapeHtml(why)}.</b> Showing the weights: ` + weightsCaption(x, k);
  }

  function caption(x, k) {
    if (x.state.show === "bias") return biasCaption(x, k);
    return x.state.show in E.run.STACK_SHOWS ? stackCaption(x, k) : weightsCaption(x, k);
  }

  function biasCaption(x, k) {
    /* the position bias view's caption: what B is, or why this kind shows its weights instead */
    if (!E.run.biasing(x, k)) {
      return `<b class="av-flow-caption">${escapeHtml(k.label)} adds no position bias (B = 0).</b> Showing the ` +
        "weights: " + weightsCaption(x, k);
    }
    return `${escapeHtml(k.label)} · layer ${x.state.layer} · head ${x.state.head} · <b class="av-flow-caption">` +
      `position bias B</b> <span>(what the model adds to each score of QKᵀ·s before the mask and the softmax, by ` +
      `where the query and the key are; rows: queries, ${AXES[k.queries] || k.queries}; columns: keys, ` +
      `${AXES[k.keys] || k.keys})</span>`;
  }

  function weightsCaption(x, k) {
    const state = x.state;
    return `${escapeHtml(k.label)} · layer ${state.layer} · head ${state.head} ` +
      (E.run.isOff(x, k, state.layer, state.head) ? `<b class="av-off-caption">switched off</b> ` : "") +
      (E.run.flowing(x, k) ? `<b class="av-flow-caption">what flows</b> (each row's share of α·‖v W_O‖) ` : "") +
      `<span>(rows: queries, ${AXES[k.queries] || k.queries}` +
      (k.queries === "target" ? ", each row writing the next output token" : "") +
      `; columns: keys, ${AXES[k.keys] || k.keys})</span>`;
  }

  function fillTable(x, k, w, offset, maxima, t) {
    /* each cell is written only where it changes: a head switch leaves most "0.00" cells as they are, and
       every write would lay the table out again (the widest table has ~1,400 cells) */
    const run = E.run, table = x.table, drawn = table.shown, tone = run.toneOf(x, k, true);
    table.cells.forEach(([td, index, q, j], c) => {
      let css, text, title, cls;
      if (run.future(k, t, q, j)) {
        css = ""; text = ""; title = `not computed yet at step ${t + 1}`; cls = "av-future";
      } else {
        const value = w[offset + index];
        css = tone(value, maxima[q]); title = value.toFixed(4); cls = "";
        text = table.small ? "" : value.toFixed(2);
      }
      const was = drawn[c];
      if (was.cls !== cls) { td.className = cls; was.cls = cls; }
      if (was.css !== css) { td.style.cssText = css; was.css = css; }
      if (was.title !== title) { td.title = title; was.title = title; }
      if (was.text !== text) { td.textContent = text; was.text = text; }
    });
    for (const [td, , q, j] of table.hidden) td.classList.toggle("av-future", run.future(k, t, q, j));
    table.rows.forEach((tr, q) => tr.classList.toggle("av-now", q === t));
  }

  function draw(x) {
    /* the chosen head: values as text (2 decimals) where they fit, 4 decimals in the title and on hover */
    const run = E.run, state = x.state, k = x.data.kinds[state.kind], w = run.weightsOf(x, k, state.layer);
    const offset = state.head * k.Q * k.K, t = run.stepping(x, k), large = k.Q * k.K > TABLE_CELLS && global.AttentionHeadMap;
    if (large && (!x.map || x.map.kind !== k.kind)) {
      x.table = null;
      x.map = Object.assign(global.AttentionHeadMap.build(x.ui.view, {queryTokens: k.queryTokens,
        keyTokens: k.keyTokens, small: k.K > BIG, label: shown}), {kind: k.kind});
    } else if (!large && (!x.table || x.table.kind !== k.kind)) {
      x.map = null;
      buildTable(x, k);
    }
    const view = x.ui.view;
    view.dataset.kind = k.kind; view.dataset.layer = state.layer; view.dataset.head = state.head;
    view.setAttribute("aria-label", `${k.label}, layer ${state.layer}, head ${state.head}`);
    const shownAs = large ? x.map : x.table;
    shownAs.caption.innerHTML = caption(x, k);
    sayWideSoon(x);
    const painted = `${state.layer} ${state.head} ${state.scale} ${t} ${run.flowing(x, k)} ${run.biasing(x, k)} ` +
      `${run.stacked(x, k) && state.show}`; // what the view's cells show
    if (shownAs.painted === painted) return; // a kept kind's head view, as it was left
    shownAs.painted = painted;
    const maxima = run.rowMaxima(w, offset, k.Q, k.K);
    if (large) {
      const tone = run.toneOf(x, k);
      x.map.draw((q, j) => {
        if (run.future(k, t, q, j)) return false;
        if (!k.allowed[q][j]) return null;
        const value = w[offset + q * k.K + j];
        return [tone(value, maxima[q]), value.toFixed(2)];
      }, t);
      return;
    }
    fillTable(x, k, w, offset, maxima, t);
  }

  E.head = {draw: draw, watchWidth: watchWidth};
})(window);
