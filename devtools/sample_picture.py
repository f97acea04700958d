"""Draws attention_viz/data/sample_picture.png, the picture the Pictures and sound tab opens with: a scene drawn here
with PIL (a sky, a sun, hills, a house and a tree), so the project owns it (its licence is the project's).

    python -m devtools.sample_picture
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parents[1] / "attention_viz" / "data" / "sample_picture.png"
SIDE = 320


def draw() -> Image.Image:
    y = np.linspace(0.0, 1.0, SIDE)[:, None, None]
    sky = (1 - y) * np.array([90, 150, 230]) + y * np.array([200, 225, 250])  # (SIDE, 1, 3)
    image = Image.fromarray(np.broadcast_to(sky, (SIDE, SIDE, 3)).astype(np.uint8))
    pen = ImageDraw.Draw(image)
    pen.ellipse((230, 30, 290, 90), fill=(255, 210, 60))                                  # the sun
    pen.polygon([(0, 210), (90, 170), (200, 200), (320, 160), (320, 320), (0, 320)], fill=(70, 150, 70))  # hills
    pen.rectangle((60, 180, 160, 260), fill=(200, 80, 60))                                # the house
    pen.polygon([(50, 182), (110, 130), (170, 182)], fill=(120, 50, 40))                  # its roof
    pen.rectangle((98, 215, 122, 260), fill=(90, 60, 40))                                 # its door
    pen.rectangle((72, 195, 92, 213), fill=(240, 240, 200))                               # a window
    pen.rectangle((235, 200, 250, 270), fill=(100, 70, 40))                               # the tree's trunk
    pen.ellipse((205, 140, 280, 215), fill=(40, 110, 50))                                 # its crown
    return image


if __name__ == "__main__":
    draw().save(OUT, optimize=True)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")
