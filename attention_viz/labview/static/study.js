/* The compatibility study's two charts (service/study_view.py: held-out exact match after training, the logits'
 * spread at initialisation, against d_k per compatibility function), drawn with charts.js's pieces.
 *
 *   AttentionLab.mountStudy(element, studyData);
 *
 * Needs charts.js and lab.js loaded first (it adds mountStudy to window.AttentionLab). Defined once per page.
 */
(function () {
  "use strict";
  const lab = window.AttentionLab;
  if (!lab || lab.mountStudy) return;
  const {svgEl, htmlEl, fmt, logTicks, chart, legend, panel, plotBox, redrawOnWidth} = window.AttentionCharts;

  function studySeries(c, s, lo, hi, bar, text) {
    /* one (compatibility, init) series: its line through s.mean, a bar from bar(i) = [top, bottom] at each
       point and a dot whose hover text is text(i) */
    const cls = `avl-arm avl-arm-${s.arm} avl-init-${s.init}`;
    const g = svgEl("g", { class: cls, "data-series": `${s.arm}/${s.init}` }, c.plot);
    const pts = s.d_k.map((d, i) => [c.x(d), c.y(Math.min(Math.max(s.mean[i], lo), hi))]);
    svgEl("polyline", { points: pts.map((p) => p.join(",")).join(" "), class: "avl-line" }, g);
    pts.forEach((p, i) => {
      const [top, bottom] = bar(i);
      svgEl("line", { x1: p[0], x2: p[0], y1: c.y(top), y2: c.y(bottom), class: "avl-errorbar" }, g);
      svgEl("title", {}, svgEl("circle", { cx: p[0], cy: p[1], r: 3.5, class: "avl-dot" }, g)).textContent = text(i);
    });
  }

  function drawAccuracy(box, data) {
    const ds = data.d_k;
    const c = chart(box, { name: "study-accuracy", height: 230, xDomain: [ds[0] / 1.5, ds[ds.length - 1] * 1.5], xLog: true,
      xTicks: ds, xFmt: String, yDomain: [0, 102], yTicks: [0, 25, 50, 75, 100], xTitle: "d_k (log scale)",
      yTitle: "held-out exact match %", aria: "held-out exact match against d_k per compatibility function" });
    for (const s of data.accuracy) {
      studySeries(c, s, 0, 102, (i) => [Math.min(s.mean[i] + s.std[i], 100), Math.max(s.mean[i] - s.std[i], 0)],
        (i) => `${s.label}, d_k ${s.d_k[i]}: ${fmt(s.mean[i], 3)} ± ${fmt(s.std[i], 2)} % (mean ± std over ${s.seeds} seeds)`);
    }
  }

  function drawSpread(box, data) {
    const ds = data.d_k, all = [];
    data.logit_std.forEach((s) => all.push(...s.min, ...s.max));
    all.push(Math.sqrt(ds[ds.length - 1]));
    const ticks = logTicks(Math.min(...all.filter((v) => v > 0)), Math.max(...all), 5);
    const c = chart(box, { name: "study-spread", height: 230, xDomain: [ds[0] / 1.5, ds[ds.length - 1] * 1.5], xLog: true,
      xTicks: ds, xFmt: String, yDomain: [ticks[0], ticks[ticks.length - 1]], yLog: true, yTicks: ticks,
      xTitle: "d_k (log scale)", yTitle: "std of the logits at step 0",
      aria: "spread of the softmax logits at initialisation against d_k" });
    const lo = ds[0] / 1.5, hi = ds[ds.length - 1] * 1.5;
    svgEl("polyline", { points: `${c.x(lo)},${c.y(Math.sqrt(lo))} ${c.x(hi)},${c.y(Math.sqrt(hi))}`,
      class: "avl-uniform", "data-role": "sqrt-dk" }, c.plot);
    for (const s of data.logit_std) {
      studySeries(c, s, ticks[0], ticks[ticks.length - 1], (i) => [s.max[i], Math.max(s.min[i], ticks[0])],
        (i) => `${s.label}, d_k ${s.d_k[i]}: logit std ${fmt(s.mean[i])} (seeds ${fmt(s.min[i])} to ${fmt(s.max[i])}); ` +
          `√d_k = ${fmt(Math.sqrt(s.d_k[i]))}`);
    }
  }

  function mountStudy(root, data) {
    /* the study's two charts (held-out exact match; logit spread at step 0) from study_view's numbers */
    root.replaceChildren();
    const view = htmlEl("div", "av-lab av-study", root);
    if (!data || !data.accuracy) {
      htmlEl("p", "avl-heading", view, "No study ships with this installation.");
      return view;
    }
    htmlEl("p", "avl-heading", view, `Trained on ${data.setup}`);
    const grid = htmlEl("div", "avl-grid", view);
    function render() {
      grid.replaceChildren();
      const items = data.accuracy.map((s) => [`avl-arm avl-arm-${s.arm} avl-init-${s.init}`, s.label]);
      const ap = panel(grid, "study-accuracy", "After training: held-out exact match (mean ± std over seeds)");
      legend(ap, items);
      const ab = plotBox(ap, "study-accuracy");
      const sp = panel(grid, "study-spread", "At initialisation: the spread of the logits (mean, seeds' range)");
      legend(sp, [...items.filter(([cls]) => data.logit_std.some((s) => cls.includes(`avl-arm-${s.arm} avl-init-${s.init}`))),
        ["avl-uniform", "√d_k"]]);
      const sb = plotBox(sp, "study-spread");
      drawAccuracy(ab, data);
      drawSpread(sb, data);
    }
    redrawOnWidth(view, render)();
    return view;
  }

  lab.mountStudy = mountStudy;
})();
