"""What the app shows, composed from session runs with render and lab: images, tables and short texts.

No Gradio here: every method takes plain values, validates them (ValueError with a message for the
user) and returns PNG files, HTML, rows and Markdown, so tests call it exactly as the app does.
Images are encoded once, written to a content-named file and dropped from memory; the caches keep the
file names (a few bytes each, not megabytes of pixels), so a control that only changes the view
re-renders at most one figure and never reruns the model.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import shutil
import tempfile
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_viz import lab
from attention_viz.draw import figures as render, heatmap_table, raster
from attention_viz.train import family
from attention_viz.core.attention import scale_factor
from attention_viz.service.checks import check_bool, check_choice, check_int
from attention_viz.core.maps import KINDS
from attention_viz.service.explorer import (
    COMPARISONS,
    D_K_RANGE,
    DEFAULT_UNTRAINED,
    HEADS_RANGE,
    MAX_HEAD_WIDTH,
    UNTRAINED,
    UNTRAINED_LAYERS,
    Explorer,
    Run,
    Settings,
)

COLOUR_SCALES = {"absolute": "0 → 1 for every head", "per_head": "0 → each head's maximum"}
LAB_D_K_RANGE = (1, 4096)
LAB_KEYS_RANGE = (2, 1024)
LAB_SAMPLES = 20_000
LAB_SEED = 0
GRID_WIDTH = 900            # pixels the grid of every head is scaled to, about
KEPT_EXPORTS = 32           # export folders kept on disk; older ones are deleted
KEPT_PNGS = 2048            # image files kept for the app to serve (content-named; tens of MB on disk)


@dataclass(frozen=True)
class Visualization:
    """The Transformer view for one set of controls."""

    grid: str                   # PNG file: every layer × head of the chosen kind
    head: str                   # HTML: the chosen head as a heatmap table, tokens on both axes, values in cells
    output: str                 # the model's output string (or why there is none)
    statistics: list[list]      # one row per layer × head, columns session.STAT_HEADERS
    info: str                   # Markdown: model, d_k, scaling, masks, output against the task


@dataclass(frozen=True)
class LabView:
    """The √d_k lab for one d_k, number of keys and scaling switch."""

    histogram: str              # PNG file: q·k samples against N(0, d_k)
    softmax: str                # PNG file: one query's softmax over its keys
    sweep: str                  # PNG file: statistics over d_k, scaled against unscaled
    numbers: list[list]         # rows under LAB_HEADERS


LAB_HEADERS = ["quantity", "unscaled q·k", "scaled q·k / √d_k", "theory"]


@dataclass(frozen=True)
class ModelControls:
    """Ranges and values of the controls that depend on the picked model."""

    untrained: bool
    d_k: int                    # the d_k to show: the requested one, or the family member nearest it
    log_d_k_min: float          # the log₂ d_k slider: the family's range, or 0 .. 10 for the untrained model
    log_d_k_max: float
    log_d_k_step: float
    max_layer: int
    max_head: int
    layer: int                  # the requested layer and head, clamped into range
    head: int
    scale_mode: str             # how the model was trained ("sqrt_dk" for the untrained one)
    d_k_note: str               # which d_k values exist


class Views:
    """The app's figures and texts for one server; caches rendered images and owns the export folder.

    Args:
        explorer: the runs and models (created once at start-up).
        image_cache_size: rendered images kept per kind of figure (as the names of their PNG files; the
            files themselves are the last KEPT_PNGS written, on disk).
    """

    def __init__(self, explorer: Explorer, image_cache_size: int = 8) -> None:
        self.explorer = explorer
        self._grid = functools.lru_cache(maxsize=image_cache_size)(self._render_grid)
        self._head_table = functools.lru_cache(maxsize=4 * image_cache_size)(self._render_head_table)
        self._head_image = functools.lru_cache(maxsize=image_cache_size)(self._render_head)
        self._histogram = functools.lru_cache(maxsize=image_cache_size)(self._render_histogram)
        self._softmax = functools.lru_cache(maxsize=image_cache_size)(self._render_softmax)
        self._sweep = functools.lru_cache(maxsize=8)(self._sweep_result)
        self._sweep_image = functools.lru_cache(maxsize=image_cache_size)(self._render_sweep)
        self._sweep_base = functools.lru_cache(maxsize=2)(self._render_sweep_base)  # pixels: ~1.6 MB each
        self._exports = tempfile.TemporaryDirectory(prefix="attention_viz-exports-")
        self._export_dirs: deque[Path] = deque()
        self._pngs: OrderedDict[str, Path] = OrderedDict()  # content hash -> file, least recently used first
        self._png_lock = threading.Lock()
        self.image_dir.mkdir()
        self._family: str | None = None
        self._family_lock = threading.Lock()

    @property
    def export_root(self) -> Path:
        """The temporary folder this server writes exports to (removed when the Views is collected)."""
        return Path(self._exports.name)

    @property
    def image_dir(self) -> Path:
        """The folder of the PNG files png_file writes (each written once, never modified): only images, so the
        app may serve it as is instead of copying every image into Gradio's cache."""
        return self.export_root / "images"

    def png_file(self, image: np.ndarray, palette: np.ndarray | None = None) -> str:
        """The image (RGB, or indices into `palette`) as a PNG file named by its content, written once and
        atomically; its path, for the app.

        Gradio writes a returned array to its cache under a content hash each time, truncating the file in
        place, so two users shown the same image can race and one download finds it empty. A path is copied
        once (written aside, then renamed) and never rewritten; it also saves re-encoding cached images.
        """
        pixels = np.ascontiguousarray(image)
        digest = hashlib.blake2b(pixels.tobytes(), digest_size=16)
        digest.update(repr((pixels.shape, pixels.dtype.str)).encode())
        if palette is not None:
            digest.update(np.ascontiguousarray(palette).tobytes())
        name = digest.hexdigest()
        if self._touch(name):
            return str(self._pngs[name])
        path = self.image_dir / f"{name}.png"
        staging = path.with_name(f".{name}.{threading.get_ident()}.tmp")
        staging.write_bytes(raster.array_to_png(pixels, palette=palette))
        os.replace(staging, path)  # atomic: a reader sees the whole file or none
        with self._png_lock:
            self._pngs[name] = path
            while len(self._pngs) > KEPT_PNGS:
                self._pngs.popitem(last=False)[1].unlink(missing_ok=True)
        return str(path)

    def figure_file(self, fig) -> str:
        """A matplotlib figure drawn and written as a PNG file (png_file); its path."""
        return self.png_file(render.figure_to_array(fig))

    def _touch(self, name: str) -> bool:
        """Mark a PNG (by content name) as just used; False when it has left the store (deleted)."""
        with self._png_lock:
            if name not in self._pngs:
                return False
            self._pngs.move_to_end(name)
            return True

    def _kept(self, cache, *key) -> str:
        """cache(*key), the path of a PNG file, drawn again in the rare case its file was deleted meanwhile."""
        path = cache(*key)
        if not self._touch(Path(path).stem):
            cache.cache_clear()
            path = cache(*key)
        return path

    # ------------------------------------------------------------------ transformer view

    def model_controls(self, model: object, d_k: object, layer: object = 0, head: object = 0,
                       n_heads: object = DEFAULT_UNTRAINED["n_heads"]) -> ModelControls:
        """The d_k slider's range, the layer and head ranges and the training scale of a model choice."""
        explorer = self.explorer
        d_k = explorer.default_d_k(model) if d_k is None else check_int("d_k", d_k, *D_K_RANGE)
        layer, head = check_int("layer", layer, 0, 64), check_int("head", head, 0, 64)
        if model == UNTRAINED:
            n_heads = check_int("heads", n_heads, *HEADS_RANGE)
            return ModelControls(
                True, d_k, 0.0, math.log2(D_K_RANGE[1]), 1.0, UNTRAINED_LAYERS - 1, n_heads - 1,
                min(layer, UNTRAINED_LAYERS - 1), min(head, n_heads - 1), "sqrt_dk",
                f"Any d_k from {D_K_RANGE[0]} to {D_K_RANGE[1]} (heads × d_k ≤ {MAX_HEAD_WIDTH}).",
            )
        config = explorer.model_shape(model, d_k)  # validates the model name
        family = explorer.families[model]
        d_k = family.nearest(d_k)[0]
        logs = [math.log2(value) for value in family.d_ks]
        # Powers of two evenly spaced on the log axis (4, 16, 64, 256: step 2) land the slider on members only.
        whole = all(value.is_integer() for value in logs)
        step = math.gcd(*(int(b - a) for a, b in zip(logs, logs[1:], strict=False))) if whole and len(logs) > 1 else 1
        max_layer = min(config.n_encoder_layers, config.n_decoder_layers) - 1
        return ModelControls(
            False, d_k, min(logs), max(logs) if len(logs) > 1 else min(logs) + 1, float(step) if whole else 0.25,
            max_layer, config.n_heads - 1, min(layer, max_layer), min(head, config.n_heads - 1), family.scale,
            "Trained d_k: " + ", ".join(str(value) for value in family.d_ks) + ".",
        )

    def largest_model(self) -> tuple[int, int]:
        """(layers, heads) of the largest choice: the API's bounds for the layer and head inputs."""
        configs = [self.explorer.model_shape(family.key, d_k) for family in self.explorer.families.values()
                   for d_k in family.d_ks]
        layers = max([UNTRAINED_LAYERS] + [max(c.n_encoder_layers, c.n_decoder_layers) for c in configs])
        heads = max([HEADS_RANGE[1]] + [c.n_heads for c in configs])
        return layers, heads

    def head_at(self, settings: Settings, kind: object, x: object, y: object) -> tuple[int, int] | None:
        """(layer, head) of the grid tile under pixel (x, y) of the grid image, None between tiles."""
        kind = check_choice("attention kind", kind, KINDS)
        shape = self.explorer.run(settings).weights(kind).shape
        x, y = check_int("x", x, 0, 1 << 16), check_int("y", y, 0, 1 << 16)
        return raster.grid_layout(shape, cell=grid_cell(shape), labels=True).head_at(x, y)

    def visualize(
        self, settings: Settings, kind: object, layer: object, head: object, colour_scale: object = "absolute",
        requested_d_k: object = None,
    ) -> Visualization:
        """Grid, detailed head, output, per-head statistics and notes for one set of controls.

        requested_d_k: the d_k the user asked for, to say so when a trained family snapped it to another.
        """
        kind = check_choice("attention kind", kind, KINDS)
        per_head = check_choice("colour scale", colour_scale, COLOUR_SCALES) == "per_head"
        run = self.explorer.run(settings)
        run.head(kind, layer, head)  # validates layer and head against this model
        layer, head = int(layer), int(head)
        requested = settings.d_k if requested_d_k is None else check_int("d_k", requested_d_k, *D_K_RANGE)
        return Visualization(
            grid=self._kept(self._grid, settings, kind, per_head),
            head=self._head_table(settings, kind, layer, head, per_head),
            output=output_text(run),
            statistics=run.statistics(kind),
            info="\n\n".join(filter(None, [snapped_note(requested, settings), run_notes(run)])),
        )

    def _render_grid(self, settings: Settings, kind: str, per_head: bool) -> str:
        run = self.explorer.run(settings)
        masked = np.where(run.mask(kind), run.weights(kind), np.nan)  # (L, H, Q, K); masked cells grey
        indices = raster.grid_indices(masked, cell=grid_cell(masked.shape), per_head_max=per_head, labels=True)
        return self.png_file(indices, palette=raster.grid_palette())

    def _render_head_table(self, settings: Settings, kind: str, layer: int, head: int, per_head: bool) -> str:
        run = self.explorer.run(settings)
        queries, keys = run.tokens(kind)
        return heatmap_table.head_table(run.head(kind, layer, head), queries, keys, head_title(settings, kind, layer, head),
                                        mask=run.mask(kind), per_head_max=per_head)

    def _render_head(self, settings: Settings, kind: str, layer: int, head: int, per_head: bool) -> str:
        run = self.explorer.run(settings)
        queries, keys = run.tokens(kind)
        return self.png_file(raster.head_image(run.head(kind, layer, head), queries, keys,
                                               head_title(settings, kind, layer, head), mask=run.mask(kind),
                                               per_head_max=per_head))

    def steps(self, settings: Settings, kind: object, layer: object, head: object) -> tuple[str, str]:
        """Figure 2 (left) for one head, and a line on what each panel is."""
        kind = check_choice("attention kind", kind, KINDS)
        steps = self.explorer.steps(settings, kind, layer, head)
        title = f"{KINDS[kind]}, layer {int(layer)}, head {int(head)}"
        image = self.figure_file(render.steps_figure(steps.arrays, steps.query_tokens, steps.key_tokens, title))
        blocked = int(np.isneginf(steps.arrays["masked"]).sum())
        text = (
            f"**QKᵀ** (d_k = {settings.d_k}) → **scaled** ×{steps.factor:.4g} ({scaling_text(settings)}) → "
            f"**masked**: {blocked} of {steps.arrays['masked'].size} scores set to −∞ → **softmax** "
            f"(each row sums to 1; −∞ becomes exactly 0) → **weights·V**, this head's output "
            f"[{steps.arrays['output'].shape[0]} × d_v = {steps.arrays['output'].shape[1]}]."
        )
        return image, text

    def compare(
        self, settings: Settings, what: object, kind: object, layer: object, head: object
    ) -> tuple[str, str]:
        """The difference heatmap of one head with a switch on and off, and what changed."""
        kind = check_choice("attention kind", kind, KINDS)
        comparison = self.explorer.compare(settings, what, kind, layer, head)
        a, b = comparison.labels
        title = f"{a} − {b}\n{KINDS[kind]}, layer {int(layer)}, head {int(head)}"
        image = self.figure_file(render.difference_figure(comparison.a, comparison.b, comparison.query_tokens,
                                                    comparison.key_tokens, title))
        diff = np.abs(comparison.difference)
        lines = [f"Red: more weight {a}; blue: more weight {b}. Both use the same source and decoder input."]
        if diff.max() == 0:
            lines.append(f"No difference in this head: {no_difference_reason(comparison.what, kind, settings)}")
        else:
            i, j = np.unravel_index(diff.argmax(), diff.shape)
            lines.append(
                f"Largest change {diff.max():.3f}: query {i} `{comparison.query_tokens[i]}` → key {j} "
                f"`{comparison.key_tokens[j]}`; mean |change| {diff.mean():.3f}."
            )
        lines.append(f"Output {a}: `{comparison.outputs[0]}`; {b}: `{comparison.outputs[1]}`.")
        return image, "\n\n".join(lines)

    def export(self, settings: Settings, kind: object, layer: object, head: object,
               colour_scale: object = "absolute") -> list[Path]:
        """Write the grid and the head as PNG, every map as .npz and the head as CSV; returns the paths."""
        view = self.visualize(settings, kind, layer, head, colour_scale)
        kind = check_choice("attention kind", kind, KINDS)
        run = self.explorer.run(settings)
        layer, head = int(layer), int(head)
        head_png = Path(self._kept(self._head_image, settings, kind, layer, head, colour_scale == "per_head"))
        folder = Path(tempfile.mkdtemp(dir=self.export_root))
        self._export_dirs.append(folder)
        while len(self._export_dirs) > KEPT_EXPORTS:
            shutil.rmtree(self._export_dirs.popleft(), ignore_errors=True)
        stem = f"{kind.replace('.', '_')}_L{layer}_H{head}"
        files = {
            f"grid_{kind.replace('.', '_')}.png": Path(view.grid).read_bytes(),
            f"head_{stem}.png": head_png.read_bytes(),
            "maps.npz": self.explorer.maps_npz(run),
            f"head_{stem}.csv": self.explorer.head_csv(run, kind, layer, head).encode(),
        }
        paths = []
        for name, data in files.items():
            path = folder / name
            path.write_bytes(data)
            paths.append(path)
        return paths

    # ------------------------------------------------------------------ the √d_k lab

    def dk_lab(self, d_k: object, n_keys: object, scaled: object) -> LabView:
        """Histogram of q·k, one softmax row, the sweep over d_k and the numbers for this d_k."""
        d_k = check_int("d_k", d_k, *LAB_D_K_RANGE)
        n_keys = check_int("number of keys", n_keys, *LAB_KEYS_RANGE)
        scaled = check_bool("scaled", scaled)
        return LabView(
            histogram=self._kept(self._histogram, d_k, scaled),
            softmax=self._kept(self._softmax, d_k, n_keys, scaled),
            sweep=self._kept(self._sweep_image, d_k, n_keys),
            numbers=lab_numbers(d_k, n_keys),
        )

    def _render_histogram(self, d_k: int, scaled: bool) -> str:
        samples = lab.dot_products(d_k, LAB_SAMPLES, seed=LAB_SEED, scaled=scaled)
        # One x range for both modes (the unscaled spread), so switching the scale visibly narrows the histogram.
        fig = render.dot_product_histogram(samples, d_k, scaled, x_limit=4.0 * math.sqrt(d_k))
        return self.figure_file(fig)

    def _render_softmax(self, d_k: int, n_keys: int, scaled: bool) -> str:
        logits, weights = lab.softmax_row(d_k, n_keys, scaled, seed=LAB_SEED)
        name = "q·k / √d_k" if scaled else "q·k"
        fig = render.softmax_bars(weights, logits, title=f"one query, {n_keys} keys, d_k = {d_k}, logits {name}")
        return self.figure_file(fig)

    def _sweep_result(self, n_keys: int) -> lab.Sweep:
        d_ks = [2**i for i in range(13)]  # 1 .. 4096
        return lab.sweep(d_ks, n_keys=n_keys, n_queries=min(256, lab.MAX_SWEEP_LOGITS // n_keys), seed=LAB_SEED)

    def _render_sweep_base(self, n_keys: int) -> tuple[np.ndarray, list[render.LogAxes]]:
        """The curves over d_k for one number of keys, drawn once: pixels and where each panel lies."""
        fig = render.sweep_figure(self._sweep(n_keys))
        pixels = render.figure_to_array(fig)
        pixels.setflags(write=False)
        return pixels, render.log_x_axes(fig)

    def _render_sweep(self, d_k: int, n_keys: int) -> str:
        """The curves with the slider's d_k marked in every panel: a column of pixels, not a new figure."""
        pixels, panels = self._sweep_base(n_keys)
        image = pixels.copy()
        for panel in panels:
            raster.mark_column(image, panel.column(d_k), panel.top, panel.bottom)
        return self.png_file(image)

    def has_family(self) -> bool:
        """Whether the d_k family's checkpoints ship (their cards are read, nothing is drawn)."""
        return bool(family.family_cards(self.explorer.models_dir))

    def family_curves(self) -> str | None:
        """The d_k family's training curves (figures.family_figure over the shipped cards) as a PNG file; None when
        none ships. Drawn once (about a second: many curves and a constrained layout), then kept."""
        with self._family_lock:
            if (self._family is None or not self._touch(Path(self._family).stem)) and self.has_family():
                self._family = self.figure_file(render.family_figure(family.family_cards(self.explorer.models_dir)))
            return self._family

    # ------------------------------------------------------------------ start-up

    def warm_up(self, settings: Settings, lab_d_k: int = DEFAULT_UNTRAINED["d_k"], lab_keys: int = 16) -> None:
        """Run the default model and every renderer once, so the first user does not pay for it."""
        kind = "encoder.self_attn"
        self.visualize(settings, kind, 0, 0)
        self._head_image(settings, kind, 0, 0, False)  # the exported head: loads the font
        self.steps(settings, kind, 0, 0)
        self.compare(settings, "scaling", kind, 0, 0)
        self.dk_lab(lab_d_k, lab_keys, True)
        self.family_curves()


# ---------------------------------------------------------------------- texts


def grid_cell(shape: tuple[int, ...]) -> int:
    """Pixels per weight so the grid of [L, H, Q, K] is about GRID_WIDTH wide (1 to 16)."""
    _, n_heads, _, n_k = shape
    return max(1, min(16, GRID_WIDTH // (n_heads * n_k)))


def head_title(settings: Settings, kind: str, layer: int, head: int) -> str:
    """Two short lines over one head: which attention, layer and head, and how QKᵀ was scaled."""
    return f"{KINDS[kind]}, layer {layer}, head {head}\nQKᵀ {scaling_text(settings)}"


def scaling_text(settings: Settings) -> str:
    """How QKᵀ was scaled, in words: "×1/√16 = 0.25", "unscaled", "×0.1 (custom)"."""
    if settings.scale == "sqrt_dk":
        return f"×1/√{settings.d_k} = {scale_factor('sqrt_dk', settings.d_k):.3g}"
    if settings.scale == "none":
        return "unscaled"
    return f"×{settings.scale:g} (custom)"


def output_text(run: Run) -> str:
    """The output box: the generated string, or a note that an untrained model has nothing to say."""
    if not run.trained:
        return f"(untrained model: no meaningful output; greedy decoding gives {run.output!r})"
    return run.output if run.finished else f"{run.output} … (no <eos> after {len(run.generated)} tokens)"


def run_notes(run: Run) -> str:
    """Markdown notes on a run: which model, d_k, scaling, masks, and the output against the task."""
    s, c = run.settings, run.config
    lines = []
    if run.card is None:
        lines.append(
            f"**Untrained model** (random weights, seed 0): d_model {c.d_model}, h {c.n_heads}, d_k {c.d_k}, "
            f"d_v {c.d_v}, N {c.n_encoder_layers}. Its output is noise; the maps show attention before any learning."
        )
    else:
        card = run.card
        accuracy = card.get("heldout_exact_match")
        trained = "1/√d_k" if card.get("scale") == "sqrt_dk" else "no scaling"
        lines.append(
            f"**{card.get('task', 'model')}**, checkpoint `{card['name']}`: d_model {c.d_model}, h {c.n_heads}, "
            f"d_k {c.d_k}, N {c.n_encoder_layers}, trained with {trained}"
            + (f", held-out exact match {accuracy:.1%}." if isinstance(accuracy, (int, float)) else ".")
        )
        if (s.scale == "sqrt_dk") != (card.get("scale") == "sqrt_dk"):
            lines.append(f"Running it with scaling {scaling_text(s)}, not as it was trained: watch the output change.")
        alphabet = card.get("alphabet")
        if alphabet:
            new = list(dict.fromkeys(ch for ch in s.text if ch not in alphabet))
            if new:
                lines.append(f"Trained on `{alphabet[0]}`..`{alphabet[-1]}` only; new to it: "
                             + ", ".join(repr(ch) for ch in new) + ".")
        if run.expected is not None:
            verdict = "✓ matches" if run.finished and run.output == run.expected else "✗ differs from"
            lines.append(f"Output `{run.output}` {verdict} the task's answer `{run.expected}`.")
    lines.append(
        f"Scores QKᵀ {scaling_text(s)}; causal mask {'on' if s.causal_mask else 'off'}; "
        f"{s.pad_tokens} pad token{'s' if s.pad_tokens != 1 else ''} with the padding mask "
        f"{'on' if s.padding_mask else 'off'}. Grey cells are masked (weight exactly 0)."
    )
    return "\n\n".join(lines)


def snapped_note(requested: int, settings: Settings) -> str | None:
    """A note when a trained family has no model at the requested d_k and its nearest one is shown."""
    if settings.model == UNTRAINED or requested == settings.d_k:
        return None
    return f"No trained model with d_k = {requested}; showing the nearest, d_k = {settings.d_k}."


def no_difference_reason(what: str, kind: str, settings: Settings) -> str:
    """Why switching `what` leaves this head unchanged."""
    if what == "causal_mask" and kind == "encoder.self_attn":
        return "the causal mask exists only in decoder self-attention, and the encoder runs before the decoder."
    if what == "padding_mask" and settings.pad_tokens == 0:
        return "there are no pad tokens; add some with the pad-tokens slider."
    if what == "padding_mask" and kind == "decoder.self_attn":
        return "the pads are in the source, which decoder self-attention never sees."
    if what == "scaling" and settings.d_k == 1:
        return "with d_k = 1 the factor 1/√d_k is 1."
    return "this head's weights are the same either way."


def lab_numbers(d_k: int, n_keys: int) -> list[list]:
    """The lab's numbers for one d_k: variance of the logits, and one softmax row's saturation, both modes."""
    rows = []
    variances = [float(lab.dot_products(d_k, LAB_SAMPLES, LAB_SEED, scaled).var()) for scaled in (False, True)]
    rows.append(["variance of the logits", *[round(v, 3) for v in variances], f"{d_k} and 1"])
    rows_by_mode = [lab.softmax_row(d_k, n_keys, scaled, LAB_SEED)[1] for scaled in (False, True)]
    rows.append(["max softmax weight (one query)", *[round(float(p.max()), 4) for p in rows_by_mode],
                 f"uniform: {1 / n_keys:.4f}"])
    rows.append(["entropy, nats (one query)", *[round(float(lab.entropy(p)), 4) for p in rows_by_mode],
                 f"uniform: {math.log(n_keys):.4f}"])
    rows.append(["‖∂softmax/∂logits‖ (one query)",
                 *[float(f"{float(lab.softmax_jacobian_norm(p)):.4g}") for p in rows_by_mode],
                 f"uniform: {math.sqrt(1 / n_keys - 1 / n_keys**2):.4f}; one-hot: 0"])
    return rows


__all__ = [
    "COLOUR_SCALES", "COMPARISONS", "LAB_HEADERS", "LabView", "Views", "Visualization", "lab_numbers",
    "output_text", "run_notes", "scaling_text", "snapped_note",
]
