"""Pictures and recordings through the real models that read them (hub.images, hub.speech): the Pictures and sound
tab's views, drawn on the server as content-named PNG files (service.pngstore).

    media = MediaViews(real_models, png_store, long_runs=long_runs)
    media.choices()                                   # [(label, "hub:google/vit-base-patch16-224"), ...]
    media.view("hub:google/vit-base-patch16-224", upload_path, "sqrt_dk", 1.0, layer=11, head=3, query=0)
    # {"overlay": png, "heads": png, "rollout": png, "specials": markdown, "notes": markdown}        a picture
    # {"alignment": png, "encoder": long payload, "notes": markdown (the transcript first)}           a recording

- A picture: the chosen head's row of one token (the class token, or the patch clicked) over the picture as the model
  read it (draw.overlay.overlay_pixels: a click on it finds its patch, query_at); every head of the layer from that
  token, each a panel (draw.overlay.overlay_figure); the rollout over the layers from it; the special tokens' weights
  (class, distillation, registers) as a table of their own, since they have no place in the picture.
- A recording: the transcript Whisper writes greedily; the chosen decoder layer's and head's encoder-decoder
  attention, one row per decoder step under the log-mel spectrogram on one time axis (the alignment); the encoder's
  self-attention as the Long text tab's view (explorer.long_pack's payload: every head's summary, the chosen head's
  overview, exact regions asked of LongRuns.view): Whisper's encoder read by the long pass (hub.long: its q, k and
  lse kept on the temporary disk, within service.long_runs' budget for every long run), its decoder by the greedy
  pass, which records the decoder's maps only. No 1,500 x 1,500 map a head is held for all heads and layers: the
  run holds the decoder's and cross maps, the features, and the kept run's id.
- The scaling switches as on text (1/√d_k, off, a custom factor); d_k is the model's own (its weights fix it).
- Runs: one per (model, file, scaling), MEDIA_RUNS_KEPT of them for all visitors (least recently used dropped),
  each computed once, on the model's run line (service.real_models): one piece of a model's work at a time, as the
  queue's line for that model (server/admission.py) already orders them; a second asker of the same run waits for it
  holding no lock (at most BUSY_WAIT_S). No lock is held across a pass, a file read or a drawing. Every refusal is a ValueError whose sentence names
  the limit or the fault (hub.images, hub.speech: not a picture, damaged, too many pixels, too large; a recording
  longer than the model's window is cut, and the notes say so).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from importlib import resources

import numpy as np

from attention_viz.core.rollout import rollout
from attention_viz.core.variation import Variation
from attention_viz.draw.overlay import overlay_figure, overlay_pixels
from attention_viz.draw.spectrogram import alignment_figure
from attention_viz.explorer.html import explorer_html
from attention_viz.explorer.long_pack import pack_long
from attention_viz.explorer.pack import decode_written, pack
from attention_viz.service.checks import check_choice, check_float, check_int, shown
from attention_viz.service.exports import ExportFolder
from attention_viz.service.limits import (EXPORT_PAGE_BYTES, FACTOR_RANGE, MEDIA_NEW_TOKENS, MEDIA_OVERLAY_SIDE,
                                          MEDIA_RUNS_KEPT, SCALE_CHOICES, SCALE_LABELS)
from attention_viz.service.long_runs import LongRuns
from attention_viz.service.pngstore import PngStore
from attention_viz.service.real_models import BUSY_WAIT_S, RealModels, display_name

PICTURES, RECORDINGS = "pictures", "recordings"


@dataclass
class _Kept:
    """One run of a picture or a recording, as its views need it."""

    run: object                      # hub.text_run.TextRun of the picture or recording (a recording's decoder and
    #                                  cross maps only); its notes say what reading it changed
    values: np.ndarray | None = None  # what the model read: a picture as it saw it [H, W, 3] uint8, or a recording's
    #                                   log-mel features [mels, frames]
    variation: Variation | None = None  # the run's switches (a recording's encoder is read again under them if its
    #                                     kept long run was dropped)
    encoder: dict | None = None      # a recording's encoder: pack_long's payload of its long run, with "run" (its id
    #                                  in LongRuns) and "model"; no overview (each view asks for its head's)
    done: threading.Event = field(default_factory=threading.Event)  # set once computed, or refused
    refusal: str = ""                # why it could not be computed, for those who waited for it


class MediaViews:
    """The views of pictures and recordings on one server's real models (thread-safe)."""

    def __init__(self, real: RealModels, store: PngStore, exports: ExportFolder | None = None,
                 kept: int = MEDIA_RUNS_KEPT, long_runs: LongRuns | None = None) -> None:
        self.real, self.store, self.exports, self.kept = real, store, exports, kept
        self.long = long_runs if long_runs is not None else LongRuns(real)  # a recording's encoder runs, kept there
        self._runs: OrderedDict[tuple, _Kept] = OrderedDict()  # run key -> kept, least recently used first
        self._lock = threading.Lock()  # guards _runs only (never held across a pass or a drawing)

    def choices(self) -> list[tuple[str, str]]:
        """(label, value) of the real models set up here that read pictures or recordings (their configs say so)."""
        return [(f"{self.real.label(key)[:-len(' (real model)')]} ({self.real.reads(key)})", key)
                for key in self.real.media_keys]

    @property
    def picture_keys(self) -> list[str]:
        """The models set up here that read pictures, in set-up order."""
        return [key for key in self.real.media_keys if self.real.reads(key) == PICTURES]

    def sample(self) -> str:
        """The sample picture (a scene drawn for the app: data/sample_picture.png) as a file of the PNG store, which
        the app serves: the picture input's first value, and the lesson's."""
        from PIL import Image

        with Image.open(resources.files("attention_viz.data").joinpath("sample_picture.png")) as image:
            return self.store.png_file(np.asarray(image.convert("RGB")))

    def reads(self, key: object) -> str:
        """PICTURES or RECORDINGS: what the model `key` reads (a ValueError for a model not offered here)."""
        if key not in self.real.media_keys:
            offered = ", ".join(display_name(k) for k in self.real.media_keys) or "none"
            raise ValueError(f"Unknown model {shown(key)} for pictures and recordings; this server's: {offered}.")
        return self.real.reads(key)

    def model(self, key: object):
        """The loaded model `key` (loading it first if need be; its refusal as a ValueError)."""
        self.reads(key)
        return self.real.get(key)

    def shape(self, key: object) -> tuple[int, int, int]:
        """(layers, heads, d_k) as the views offer them (n_layers), from the loaded model or else its config (nothing
        loaded: the page is built with them)."""
        self.reads(key)
        if self.real.loaded(key):
            model = self.real.get(key)
            return n_layers(model), model.n_heads, model.d_k
        from attention_viz.hub.images import vision_config  # the hub extra: its config was read to offer the model
        from attention_viz.hub.loading import cached_config

        config = cached_config(self.real.names[display_name(key)])
        vision = vision_config(config)
        if vision is not None:
            heads = int(vision.num_attention_heads)
            return int(vision.num_hidden_layers), heads, int(vision.hidden_size) // heads
        heads = min(int(config.encoder_attention_heads), int(config.decoder_attention_heads))
        return min(int(config.encoder_layers), int(config.decoder_layers)), heads, int(config.d_model) // heads

    def query_at(self, key: object, x: object, y: object) -> int:
        """The token a click at pixel (x, y) of the overlay picks: the patch under it (its index among the tokens)."""
        model = self.model(key)
        patches = model.modality
        if self.reads(key) != PICTURES:
            raise ValueError(f"{display_name(key)} reads recordings: there is no patch to click.")
        side = patches.patch * zoom_of(patches)
        rows, columns = patches.grid
        row = check_int("the row clicked", int(y) // side if isinstance(y, (int, float)) else y, 0, rows - 1)
        column = check_int("the column clicked", int(x) // side if isinstance(x, (int, float)) else x, 0, columns - 1)
        return len(patches.specials) + row * columns + column

    def run(self, key: object, path: str, scale_mode: object = "sqrt_dk", factor: object = 1.0):
        """The run views are drawn from (hub.text_run.TextRun; a recording's encoder maps pooled), kept as view's."""
        reads, model = self.reads(key), self.model(key)
        mode = check_choice("scaling", scale_mode, SCALE_CHOICES)
        custom = check_float("custom scale factor", factor, *FACTOR_RANGE)
        return self._run(key, model, reads, path, Variation(custom if mode == "custom" else mode)).run

    def view(self, key: object, path: object, scale_mode: object = "sqrt_dk", factor: object = 1.0,
             layer: object = 0, head: object = 0, query: object = 0) -> dict:
        """The views of the file at `path` (an upload the server took) through the model `key`, at these settings."""
        reads, model = self.reads(key), self.model(key)
        if not isinstance(path, str) or not path:
            raise ValueError("Upload a picture first (or use the sample)." if reads == PICTURES
                             else "Record or upload a recording first.")
        mode = check_choice("scaling", scale_mode, SCALE_CHOICES)
        custom = check_float("custom scale factor", factor, *FACTOR_RANGE)
        variation = Variation(custom if mode == "custom" else mode)
        layer = check_int("layer", layer, 0, n_layers(model) - 1)
        head = check_int("head", head, 0, model.n_heads - 1)
        kept = self._run(key, model, reads, path, variation)
        what = f"d_k = {model.d_k}: this model's own (its weights fix it); scaling: {run_scale(mode, custom)}"
        if reads == PICTURES:
            query = check_int("query token", query, 0, model.modality.length - 1)
            return self._picture(model, kept, layer, head, query, what)
        return self._recording(key, model, kept, layer, head, what)

    def explorer(self, key: object, path: object, scale_mode: object = "sqrt_dk", factor: object = 1.0,
                 client: str | None = None) -> list:
        """A picture's run as the explorer's one HTML file (every map of every layer and head over the tokens, offline,
        as av.show draws it), written to the export folder counted against `client`; its path, in a list. A recording
        is refused: its 1,500 x 1,500 encoder maps are kept pooled, and make no file of a size to open."""
        if self.reads(key) != PICTURES:
            raise ValueError("The explorer page is a picture's: a recording's encoder maps (1,500 x 1,500 a head) "
                             "are too large for one file; av.show(model, recording) draws them in a notebook.")
        if not isinstance(path, str) or not path:
            raise ValueError("Upload a picture first (or use the sample).")
        model, run = self.model(key), self.run(key, path, scale_mode, factor)
        notes = [f"{model.name} ({model.family.name}, real model), scaling {run_scale(scale_mode, factor)}",
                 f"Our Eq. 1 inside it: {model.fidelity}.", *run.notes]
        page = explorer_html(pack(run.maps, model.input_axis(), [], masks=run.masks, notes=notes,
                                  title=f"a picture on {model.name}"), document=True, title="attention explorer")
        data = page.encode()
        if len(data) > EXPORT_PAGE_BYTES:
            raise ValueError(f"This model's explorer page would be {len(data) / 2**20:.0f} MB, past the export's "
                             f"{EXPORT_PAGE_BYTES / 2**20:.0f} MB: av.show(model, picture) draws it in a notebook.")
        return [str(p) for p in self.exports.write({f"{display_name(key).replace('/', '_')}_explorer.html": data},
                                                   client)]

    # -- the runs

    def _run(self, key: str, model, reads: str, path: str, variation: Variation) -> _Kept:
        try:
            stat = os.stat(path)
        except OSError:
            raise ValueError("The file is no longer on the server: upload it again.") from None
        run_key = (key, path, stat.st_size, stat.st_mtime_ns, variation)
        with self._lock:
            kept = self._runs.get(run_key)
            computes = kept is None
            if computes:
                kept = self._runs[run_key] = _Kept(None)
            self._runs.move_to_end(run_key)
            while len(self._runs) > self.kept:
                self._runs.popitem(last=False)
        if not computes:  # another asker computes it: wait for it, holding nothing
            if not kept.done.wait(BUSY_WAIT_S):
                raise ValueError(f"This model is busy with other visitors' work (over {BUSY_WAIT_S:.0f} s): try "
                                 "again in a minute.")
            if kept.run is None:
                raise ValueError(kept.refusal)
            return kept
        try:
            kept.run, kept.values = self._compute(key, model, reads, path, variation)
            kept.variation = variation
            if reads == RECORDINGS:
                self._encoder(key, model, kept)
        except Exception as error:
            kept.refusal = str(error) if isinstance(error, ValueError) else "The server could not read it."
            with self._lock:
                if self._runs.get(run_key) is kept:
                    del self._runs[run_key]
            raise
        finally:
            kept.done.set()
        return kept

    def _compute(self, key: str, model, reads: str, path: str, variation: Variation):
        """The run and what the model read, the file decoded once (within the modality's limits) for both."""
        from attention_viz.hub import images, speech, text_run  # the hub extra: a real model means it is installed

        with self.real.line(key):
            try:
                if reads == PICTURES:
                    source, cut = images.read_image(path), ""
                else:  # the window's samples at the model's rate, and where a longer recording was cut
                    samples, cut = speech.read_audio(path, model.modality.rate, model.modality.seconds)
                    source = (samples, model.modality.rate)
                run = text_run.run_media(model, source, max_new_tokens=MEDIA_NEW_TOKENS, variation=variation,
                                         encoder_maps=reads == PICTURES)  # a recording's encoder: _encoder
                values = model.encode(source).ids  # what the run read: [C, H, W] pixels or [mels, frames]
            except ValueError as refusal:
                said = misfit(path, reads, display_name(key)) or f"Not read: {str(refusal).rstrip('.')}."
                raise ValueError(said) from None
        if cut:
            run = replace(run, notes=(cut, *run.notes))
        if reads == PICTURES:
            return run, model.modality.seen(values)
        return run, values.float().cpu().numpy()

    def _encoder(self, key: str, model, kept: _Kept) -> None:
        """A recording's encoder read by the long pass (its q, k and lse kept on the temporary disk) and kept in
        LongRuns, under the run's switches: kept.encoder its payload (summaries, labels: the positions' times)."""
        import torch

        from attention_viz.hub.words import labels  # the hub extra, as _compute's

        with self.real.line(key):
            run = model.long_run(torch.from_numpy(kept.values), kept.variation, keep="disk")  # (mels, frames) read
        try:
            frames = model.modality
            step = frames.seconds / frames.positions
            title = (f"{model.name}'s encoder: {run.length:,} positions of {step * 1000:.0f} ms ({frames.seconds:g} s), "
                     f"{len(run.keys)} layers x {run.n_heads} heads")
            payload = pack_long(run, labels(frames.tokens()), read=run.length, of=run.given, title=title)
        except Exception:
            run.close()
            raise
        payload["seconds"] = model.input_axis().seconds  # each position's: the view writes its spans as times
        again = "press Read it to read the recording again"  # its view reads the encoder again (_encoder_view)
        payload["run"], payload["model"] = self.long.keep(run, key, again), key  # within the long runs' budget
        kept.encoder = payload

    def _encoder_view(self, key: str, model, kept: _Kept, layer: int, head: int) -> dict:
        """The long view's payload with the chosen encoder head's overview (LongRuns.view, as the page asks it); the
        encoder read again where its kept run was dropped to make room for other long runs."""
        for attempt in range(2):
            payload = kept.encoder
            overview = self.long.view({"run": payload["run"], "what": "overview", "key": f"encoder.{layer}.self_attn",
                                       "head": head})
            if "error" not in overview:
                return {**payload, "overview": overview}
            if attempt == 0 and payload["run"] not in self.long:
                self._encoder(key, model, kept)
        raise ValueError(overview["error"])

    # -- the views

    def _picture(self, model, kept: _Kept, layer: int, head: int, query: int, what: str) -> dict:
        patches, run = model.modality, kept.run
        specials, grid = list(patches.specials), patches.grid
        weights = run.maps[f"encoder.{layer}.self_attn"]  # (H, T, T)
        looks = run.src_tokens[query]
        marked = query - len(specials) if query >= len(specials) else None
        overlay = overlay_pixels(kept.values, weights[head, query], grid, len(specials), marked, zoom_of(patches))
        heads = overlay_figure(kept.values, weights[:, query], grid, specials,
                               [f"H{h}" for h in range(weights.shape[0])], f"layer {layer}: where {looks} looks")
        mixed = rollout({k: v[None] for k, v in run.maps.items()})[0]  # (T, T)
        rolled = overlay_figure(kept.values, mixed[query][None], grid, specials, ["rollout"],
                                f"rollout over {n_layers(model)} layers from {looks}")
        notes = (f"**{model.name}** ({model.family.name}): {patches.length} tokens, "
                 f"{len(specials) and ', '.join(specials) + ' and '}{grid[0]} x {grid[1]} patches of "
                 f"{patches.patch} px. "
                 f"Layer {layer}, head {head}, from **{looks}**: the colour is each patch's weight ÷ the largest on "
                 f"a patch ({weights[head, query, len(specials):].max():.3f}); click a patch to look from it. {what}. "
                 f"Our Eq. 1 inside it: {model.fidelity}." + "".join(f" {note}" for note in run.notes))
        return {"overlay": self.store.png_file(overlay), "heads": self.store.figure_file(heads),
                "rollout": self.store.figure_file(rolled), "specials": specials_table(weights[:, query], specials,
                                                                                     looks, layer),
                "notes": notes, "query": query}

    def _recording(self, key: str, model, kept: _Kept, layer: int, head: int, what: str) -> dict:
        frames, run = model.modality, kept.run
        features = kept.values  # (mels, frames)
        cross = run.maps[f"decoder.{layer}.cross_attn"][head]  # (Q, K)
        rows = decode_written(list(run.written), list(run.tgt_tokens), True) or list(run.tgt_tokens)  # each row writes
        alignment = alignment_figure(features, cross, rows, frames.seconds,
                                     f"decoder layer {layer}, head {head}: each row's encoder-decoder attention")
        encoder = self._encoder_view(key, model, kept, layer, head)
        step = frames.seconds / frames.positions
        named = [tuple(pair) for pair in getattr(model.model.generation_config, "alignment_heads", None) or []]
        among = ("" if not named else
                 f" Its generation config names {len(named)} alignment heads, whose rows word timestamps are read from "
                 f"({', '.join(f'L{layer}·H{head}' for layer, head in named)}): this one is "
                 f"{'one of them' if (layer, head) in named else 'not among them'}.")
        notes = (f"**Transcript**: “{run.output.strip() or '(nothing written)'}”\n\n"
                 f"**{model.name}** ({model.family.name}): {frames.positions:,} encoder positions of "
                 f"{step * 1000:.0f} ms ({frames.seconds:g} s heard at once); the decoder's {len(run.tgt_tokens)} rows "
                 f"are its prompt and what it wrote. The encoder's self-attention below: every head's summary, the "
                 f"chosen head's whole map at {encoder['overview']['side']} x {encoder['overview']['side']} cells "
                 f"(each the largest weight of a block of {encoder['overview']['block']} x "
                 f"{encoder['overview']['block']} positions), and the exact weights of any region dragged on it.{among} "
                 f"{what}. "
                 f"Our Eq. 1 inside it: {model.fidelity}." + "".join(f" {note}" for note in run.notes))
        return {"alignment": self.store.figure_file(alignment), "encoder": encoder, "notes": notes}


def run_scale(scale_mode: object, factor: object) -> str:
    """The scaling as the notes name it (values checked by the run before)."""
    return f"a factor of {float(factor):g}" if scale_mode == "custom" else SCALE_LABELS[scale_mode]


def n_layers(model) -> int:
    """The layers a view's slider offers: the encoder's (an image model), or those both of Whisper's stacks have."""
    encoder, decoder = model.n_layers("encoder.self_attn"), model.n_layers("decoder.self_attn")
    return min(encoder, decoder) if decoder else encoder


def zoom_of(patches) -> int:
    """The whole factor the overlay's picture is zoomed by: about MEDIA_OVERLAY_SIDE pixels on its longer side."""
    return max(1, MEDIA_OVERLAY_SIDE // max(patches.size))


def specials_table(rows: np.ndarray, specials: list[str], looks: str, layer: int) -> str:
    """rows [H, T]: each head's weight from the token that looks on each special token and on the patches together,
    as a Markdown table (the special tokens have no place in the picture)."""
    if not specials:
        return "This model has no special tokens: every token is a patch (a pooling head of its own reads them)."
    header = "| head | " + " | ".join(f"`{s}`" for s in specials) + " | every patch |\n"
    line = "|---|" + "---:|" * (len(specials) + 1) + "\n"
    body = "".join(f"| H{h} | " + " | ".join(f"{w:.3f}" for w in row[:len(specials)])
                   + f" | {row[len(specials):].sum():.3f} |\n" for h, row in enumerate(rows))
    return f"Layer {layer}: the weight {looks} gives each special token, and all patches together.\n\n" + header \
        + line + body


def misfit(path: str, reads: str, name: str) -> str | None:
    """A sentence where the file is of the other kind (a picture given to a speech model, or the reverse)."""
    if reads == RECORDINGS:
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(path):  # the header only
                return f"This file is a picture; {name} reads recordings. Pick an image model, or give it a recording."
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            return None
    import soundfile

    try:
        soundfile.info(path)
    except (soundfile.LibsndfileError, RuntimeError, TypeError, ValueError):
        return None
    return f"This file is a recording; {name} reads pictures. Pick a speech model, or give it a picture."
