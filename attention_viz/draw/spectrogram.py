"""Attention over a recording: the log-mel spectrogram a speech encoder read (hub.speech) with, under it on the same
time axis, each written token's encoder-decoder attention (the alignment of words to time). A matplotlib figure,
drawn once per view (the encoder's self-attention is the long view's: service.media_view).

Axes: M mel bins, F feature frames (two per encoder position in Whisper), Q the decoder's rows, K encoder positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from attention_viz.draw.raster import WEIGHT_CMAP
from attention_viz.draw.vector import LABEL_PT, PAGE_WIDTH, TICK_PT, TITLE_PT

ROW_INCHES = 0.16  # a token's row in the alignment
MAX_ROWS = 60      # rows labelled at most (a longer transcript's labels thinned)


def alignment_figure(features: np.ndarray, weights: np.ndarray, tokens: Sequence[str], seconds: float,
                     title: str) -> Figure:
    """features [M, F] (the log-mel input), weights [Q, K] (one head's or the heads' mean cross-attention), tokens
    [Q] (the token each row's step writes) -> the spectrogram above, the rows below, both over
    `seconds`; each row scaled to its own largest weight, so that where a token looks reads at any weight."""
    features, weights = np.asarray(features, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or len(tokens) != weights.shape[0]:
        raise ValueError(f"weights must be [Q, K] with one token a row; got {list(weights.shape)} and {len(tokens)} "
                         "tokens")
    height = 1.4 + ROW_INCHES * max(len(tokens), 4)
    fig = Figure(figsize=(PAGE_WIDTH, 1.5 + height))
    spec, rows = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.4, height - 1.4]})
    spec.imshow(features, aspect="auto", origin="lower", cmap="magma", extent=(0, seconds, 0, features.shape[0]),
                interpolation="antialiased")
    spec.set_ylabel("mel bin", fontsize=LABEL_PT)
    spec.set_title(title, fontsize=TITLE_PT)
    tops = weights.max(axis=1, keepdims=True)
    image = rows.imshow(np.divide(weights, tops, out=np.zeros_like(weights), where=tops > 0), aspect="auto",
                        cmap=WEIGHT_CMAP, vmin=0, vmax=1, extent=(0, seconds, len(tokens), 0),
                        interpolation="nearest")
    step = max(1, -(-len(tokens) // MAX_ROWS))
    rows.set_yticks([i + 0.5 for i in range(0, len(tokens), step)])
    rows.set_yticklabels([repr(tokens[i])[1:-1] or "·" for i in range(0, len(tokens), step)], fontsize=TICK_PT)
    rows.set_ylabel("the token each step writes", fontsize=LABEL_PT)
    rows.set_xlabel("time in the recording (s)", fontsize=LABEL_PT)
    for ax in (spec, rows):
        ax.tick_params(labelsize=TICK_PT)
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    bar = fig.colorbar(image, ax=[spec, rows], fraction=0.04, pad=0.02)
    bar.set_label("weight ÷ the row's largest", fontsize=TICK_PT)
    bar.ax.tick_params(labelsize=TICK_PT)
    return fig
