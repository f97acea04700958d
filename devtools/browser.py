"""Debian's headless Chromium for Playwright, as tests, benchmarks and scripts launch it (never a downloaded build).

See /work/shared BROWSER_TESTING.md; tests/conftest.py hands these to pytest-playwright.
"""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Run in a page on a view's root element: every element with text of its own, its font size; every value cell,
# its text box against its cell's box, and whether two text boxes meet (they must not).
READABLE_JS = """(root) => {
    const own = [...root.querySelectorAll('*')].filter(e => e.getClientRects().length &&
        [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()));
    const fonts = own.map(e => parseFloat(getComputedStyle(e).fontSize));
    const boxes = [...root.querySelectorAll('.av-panel td, .av-panel th')].filter(c => c.textContent.trim()).map(c => {
        const range = document.createRange(); range.selectNodeContents(c);
        return [range.getBoundingClientRect(), c.getBoundingClientRect()];
    });
    const inside = ([t, c]) => t.left >= c.left - 0.5 && t.right <= c.right + 0.5 && t.top >= c.top - 0.5 &&
        t.bottom <= c.bottom + 0.5;
    const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
    let overlaps = 0;
    for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) if (hit(boxes[i][0], boxes[j][0])) overlaps++;
    return {texts: own.length, smallest: Math.min(...fonts), values: root.querySelectorAll('td.av-v').length,
            outside: boxes.filter(b => !inside(b)).length, overlaps: overlaps};
}"""
