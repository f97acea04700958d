/* headmap.js: one head drawn on a canvas with its numbers as text over it, for heads too large for a table.
 *
 *   const map = AttentionHeadMap.build(view, {queryTokens, keyTokens, small, label})
 *   map.draw(cell, now)   cell(q, j) -> [rgb, text] (a weight: its colour and its 4-character text),
 *                         null (masked: may not attend) or false (not computed yet at this decode step);
 *                         now: the query row the decode step writes (marked), or -1
 *   map.cellAt(event)     -> {q, j, box} under the pointer (box: the cell's client rectangle), or null
 *   map.hover(q, j)       outlines that cell (hover(null) clears it)
 *
 * Built inside `view` (explorer.js's head view, which keeps its id and data attributes): a caption, the key
 * labels above, the query labels at the left (sticky, so they stay in sight while the view scrolls
 * sideways), and the body: a canvas of one pixel per cell scaled up by CSS without smoothing (masked cells
 * transparent over a hatched background, cells not computed yet light grey), white lines between the cells,
 * and over it one line of DOM text per query row in which every value is written inside its own cell
 * (2 decimals; selectable, found by the browser's find, read by screen readers), black or white for its
 * cell by a background clipped to the text. Cells are 5 characters (ch) of that text's font wide and
 * every size is in ch, so the canvas, the lines and the text share one grid without measuring anything.
 *
 * Why: a table redraws a head by rewriting and laying out again each of its Q x K cells (~40 ms of layout
 * for 33 x 49 cells); this writes Q x K pixels and Q lines of text. Above 64 keys (small) cells are 14 px
 * squares without text, as the table does (the exact weight on hover).
 * Nothing global but `window.AttentionHeadMap`; every element lives inside `view`.
 */
(function (global) {
  "use strict";
  if (global.AttentionHeadMap) return; // already loaded by another fragment on this page

  const CELL_CH = 5; // a cell is 5 characters wide: "0.12" and a space
  const FUTURE = [242, 242, 242]; // as explorer.js's cells not computed yet
  const BLANK = " ".repeat(CELL_CH);

  const esc = global.AttentionShared.escapeHtml; // shared.js, loaded first
  const {ink, paint} = global.AttentionPalette; // palette.js, loaded first

  function textStyle(runs) {
    /* one row's text colour: one colour, or a background clipped to the text with a stop per run of cells */
    if (runs.length === 1) return `color:${runs[0][0]}`;
    const stops = runs.map(([colour, from, to]) => `${colour} ${from * CELL_CH}ch ${to * CELL_CH}ch`).join(",");
    return `background-image:linear-gradient(90deg,${stops})`;
  }

  function build(view, spec) {
    const Q = spec.queryTokens.length, K = spec.keyTokens.length, small = !!spec.small;
    const label = spec.label || ((t) => t);
    const keys = spec.keyTokens.map((t, j) => `<span class="av-hm-key${label(t).length > 3 ? " av-long" : ""}" ` +
      `title="key ${j}: ${esc(t)}">${esc(label(t))}</span>`).join("");
    const queries = spec.queryTokens.map((t, q) => `<span class="av-hm-query" title="query ${q}: ${esc(t)}">` +
      `${esc(label(t))}</span>`).join("");
    const rows = `<div class="av-hm-row" aria-hidden="${small}"></div>`.repeat(Q);
    view.innerHTML = `<div class="av-caption"></div><div class="av-hm${small ? " av-small" : ""}" ` +
      `style="--q:${Q};--k:${K}"><span class="av-hm-corner">query ↓ key →</span>` +
      `<div class="av-hm-keys">${keys}</div><div class="av-hm-queries">${queries}</div>` +
      `<div class="av-hm-body"><canvas></canvas><div class="av-hm-text">${rows}</div>` +
      Array.from({length: K - 1}, (_, j) => `<i class="av-hm-line" style="left:calc(${j + 1} * var(--cw) - 1px)"></i>`).join("") +
      `<i class="av-hm-cell" hidden></i></div></div>`;
    const $ = (sel) => view.querySelector(sel);
    const body = $(".av-hm-body"), canvas = $("canvas"), outline = $(".av-hm-cell");
    const rowEls = Array.from(view.querySelectorAll(".av-hm-row"));
    const labels = Array.from(view.querySelectorAll(".av-hm-query"));
    const shownText = new Array(Q).fill(null), shownStyle = new Array(Q).fill(null);
    canvas.width = K; canvas.height = Q; // one pixel per cell, scaled up by CSS without smoothing
    const ctx = canvas.getContext("2d"), cells = new Array(Q * K);

    function draw(cell, now) {
      /* the cells' colours (masked cells transparent over the hatch), then each row's text where it changed */
      paint(ctx, Q, K, (q, j) => {
        const c = cells[q * K + j] = cell(q, j);
        return c === null ? null : c ? c[0] : FUTURE;
      });
      for (let q = 0; q < Q; q++) {
        let text = "";
        const runs = []; // [colour, first cell, past the last cell] of the row's text
        for (let j = 0; j < K && !small; j++) {
          const c = cells[q * K + j];
          text += c ? (c[1] + BLANK).slice(0, CELL_CH) : BLANK;
          const colour = c ? ink(c[0]) : null, last = runs[runs.length - 1];
          if (last && (colour === null || colour === last[0])) last[2] = j + 1;
          else if (colour !== null) runs.push([colour, last ? j : 0, j + 1]);
        }
        if (!small) {
          text = text.replace(/ +$/, "");
          const style = textStyle(runs.length ? runs : [["#000", 0, K]]);
          if (shownText[q] !== text) { rowEls[q].textContent = text; shownText[q] = text; }
          if (shownStyle[q] !== style) {
            rowEls[q].style.cssText = style; shownStyle[q] = style;
            rowEls[q].classList.toggle("av-clip", runs.length > 1);
          }
        }
        rowEls[q].classList.toggle("av-now", q === now);
        labels[q].classList.toggle("av-now", q === now);
      }
    }

    function cellAt(event) {
      if (!body.contains(event.target)) return null;
      const box = body.getBoundingClientRect();
      const j = Math.floor((event.clientX - box.left) / box.width * K);
      const q = Math.floor((event.clientY - box.top) / box.height * Q);
      if (!(q >= 0 && q < Q && j >= 0 && j < K)) return null;
      const w = box.width / K, h = box.height / Q;
      return {q: q, j: j, box: {left: box.left + j * w, right: box.left + (j + 1) * w,
        top: box.top + q * h, bottom: box.top + (q + 1) * h}};
    }

    function hover(q, j) {
      outline.hidden = q === null || q === undefined;
      if (outline.hidden) return;
      outline.style.cssText = `left:${100 * j / K}%;top:${100 * q / Q}%;width:${100 / K}%;height:${100 / Q}%`;
    }

    return {draw: draw, cellAt: cellAt, hover: hover, caption: view.querySelector(".av-caption"), Q: Q, K: K};
  }

  global.AttentionHeadMap = {build: build, ink: ink};
})(window);
