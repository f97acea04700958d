/* explorer-kept.js: the kinds shown before in this run, kept so that showing one again costs no new layout.
 *
 * x.kept: kind -> {grid, page, table, map, painted, scores}: their tiles, detached from the page, and their head view
 * and scores, hidden where they are (their text and tables keep their layout; laying out a wide head's text or a
 * table of 32 heads again costs a frame); showing a kind again puts them back (new canvases cost a frame on a wide
 * run) and repaints them only if the head, colour scale or decode step changed meanwhile.
 *
 *   AttentionExplorer.kept.keep(x, kind)   .restore(x, kind) -> whether it was kept   .forget(x)   (a new run)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.kept) return;

  function hideKept(el) { // out of the flow, unseen, unreachable, and no longer the element of its id
    el.removeAttribute("id"); el.classList.add("av-kept"); el.inert = true;
  }

  function keep(x, kind) {
    /* the head view and the scores stay where they are, hidden, so that they come back without a new layout;
       fresh empty ones take their ids */
    const ui = x.ui;
    if (kind === null || !ui.grid.firstChild) return;
    const page = ui.view;
    page.removeAttribute("tabindex"); page.removeAttribute("aria-label");
    delete page.dataset.kind; delete page.dataset.layer; delete page.dataset.head;
    hideKept(page);
    const scores = ui.scores;
    hideKept(scores);
    scores.querySelectorAll("tr.av-selected").forEach((tr) => tr.classList.remove("av-selected"));
    x.kept.set(kind, {grid: Array.from(ui.grid.childNodes), page: page, table: x.table, map: x.map,
      painted: x.gridPainted, scores: scores});
    ui.grid.replaceChildren(); x.table = x.map = x.gridPainted = null;
    ui.scores = document.createElement("div");
    ui.scores.className = "av-scores"; ui.scores.id = x.scoresId; ui.scores.hidden = true;
    ui.scorePanels.append(ui.scores);
    ui.view = document.createElement("div");
    ui.view.className = "av-head-view"; ui.view.id = x.headViewId; ui.view.tabIndex = 0;
    ui.views.append(ui.view);
  }

  function restore(x, kind) {
    const ui = x.ui, was = x.kept.get(kind);
    if (!was) return false;
    x.kept.delete(kind);
    ui.view.remove();
    ui.view = was.page; ui.view.classList.remove("av-kept"); ui.view.inert = false;
    ui.view.id = x.headViewId; ui.view.tabIndex = 0;
    ui.grid.replaceChildren(...was.grid); x.table = was.table; x.map = was.map;
    x.gridPainted = was.painted;
    ui.scores.remove();
    ui.scores = was.scores; ui.scores.classList.remove("av-kept"); ui.scores.inert = false; ui.scores.id = x.scoresId;
    return true;
  }

  function forget(x) {
    for (const was of x.kept.values()) { was.page.remove(); was.scores.remove(); }
    x.kept.clear();
    x.ui.scores.innerHTML = "";
  }

  E.kept = {keep: keep, restore: restore, forget: forget};
})(window);
