"""What the app shows, composed from runs (runs.py) with draw/ and explorer/: packed runs, images, tables, texts.

No Gradio here: every method takes plain values, validates them (ValueError with a message for the
user) and returns packed runs (dicts), PNG files, rows and Markdown, so tests call it exactly as the app does.
The Transformer view is one packed run (attention_viz.explorer.pack): every map of every kind, layer and
head, which the browser draws, so a change of kind, layer, head or colour scale never reaches the server.
The steps of one head and its comparisons are numbers too (attention_viz.explorer.steps), drawn by the browser.
Images (exports, the lab) are encoded once into a PngStore; the caches keep the file names (a few bytes each).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_viz.core.maps import KINDS
from attention_viz.data.snapshots import load_study_summary
from attention_viz.draw import png, raster, sheet, vector
from attention_viz.explorer.html import explorer_html
from attention_viz.explorer.pack import decode_written, pack
from attention_viz.service.long_runs import LongRuns
from attention_viz.service.media_view import MediaViews
from attention_viz.service.scores import score_kind, task_alignment
from attention_viz.service.stacks import stack_views
from attention_viz.explorer.steps import pack_compare, pack_pair, pack_steps
from attention_viz.service.checks import check_int
from attention_viz.service.exports import ExportFolder, head_csv, maps_npz
from attention_viz.service.lab_view import LabData, LabView
from attention_viz.service.limits import (
    D_K_RANGE,
    DEFAULT_UNTRAINED,
    EXPORT_PAGE_BYTES,
    GRID_WIDTH,
    IMAGE_CACHE_SIZE,
    LAB_D_K,
    LAB_KEYS,
    LAYER_HEAD_LIMIT,
    PACKED_CACHE_BYTES,
    STEPS_KEPT,
)
from attention_viz.service.heads_view import HeadsView
from attention_viz.service.induction import Induction
from attention_viz.service.models import ModelControls
from attention_viz.service.pngstore import PngStore
from attention_viz.service.qk_view import OwnQK
from attention_viz.service.requests import Settings, parse_colour_scale
from attention_viz.service import pairs, study_view, training_view
from attention_viz.service.catalog import SizedCache
from attention_viz.service.runs import Runs
from attention_viz.service.texts import (
    heads_off_note,
    ADDITIVE,
    code,
    export_record,
    export_stem,
    head_title,
    no_difference_reason,
    signed,
    run_notes,
    run_title,
    scaling_text,
    settings_record,
    snapped_note,
)


EXPORT_SCALE = 2  # the exported head's lengths and fonts, times: a file read on its own (452 px wide was too small)

@dataclass(frozen=True)
class Visualization:
    """The Transformer view for one input: everything the browser draws, and the texts beside it."""

    run: dict                   # the packed run (explorer.pack's format, plus "settings"): tokens, every map of
                                # every kind, layer and head, masks, statistics, output and notes; shared
                                # through the cache, so never mutated
    output: str                 # the output box: the model's output string (or why there is none)
    info: str                   # Markdown: model, d_k, scaling, masks, output against the task


class Views:
    """The app's figures and texts for one server; caches rendered images and owns the export folder.

    Args:
        runs: the runs and models (created once at start-up).
        image_cache_size: rendered images kept per kind of figure (as the names of their PNG files).
    """

    def __init__(self, runs: Runs, image_cache_size: int = IMAGE_CACHE_SIZE) -> None:
        self.runs = runs
        self.exports = ExportFolder()
        self.heads = HeadsView(runs, self.exports)  # which heads matter: importance, prune curve, CSV
        self.induction = Induction(runs)  # induction heads on a repeated random sequence, per model, on demand
        self.store = PngStore(self.exports.root / "images")
        self.lab = LabData()
        self.own_qk = OwnQK(runs.catalog)  # the lab's "this model's own q·k" (footnote 4 on a trained model)
        self.long = LongRuns(runs.catalog.real)  # a real model reading a page: its line, its kept runs' budget
        # pictures and recordings (the models that read them); a recording's encoder runs kept with the long runs
        self.media = MediaViews(runs.catalog.real, self.store, self.exports, long_runs=self.long)
        self._packed = SizedCache(self._pack, PACKED_CACHE_BYTES, packed_size)
        self._training = functools.lru_cache(maxsize=8)(lambda d_k: training_view.training_data(self.runs.catalog, d_k))
        self._grid = functools.lru_cache(maxsize=image_cache_size)(self._render_grid)
        self._head_image = functools.lru_cache(maxsize=image_cache_size)(self._render_head)
        self._steps = functools.lru_cache(maxsize=STEPS_KEPT)(self._steps_view)

    @property
    def export_root(self) -> Path:
        """The temporary folder this server writes exports to (removed when the Views is collected)."""
        return self.exports.root

    @property
    def image_dir(self) -> Path:
        """The folder of the PNG files (only images, each written once): the app serves it as it is."""
        return self.store.folder

    def png_file(self, image: np.ndarray, palette: np.ndarray | None = None) -> str:
        """PngStore.png_file: the image as a content-named PNG file; its path."""
        return self.store.png_file(image, palette)

    # ------------------------------------------------------------------ transformer view

    def model_controls(self, model: object, d_k: object, layer: object = 0, head: object = 0,
                       n_heads: object = DEFAULT_UNTRAINED["n_heads"], progress=None) -> ModelControls:
        """The controls a model choice gets (its d_k, layer and head ranges, its training scale, which switches act;
        Catalog.controls asks its kind); a real model is loaded here the first time it is picked, telling
        progress(fraction, text) how its download goes. n_heads: the untrained model's (checked by it)."""
        catalog = self.runs.catalog
        d_k = catalog.default_d_k(model) if d_k is None else check_int("d_k", d_k, *D_K_RANGE)
        layer, head = check_int("layer", layer, 0, LAYER_HEAD_LIMIT), check_int("head", head, 0, LAYER_HEAD_LIMIT)
        return catalog.controls(model, d_k, layer, head, n_heads, progress)

    def visualize(self, settings: Settings, requested_d_k: object = None) -> Visualization:
        """The packed run (every kind, layer and head: the browser draws each view from it), the output and notes.

        requested_d_k: the d_k the user asked for, to say so when a trained family snapped it to another.
        """
        run = self.runs.run(settings)
        model = self.runs.attention_model(settings)
        requested = settings.d_k if requested_d_k is None else check_int("d_k", requested_d_k, *D_K_RANGE)
        packed = self._packed(settings)
        snapped = snapped_note(requested, settings, model.abilities.d_k_fixed)
        if snapped:
            packed = {**packed, "notes": [snapped, *packed["notes"]]}
        return Visualization(run=packed, output=model.output_text(run), info="\n\n".join(packed["notes"]))

    def _pack(self, settings: Settings) -> dict:
        """A run packed once for the browser (cached by settings, as the runs are)."""
        run = self.runs.run(settings)
        model = self.runs.attention_model(settings)
        task = run.card.get("task") if run.card else None
        aligned = task_alignment(task, run.settings.text)
        scores = {kind: score_kind(kind, run.weights(kind), run.mask(kind), *run.tokens(kind), aligned, task,
                                   sink=model.sink)
                  for kind in run.kinds}
        notes = run_notes(run, model.notes(run)).split("\n\n")
        if settings.heads_off:
            on = self.runs.run(settings.switched(heads_off=(), ablation="zero"))
            notes.insert(1, heads_off_note(run, on))
        packed = pack(run.maps, run.src_tokens, run.tgt_tokens, masks={kind: run.mask(kind) for kind in run.kinds},
                      output=run.output, notes=notes, title=run_title(run), scores=scores,
                      decode=self._decode(run), heads_off=settings.off, ablation=settings.ablation,
                      value_norms=self.runs.value_norms(run),
                      stacks=stack_views(run.maps, encoder_decoder=bool(run.src_ids and run.tgt_ids)),
                      biases=run.biases, position_bias=settings.position_bias)
        packed["settings"] = settings_record(settings)
        return packed

    def _decode(self, run) -> dict | None:
        """The decode the explorer steps through (explorer.pack.decode_written); None for a model that wrote nothing."""
        written = decode_written(run.generated, run.tgt_tokens if run.tgt_ids else [], decoder_only=not run.src_ids)
        return None if written is None else {"written": written, "steps": self.runs.step_maps(run)}

    def grid_file(self, settings: Settings, kind: object, colour_scale: object = "absolute") -> str:
        """Every layer x head of one kind as a PNG file (the export's grid; the page draws its own)."""
        kind = self.runs.run(settings).head_request(kind, 0, 0).kind
        return self.store.kept_file(self._grid, settings, kind, parse_colour_scale(colour_scale))

    def _render_grid(self, settings: Settings, kind: str, per_head: bool) -> str:
        run = self.runs.run(settings)
        masked = np.where(run.mask(kind), run.weights(kind), np.nan)  # (L, H, Q, K); masked cells grey
        queries, keys = run.tokens(kind)
        title = f"{run_title(run)}\n{KINDS[kind]}: every layer (rows) × head (columns)"
        return self.store.png_file(sheet.grid_sheet(masked, queries, keys, title, cell=grid_cell(masked.shape),
                                                    per_head_max=per_head))

    def _render_head(self, settings: Settings, kind: str, layer: int, head: int, per_head: bool) -> str:
        run = self.runs.run(settings)
        queries, keys = run.tokens(kind)
        return self.store.png_file(raster.head_image(run.head(kind, layer, head), queries, keys,
                                                     head_title(settings, kind, layer, head), mask=run.mask(kind),
                                                     per_head_max=per_head, scale=EXPORT_SCALE))

    def steps(self, settings: Settings, kind: object, layer: object, head: object) -> tuple[dict, str]:
        """Figure 2 (left) for one head as numbers (explorer.steps.pack_steps: QKᵀ, scaled, masked, softmax,
        weights·V, the mask, d_k and the factor), which the browser draws, and a line on what each panel is; the
        last STEPS_KEPT are kept (a student opens the steps of one run again and again; never mutated)."""
        request = self.runs.run(settings).head_request(kind, layer, head)
        return self._steps(settings, request.kind, request.layer, request.head)

    def steps_at_once(self, settings: Settings, kind: object, layer: object, head: object) -> tuple[dict, str] | None:
        """steps, where they take a few ms at most: the run of `settings` is kept, and is a trained family's (a
        shipped checkpoint, loaded once and kept; its steps run the stacks of a d_model-64 Transformer up to one
        layer: 4-7 ms); else None, computing nothing (a new run takes tens of ms, and so may a real model's stacks
        or an untrained model too wide to keep, built again)."""
        if settings.model not in self.runs.catalog.families or self.runs.run.kept(settings) is None:
            return None
        return self.steps(settings, kind, layer, head)

    def _steps_view(self, settings: Settings, kind: str, layer: int, head: int) -> tuple[dict, str]:
        run = self.runs.run(settings)
        request = run.head_request(kind, layer, head)
        steps = self.runs.steps(settings, request.kind, request.layer, request.head)
        title = f"{KINDS[request.kind]}, layer {request.layer}, head {request.head}"
        mask = run.mask(request.kind)
        output = steps.arrays["output"]
        additive = settings.compatibility == "additive"
        first = (f"**{ADDITIVE}** (additive attention, hidden width d_k = {settings.d_k}) → **not scaled** (×1) → "
                 if additive else
                 f"**QKᵀ** (d_k = {settings.d_k}) → **scaled** ×{steps.factor:.4g} ({scaling_text(settings)}) → ")
        text = (
            f"*{title}*: {first}"
            f"**masked**: {int((~mask).sum())} of {mask.size} scores set to −∞ → **softmax** "
            f"(each row sums to 1; −∞ becomes exactly 0) → **weights·V**, this head's output "
            f"[{output.shape[0]} × d_v = {output.shape[1]}]."
        )
        payload = pack_steps(steps.arrays, steps.query_tokens, steps.key_tokens, mask, settings.d_k, steps.factor,
                             scaling_text(settings), request.kind, request.layer, request.head, text)
        if additive:  # the first panels hold w_hᵀ tanh(q_h + k_h), which nothing scales
            payload["panels"][0]["name"], payload["panels"][1]["name"] = ADDITIVE, "not scaled"
        payload["settings"] = settings_record(settings)
        return payload, text

    def compare(
        self, settings: Settings, what: object, kind: object, layer: object, head: object
    ) -> tuple[dict, str]:
        """One head with a switch on and off as numbers (explorer.steps.pack_compare: both maps, a − b, the
        largest change, both outputs), which the browser draws as a difference table, and what changed."""
        request = self.runs.run(settings).head_request(kind, layer, head)
        comparison = self.runs.compare(settings, what, request.kind, request.layer, request.head)
        a, b = comparison.labels
        diff = np.abs(comparison.difference)
        lines = [f"*{KINDS[request.kind]}, layer {request.layer}, head {request.head}*: red, more weight {a}; "
                 f"blue, more weight {b}. Both use the same source and decoder input."]
        if diff.max() == 0:
            lines.append(f"No difference in this head: {no_difference_reason(comparison.what, request.kind, settings)}")
        else:
            i, j = np.unravel_index(diff.argmax(), diff.shape)
            lines.append(
                f"Largest change {signed(comparison.difference[i, j])}: query {i} {code(comparison.query_tokens[i])} → key {j} "
                f"{code(comparison.key_tokens[j])}; mean |change| {diff.mean():.3f}."
            )
        lines.append(f"Output {a}: {code(comparison.outputs[0])}; {b}: {code(comparison.outputs[1])}.")
        text = "\n\n".join(lines)
        payload = pack_compare(comparison.a, comparison.b, comparison.query_tokens, comparison.key_tokens,
                               comparison.what, comparison.labels, comparison.outputs, request.kind, request.layer,
                               request.head, masks=comparison.masks, text=text)
        payload["settings"] = settings_record(settings)
        return payload, text

    def compare_pair(self, a: Settings, b: Settings, what: str, kind: object, layer: object,
                     head: object) -> tuple[dict, str]:
        """One head of two runs (another text, or another model: service.pairs) as numbers (explorer.steps.pack_pair:
        both heads in their own tokens, a − b where the tokens align), which the browser draws, and what changed."""
        comparison, labels, (kind, layer, head) = pairs.compare_runs(self.runs, a, b, what, kind, layer, head)
        difference = comparison.difference[0, 0]  # (Qa, Ka), NaN where a token does not align
        unaligned = pairs.unaligned_sentence(comparison)
        lines = [f"*{KINDS[kind]}, layer {layer}, head {head}*: a = {code(labels[0])}, b = {code(labels[1])}; "
                 "red, more weight in a; blue, more in b.", unaligned]
        if np.isnan(difference).all():
            lines.append("No cell aligns, so there is no difference to show: compare a and b side by side.")
        else:
            i, j = np.unravel_index(np.nanargmax(np.abs(difference)), difference.shape)
            queries, keys = comparison.tokens_a
            lines.append(f"Largest aligned change {signed(difference[i, j])}: query {i} {code(queries[i])} → key {j} "
                         f"{code(keys[j])}; mean |change| over aligned cells {np.nanmean(np.abs(difference)):.3f}.")
        outputs = (self.runs.run(a).output, self.runs.run(b).output)
        lines.append(f"Output a: {code(outputs[0])}; b: {code(outputs[1])}.")
        text = "\n\n".join(lines)
        payload = pack_pair(comparison.a[0, 0], comparison.b[0, 0], difference, comparison.tokens_a, comparison.tokens_b,
                            what, labels, outputs, kind, layer, head, masks=comparison.masks, unaligned=unaligned,
                            text=text)
        payload["settings"] = settings_record(a)
        return payload, text

    def export(self, settings: Settings, kind: object, layer: object, head: object,
               colour_scale: object = "absolute", client: str | None = None, figures: bool = True) -> list[Path]:
        """Write the grid and the head as PNG, every map as .npz, the head as CSV, the run on screen as one HTML file
        (the explorer, offline, as attention_viz.show(...).save writes it) and, with `figures`, the grid and the head
        as SVG and PDF (a paper's figures, text kept as text); returns the paths. `client` (a page's session) keeps
        its last few exports only (ExportFolder).

        Without `figures` the files take tens of ms (the PNGs are kept, the page packed for the view on screen); the
        four figures are matplotlib's, seconds on a real model's grid (docs/benchmarks.md, "Export"), so the page
        asks for them after the first files are shown.

        File names say the model, the text and the view; the PNGs (tEXt chunks), the SVG and PDF (metadata) and the
        CSV (# lines) carry the settings they were made with, the .npz its settings as JSON, the page its notes.
        """
        run = self.runs.run(settings)
        r = run.head_request(kind, layer, head)
        per_head = parse_colour_scale(colour_scale)
        grid_png = Path(self.grid_file(settings, r.kind, colour_scale))
        record = export_record(settings, r.kind, r.layer, r.head, "per_head" if per_head else "absolute",
                               causal="decoder.self_attn" in run.kinds)
        grid_record = {name: value for name, value in record.items() if name not in ("layer", "head")}
        head_png = Path(self.store.kept_file(self._head_image, settings, r.kind, r.layer, r.head, per_head))
        stem = export_stem(settings, r.kind)
        head = f"{stem}__L{r.layer}_H{r.head}"
        files = {
            f"{stem}__grid.png": described_png(grid_png, grid_record),
            f"{head}.png": described_png(head_png, record),
            f"{stem}__maps.npz": maps_npz(run),
            f"{head}.csv": head_csv(run, r.kind, r.layer, r.head, record).encode(),
        }
        if figures:
            figure = self._head_figure(settings, r.kind, r.layer, r.head, per_head)
            grid = self._grid_figure(settings, r.kind, per_head)
            files.update({
                f"{stem}__grid.svg": vector.figure_bytes(grid, "svg", grid_record),
                f"{stem}__grid.pdf": vector.figure_bytes(grid, "pdf", grid_record),
                f"{head}.svg": vector.figure_bytes(figure, "svg", record),
                f"{head}.pdf": vector.figure_bytes(figure, "pdf", record),
            })
        return self.exports.write({**files, **self.explorer_page(settings, f"{stem}__explorer")}, client)

    def _head_figure(self, settings: Settings, kind: str, layer: int, head: int, per_head: bool):
        """One head as a figure for a paper (draw.vector): its tokens on the axes, masked cells grey."""
        run = self.runs.run(settings)
        weights = run.head(kind, layer, head)[None, None]  # (1, 1, Q, K)
        title = f"{run_title(run)}\n{head_title(settings, kind, layer, head)}"
        return vector.grid_figure(weights, *run.tokens(kind), title, (layer,), (head,), mask=run.mask(kind),
                                  per_head_max=per_head)

    def _grid_figure(self, settings: Settings, kind: str, per_head: bool):
        """Every layer x head of one kind as a figure for a paper (draw.vector), as the exported PNG grid shows it."""
        run = self.runs.run(settings)
        weights = run.weights(kind)  # (L, H, Q, K)
        title = f"{run_title(run)}\n{KINDS[kind]}: every layer (rows) × head (columns)"
        return vector.grid_figure(weights, *run.tokens(kind), title, tuple(range(weights.shape[0])),
                                  tuple(range(weights.shape[1])), mask=run.mask(kind), per_head_max=per_head)

    def explorer_page(self, settings: Settings, name: str) -> dict[str, bytes]:
        """The run on screen as one HTML file, {name.html: bytes}: the packed run the page draws, with the explorer's
        scripts and styles inlined (no network); past EXPORT_PAGE_BYTES, {name_too_large.txt: why} instead."""
        page = explorer_html(self._packed(settings), document=True, title="attention explorer").encode()
        if len(page) > EXPORT_PAGE_BYTES:
            return {f"{name}_too_large.txt": (f"The explorer page of this run would be {len(page) / 2**20:.1f} MB, past "
                                              f"the export's {EXPORT_PAGE_BYTES / 2**20:.0f} MB: export a shorter "
                                              "text.\n").encode()}
        return {f"{name}.html": page}

    # ------------------------------------------------------------------ the √d_k lab

    def dk_lab(self, d_k: object, n_keys: object, scaled: object) -> LabView:
        """LabData.view: the lab's numbers for the browser to draw (histogram against the exact law, one query's
        logits and softmax, the sweep over d_k) and the table."""
        return self.lab.view(d_k, n_keys, scaled)

    def training(self, d_k: object) -> dict:
        """The study's three compatibility functions at one trained d_k, step by step (service.training_view: every
        snapshot's maps of the probes, the loss, accuracy and alignment so far), cached per d_k."""
        return self._training(str(d_k).strip())

    def training_sizes(self) -> list[int]:
        """The d_k the training view stops at (each arm of the study has a member there); [] when none ships."""
        return training_view.trained_sizes(self.runs.catalog)

    def study_summary(self) -> dict | None:
        """The compatibility study's summary shipped beside its members (None when none ships)."""
        models_dir = self.runs.catalog.models_dir
        return load_study_summary(None if models_dir is None else Path(models_dir) / "study")

    def study_data(self) -> dict | None:
        """The study's summary as the numbers the page draws (service.study_view; held-out exact match over d_k
        per compatibility and init, the logit spread at step 0), or None when the study does not ship."""
        summary = self.study_summary()
        return None if summary is None else study_view.study_data(summary)

    # ------------------------------------------------------------------ start-up

    def warm_up(self, settings: Settings, lab_d_k: int = LAB_D_K, lab_keys: int = LAB_KEYS) -> None:
        """Run the default model and every renderer once, so the first user does not pay for it."""
        kind = "encoder.self_attn"
        self.visualize(settings)
        self.grid_file(settings, kind)  # the exported grid
        self._head_image(settings, kind, 0, 0, False)  # the exported head: loads the font
        self.steps(settings, kind, 0, 0)
        self.compare(settings, "scaling", kind, 0, 0)
        self.dk_lab(lab_d_k, lab_keys, True)


def text_label(catalog) -> str:
    """The text box's label for our own models: their limits."""
    return f"Text (1 to {catalog.tokenizer.max_len} printable ASCII characters)"


def packed_size(payload: dict) -> int:
    """About the bytes a packed run holds: its base64 maps, the decode's per-step maps, the value norms (a Python
    float and its list slot: ~32 bytes each) and a little for the rest."""
    maps = sum(len(b64) for kind in payload["kinds"] for b64 in kind["maps"])
    maps += 32 * sum(len(row) for kind in payload["kinds"] for layer in kind.get("norms", ()) for row in layer)
    steps = sum(len(b64) for step in payload.get("decode", {}).get("steps", ()) for layers in step.values()
                for b64 in layers)
    return maps + steps + 4096


def described_png(path: Path, record: dict[str, str]) -> bytes:
    """A PNG file's bytes with the settings it was made with as tEXt chunks."""
    return png.png_with_text(path.read_bytes(), {"Software": "attention_viz", **record})


def grid_cell(shape: tuple[int, ...]) -> int:
    """Pixels per weight so the exported grid of [L, H, Q, K] is about GRID_WIDTH wide (1 to 16)."""
    _, n_heads, _, n_k = shape
    return max(1, min(16, GRID_WIDTH // (n_heads * n_k)))
