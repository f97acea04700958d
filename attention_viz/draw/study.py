"""Figures of the compatibility study (attention_viz.train.study): curves with seed bands, the mechanism, the summary.

Input is the study's results.json as a dict (and the shipped members' snapshots for the forming figure); output
`matplotlib.figure.Figure`s on the Agg canvas (no pyplot).
Bands are the min-max over seeds around the median curve.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

ARM_STYLE = {
    "scaled_dot": {"color": "tab:blue", "label": "scaled dot ÷√d_k"},
    "dot": {"color": "tab:red", "label": "plain dot", "linestyle": "--"},
    "additive": {"color": "tab:green", "label": "additive", "linestyle": "-."},
}
INIT_STYLE = {"unit_qk": {"marker": "o"}, "xavier": {"marker": "s", "alpha": 0.6}}


def _runs(results: dict, init: str, arm: str, d_k: int) -> list[dict]:
    return [r for r in results["runs"] if (r["init"], r["compatibility"], r["d_k"]) == (init, arm, d_k)]


def _band(ax, x, ys: np.ndarray, style: dict, label: bool) -> None:
    """Median line and min-max band over seeds; ys [seeds, points]."""
    line_style = {k: v for k, v in style.items() if k != "label"}
    ax.plot(x, np.median(ys, axis=0), label=style["label"] if label else None, **line_style)
    ax.fill_between(x, ys.min(axis=0), ys.max(axis=0), color=style["color"], alpha=0.18, linewidth=0)


def curves_figure(results: dict, init: str = "unit_qk") -> Figure:
    """Training loss (log) and batch exact match against step, one column per d_k, one colour per arm."""
    d_ks = results["setup"]["d_k"]
    fig = Figure(figsize=(3.0 * len(d_ks), 5.4), layout="constrained")
    axes = fig.subplots(2, len(d_ks), sharex=True, sharey="row", squeeze=False)
    for col, d_k in enumerate(d_ks):
        for arm, style in ARM_STYLE.items():
            runs = _runs(results, init, arm, d_k)
            if not runs:
                continue
            step = runs[0]["curve"]["step"]
            for row, key in enumerate(("loss", "exact_match")):
                _band(axes[row, col], step, np.array([r["curve"][key] for r in runs]), style, col == 0 and row == 0)
        axes[0, col].set_title(f"d_k = {d_k}")
        axes[0, col].set_yscale("log")
        axes[1, col].set_ylim(-0.02, 1.02)
        axes[1, col].set_xlabel("step")
    axes[0, 0].set_ylabel("training loss")
    axes[1, 0].set_ylabel("batch exact match")
    axes[0, 0].legend(loc="lower left", fontsize="small")
    n = len(results["setup"]["seeds"])
    fig.suptitle(f"{results['setup']['task']}, init {init}: median over {n} seeds, band = min-max")
    return fig


def mechanism_figure(results: dict, init: str = "unit_qk") -> Figure:
    """Logit std and the softmax Jacobian's norm on the probe batch against step (log x), one column per d_k."""
    d_ks = results["setup"]["d_k"]
    fig = Figure(figsize=(3.0 * len(d_ks), 5.4), layout="constrained")
    axes = fig.subplots(2, len(d_ks), sharex=True, sharey="row", squeeze=False)
    for col, d_k in enumerate(d_ks):
        for arm, style in ARM_STYLE.items():
            runs = _runs(results, init, arm, d_k)
            if not runs:
                continue
            step = np.array(runs[0]["mechanism"]["step"]) + 1  # +1: step 0 on a log axis
            for row, key in enumerate(("logit_std", "softmax_grad_norm")):
                ys = np.array([r["mechanism"]["all"][key] for r in runs])
                _band(axes[row, col], step, ys, style, col == 0 and row == 0)
        axes[0, col].set_title(f"d_k = {d_k}")
        axes[0, col].set_xscale("log")
        axes[0, col].set_yscale("log")
        axes[1, col].set_yscale("log")  # saturation drives it towards 0 over orders of magnitude
        axes[1, col].set_xlabel("step + 1")
    axes[0, 0].set_ylabel("std of softmax logits")
    axes[1, 0].set_ylabel("‖∂softmax/∂logits‖ per row")
    axes[0, 0].legend(loc="upper left", fontsize="small")
    fig.suptitle(f"Footnote 4 in training (init {init}): saturated rows have a Jacobian near 0")
    return fig


def summary_figure(results: dict) -> Figure:
    """Held-out exact match (mean ± std over seeds) against d_k per arm and init; step-0 logit std against d_k."""
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2)
    cells = {(r["init"], r["compatibility"]): [] for r in results["summary"]}
    for r in results["summary"]:
        cells[(r["init"], r["compatibility"])].append(r)
    for (init, arm), rows in cells.items():
        rows = sorted(rows, key=lambda r: r["d_k"])
        x = [r["d_k"] for r in rows]
        mean = [100 * r["heldout_exact_match"]["mean"] for r in rows]
        std = [100 * r["heldout_exact_match"]["std"] for r in rows]
        style = {k: v for k, v in ARM_STYLE[arm].items() if k != "label"}
        left.errorbar(x, mean, yerr=std, capsize=3, label=f"{ARM_STYLE[arm]['label']} ({init})",
                      **style, **INIT_STYLE[init])
    left.set_xscale("log", base=2)
    left.set_xlabel("d_k")
    left.set_ylabel("held-out exact match %")
    left.legend(fontsize="x-small")
    left.set_title("after training (mean ± std over seeds)")
    init_rows = results["initialisation"]
    for init in INIT_STYLE:
        for arm in ARM_STYLE:
            rows = sorted((r for r in init_rows if (r["init"], r["compatibility"]) == (init, arm)), key=lambda r: r["d_k"])
            if rows:
                style = {k: v for k, v in ARM_STYLE[arm].items() if k != "label"}
                right.plot([r["d_k"] for r in rows], [r["logit_std"] for r in rows],
                           label=f"{ARM_STYLE[arm]['label']} ({init})", **style, **INIT_STYLE[init])
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("d_k")
    right.set_ylabel("std of softmax logits at step 0")
    right.legend(fontsize="x-small")
    right.set_title("at initialisation (probe batch)")
    return fig


def forming_figure(snapshots: dict, key: str = "decoder.0.cross_attn", probe: int = 0, columns: int = 8) -> Figure:
    """One map of one probe string at `columns` of the snapshot steps (log-spaced), one row per arm.

    snapshots: {arm: attention_viz.data.snapshots.Snapshots} of members that differ only in the arm; heads averaged.
    """
    arms = [a for a in ARM_STYLE if a in snapshots]
    first = snapshots[arms[0]]
    n = len(first.steps)
    picks = sorted({round(i * (n - 1) / (columns - 1)) for i in range(columns)})
    fig = Figure(figsize=(1.45 * len(picks) + 0.6, 1.55 * len(arms) + 0.7), layout="constrained")
    axes = fig.subplots(len(arms), len(picks), squeeze=False)
    src = first.meta["src_tokens"][probe]
    tgt = first.meta["tgt_tokens"][probe]
    for row, arm in enumerate(arms):
        snaps = snapshots[arm]
        for col, index in enumerate(picks):
            ax = axes[row, col]
            ax.imshow(snaps.map_at(key, index, probe).mean(0), vmin=0, vmax=1, cmap="viridis", interpolation="nearest")
            ax.set_xticks(range(len(src)), src if row == len(arms) - 1 else [], fontsize=6, rotation=90)
            ax.set_yticks(range(len(tgt)), tgt if col == 0 else [], fontsize=6)
            if row == 0:
                ax.set_title(f"step {snaps.steps[index]}", fontsize=8)
        axes[row, 0].set_ylabel(ARM_STYLE[arm]["label"], fontsize=8)
    fig.suptitle(f"{key} on {first.probes[probe]!r} (teacher-forced), d_k = {first.meta['d_k']}, "
                 f"init {first.meta['init']}, seed {first.meta['seed']}", fontsize=9)
    return fig


def save_figures(results: dict, out: str | Path, dpi: int = 90, snapshots: dict | None = None) -> list[Path]:
    """Write curves_INIT.png, mechanism_INIT.png (each trained init) and summary.png into `out`; with snapshots
    ({d_k: {arm: Snapshots}}), forming_dkD.png for the smallest and the largest d_k."""
    out = Path(out)
    paths = []
    for init in sorted({r["init"] for r in results["runs"]}):
        for name, draw in (("curves", curves_figure), ("mechanism", mechanism_figure)):
            paths.append(out / f"{name}_{init}.png")
            draw(results, init).savefig(paths[-1], dpi=dpi)
    paths.append(out / "summary.png")
    summary_figure(results).savefig(paths[-1], dpi=dpi)
    for d_k in sorted({min(snapshots), max(snapshots)}) if snapshots else []:
        paths.append(out / f"forming_dk{d_k}.png")
        forming_figure(snapshots[d_k]).savefig(paths[-1], dpi=dpi)
    return paths
