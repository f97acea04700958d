/* explorer-headsoff.js: the "switch heads off" mode: a click on a tile, a layer's label or the kind's button asks for a
 * run with those heads off (an "explorer:heads-off" event; the page reads the heads asked, {map key: [heads] or "all"}
 * in run order, back with controller.askedOff(), puts them in the heads-off box as JSON and runs), and the note that
 * says which heads this run has off.
 *
 *   AttentionExplorer.headsOff.wire(x)   .setCutting(x, on)   .note(x)   .offMap(x, off)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.headsOff) return;

  function offMap(x, off) {
    /* heads off ({key: Set}) as the server reads them in JSON: {map key: [heads, ascending] or "all"}, in run order,
       keys with none left out */
    const data = x.data, keyOf = E.run.keyOf, result = {};
    for (const kind of data.order) {
      for (let l = 0; l < data.kinds[kind].layers; l++) {
        const heads = off[keyOf(kind, l)];
        if (heads && heads.size) {
          result[keyOf(kind, l)] = heads.size === data.H ? "all" : [...heads].sort((a, b) => a - b);
        }
      }
    }
    return result;
  }

  function ask(x, off) {
    /* the page reads the request back (controller.askedOff) when its event runs */
    x.askedOff = off;
    x.root.classList.add("av-switching");
    x.root.dispatchEvent(new CustomEvent("explorer:heads-off"));
  }

  function switchHeads(x, changes, on) {
    /* ask for a run with these (key, head) pairs switched off (on = false) or back on; the view changes when the
       run comes back */
    const off = {};
    for (const [key, heads] of Object.entries(x.data.off)) off[key] = new Set(heads);
    for (const [key, h] of changes) {
      off[key] = off[key] || new Set();
      if (on) off[key].delete(h); else off[key].add(h);
    }
    ask(x, offMap(x, off));
  }
  const headsOf = (x, k, layers) => layers.flatMap((l) => Array.from({length: x.data.H}, (_, h) => [E.run.keyOf(k.kind, l), h]));

  function setCutting(x, on) {
    const ui = x.ui;
    x.cutting = !!on && !!x.opts.switchable;
    ui.cut.setAttribute("aria-pressed", x.cutting ? "true" : "false");
    ui.cutKind.hidden = ui.cutNone.hidden = !x.cutting;
    x.root.classList.toggle("av-cutting", x.cutting);
    if (x.data) { E.grid.draw(x, true); note(x); }
  }

  function note(x) {
    const ui = x.ui, data = x.data, k = data.kinds[x.state.kind], n = Object.values(data.off).reduce((a, s) => a + s.size, 0);
    ui.cutKind.textContent = E.run.kindOff(x, k) ? `${k.label}: every head on` : `${k.label}: all off`;
    const how = data.ablation === "mean" ? "its mean output" : "0";
    const text = n ? `${n} head${n > 1 ? "s" : ""} switched off (marked off): their maps are still computed; what ` +
      `each passes to W_O is ${how}.` : "";
    const hint = x.cutting ? " Click a tile to switch that head off or on, a layer's L to switch its row, or the " +
      "buttons above; the model reruns." : "";
    ui.offNote.hidden = !(text || hint);
    ui.offNote.textContent = text + hint;
  }

  function wire(x) {
    /* in this mode a tile or a layer's label switches heads instead of opening one (registered before the grid's own
       click: it stops the click before that sees it) */
    const ui = x.ui, run = E.run;
    ui.cutBox.hidden = !x.opts.switchable;
    ui.grid.addEventListener("click", (event) => {
      if (!x.cutting || !x.data) return;
      const k = x.data.kinds[x.state.kind], tile = event.target.closest(".av-tile"), row = event.target.closest(".av-row-cut");
      if (tile) {
        const l = +tile.dataset.layer, h = +tile.dataset.head;
        switchHeads(x, [[run.keyOf(k.kind, l), h]], run.isOff(x, k, l, h));
      } else if (row) switchHeads(x, headsOf(x, k, [+row.dataset.row]), run.layerOff(x, k, +row.dataset.row));
      else return;
      event.stopImmediatePropagation();
    });
    ui.cut.addEventListener("click", () => setCutting(x, !x.cutting));
    ui.cutKind.addEventListener("click", () => {
      const k = x.data.kinds[x.state.kind];
      switchHeads(x, headsOf(x, k, Array.from({length: k.layers}, (_, l) => l)), run.kindOff(x, k));
    });
    ui.cutNone.addEventListener("click", () => ask(x, {}));
  }

  E.headsOff = {wire: wire, setCutting: setCutting, note: note, offMap: offMap};
})(window);
