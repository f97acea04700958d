/* long-grids.js: every head's summaries as layer x head grids (sink, entropy, mean distance), the chosen head marked.
 *
 *   AttentionLong.grids.draw(view)   AttentionLong.grids.markChosen(view)
 */
(function (global) {
  "use strict";
  const L = global.AttentionLong = global.AttentionLong || {};
  if (L.grids) return;
  const P = global.AttentionPalette, esc = global.AttentionShared.escapeHtml; // both loaded first
  const GRIDS = [  // each statistic's grid: its name, its title, how its colour bar's top is written
    ["first_token", "weight on the first token (the sink)", (v) => L.run.fmt(v)],  // a weight, as the maps' bars
    ["entropy", "entropy (nats)", (v) => v.toFixed(2)],
    ["mean_distance", "mean distance (tokens)", (v) => v.toFixed(1)],  // as the chosen head's line
  ];


  function drawGrids(view) {
    const p = view.state.payload, H = p.heads;
    const unit = p.seconds ? "positions" : "tokens";  // a recording's: its encoder's positions, not tokens of text
    view.$(".av-long-grids").innerHTML = GRIDS.map(([name, named, format]) => {
      const title = named.replace("(tokens)", `(${unit})`);
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
        <div class="av-long-legend">${L.overview.legend(top, "", format)}</div></figure>`;
    }).join("");
    view.element.querySelectorAll(".av-long-cell").forEach((cell) => cell.addEventListener("click", () =>
      L.overview.choose(view, cell.dataset.key, Number(cell.dataset.head))));
    view.element.querySelectorAll(".av-long-grid").forEach((grid) => grid.addEventListener("keydown", (e) => {
      /* one tab stop a grid (the chosen head); the arrow keys move through the layers and heads */
      const step = {ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0]}[e.key];
      if (!step || !e.target.classList.contains("av-long-cell")) return;
      e.preventDefault();
      const l = Math.min(Math.max(p.keys.indexOf(e.target.dataset.key) + step[0], 0), p.keys.length - 1);
      const h = Math.min(Math.max(Number(e.target.dataset.head) + step[1], 0), H - 1);
      L.overview.choose(view, p.keys[l], h).then(() => {});
      const next = grid.querySelector(`.av-long-cell[data-key="${CSS.escape(p.keys[l])}"][data-head="${h}"]`);
      if (next) next.focus();
    }));
  }

  function markChosen(view) {
    view.element.querySelectorAll(".av-long-cell").forEach((cell) => {
      const on = cell.dataset.key === view.state.key && Number(cell.dataset.head) === view.state.head;
      cell.classList.toggle("av-long-on", on);
      cell.setAttribute("aria-pressed", on ? "true" : "false");
      cell.tabIndex = on ? 0 : -1;
    });
    const p = view.state.payload, l = p.keys.indexOf(view.state.key), unit = p.seconds ? "position" : "token";
    const f = (name) => p.stats[name][l][view.state.head];
    view.$(".av-long-chosen").textContent = `${view.state.key}, head ${view.state.head}: sink ${f("first_token").toFixed(3)}, ` +
      `entropy ${f("entropy").toFixed(2)} nats, mean distance ${f("mean_distance").toFixed(1)} ${unit}s, ` +
      `previous ${unit} ${f("previous_token").toFixed(3)}`;
  }

  L.grids = {draw: drawGrids, markChosen: markChosen};
})(window);
