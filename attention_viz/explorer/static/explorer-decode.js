/* explorer-decode.js: the decode step by step: the step bar (play, ◀, the slider, ▶: shared.js) whose last position
 * is the finished run, and what the step writes and where the chosen head looks for it.
 *
 *   AttentionExplorer.decode.wire(x)        (once per mount: x.bar)
 *   AttentionExplorer.decode.setStep(x, t or null, reason)   .draw(x)   (the bar and its text)
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.decode) return;
  const {escapeHtml, shown, stepBar} = global.AttentionShared;
  const PLAY_MS = 900; // one decode step per this many milliseconds while playing

  function wire(x) {
    /* the bar's positions: 0 .. n - 1 the steps, n the finished run (state.step null) */
    const n = () => (x.data && x.data.decode ? x.data.decode.written.length : null);
    x.bar = stepBar(x.ui.decode, {
      ms: PLAY_MS, last: n, stopAtEnd: true,
      position: () => (x.state.step === null ? n() : x.state.step),
      show: (i, reason) => setStep(x, i >= n() ? null : i, reason),
    });
  }

  function setStep(x, step, reason) {
    /* show the decode at step t (0-based), or the finished run (null or past the last step) */
    const data = x.data, state = x.state;
    if (!data || !data.decode) return;
    const n = data.decode.written.length;
    state.step = step === null || step === undefined || +step >= n ? null : Math.max(0, Math.floor(+step) || 0);
    x.timed(reason || "step", () => { E.grid.draw(x); E.head.draw(x); draw(x); });
    x.root.dispatchEvent(new CustomEvent("explorer:step", {detail: {step: state.step}}));
  }

  function movedSince(x, k, t) {
    /* the largest change of the chosen head's earlier rows between step t - 1 and step t */
    const state = x.state, before = E.run.weightsAt(x, k, state.layer, t), prev = E.run.weightsAt(x, k, state.layer, t - 1);
    let moved = 0;
    for (let q = 0; q < t; q++) {
      for (let j = 0; j < k.K; j++) {
        const i = (state.head * k.Q + q) * k.K + j;
        moved = Math.max(moved, Math.abs(before[i] - prev[i]));
      }
    }
    return moved;
  }

  function stepText(x, d, t, n) {
    const state = x.state, k = x.data.kinds[state.kind], so = d.written.slice(0, t).map(shown).join("");
    let text = `<b>Step ${t + 1} of ${n}</b>: output so far <code>${escapeHtml(so) || "(nothing)"}</code>, ` +
      `writing <code>${escapeHtml(shown(d.written[t]))}</code>.`;
    if (k.queries !== "target") {
      return text + ` ${escapeHtml(k.label)} ran once, before the first step: it is the same at every step.`;
    }
    const w = E.run.biasing(x, k) ? E.run.weightsAt(x, k, state.layer, t) // where it looks: its weights, not B
      : E.run.weightsOf(x, k, state.layer), row = (state.head * k.Q + t) * k.K;
    let top = 0;
    for (let j = 1; j < k.K; j++) if (w[row + j] > w[row + top]) top = j;
    text += ` Head L${state.layer}·H${state.head} looks most at ${k.keys} ${top} ` +
      `<code>${escapeHtml(shown(k.keyTokens[top]))}</code> (${w[row + top].toFixed(2)}).`;
    if (d.per_step && t > 0) {
      text += ` <span class="av-changed">Causal mask off: the earlier rows are recomputed at every step, and ` +
        `this head's moved by up to ${movedSince(x, k, t).toFixed(2)} since step ${t}.</span>`;
    } else if (t > 0) {
      text += " The rows above were computed at their own steps and stay as they were: the causal mask hides later tokens.";
    }
    return text;
  }

  function draw(x) {
    /* the step bar: where the decode is, what it writes, and where the chosen head looks for it */
    const ui = x.ui, d = x.data.decode, n = d ? d.written.length : 0;
    ui.decode.hidden = !d;
    if (!d) return;
    const t = x.state.step;
    ui.step.max = n; ui.step.value = t === null ? n : t;
    ui.decode.dataset.step = t === null ? "all" : t;
    x.bar.mark();
    if (t === null) {
      E.write(ui.stepText, `Finished: all ${n} steps of the greedy decode. Press play or move the slider ` +
        "to see each output token being written.");
      return;
    }
    E.write(ui.stepText, stepText(x, d, t, n));
  }

  E.decode = {wire: wire, setStep: setStep, draw: draw};
})(window);
