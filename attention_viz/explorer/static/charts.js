/* charts.js: SVG charts drawn as DOM, no library: the pieces every chart uses, and one framed chart.
 *
 *   AttentionCharts.svgEl(tag, attrs, parent)   AttentionCharts.htmlEl(tag, cls, parent, text)
 *   AttentionCharts.label(parent, x, y, text, attrs)          // an SVG <text>
 *   AttentionCharts.scale(d0, d1, r0, r1, log)                 // domain -> range, linear or log
 *   AttentionCharts.fmt(v, digits), niceCeil(v), linearTicks(lo, hi, count), logTicks(lo, hi, most)
 *   AttentionCharts.chart(box, options)   // an SVG as wide as `box` with a plot area framed by axes, ticks and titles:
 *                                         // {svg, plot, area, x, y, width} to draw on (lab.js's panels)
 *   AttentionCharts.legend(parent, items), panel(grid, name, title, cls), plotBox(parent, name)
 *   const redraw = AttentionCharts.redrawOnWidth(view, render)   // render() now (if shown) and at each new width
 *
 * Used by lab.js (the lab, the study, a model's own q·k) and heads.js (the prune curve); defined once per page.
 */
(function (global) {
  "use strict";
  if (global.AttentionCharts) return;
  const NS = "http://www.w3.org/2000/svg";
  const CHAR_PX = 7.2; // width of one 12 px character, generously

  function svgEl(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function htmlEl(tag, cls, parent, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function label(parent, x, y, str, attrs) {
    const t = svgEl("text", Object.assign({ x: x, y: y }, attrs || {}), parent);
    t.textContent = str;
    return t;
  }
  function fmt(v, digits) {
    if (!isFinite(v)) return String(v);
    if (v === 0) return "0";
    const a = Math.abs(v);
    let s;
    if (a >= 1e5 || a < 1e-3) s = v.toExponential(0).replace("e+", "e");
    else s = String(Number(v.toPrecision(digits || 3)));
    return s.replace("-", "−");
  }
  function niceStep(range, count) {
    const raw = range / Math.max(count, 1);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    const f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  function linearTicks(lo, hi, count) {
    /* round numbers from lo to hi, about `count` apart; at least 3 where count asks 3 or more (a step rounded up
       to 50 on ±46.6 once left the axis one tick, 0, and nothing to read a spread off) */
    let step = niceStep(hi - lo, count);
    const at = (s) => {
      const out = [];
      for (let v = Math.ceil(lo / s - 1e-9) * s; v <= hi + s * 1e-9; v += s) out.push(Math.abs(v) < s * 1e-9 ? 0 : v);
      return out;
    };
    let out = at(step);
    while (out.length < Math.min(3, count) && step > (hi - lo) * 1e-6) {  // the next round step down: 5 → 2 → 1
      const p = Math.pow(10, Math.floor(Math.log10(step))), f = Math.round(step / p);
      step = (f === 5 ? 2 : f === 2 ? 1 : 0.5) * p;
      out = at(step);
    }
    return out;
  }
  function niceCeil(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const f of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (f * p >= v) return f * p;
    return 10 * p;
  }
  function scale(d0, d1, r0, r1, log) {
    const f = log ? Math.log : (v) => v;
    const a = f(d0), b = f(d1);
    return (v) => r0 + ((f(v) - a) / (b - a)) * (r1 - r0);
  }

  /* One chart: an SVG `width` wide with a plot area framed by axes; returns the pieces to draw on. */
  function chart(box, o) {
    const width = Math.max(box.clientWidth, 200);
    const yLabels = o.yTicks.map((v) => (o.yFmt || fmt)(v));
    const left = 26 + CHAR_PX * Math.max(...yLabels.map((s) => s.length), 1);
    const m = { left: left, right: 14, top: o.top || 12, bottom: 44 };
    const svg = svgEl("svg", { width: width, height: o.height, viewBox: `0 0 ${width} ${o.height}`, role: "img",
      "aria-label": o.aria, class: "avl-chart", "data-chart": o.name });
    const area = { x0: m.left, x1: width - m.right, y0: m.top, y1: o.height - m.bottom };
    const pad = o.pad || 0; // pixels between the axes and the data, for dots drawn at the ends
    const x = scale(o.xDomain[0], o.xDomain[1], area.x0 + pad, area.x1 - pad, o.xLog);
    const y = scale(o.yDomain[0], o.yDomain[1], area.y1 - pad, area.y0 + pad, o.yLog);
    svgEl("rect", { x: area.x0, y: area.y0, width: area.x1 - area.x0, height: area.y1 - area.y0,
      class: "avl-area", "data-role": "plot-area" }, svg);
    const grid = svgEl("g", { class: "avl-gridlines" }, svg);
    const axes = svgEl("g", { class: "avl-axis" }, svg);
    o.yTicks.forEach((v, i) => {
      const py = y(v);
      svgEl("line", { x1: area.x0, x2: area.x1, y1: py, y2: py }, grid);
      label(axes, area.x0 - 6, py + 4, yLabels[i], { "text-anchor": "end" });
    });
    const xLabels = o.xTicks.map((v) => (o.xFmt || fmt)(v));
    const spans = o.xTicks.map((v, i) => { // each label's extent, as anchored; a narrow chart drops the ones that
      const px = x(v), w = CHAR_PX * xLabels[i].length; // would run into the label before (the last one stays)
      const anchor = px - area.x0 < 12 ? "start" : area.x1 - px < 12 ? "end" : "middle";
      const left = anchor === "start" ? px : anchor === "end" ? px - w : px - w / 2;
      return { px: px, anchor: anchor, left: left, right: left + w };
    });
    const shown = [];
    spans.forEach((span, i) => {
      while (shown.length && spans[shown[shown.length - 1]].right + 4 > span.left) {
        if (i < spans.length - 1) return; // this one would collide: not written
        shown.pop(); // the last label collides: the one before it gives way
      }
      shown.push(i);
    });
    spans.forEach((span, i) => {
      svgEl("line", { x1: span.px, x2: span.px, y1: area.y1, y2: area.y1 + 4 }, axes);
      if (shown.includes(i)) label(axes, span.px, area.y1 + 17, xLabels[i], { "text-anchor": span.anchor });
    });
    svgEl("line", { x1: area.x0, x2: area.x1, y1: area.y1, y2: area.y1, class: "avl-baseline" }, axes);
    label(axes, (area.x0 + area.x1) / 2, o.height - 6, o.xTitle, { "text-anchor": "middle", class: "avl-title" });
    label(axes, 0, 0, o.yTitle, { "text-anchor": "middle", class: "avl-title",
      transform: `translate(13 ${(area.y0 + area.y1) / 2}) rotate(-90)` });
    const plot = svgEl("g", { class: "avl-plot" }, svg);
    box.replaceChildren(svg);
    return { svg: svg, plot: plot, area: area, x: x, y: y, width: width };
  }

  function legend(parent, items) {
    const row = htmlEl("div", "avl-legend", parent);
    for (const [cls, text] of items) {
      const item = htmlEl("span", "avl-legend-item", row);
      htmlEl("span", "avl-swatch " + cls, item);
      htmlEl("span", "", item, text);
    }
  }

  /* Powers of ten from below lo to above hi, one decade in `stride` so that at most `most` are labelled. */
  function logTicks(lo, hi, most) {
    const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
    const stride = Math.max(1, Math.ceil((b - a) / (most - 1)));
    const out = [];
    for (let e = a; e < b + stride; e += stride) out.push(Math.pow(10, e));
    return out;
  }

  function panel(grid, name, title, cls) {
    const section = htmlEl("section", "avl-panel" + (cls ? " " + cls : ""), grid);
    section.dataset.panel = name;
    htmlEl("h4", "avl-panel-title", section, title);
    return section;
  }
  function plotBox(parent, name) {
    const box = htmlEl("div", "avl-plot-box", parent);
    box.dataset.plot = name;
    return box;
  }

  function redrawOnWidth(view, render) {
    /* a chart view drawn at its width: returns redraw(), which renders now if the view has a width (else at the
       next width it gets); render() runs again at the next frame whenever the width changes */
    let drawnWidth = -1;
    const draw = () => { render(); drawnWidth = view.clientWidth; };
    new ResizeObserver(() => {
      const w = view.clientWidth;
      if (w > 0 && w !== drawnWidth) global.requestAnimationFrame(() => { if (view.clientWidth !== drawnWidth) draw(); });
    }).observe(view);
    return () => { if (view.clientWidth > 0) draw(); else drawnWidth = -1; };
  }

  global.AttentionCharts = {svgEl: svgEl, htmlEl: htmlEl, label: label, fmt: fmt, niceStep: niceStep,
    linearTicks: linearTicks, niceCeil: niceCeil, logTicks: logTicks, scale: scale, chart: chart, legend: legend,
    panel: panel, plotBox: plotBox, redrawOnWidth: redrawOnWidth};
})(window);
