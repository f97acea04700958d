"""The explorer inline in Jupyter: `show(model, "text")` or `show(maps, source_tokens, ...)`.

The view is an <iframe srcdoc> holding the whole page of html.explorer_html: its own document, so
two views in one notebook never share ids, styles or scripts (the blank-second-view problem of
libraries that mount by a global id), and nothing comes from a CDN. The iframe sizes itself to
its content. Outside Jupyter, `View.save(path)` writes the same page to a file.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from attention_viz.analysis.runs import EXTRA_DECODE_STEPS
from attention_viz.core.attention import Scale
from attention_viz.core.model import Transformer
from attention_viz.core.protocol import AttentionModel
from attention_viz.core.variation import Variation
from attention_viz.data.tokenizer import DEFAULT_MAX_LEN, CharTokenizer
from attention_viz.explorer.html import asset, explorer_html, long_html
from attention_viz.explorer.long_pack import pack_long, pack_offline
from attention_viz.explorer.pack import decode_written, default_masks, pack

_counter = itertools.count()
LONG_FROM = 256         # a real model's text of more tokens than this is shown as a long run (show(..., long=None))
LONG_BYTES = 8 * 2**20  # a long view's embedded overviews at most this many bytes (every head's, at one side)


class View:
    """An explorer ready to show: Jupyter calls `_repr_html_`; `html` is the standalone page."""

    def __init__(self, payload: dict, height: int = 640) -> None:
        self.payload = payload
        self.root_id = f"explorer-{next(_counter)}"
        page = long_html if payload.get("kind") == "long" else explorer_html
        self.html = page(payload, root_id=self.root_id, document=True)
        self.height = height

    def _repr_html_(self) -> str:
        # run inside the iframe: the iframe as tall as its page, now and whenever the page grows
        page = self.html.replace("</body>", f"<script>{asset('autosize.js')}</script></body>")
        return (f'<iframe class="av-notebook-view" title="attention explorer" srcdoc="{html.escape(page, quote=True)}" '
                f'style="width:100%;height:{int(self.height)}px;border:0" loading="eager"></iframe>')

    def save(self, path: str | Path) -> Path:
        """Write the standalone page (opens offline in any browser)."""
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path


def run_model(model: Transformer, text: str, scale: Scale = "sqrt_dk", causal_mask: bool = True,
              padding_mask: bool = True, pad_tokens: int = 0, max_len: int | None = None,
              tokenizer: CharTokenizer | None = None) -> dict:
    """Greedy-decode `text` with `model` and pack the maps of the last step (as the app's runs do).

    The decoder's input is <bos> + the output but its last token, so row t of a decoder map is the step
    that produced output token t; the payload's decode lets the explorer step through them (with each step's
    own maps when the causal mask is off).
    """
    variation = Variation(scale, causal_mask, padding_mask)  # checked before any work
    tok = tokenizer or CharTokenizer(max_len=max(DEFAULT_MAX_LEN, len(text)))
    encoding = tok.encode(text)
    src_ids = encoding.ids + [tok.pad_id] * int(pad_tokens)
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)  # (1, S)
    steps = max_len if max_len is not None else len(text) + 1 + EXTRA_DECODE_STEPS
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            generated, maps = model.greedy_decode(src, steps, variation=variation)
            out_ids = generated[0].tolist()
            tgt = torch.tensor([[model.start_id] + out_ids[:-1]], device=device)  # (1, T)
            norms = {key: value[0].float().cpu().numpy() for key, value in  # what flows: the maps x these
                     model.value_norms(src, tgt, variation=variation).items()}
            step_maps = None
            if not causal_mask:  # each step's own maps: earlier rows change as tokens arrive
                step_maps = [{key: value[0] for key, value in step.to_numpy().items()}
                             for step in model.step_maps(src, tgt, variation=variation)]
    finally:
        model.train(was_training)
    source, target = tok.tokens(src_ids), tok.tokens([model.start_id] + out_ids[:-1])
    arrays = {key: value[0] for key, value in maps.to_numpy().items()}  # key -> (H, Q, K)
    notes = [f"scale: {scale}; causal mask {'on' if causal_mask else 'off'}; "
             f"padding mask {'on' if padding_mask else 'off'}"]
    if encoding.unknown:
        notes.append("unknown characters became <unk>: " + " ".join(encoding.unknown))
    if tok.eos_id not in out_ids:
        notes.append(f"no <eos> within {steps} tokens: the output is unfinished")
    return pack(arrays, source, target, masks=default_masks(source, target, causal_mask, padding_mask),
                output=tok.decode(out_ids), notes=notes, title=f"“{text}”",
                decode={"written": tok.tokens(out_ids), "steps": step_maps}, value_norms=norms)


def run_pretrained(model, text: str, scale: Scale = "sqrt_dk", causal_mask: bool = True, padding_mask: bool = True,
                   pad_tokens: int = 0, max_new_tokens: int = 40) -> dict:
    """A real model's greedy decode of `text` (or one pass, for an encoder), packed as run_model packs ours."""
    from attention_viz.hub.text_run import run_text  # the hub extra: a real model means it is installed

    variation = Variation(scale, causal_mask, padding_mask)  # checked before any work
    result = run_text(model, text, max_new_tokens=max_new_tokens, pad_tokens=int(pad_tokens), variation=variation,
                      values=True)  # what flows, from the maps' own pass
    notes = [f"{model.name} ({model.family.name}, real model): scale {scale}; causal mask "
             f"{'on' if causal_mask else 'off'}; padding mask {'on' if padding_mask else 'off'}",
             f"Our Eq. 1 inside it: {model.fidelity}.", *result.notes]
    decode = None
    written = decode_written(result.written, result.tgt_tokens if result.tgt_ids else [], not result.src_ids)
    if written is not None:
        decode = {"written": written, "steps": None}
        if not causal_mask:
            decode["steps"] = pretrained_steps(model, result, variation)
    return pack(result.maps, result.src_tokens, result.tgt_tokens, masks=result.masks, output=result.output,
                notes=notes, title=f"“{text}” on {model.name}", decode=decode, value_norms=result.norms,
                biases=result.biases)  # a position bias (T5, ALiBi): the explorer's "position bias B"


def run_media(model, source, scale: Scale = "sqrt_dk", causal_mask: bool = True, max_new_tokens: int = 40) -> dict:
    """A picture through an image model, or a recording through Whisper (model.modality: hub.images, hub.speech),
    packed as run_pretrained packs a text: the encoder's tokens are its special tokens and patches, or its times;
    Whisper writes its transcript greedily, its decoder rows the prompt and what it wrote."""
    from attention_viz.hub.text_run import run_media as media_run  # the hub extra: a real model means it is installed

    variation = Variation(scale, causal_mask)  # checked before any work
    result = media_run(model, source, max_new_tokens=max_new_tokens, variation=variation)
    notes = [f"{model.name} ({model.family.name}, real model): scale {scale}; causal mask "
             f"{'on' if causal_mask else 'off'}", f"Our Eq. 1 inside it: {model.fidelity}.",
             *result.notes]
    decode = None
    if model.abilities.writes_text:
        written = decode_written(list(result.written), list(result.tgt_tokens), True)  # the prompt's steps write
        decode = None if written is None else {"written": written, "steps": None}  # its next token
    axis = model.input_axis()  # the picture's patches or the recording's times, with their labels
    what = "picture" if axis.name == "patches" else "recording"
    return pack(result.maps, axis, list(result.tgt_tokens), masks=result.masks, output=result.output, notes=notes,
                title=f"a {what} on {model.name}", decode=decode)


def run_long(model, text, budget: int = LONG_BYTES, **switches) -> dict:
    """A real model's long pass over `text` (hub.long; as many tokens as its positions hold; a speech model's
    recording, read by its encoder over its time axis), packed for the long view with every head's overview embedded
    within `budget` bytes (no server: its zoom is drawn from those)."""
    from attention_viz.hub.words import labels, words_of

    if model.input_axis().name != "tokens":  # a recording (a picture): its positions' times as its words
        run = model.long_run(text, **switches)  # read whole (a recording cut to the window: its note says so)
        words, what = labels(model.modality.tokens()), "positions"
    else:
        ids = model.encode(text).ids  # (S,)
        run = model.long_run(ids, warn=False, **switches)  # the first tokens its positions hold: the view says so
        words, what = words_of(model.tokenizer, ids[:run.length].tolist()), "tokens"
    try:
        maps = f"{len(run.keys)} map{'' if len(run.keys) == 1 else 's'}"
        title = f"{model.name}: {run.length:,} {what}, {maps} x {run.n_heads} heads"
        payload = pack_long(run, words, read=run.length, of=run.given, note=run.note, title=title)
        payload["offline"] = pack_offline(run, budget)
        if model.input_axis().seconds:  # a recording's: the view writes its spans as times
            payload["seconds"] = model.input_axis().seconds
    finally:
        run.close()
    return payload


def pretrained_steps(model, result, variation: Variation) -> list[dict[str, np.ndarray]]:
    """Without the causal mask, each decode step's own decoder maps (earlier rows change as tokens arrive)."""
    src = torch.tensor([result.src_ids], device=model.device) if result.src_ids else None  # (1, S)
    tgt = torch.tensor([result.tgt_ids], device=model.device)  # (1, T)
    with torch.inference_mode():
        return model.step_maps(src, tgt, variation=replace(variation, causal_mask=False))


def show(model_or_maps: AttentionModel | Mapping[str, np.ndarray], text: str | Sequence[str] = "",
         target_tokens: Sequence[str] = (), *, masks: Mapping[str, np.ndarray] | None = None,
         output: str = "", notes: Sequence[str] = (), height: int = 640, **run_options) -> View:
    """The interactive explorer, inline in Jupyter (the returned View renders itself).

    show(model, "abc")                       greedy-decode "abc" and show every map (run_model's options apply)
    show(real_model, "Hello")                a real model (attention_viz.hub.PretrainedTransformer): its own tokens,
                                             every map it has (run_pretrained's options apply)
    show(image_model, "cat.jpg")             a picture (a path, bytes, PIL image or array) through an image model, a
                                             recording through Whisper: their tokens are patches or times (run_media;
                                             long=True: the encoder's long view over them, run_long)
    show(real_model, long_text)              a text of more than LONG_FROM tokens through a model of one stack (or
                                             long=True): every head's summary and overview, a zoom drawn from the
                                             embedded blocks (run_long: at most LONG_BYTES of them)
    show(maps, source_tokens, target_tokens) maps: key -> [H, Q, K] (a batch axis of 1 is dropped), e.g.
                                             AttentionMaps.to_numpy() of one forward pass
    """
    if isinstance(model_or_maps, AttentionModel) and model_or_maps.input_axis().name != "tokens":
        if run_options.pop("long", None):  # the encoder's positions through the long pass, as a text's (run_long)
            return View(run_long(model_or_maps, text, **run_options), height=height)
        return View(run_media(model_or_maps, text, **run_options), height=height)  # a picture or a recording
    if isinstance(model_or_maps, AttentionModel) and model_or_maps.pretrained:
        if not isinstance(text, str) or not text:
            raise ValueError("show(model, text): text must be a non-empty string")
        long = run_options.pop("long", None)
        if long is None:
            long = (model_or_maps.layout != "encoder-decoder"
                    and model_or_maps.encode(text).ids.numel() > LONG_FROM)
        if long:
            return View(run_long(model_or_maps, text, **run_options), height=height)
        return View(run_pretrained(model_or_maps, text, **run_options), height=height)
    if isinstance(model_or_maps, AttentionModel):
        if not isinstance(text, str):
            raise ValueError("show(model, text): text must be a string")
        return View(run_model(model_or_maps, text, **run_options), height=height)
    if run_options:
        raise ValueError(f"{sorted(run_options)} apply only to show(model, text)")
    maps = {}
    for key, value in dict(model_or_maps).items():
        array = value.detach().float().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        maps[key] = array[0] if array.ndim == 4 and array.shape[0] == 1 else array
    return View(pack(maps, list(text), target_tokens, masks=masks, output=output, notes=notes), height=height)
