/* palette.js: the colours every view draws weights with, and the text colour written on them.
 *
 *   AttentionPalette.viridis(t)      // [r, g, b] of t in [0, 1], linearly between viridis' 17 stops (as the
 *                                    // server's images: matplotlib's viridis sampled at 0, 1/16, ..., 1)
 *   AttentionPalette.diverging(x)    // [r, g, b] of x in [-1, 1] on RdBu reversed (blue -1, white 0, red +1)
 *   AttentionPalette.ink(rgb)        // "#000" or "#fff": whichever reads at least 4.58:1 on rgb (WCAG 2.1)
 *   AttentionPalette.css(rgb)        // "rgb(r,g,b)"
 *   AttentionPalette.paint(ctx, rows, cols, rgbOf)   // a heat map on a rows x cols canvas, a pixel per cell:
 *                                    // rgbOf(r, c) -> [r, g, b] (opaque) or null (transparent)
 *
 * Loaded before explorer.js, headmap.js, steps.js and training.js (attention_viz.explorer.html.script); defined
 * once per page, later copies leave window.AttentionPalette as it is.
 */
(function (global) {
  "use strict";
  if (global.AttentionPalette) return;
  const hex = (list) => list.map((h) => [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const VIRIDIS = hex(["440154", "48186a", "472d7b", "424086", "3b528b", "33638d", "2c728e", "26828e", "21918c",
    "1fa088", "28ae80", "3fbc73", "5ec962", "84d44b", "addc30", "d8e219", "fde725"]);
  const RDBU = hex(["053061", "2166ac", "4393c3", "92c5de", "d1e5f0", "f7f7f7", "fddbc7", "f4a582", "d6604d",
    "b2182b", "67001f"]);

  function ramp(stops, t) {
    /* [r, g, b] of t in [0, 1] along `stops`, linearly between neighbours */
    const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2), f = x - i;
    return [0, 1, 2].map((c) => Math.round(stops[i][c] + (stops[i + 1][c] - stops[i][c]) * f));
  }
  // WCAG 2.1: black text on a colour whose relative luminance L has (L + 0.05)² > 0.0525, else white: at least 4.58:1
  const luminance = (rgb) => rgb.reduce((sum, v, i) => sum + [0.2126, 0.7152, 0.0722][i] *
    (v / 255 <= 0.03928 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4), 0);

  function paint(ctx, rows, cols, rgbOf) {
    const image = ctx.createImageData(cols, rows), pixels = image.data;
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) {
      const rgb = rgbOf(r, c), p = 4 * (r * cols + c);
      if (rgb === null) continue;  // a new image's pixels are transparent
      pixels[p] = rgb[0]; pixels[p + 1] = rgb[1]; pixels[p + 2] = rgb[2]; pixels[p + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
  }

  global.AttentionPalette = {
    viridis: (t) => ramp(VIRIDIS, t),
    diverging: (x) => ramp(RDBU, (x + 1) / 2),
    ink: (rgb) => ((luminance(rgb) + 0.05) ** 2 > 1.05 * 0.05 ? "#000" : "#fff"),
    css: (rgb) => `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`,
    paint: paint,
  };
})(window);
