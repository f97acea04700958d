/* explorer-run.js: the explorer's numbers, no drawing: a packed run decoded once, each map's weights at a decode step,
 * what flows, a stack's rollout and attention flow, which heads are off, and where a weight sits on the colour bar.
 *
 *   AttentionExplorer.run.prepare(payload)        -> the kept run (kinds by name, each with weights[layer])
 *   AttentionExplorer.run.weightsOf(x, k, l)      -> [H * Q * K] what the maps show for kind k, layer l, at x's step
 *   AttentionExplorer.run.toneOf(x, k, css)       -> (value, row max) -> its colour ([r, g, b], or css: a cell's style):
 *                                                    a weight on the colour scale, a position bias on the diverging bar
 * `x` is one mounted explorer's context (explorer.js: its state, its kept run as x.data).
 */
(function (global) {
  "use strict";
  const E = global.AttentionExplorer = global.AttentionExplorer || {};
  if (E.run) return; // already loaded by another fragment on this page

  const {viridis: colour, ink, css} = global.AttentionPalette; // palette.js, loaded first
  const LOG_FLOOR = 1e-3; // the log scale's bottom: 0.001 and below share the darkest colour
  // 256 steps of the colour bar, computed once: redraws only look colours up
  const LEVELS = 256;
  const LUT = Array.from({length: LEVELS}, (_, i) => colour(i / (LEVELS - 1)));
  const LUT_CSS = LUT.map((rgb) => `background:${css(rgb)};color:${ink(rgb)}`);
  const level = (t) => Math.round(Math.min(Math.max(t, 0), 1) * (LEVELS - 1));
  // a position bias B is signed: the diverging bar (blue −, white 0, red +), ±the kind's largest |B|
  const BIAS_LUT = Array.from({length: LEVELS}, (_, i) => global.AttentionPalette.diverging(2 * i / (LEVELS - 1) - 1));
  const BIAS_CSS = BIAS_LUT.map((rgb) => `background:${css(rgb)};color:${ink(rgb)}`);

  function decodeBias(b64) {
    /* base64 of little-endian float32 -> Float32Array (copied: base64's bytes need not sit 4-aligned) */
    const bytes = global.AttentionShared.bytes(b64);
    return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  }
  function biasOf(entry, H, Q, K) {
    /* a kind's position bias: {range, layers[l] = Float32Array [H * Q * K]}; a layer that adds none holds zeros */
    if (!entry.bias) return null;
    const maps = entry.bias.maps, layers = [];
    maps.forEach((data, l) => layers.push(typeof data === "number" ? layers[data]
      : data === null ? new Float32Array(H * Q * K) : decodeBias(data)));
    return {range: entry.bias.range, layers: layers};
  }

  function decode(b64, quant) {
    /* base64 of little-endian uint16 -> Float32Array of weights */
    const quantised = new Uint16Array(global.AttentionShared.bytes(b64).buffer);
    const out = new Float32Array(quantised.length);
    for (let i = 0; i < out.length; i++) out[i] = quantised[i] / quant;
    return out;
  }

  function prepare(payload) {
    /* decode every map once; kinds by name, each with weights[layer] = Float32Array [H * Q * K] */
    const kinds = {};
    for (const entry of payload.kinds) {
      const queries = payload.tokens[entry.queries], keys = payload.tokens[entry.keys];
      kinds[entry.kind] = Object.assign({}, entry, {
        queryTokens: queries, keyTokens: keys, Q: queries.length, K: keys.length,
        weights: entry.maps.map((b64) => decode(b64, payload.quant)),
        norms: entry.norms || null, // [layer][head][key]: ‖v_j W_O^h‖
        bias: biasOf(entry, payload.n_heads, queries.length, keys.length), // the position bias B added to QKᵀ
        allowed: entry.mask.map((row) => Array.from(row, (c) => c === "1")),
        // the whole stack read as one mixing (service.stacks): rollout and, where computed, flow, each [Q * K]
        stack: entry.stack ? {rollout: decode(entry.stack.rollout, payload.quant),
          flow: entry.stack.flow ? decode(entry.stack.flow, payload.quant) : null,
          note: entry.stack.note, flowNote: entry.stack.flow_note} : null,
      });
    }
    const off = {}; // map key -> Set of heads switched off in this run
    for (const [key, heads] of Object.entries(payload.heads_off || {})) off[key] = new Set(heads);
    return {payload: payload, kinds: kinds, order: payload.kinds.map((e) => e.kind), H: payload.n_heads,
      decode: payload.decode || null, stepWeights: new Map(), flows: new Map(), off: off, ablation: payload.ablation || "zero",
      // what flows needs every map's norms; decoder maps that change every step (no causal mask) have none per step
      canFlow: payload.kinds.every((e) => !!e.norms) && !(payload.decode && payload.decode.per_step)};
  }

  function rowMaxima(data, offset, Q, K) {
    const out = new Float32Array(Q);
    for (let q = 0; q < Q; q++) {
      let m = 0;
      for (let k = 0; k < K; k++) m = Math.max(m, data[offset + q * K + k]);
      out[q] = m;
    }
    return out;
  }
  function position(scale, w, rowMax) {
    /* where weight w sits on the colour bar (0 → 1) under a scale; `row` divides by the row's maximum */
    if (scale === "row") return rowMax > 0 ? w / rowMax : 0;
    if (scale === "log") return 1 + Math.log10(Math.max(w, LOG_FLOOR)) / -Math.log10(LOG_FLOOR);
    return w;
  }

  function stepping(x, k) {
    /* the current step when it changes what this kind shows (decoder maps), else -1 */
    return x.state.step !== null && !stacked(x, k) && x.data.decode && k.queries === "target" ? x.state.step : -1;
  }
  const future = (k, t, q, j) => t >= 0 && (q > t || (k.keys === "target" && j > t)); // not computed at step t
  const flowing = (x, k) => x.state.show === "flows" && x.data.canFlow && !!k.norms;
  const biasing = (x, k) => x.state.show === "bias" && !!k.bias; // the position bias B instead of the weights
  // the stack views: one [T, T] map for the whole stack of a self-attention kind, the same for every layer and head
  const STACK_SHOWS = {rollout: "rollout", flow: "attention flow"};
  const stackMap = (x, k) => (x.state.show in STACK_SHOWS && k.stack ? k.stack[x.state.show] : null);
  const stacked = (x, k) => !!stackMap(x, k);
  const weightsOf = (x, k, l) => (stacked(x, k) ? stackAt(x, k) : biasing(x, k) ? k.bias.layers[l]
    : flowing(x, k) ? flowsAt(x, k, l, stepping(x, k)) : weightsAt(x, k, l, stepping(x, k)));

  function toneOf(x, k, asCss) {
    /* what colours a value of kind k as the explorer shows it: a position bias on the diverging bar (±k.bias.range),
       else a weight under the colour scale (its row's maximum for "row") */
    if (biasing(x, k)) {
      const lut = asCss ? BIAS_CSS : BIAS_LUT, range = k.bias.range > 0 ? k.bias.range : 1;
      return (value) => lut[level((value / range + 1) / 2)];
    }
    const lut = asCss ? LUT_CSS : LUT, scale = x.state.scale;
    return (value, rowMax) => lut[level(position(scale, value, rowMax))];
  }

  function stackAt(x, k) {
    /* [H * Q * K] the stack's map, repeated for every head, so the head view draws it at any head's offset */
    const data = x.data, id = `stack|${x.state.show}|${k.kind}`;
    if (!data.flows.has(id)) {
      const one = stackMap(x, k), out = new Float32Array(data.H * one.length);
      for (let h = 0; h < data.H; h++) out.set(one, h * one.length);
      data.flows.set(id, out);
    }
    return data.flows.get(id);
  }

  function flowsAt(x, k, l, t) {
    /* [H * Q * K] what flows at step t: α_qj·‖v_j W_O^h‖ over its row's sum (a row that moves nothing: 0) */
    const data = x.data, id = `${t}|${k.kind}|${l}`;
    if (!data.flows.has(id)) {
      const w = weightsAt(x, k, l, t), norms = k.norms[l], out = new Float32Array(w.length);
      for (let h = 0; h < data.H; h++) {
        for (let q = 0; q < k.Q; q++) {
          const row = (h * k.Q + q) * k.K;
          let sum = 0;
          for (let j = 0; j < k.K; j++) sum += (out[row + j] = w[row + j] * norms[h][j]);
          for (let j = 0; j < k.K; j++) out[row + j] = sum > 0 ? out[row + j] / sum : 0;
        }
      }
      data.flows.set(id, out);
    }
    return data.flows.get(id);
  }

  function weightsAt(x, k, l, t) {
    /* [H * Q * K] weights of layer l at step t (-1: the finished run): the run's own, or (a run decoded
       without the causal mask) step t's maps placed in rows 0..t, zeros elsewhere */
    const data = x.data;
    if (t < 0 || !data.decode || !data.decode.per_step) return k.weights[l];
    const id = `${t}|${k.kind}|${l}`;
    if (!data.stepWeights.has(id)) {
      const width = k.keys === "target" ? t + 1 : k.K, small = decode(data.decode.steps[t][k.kind][l], data.payload.quant);
      const full = new Float32Array(data.H * k.Q * k.K);
      for (let h = 0; h < data.H; h++) {
        for (let q = 0; q <= t; q++) {
          for (let j = 0; j < width; j++) full[(h * k.Q + q) * k.K + j] = small[(h * (t + 1) + q) * width + j];
        }
      }
      data.stepWeights.set(id, full);
    }
    return data.stepWeights.get(id);
  }

  // the server's key of one map ("decoder.1.cross_attn"), and the heads this run switched off
  const keyOf = global.AttentionShared.mapKey;
  const isOff = (x, k, l, h) => !!(x.data.off[keyOf(k.kind, l)] && x.data.off[keyOf(k.kind, l)].has(h));
  const layerOff = (x, k, l) => !!x.data.off[keyOf(k.kind, l)] && x.data.off[keyOf(k.kind, l)].size === x.data.H;
  const kindOff = (x, k) => Array.from({length: k.layers}, (_, l) => l).every((l) => layerOff(x, k, l));

  E.run = {prepare: prepare, decode: decode, rowMaxima: rowMaxima, position: position, stepping: stepping, future: future,
    flowing: flowing, biasing: biasing, toneOf: toneOf, BIAS_LUT: BIAS_LUT, stacked: stacked, STACK_SHOWS: STACK_SHOWS, weightsOf: weightsOf, weightsAt: weightsAt, flowsAt: flowsAt, keyOf: keyOf, isOff: isOff,
    layerOff: layerOff, kindOff: kindOff, LUT: LUT, LUT_CSS: LUT_CSS, level: level, colour: colour, ink: ink, css: css};
})(window);
