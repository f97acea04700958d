/* explorer-scores.js: what to look for in the chosen kind (the server's sentence) and every head's pattern scores as a
 * table whose rows select their head; the chosen head's statistics under the grid.
 *
 *   AttentionExplorer.scores.draw(x)   .mark(x) (the chosen head's row and line)   .stats(x)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.scores) return;
  const {escapeHtml, inline} = global.AttentionShared;

  const STATS = [["entropy", "entropy", "nats"], ["max_weight", "max weight", ""],
    ["mean_distance", "mean distance", "positions"], ["diagonal", "on diagonal", ""]];

  function rowsHtml(x, k, names) {
    const sc = k.scores, clear = E.grid.CLEAR;
    const best = names.map((n) => Math.max(...sc.values[n].flat().map((v) => (v === null ? -1 : v))));
    let rows = "";
    for (let l = 0; l < k.layers; l++) {
      for (let h = 0; h < x.data.H; h++) {
        rows += `<tr data-layer="${l}" data-head="${h}" tabindex="0"><th>L${l}·H${h}</th>` + names.map((n, i) => {
          const v = sc.values[n][l][h];
          return v === null ? "<td>–</td>" : `<td class="${v === best[i] ? "av-best" : ""}${v > clear ? " av-clear" : ""}">${v.toFixed(2)}</td>`;
        }).join("") + "</tr>";
      }
    }
    return rows;
  }

  function draw(x) {
    /* what to look for (the server's sentence, from this run's numbers) and every head's scores; a kind shown
       before brings its panel back as it was (see explorer-kept.js) */
    const ui = x.ui, k = x.data.kinds[x.state.kind], sc = k.scores;
    ui.scores.hidden = !sc;
    if (!sc || ui.scores.firstChild) { mark(x); return; }
    const names = Object.keys(sc.values);
    ui.scores.innerHTML = `<p class="av-look-for">${inline(sc.look_for)}</p><p class="av-this-head"></p>` +
      `<div class="av-score-box"><table class="av-score-table"><thead><tr><th>head</th>` +
      names.map((n) => `<th title="even spread would score ${sc.chance[n]}">${escapeHtml(sc.labels[n])}</th>`).join("") +
      `</tr><tr class="av-chance"><th>even spread</th>${names.map((n) => `<td>${(sc.chance[n] || 0).toFixed(2)}</td>`).join("")}` +
      `</tr></thead><tbody>${rowsHtml(x, k, names)}</tbody></table></div>`;
    mark(x);
  }

  function mark(x) {
    const ui = x.ui, state = x.state, sc = x.data && x.data.kinds[state.kind].scores;
    if (!sc) return;
    ui.scores.querySelectorAll("tbody tr").forEach((tr) => {
      tr.classList.toggle("av-selected", +tr.dataset.layer === state.layer && +tr.dataset.head === state.head);
    });
    const parts = Object.keys(sc.values).map((n) => {
      const v = sc.values[n][state.layer][state.head];
      return `${escapeHtml(sc.labels[n])} ${v === null ? "–" : v.toFixed(2)}`;
    });
    E.write(ui.scores.querySelector(".av-this-head"), `<b>This head, L${state.layer}·H${state.head}:</b> ${parts.join(" · ")}`);
    const box = ui.scores.querySelector(".av-score-box"), row = box && box.querySelector("tbody tr.av-selected");
    if (row) requestAnimationFrame(() => keepInView(box, row)); // read once the frame lays it out, not now
  }

  function keepInView(box, row) {
    /* scroll the scores' own box (never the page) so that the selected head's row shows below its sticky head */
    const b = box.getBoundingClientRect(), r = row.getBoundingClientRect();
    const top = b.top + box.querySelector("thead").getBoundingClientRect().height;
    if (r.top < top) box.scrollTop -= top - r.top;
    else if (r.bottom > b.bottom) box.scrollTop += r.bottom - b.bottom;
  }

  function stats(x) {
    const k = x.data.kinds[x.state.kind], s = k.stats;
    E.write(x.ui.stats, (E.run.flowing(x, k) || E.run.stacked(x, k) ? `<span>of the weights α, layer ${x.state.layer} head ${x.state.head}:</span>` : "") + STATS.map(([key, label, unit]) =>
      `<span><b>${label}</b> ${s[key][x.state.layer][x.state.head].toFixed(3)}${unit ? " " + unit : ""}</span>`).join(""));
  }

  E.scores = {draw: draw, mark: mark, stats: stats};
})(window);
