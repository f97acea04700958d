/* autosize.js: run inside a notebook view's iframe (explorer/notebook.py): the iframe is as tall as its page, now and
 * whenever the page grows. */
(function () {
  "use strict";
  const frame = window.frameElement;
  if (!frame) return;
  // the body's own height (not scrollHeight, which is at least the frame's height and would only grow)
  function fit() { frame.style.height = Math.ceil(document.body.getBoundingClientRect().height + 8) + "px"; }
  new ResizeObserver(fit).observe(document.body); fit();
})();
