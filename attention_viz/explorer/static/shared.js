/* shared.js: what every view writes the same way: escaping, token labels, the notes' bits of Markdown, the step bar.
 *
 *   AttentionShared.escapeHtml(s)          // text safe inside HTML and inside a quoted attribute
 *   AttentionShared.shown(token)           // a token as a label: a space becomes "␣" (it must stay visible)
 *   AttentionShared.inline(s)              // escaped, then **bold** and `code` (Markdown's code spans) as HTML
 *   AttentionShared.mapKey(kind, layer)    // the server's key of one map (core.maps.MapKey): the format's one place
 *                                          // here, e.g. mapKey("decoder.cross_attn", 1) === "decoder.1.cross_attn"
 *   AttentionShared.bytes(b64)             // base64 -> its bytes, a Uint8Array: a packed map's uint16 or float32
 *                                          // values are read through its .buffer (little-endian, as every browser's)
 *   AttentionShared.stepBarHtml({play, prev, next, slider, status})   // the bar's markup: play, ◀, slider, ▶, status
 *   const bar = AttentionShared.stepBar(element, {ms, last, position, show, stopAtEnd})
 *       // wires the bar inside `element`: ◀ / ▶ / the slider show a position (0 .. last()) at once, play advances one
 *       // per `ms` and stops at last() (stopAtEnd: as it shows last(), else at the next tick); show(i, reason)
 *       // draws position i (reason: "play", "prev", "next", "step"); last() is null while there is nothing to step
 *   bar.play(); bar.pause(); bar.playing(); bar.mark()   // mark(): the play button says play or pause
 *
 * Loaded after palette.js and before every view's script; defined once per page.
 */
(function (global) {
  "use strict";
  if (global.AttentionShared) return;

  const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const shown = (token) => (token === " " ? "␣" : token);
  // a code span is fenced by a run of backticks longer than any inside it (one space of padding each side dropped),
  // and what it holds is shown as it is
  const codeSpan = (body) => `<code>${body.length >= 2 && body[0] === " " && body[body.length - 1] === " " &&
    body.trim() ? body.slice(1, -1) : body}</code>`;
  const inline = (s) => escapeHtml(s).replace(/(?<!`)(`+)(?!`)([\s\S]*?[^`])\1(?!`)|\*\*([^*`]+)\*\*/g,
    (m, fence, body, bold) => (fence ? codeSpan(body) : `<b>${bold}</b>`));

  const mapKey = (kind, layer) => { const [stack, name] = kind.split("."); return `${stack}.${layer}.${name}`; };

  function bytes(b64) {
    const raw = atob(b64), out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }

  const PLAY = "▶ play";
  // the pause mark is two bars drawn by CSS (Debian's fonts have no ⏸, drawn as a box on a projector)
  const PAUSE = '<span class="av-pause-mark" aria-hidden="true"></span> pause';

  function stepBarHtml(o) {
    /* play, previous, the slider, next and the status element (given as markup) */
    return `<button type="button" class="av-play">${PLAY}</button>
        <button type="button" class="av-prev" aria-label="${escapeHtml(o.prev)}">◀</button>
        <input type="range" class="av-step" min="0" max="0" value="0" aria-label="${escapeHtml(o.slider)}">
        <button type="button" class="av-next" aria-label="${escapeHtml(o.next)}">▶</button>
        ${o.status}`;
  }

  function stepBar(element, o) {
    /* o: {ms: one step per this many milliseconds while playing, last(): the slider's last position (or null: no
       data), position(): the position shown, show(i, reason): draw position i} */
    const $ = (sel) => element.querySelector(sel);
    const ui = {play: $(".av-play"), prev: $(".av-prev"), next: $(".av-next"), step: $(".av-step")};
    let timer = null;
    let label = PLAY;
    function mark() {
      const now = timer ? PAUSE : PLAY;
      if (label !== now) { ui.play.innerHTML = now; label = now; }
      ui.play.setAttribute("aria-pressed", timer ? "true" : "false");
    }
    function pause() {
      if (timer) { clearInterval(timer); timer = null; }
      if (o.last() !== null) mark();
    }
    function play() {
      /* advance one step per o.ms until the last position; a second press pauses */
      if (timer) { pause(); return; }
      const last = o.last();
      if (last === null) return;
      if (o.position() >= last) o.show(0, "play");
      timer = setInterval(() => {
        const next = o.position() + 1, end = o.last();
        if (end === null || next > end) { pause(); return; }
        if (next === end && o.stopAtEnd) { pause(); o.show(next, "play"); return; }
        o.show(next, "play");
      }, o.ms);
      mark();
    }
    ui.play.addEventListener("click", play);
    ui.prev.addEventListener("click", () => { pause(); o.show(Math.max(0, o.position() - 1), "prev"); });
    ui.next.addEventListener("click", () => { pause(); o.show(o.position() + 1, "next"); });
    ui.step.addEventListener("input", () => { pause(); o.show(+ui.step.value, "step"); });
    return {play: play, pause: pause, playing: () => timer !== null, mark: mark, ui: ui};
  }

  global.AttentionShared = {escapeHtml: escapeHtml, shown: shown, inline: inline, mapKey: mapKey, bytes: bytes,
    stepBarHtml: stepBarHtml, stepBar: stepBar, PLAY: PLAY, PAUSE: PAUSE};
})(window);
