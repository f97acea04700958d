/* page.js: what the app's Gradio page calls, by name: every gr.HTML's js_on_load and every event's `js` is one call of
 * a function here (attention_viz/webui/*.py), so no script lives in a Python string.
 *
 * Loaded once per page, with every view's script before it (webui/scripts.py: launch(head=...)), before any
 * component is drawn. A gr.HTML's js_on_load gets `element` (its root), `props` (props.value, its value), `watch`
 * and `trigger` (trigger(name, data): the component's event `name`, its Python listener given `data`);
 * an event's js gets the event's input values and returns the values its function (or its outputs) receive.
 *
 *   mount:   attentionViz.mountExplorer / mountSteps / mountHeads / mountLab / mountStudy / mountOwn / mountTraining
 *            (element, props, watch, options, trigger): the view in the template's ".av-mount" (".av-lab-mount"),
 *            redrawn on every new value; mountLab's and mountSteps' fifth argument is `server` (their answers
 *            asked of server[opts.answer]); mountLong(element, props, watch, options, server): the long view, whose
 *            overviews and regions are asked of the component's server function options.view (server[view])
 *   marks:   longStale(elemId, message): the long view says its page is not the current input's
 *   marks:   stale(elemIds, message, args, outputs), fresh(elemIds, shownOnly): the explorer, steps and compare views
 *            in those components say at once that they are (not) the current input's
 *   choice:  selection(elemId, at, args), openOn(elemId, target), badges(elemId, data), headsEmpty(elemId, note),
 *            reveal(target, views, bar, parts)
 *   the lesson: moreBelow(element): its text box marked while more of its text is below
 *   steps:   stepsAsk(elemId, explorerId, at, args): the steps asked beside the queue
 *   the lab: labAsk / labPending / labStale (elemId, d_k, n_keys, scaled), labCurrent(elemId),
 *            labShown(elemId, shown), own(elemId, current),
 *            training(elemId, message)
 *   values:  bump(tick), routeOne(index, kind, value, shown, tick, box), routeTyped(index, kind, value, shown, tick,
 *            box) (a number box applies on Enter or leaving it, not while typed in), released(box, value, tick) (a
 *            slider's release, once a value), routeWhen(gated, open, route,
 *            ...route's arguments) (only while another control holds `open`), applies(value, open, why),
 *            interactive(on),
 *            refreshIfOpen(active, tick),
 *            nearestTrained(d, current), twoTo(x), log2(d), clearChoice(text, example), same(value), number(value),
 *            clearHeadsOff(), headsOffAsked(elemId, tick)
 */
(function (global) {
  "use strict";
  if (global.attentionViz) return;
  const MOUNT = ".av-mount", LAB_MOUNT = ".av-lab-mount";

  function follow(view, props, watch, set) {
    /* every later value of the component goes to the view (`set`: its method that draws one) */
    watch("value", () => view[set](props.value || null));
    return view;
  }

  function mountExplorer(element, props, watch, opts, trigger) {
    /* the explorer; with opts.headsOff (an event's name), its heads-off clicks trigger that event of the component,
       whose listener asks headsOffAsked for the heads the click asked */
    const mountPoint = element.querySelector(MOUNT);
    const explorer = global.AttentionExplorer.mount(mountPoint, props.value || null, opts);
    element.avExplorer = explorer;
    if (opts.headsOff && trigger) {
      mountPoint.addEventListener("explorer:heads-off", () => trigger(opts.headsOff));
    }
    return follow(explorer, props, watch, "setPayload");
  }
  function mountSteps(element, props, watch, opts, server) {
    /* one head's steps or comparison; with opts.answer, stepsAsk asks the gr.HTML's server function of that name */
    const view = follow(global.AttentionSteps.mount(element.querySelector(MOUNT), props.value || null, opts), props,
      watch, "setPayload");
    if (server && server[opts.answer]) view.ask = (asked) => server[opts.answer](asked);
    return view;
  }
  const emptyOf = {}; // a heads panel's id -> what it says without scores, as headsEmpty last heard (before it mounts)
  const mountHeads = (element, props, watch, opts) =>
    follow(global.AttentionHeads.mount(element.querySelector(MOUNT), props.value || null,
      opts.id in emptyOf ? Object.assign({}, opts, {unscored: emptyOf[opts.id]}) : opts), props, watch, "setPayload");
  function mountLab(element, props, watch, opts, server) {
    /* the lab; with opts.answer, the lab asks the gr.HTML's server function of that name for its answers */
    const ask = server && server[opts.answer] ? (inputs) => server[opts.answer](inputs) : null;
    return follow(global.AttentionLab.mount(element.querySelector(LAB_MOUNT), props.value || null,
      Object.assign({}, opts, {ask: ask})), props, watch, "setData");
  }
  const mountStudy = (element, props) => global.AttentionLab.mountStudy(element.querySelector(LAB_MOUNT), props.value || null);
  const mountOwn = (element, props, watch) =>
    follow(global.AttentionLab.mountOwn(element.querySelector(LAB_MOUNT), props.value || null), props, watch, "setData");
  const mountTraining = (element, props, watch, opts) =>
    follow(global.AttentionTraining.mount(element.querySelector(LAB_MOUNT), props.value || null, opts), props, watch, "setData");

  function mountLong(element, props, watch, opts, server) {
    /* the long view (explorer/static/long.js); its views are asked of the gr.HTML's server function opts.view */
    const ask = server && server[opts.view] ? (request) => server[opts.view](request) : null;
    return follow(global.AttentionLong.mount(element.querySelector(MOUNT), props.value || null, {ask: ask}), props, watch,
      "setPayload");
  }
  function longStale(elemId, message) {
    const v = (document.querySelector(`#${elemId} .av-long`) || {}).avLong;
    if (v) v.markStale(message);
    return [];
  }

  const explorerIn = (elemId) => (document.querySelector(`#${elemId} .av-explorer`) || {}).avExplorer;
  function views(elemIds) {
    /* the controllers of the views (explorer, steps, compare) mounted in these components */
    const selector = elemIds.map((i) => `#${i} .av-explorer, #${i} .av-hv`).join(", ");
    return [...document.querySelectorAll(selector)].map((e) => e.avExplorer || e.avView).filter(Boolean);
  }

  function stale(elemIds, message, args, outputs) {
    /* mark every view in these components stale at once; returns the event's inputs (args), or `outputs` for an event
       with no function (e.g. clearing the text beside the views) */
    views(elemIds).forEach((v) => v.markStale(message));
    return outputs === undefined ? args : outputs;
  }
  function fresh(elemIds, shownOnly) {
    /* after an answer: these views are the current input's (even when the answer equalled the value shown, so that
       Gradio sent nothing and `watch` did not fire); shownOnly: only those on show (in the open tab) */
    views(elemIds).filter((v) => !shownOnly || !v.root || v.root.getClientRects().length > 0)
      .forEach((v) => v.markStale(null));
    return [];
  }

  function selection(elemId, at, args) {
    /* inputs at positions at, at+1, at+2 (kind, layer, head) become the explorer's choice (as sent when it has none) */
    const view = explorerIn(elemId), s = view && view.state;
    if (s && s.kind) args.splice(at, 3, s.kind, s.layer, s.head);
    return args;
  }
  function openOn(elemId, target) {
    /* a JSON {"kind", "layer", "head"} (or ""): the explorer opens that head now and keeps it for the run on its way */
    const view = explorerIn(elemId), t = target ? JSON.parse(target) : {};
    if (view && t.kind) view.openOn(t);
    return [];
  }
  function badges(elemId, data) {
    /* the importance payload's drop of each head as badges on the explorer's tiles, for the model it is of */
    const view = explorerIn(elemId);
    if (view && data && data.drop) {
      view.setImportance({model: data.model, values: data.drop, label: `${data.metric} lost (${data.unit}) with this head alone off`,
        digits: data.unit === "points" ? 0 : 2, high: Math.max(...Object.values(data.drop).flat()) / 2});
    }
    return [];
  }
  function headsEmpty(elemId, note) {
    /* the heads panel without scores says what the note under the scoring buttons says (why they are off for this
       model: its text, less the ⚠), or, with no note, its "Press ..." */
    const v = views([elemId])[0], text = document.createElement("div");
    text.innerHTML = note || "";
    emptyOf[elemId] = text.textContent.replace(/^\s*⚠\s*/, "").trim(); // a panel in a tab not yet drawn: at its mount
    if (v && v.setEmpty) v.setEmpty(emptyOf[elemId]);
    return [];
  }
  function moreBelow(element) {
    /* a text box that scrolls (the lesson's step): the class av-more while more of its text is below what it shows
       (a fade at its foot, webui/lesson_panel.py's CSS), kept as it scrolls, its text changes and its size does */
    const box = element.querySelector(".html-container") || element.closest(".html-container") || element;
    const mark = () => box.classList.toggle("av-more", box.scrollTop + box.clientHeight < box.scrollHeight - 1);
    box.addEventListener("scroll", mark, {passive: true});
    new global.ResizeObserver(mark).observe(box);
    new global.MutationObserver(mark).observe(box, {childList: true, subtree: true, characterData: true});
    mark();
  }
  function reveal(target, views, bar, parts) {
    /* after a lesson's step: the part of the page it names (target's "reveal", a key of `parts`: views, as `views`),
       else the first of `views` on show, into sight below `bar` (the lesson's, which stays at the top of the screen);
       the bar's height is the page's scroll padding (--av-bar), so what keyboard focus scrolls to is not left under
       it either */
    const t = target ? JSON.parse(target) : {}, e = document.querySelector(bar), root = document.documentElement;
    if (e) {
      e.querySelectorAll(".html-container").forEach((text) => {
        // a new step's text from its start; a box that may scroll is reached by keyboard (Tab, then the arrows)
        Object.assign(text, {scrollTop: 0, tabIndex: 0});
        text.setAttribute("role", "region");
        text.setAttribute("aria-label", "the lesson step's text");
      });
      global.requestAnimationFrame(() => root.style.setProperty("--av-bar", `${Math.ceil(e.offsetHeight)}px`));
    }
    if (global.AttentionExplorer) global.AttentionExplorer.reveal([...(parts[t.reveal] || []), ...views], bar);
    return [];
  }

  async function stepsAsk(elemId, explorerId, at, args) {
    /* the steps of the event's inputs (kind, layer and head at `at`: the explorer's choice), asked of the steps view's
       server function, as the event's outputs (the steps and their text); one ask at a time, each for the latest
       inputs, so answers cannot land out of order. It fails where that gives none (a run the server does not keep,
       a refusal, no connection): the event's .failure then asks the queued /steps */
    const v = views([elemId])[0];
    if (!v || !v.ask) throw new Error("the steps are asked through the queue");
    v.latest = selection(explorerId, at, args);
    const answer = await (v.turn = (v.turn || Promise.resolve()).catch(() => null).then(() => v.ask(v.latest)));
    if (!answer || !answer.steps) throw new Error("the steps are asked through the queue");
    return [answer.steps, answer.text];
  }

  const labIn = (elemId) => { const v = document.querySelector(`#${elemId} .av-lab`); return v && v.avLab; };
  const asked = (d_k, n_keys, scaled) => ({d_k: Number(d_k), n_keys: Number(n_keys), scaled: !!scaled});
  async function labPending(elemId, d_k, n_keys, scaled) {
    /* before the request leaves: the view marks what was asked for, and the request waits while others are in flight
       (lab.js turn()); then it asks for the latest request's inputs, as every request that waited with it does */
    const lab = labIn(elemId);
    if (!lab) return [d_k, n_keys, scaled];
    lab.markPending(asked(d_k, n_keys, scaled));
    return await lab.turn([d_k, n_keys, scaled]);
  }
  async function labAsk(elemId, d_k, n_keys, scaled) {
    /* labPending, then the answer asked of the view's server function (no queue), as the event's outputs (the view and
       its table); it fails where that gives none (a refusal, a fault, no connection): the event's
       .failure then asks the queued /dk_lab, which tells a refusal's message */
    const [k, n, s] = await labPending(elemId, d_k, n_keys, scaled), lab = labIn(elemId);
    const answer = lab ? await lab.ask({d_k: k, n_keys: n, scaled: s}) : null;  // as the controls hold them
    if (!answer || !answer.view) throw new Error("the lab's answer is asked through the queue");
    return [answer.view, answer.numbers];
  }
  function labStale(elemId, d_k, n_keys, scaled) {
    /* a refusal: the controls' values now, so a refusal of an older request leaves a view that draws them current */
    const lab = labIn(elemId);
    if (lab) lab.markStale(asked(d_k, n_keys, scaled));
  }
  function labCurrent(elemId) { const lab = labIn(elemId); if (lab) lab.markCurrent(); }
  function labShown(elemId, shown) {
    /* an answer that brought the view with the controls (a lesson step: `shown`, their values as JSON): the view
       marks what it draws as asked for */
    const lab = labIn(elemId);
    if (lab && shown) { const [d_k, n_keys, scaled] = JSON.parse(shown); lab.markPending(asked(d_k, n_keys, scaled)); }
  }
  function own(elemId, current) {
    /* the own-q·k view: an answer (current) or a refusal */
    const v = document.querySelector(`#${elemId} .av-own`);
    if (v && v.avOwn) { if (current) v.avOwn.markCurrent(); else v.avOwn.markStale(); }
  }
  function training(elemId, message) {
    /* the training view: a refusal's message over what is drawn, or null (an answer) */
    const v = (document.querySelector(`#${elemId} .av-training`) || {}).avTraining;
    if (v) v.markStale(message);
  }

  const bump = (tick) => String(Number(tick) + 1); // a run's triggers move the counter; its change is the run
  const cast = (kind, value) => ({number: Number, boolean: Boolean, string: (v) => v}[kind](value));
  const applied = {}; // a number box's id -> its value when it last applied (focus, Enter, leaving it, set by the page)
  function routeOne(index, kind, value, shown, tick, box) {
    /* one control's change: nothing is sent when its value is the one at `index` of `shown` (the run on screen's
       settings), else the counter moves and `shown` is forgotten. box: the id of a number box, whose change while
       it has the focus is a person typing: held ("0" of "0.25" is not sent; routeTyped sends what was typed) */
    if (box) {
      const active = document.activeElement;
      if (active && active.closest && active.closest(`#${box}`)) return [tick, shown];
      if (applied[box] === cast(kind, value)) return [tick, shown]; // Enter applied it already
      applied[box] = cast(kind, value);
    }
    if (shown && JSON.parse(shown)[index] === cast(kind, value)) return [tick, shown];
    return [bump(tick), ""];
  }
  function routeTyped(index, kind, value, shown, tick, box) {
    /* Enter in a number box, or the focus leaving it (its blur): what was typed there applies, once */
    if (applied[box] === cast(kind, value)) return [tick, shown];
    applied[box] = cast(kind, value);
    return routeOne(index, kind, value, shown, tick);
  }
  function released(box, value, tick) {
    /* a slider's release (Gradio fires one on every pointerup and blur of its number box): the counter moves only
       for a value the slider did not hold when it last applied */
    if (applied[box] === Number(value)) return tick;
    applied[box] = Number(value);
    return bump(tick);
  }
  document.addEventListener("focusin", (event) => { // a number box's value as it takes the focus: what applies now
    const box = event.target, block = box instanceof HTMLInputElement && box.type === "number" && box.closest(".block[id]");
    if (block) applied[block.id] = Number(box.value);
  }, true);
  // Enter in a number box (a gr.Number's, a slider's) applies it at once, as leaving the box does: it tells the box's
  // blur (a slider's release, routeTyped; Gradio's own Enter of a gr.Number can wait until the box is left), and
  // leaving the box after adds nothing
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (event.key !== "Enter" || !(box instanceof HTMLInputElement) || box.type !== "number") return;
    if (!box.closest(".block")) return;
    box.dispatchEvent(new FocusEvent("blur"));
    box.dataset.avEntered = box.value;
  }, true);
  document.addEventListener("blur", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.dataset.avEntered === undefined) return;
    const same = box.dataset.avEntered === box.value;
    delete box.dataset.avEntered;
    if (same) event.stopPropagation(); // released on Enter already: not again
  }, true);
  function routeWhen(gated, open, route, index, kind, value, shown, tick, box) {
    /* a route (routeOne, routeTyped) taken only while another control holds `open` (the custom factor: the scaling
       is custom); else the change sends nothing */
    if (gated !== open) return [tick, shown];
    return (route === "routeTyped" ? routeTyped : routeOne)(index, kind, value, shown, tick, box);
  }
  function applies(value, open, why) {
    /* a control that applies only while another holds `open` (the factor box, the scaling): typed in only then, and
       its info says why not otherwise (webui/transformer_tab.py factor_state, for the page's first value) */
    const on = value === open;
    return {__type__: "update", interactive: on, info: on ? null : why};
  }
  const interactive = (on) => ({__type__: "update", interactive: !!on}); // a button on or off (Cancel of a live run)
  // after a run: the open Steps or Compare view follows it (the counter's change asks the server)
  const refreshIfOpen = (active, tick) => (active === "steps" || active === "compare" ? bump(tick) : tick);
  function nearestTrained(d, current) {
    /* the trained d_k nearest d on a log scale (ties to the smaller), as the server snaps it */
    const sizes = [...document.querySelectorAll("#dk_trained input[type=radio]")].map((i) => Number(i.value));
    if (!sizes.length || !(d > 0)) return current;
    const far = (s) => Math.abs(Math.log2(s / d));
    return String(sizes.reduce((best, s) => (far(s) < far(best) - 1e-12 ? s : best)));
  }
  const twoTo = (x) => Math.round(2 ** x); // a log₂ slider's value, as the number beside it
  const log2 = (d) => Math.log2(Math.max(1, d));
  const clearChoice = (text, example) => [text === example ? example : null]; // the example stays while it is the text
  const same = (value) => value; // an input's value (or a constant) as an output's
  const number = (value) => Number(value);
  const clearHeadsOff = () => "";
  function headsOffAsked(elemId, tick) {
    /* the heads the explorer's last click asked, as the heads-off box's value (JSON {map key: [heads]}, "" for none),
       and the run counter moved: the run reads the box, as after a person's Enter */
    const view = explorerIn(elemId), off = view ? view.askedOff() : {};
    return [Object.keys(off).length ? JSON.stringify(off) : "", bump(tick)];
  }

  global.attentionViz = {mountLong: mountLong, longStale: longStale, mountExplorer: mountExplorer, mountSteps: mountSteps, mountHeads: mountHeads, mountLab: mountLab,
    mountStudy: mountStudy, mountOwn: mountOwn, mountTraining: mountTraining, stale: stale, fresh: fresh,
    selection: selection, openOn: openOn, badges: badges, headsEmpty: headsEmpty, moreBelow: moreBelow, reveal: reveal, stepsAsk: stepsAsk, labAsk: labAsk, labPending: labPending,
    labStale: labStale, labCurrent: labCurrent, labShown: labShown, own: own, training: training, bump: bump,
    routeOne: routeOne, routeTyped: routeTyped, released: released, routeWhen: routeWhen, applies: applies, interactive: interactive,
    refreshIfOpen: refreshIfOpen,
    nearestTrained: nearestTrained, twoTo: twoTo, log2: log2, clearChoice: clearChoice, same: same, number: number,
    clearHeadsOff: clearHeadsOff, headsOffAsked: headsOffAsked};
})(window);
