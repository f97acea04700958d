/* explorer-tips.js: hover over the chosen head: the exact weight of the cell under the pointer (a table's cell, or a
 * large head's canvas cell), and with what flows its share, the norm and the weight, in a tooltip beside it.
 *
 *   AttentionExplorer.tips.wire(x)   (once per mount)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.tips) return;
  const {shown} = global.AttentionShared;

  function valueText(x, q, j) {
    /* the hovered cell of the chosen head: its weight, and with what flows, its share, the norm and the weight */
    const run = E.run, state = x.state, k = x.data.kinds[state.kind], t = run.stepping(x, k);
    const index = (state.head * k.Q + q) * k.K + j, weight = run.weightsAt(x, k, state.layer, t)[index];
    if (run.biasing(x, k)) return `position bias B ${run.weightsOf(x, k, state.layer)[index].toFixed(4)} (weight ${weight.toFixed(4)})`;
    if (run.stacked(x, k)) return `${run.STACK_SHOWS[state.show]} ${run.weightsOf(x, k, state.layer)[index].toFixed(4)} of output token ${q}`;
    if (!run.flowing(x, k)) return `weight ${weight.toFixed(4)}`;
    return `${run.flowsAt(x, k, state.layer, t)[index].toFixed(4)} of the row's flow (weight ${weight.toFixed(4)} × ` +
      `‖v W_O‖ ${k.norms[state.layer][state.head][j].toPrecision(4)})`;
  }

  function tip(x, q, j, what, box) {
    const ui = x.ui, k = x.data.kinds[x.state.kind];
    ui.tip.textContent = `query ${q} “${shown(k.queryTokens[q])}” → key ${j} “${shown(k.keyTokens[j])}”: ${what}`;
    const base = x.root.getBoundingClientRect();
    ui.tip.style.left = `${Math.max(0, Math.min(box.left - base.left, base.width - 220))}px`;
    ui.tip.style.top = `${box.bottom - base.top + 4}px`;
    ui.tip.hidden = false;
  }

  function wire(x) {
    const ui = x.ui;
    ui.views.addEventListener("mouseover", (event) => {
      const cell = event.target.closest("td");
      if (!cell || !x.data) return;
      const q = +cell.dataset.q, j = +cell.dataset.k;
      const what = cell.classList.contains("av-future") ? "not computed yet at this step"
        : (cell.classList.contains("av-masked") ? "masked (may not attend), weight 0" : valueText(x, q, j));
      tip(x, q, j, what, cell.getBoundingClientRect());
    });
    ui.views.addEventListener("mousemove", (event) => { // a large head: the cell under the pointer on its canvas
      const map = x.map, at = map && x.data ? map.cellAt(event) : null;
      if (!map) return;
      map.hover(at ? at.q : null, at ? at.j : null);
      if (!at) { ui.tip.hidden = true; return; }
      const k = x.data.kinds[x.state.kind], t = E.run.stepping(x, k);
      const what = E.run.future(k, t, at.q, at.j) ? "not computed yet at this step"
        : (!k.allowed[at.q][at.j] ? "masked (may not attend), weight 0" : valueText(x, at.q, at.j));
      tip(x, at.q, at.j, what, at.box);
    });
    ui.views.addEventListener("mouseleave", () => { ui.tip.hidden = true; if (x.map) x.map.hover(null); });
  }

  E.tips = {wire: wire};
})(window);
