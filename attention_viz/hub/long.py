"""Attention at length: one pass keeps what recomputes every map, not the maps (L·H·T·d numbers, not L·H·T²).

    run = model.long_run(text)                              # a PretrainedTransformer; the same switches as forward
    run.summaries["decoder.3.self_attn"]["entropy"]         # [H]: each head's statistic, the mean over query rows
    run.region("decoder.3.self_attn", 2, slice(0, 256), slice(0, 256))   # exact weights of a block of the map
    run.overview("decoder.3.self_attn", 2, size=512)        # the whole map, each cell its block's max (or mean)
    run.region(..., without_sink=True)                      # the first token left out, each row renormalised

During the pass every attention runs `long_attention` (hub.attention's registered function hands it a long pass's
calls; the model stays as it is): its output from exact softmax over blocks of query rows (a block's scores
[H, rows, K] computed, summarised, used, dropped). Its probes (core.trace) keep, per attention (RECORDS), the
summaries of each head's rows, q after the model's rotary [H, T, d], the keys [H_kv, T, d] (grouped keys not
repeated), each row's log-sum-exp of its scaled, masked scores [H, T], the factor on QKᵀ and the mask, so a weight
is exp(q_i·k_j·factor − lse_i) wherever the mask allows it: any region or overview is recomputed exactly from a few
rows of q and k (hub.long_kept: Kept, and LongRun's views). The kept numbers go to a temporary file (keep="disk",
the default: the process holds what one layer needs) or stay in memory (keep="memory").

Summaries, per head, each the mean over the T query rows of a row's:
    entropy         −Σⱼ pᵢⱼ log pᵢⱼ (nats)
    max_weight      maxⱼ pᵢⱼ
    mean_distance   Σⱼ pᵢⱼ·|i − j|
    first_token     pᵢ₀ (the weight on position 0: the sink)
    previous_token  pᵢ,ᵢ₋₁ (0 on row 0)
    self            pᵢᵢ
A row with every key masked has weights 0 and every statistic 0.

Masks: as transformers' sdpa_mask builds them (boolean, True = may attend), with the pass's switches (causal mask
off: bidirectional; padding off: no padding mask). A plain causal mask, or every key seen, is never built: it is
kept as its rule, and under the causal rule the keys after a block's last row are never computed. Any other mask (a
sliding window, a padded key) is built once per pass and kind of layer, [T, K], and kept.

An encoder-decoder model reads the text with its encoder alone (its encoder.* maps; the decoder and cross-attention
are no part of a page's read). A model of another modality reads what its modality makes (model.modality): Whisper
its recording's features with its encoder alone (1,500 positions for 30 s), an image model its pixels; every position
is read. A batch of one; the model in eval mode. Axes: H query heads, H_kv key/value heads, R query rows of a block, T
positions, K keys, d head width.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from transformers.masking_utils import causal_mask_function

from attention_viz.core.attention import Window
from attention_viz.core.trace import Trace, recorded
from attention_viz.core.variation import Variation
from attention_viz.fast.blockwise import ROWS, attend
from attention_viz.hub.attention import Pass, as_allowed, factors, key_of, mask_under, position_bias, switched
from attention_viz.hub.long_kept import Kept, KeptLayer, LongRun, LongRunError
from attention_viz.hub.positions import reading

BIAS_REFUSED = ("the long pass does not cover attention with a position bias (T5's or BEiT's relative positions, "
                "ALiBi)")  # refused before any pass (hub.model), and by the pass itself

RECORDS = ("q", "k", "lse", "layer", "summaries")  # what a long pass's probes keep at every attention (module docstring)
READS_WITH_ENCODER = ("An encoder-decoder model reads the page with its encoder (every layer's self-attention); its "
                      "decoder and cross-attention are not part of a page's read")
READS_RECORDING = ("A speech model reads the recording with its encoder (every layer's self-attention); its decoder "
                   "and cross-attention are not part of this read")


@dataclass
class _Pass(Pass):
    """One long pass in flight (a hub.attention.Pass with its own attention and mask functions, below): what it keeps
    besides its probes' points, and its masks' rules."""

    kept: Kept | None = None
    rows: int = ROWS
    rules: dict[int, tuple[torch.Tensor, str, torch.Tensor | None]] = field(default_factory=dict)
    # id(mask) -> (the mask, its rule, its [T, K] on the CPU for rule "mask": what regions read)
    unmasked: set[str] = field(default_factory=set)  # what a mask left unbuilt (None) meant: "causal", "full"


# -- the attention function of the pass


def _rule_of(run: _Pass, module: torch.nn.Module, mask: torch.Tensor | None, Q: int, K: int
             ) -> tuple[str, torch.Tensor | None, torch.Tensor | None]:
    """A mask [1, 1, Q, K] or None -> ("full" | "causal" | "mask", for "mask" the [Q, K] mask on its device and on
    the CPU); a mask shared by many layers is looked at once. None is what long_mask left unbuilt, or (if it built
    both kinds, or was not asked) what the module says, as transformers' sdpa reads it."""
    if mask is None:
        if len(run.unmasked) == 1:
            return next(iter(run.unmasked)), None, None
        causal = getattr(module, "is_causal", False) and run.variation.causal_mask
        return ("causal" if causal else "full"), None, None
    if id(mask) not in run.rules:
        if mask.dim() != 4 or mask.size(0) != 1:
            raise LongRunError("the long pass takes a batch of one text")
        allowed = mask[0, 0, :, :K]
        j = torch.arange(K, device=mask.device)
        if bool(allowed.all()):
            rule = "full"
        elif Q == K and all(torch.equal(allowed[r0:r0 + 256], j[None] <= j[r0:r0 + 256, None])
                            for r0 in range(0, Q, 256)):  # j <= i, compared a band of rows at a time
            rule = "causal"
        else:
            rule = "mask"
        # the mask kept with its rule, so its id is not reused during the pass
        run.rules[id(mask)] = (mask, rule, allowed.cpu() if rule == "mask" else None)
    _, rule, on_cpu = run.rules[id(mask)]
    return rule, (mask[0, 0, :, :K] if rule == "mask" else None), on_cpu


def long_attention(run: _Pass, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                   **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract during a long pass: query [1, H, T, d], key/value [1, H_kv, K, d]
    -> (output [1, T, H, d], no weights); the summaries and what recomputes the weights kept on the way."""
    for name in ("softcap", "s_aux", "sinks"):
        if kwargs.get(name) is not None:
            raise LongRunError(f"the long pass does not cover attention with {name}")
    if position_bias(kwargs.get("position_bias")) is not None:
        raise LongRunError(BIAS_REFUSED)
    if query.size(0) != 1 or query.size(2) != key.size(2):
        raise LongRunError("the long pass takes a batch of one text, every position at once (no cache)")
    factor = float(factors(run, module, query, scaling)[1])  # the factor on QKᵀ, as hub.attention's
    window = kwargs.get("window")  # a local attention's rule (hub.routes_local): kept as its rule, no [T, K] mask
    if window is not None and attention_mask is not None:
        raise LongRunError("the long pass takes a text without padding")
    rule, allowed, allowed_cpu = ("window", None, None) if window is not None else _rule_of(
        run, module, as_allowed(attention_mask), query.size(2), key.size(2))
    q, k, v = query[0], key[0], value[0]  # (H, T, d), (H_kv, K, d), (H_kv, K, d_v)
    output, lse, sums = attend(q, k, v, factor, rule, allowed, run.rows,  # (T, H, d_v), ...; its buffers freed
                               window=window)                               # after
    name = key_of(run, module)
    probe = run.trace.get(name)
    if probe is not None:  # what it records (RECORDS), heads switched off before the model's W_O
        probe("lse", lse)
        on_cpu = window if window is None or window.overall is None else Window(window.radius, window.overall.cpu())
        probe("layer", KeptLayer(factor, q.size(0) // k.size(0), rule, allowed_cpu, on_cpu))
        probe("summaries", {stat: (total / q.size(1)).cpu().numpy() for stat, total in sums.items()})
        output = probe.attended(q, k, v, None, output.transpose(0, 1)[None])[0].transpose(0, 1)
        for point in ("q", "k", "lse"):  # to the run's Kept (on disk or in memory), one attention's at a time
            run.kept.put(name, point, probe.kept.pop(point))
    return output[None].contiguous(), None  # (1, T, H, d_v)


def long_mask(run: _Pass, *args, mask_function=None, attention_mask=None, **kwargs) -> torch.Tensor | None:
    """transformers' mask-function contract during a long pass: sdpa_mask with the pass's mask switches, None for a
    plain causal mask or every key (the pass notes which: `_Pass.unmasked`), else materialised."""
    mask = mask_under(run.variation, args, kwargs, mask_function, attention_mask, skips=True)
    if mask is None:  # sdpa_mask's default rule is causal
        causal = run.variation.causal_mask and mask_function in (None, causal_mask_function)
        run.unmasked.add("causal" if causal else "full")
    return mask


_Pass.attention = long_attention  # what hub.attention's registered functions hand a long pass's calls to
_Pass.mask = long_mask


class TextCutWarning(UserWarning):
    """A long pass read the first tokens of a longer text (its message is the run's `note`)."""


def long_run(model, keys: Mapping[int, str], ids_or_text, variation: Variation, trace: Trace,
             rows: int = ROWS, keep: str = "disk", last_logits: bool = False,
             prescaled: Mapping[int, tuple[float, float]] | None = None, most: int | None = None,
             warn: bool = True) -> LongRun:
    """One long pass of a PretrainedTransformer `model` (its attention modules' map keys `keys`) over a text or ids
    [T] / [1, T], under `variation` with its probes `trace` (model.probes, recording RECORDS) -> LongRun. last_logits:
    the output head on the last position only, where the model's forward takes logits_to_keep (a decoder's logits at
    4,096 tokens over a 49,152-word vocabulary are 805 MB; the maps do not need them). An encoder-decoder model reads
    the text with its encoder alone (its encoder.* maps; the run's logits are the encoder's last states). prescaled:
    id(attention module) -> the factors (c_q, c_k) it puts on q and k itself (the model's proof finds them), which the
    scale switch takes out as forward does. A text of more tokens than the model's positions (or `most`) is read up to
    them (`reading`): the run says so (LongRun.note, given), and warns it unless warn=False."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise LongRunError(f"rows must be a positive whole number, got {rows!r}")
    if model.modality is not None:  # a recording or a picture: its encoder reads it whole
        return _media_run(model, keys, ids_or_text, variation, trace, rows, keep, prescaled, most)
    if isinstance(ids_or_text, str):
        ids = model.encode(ids_or_text).ids[None]
    else:
        ids = torch.as_tensor(ids_or_text)
        if ids.dim() == 1:
            ids = ids[None]
        if ids.dim() != 2 or ids.size(0) != 1 or ids.dtype not in (torch.int32, torch.int64):
            raise LongRunError("give one text, or its token ids as [T] or [1, T] integers")
    if ids.size(1) == 0:
        raise LongRunError("the text has no tokens")
    given = ids.size(1)
    read, note = reading(model, given, most)
    if read < given:
        ids = ids[:, :read]
        if warn:
            warnings.warn(note, TextCutWarning, stacklevel=3)  # the caller of model.long_run
    ids = ids.to(model.device)
    if model.layout == "encoder-decoder":  # the page is read by the encoder alone: no decoder input to give
        if any(not key.startswith("encoder.") for key in variation.off or {}):
            raise LongRunError(f"{READS_WITH_ENCODER}: switch off heads of encoder.* maps only")
        forward, inputs = model.model.get_encoder(), {"input_ids": ids, "attention_mask": model.padding_of(ids)}
    else:
        forward, inputs = model.model, model.model_inputs(ids, None, None)
        if last_logits and "logits_to_keep" in inspect.signature(model.model.forward).parameters:
            inputs["logits_to_keep"] = 1
    logits, kept = _read(forward, inputs, _Pass(variation, keys, trace, prescaled=prescaled or {}, kept=Kept(keep),
                                                rows=rows))
    reads = READS_WITH_ENCODER if model.layout == "encoder-decoder" else ""
    return LongRun(logits, recorded(trace, "summaries"), recorded(trace, "layer"), kept, model.map_keys,
                   length=read, reads=reads, given=given, note=note)


def _media_run(model, keys: Mapping[int, str], source, variation: Variation, trace: Trace, rows: int, keep: str,
               prescaled: Mapping[int, tuple[float, float]] | None, most: int | None) -> LongRun:
    """long_run of a model of another modality (model.modality: hub.speech's Frames, hub.images' Patches): source is
    what its modality reads (a recording, a picture; cut or resized by it, which the run's note says) or the values
    model.encode gives, [1, ...] or without the batch axis. A speech model reads it with its encoder alone (READS_
    RECORDING; Whisper's 1,500 positions for 30 s), an image model with the whole of it; every position is read."""
    modality = model.modality
    if most is not None and most < modality.length:
        raise LongRunError(f"{model.family.name} reads its {modality.length:,} positions whole; `most` cuts texts only")
    if isinstance(source, torch.Tensor):
        values, note = source, ""
        try:
            modality.check(values[None])  # without its batch axis: [mels, frames], [C, H, W]
            values = values[None]
        except ValueError:
            pass
    else:
        encoding = model.encode(source)  # the modality's refusals name the fault
        values, note = encoding.ids[None], encoding.note
    try:
        modality.check(values)
    except ValueError as error:
        raise LongRunError(str(error)) from None
    if values.size(0) != 1:
        raise LongRunError(f"the long pass takes one {modality.probed[:-1]} at a time (a batch of one)")
    values = values.to(model.device, model.model.dtype)  # as the model's weights (features are read in float32)
    inputs, forward, reads = {modality.input_name: values}, model.model, ""
    if model.layout == "encoder-decoder":  # the recording is read by the encoder alone
        if any(not key.startswith("encoder.") for key in variation.off or {}):
            raise LongRunError(f"{READS_RECORDING}: switch off heads of encoder.* maps only")
        forward, reads = model.model.get_encoder(), READS_RECORDING
    logits, kept = _read(forward, inputs, _Pass(variation, keys, trace, prescaled=prescaled or {}, kept=Kept(keep),
                                                rows=rows))
    T = modality.length
    return LongRun(logits, recorded(trace, "summaries"), recorded(trace, "layer"), kept, model.map_keys,
                   length=T, reads=reads, given=T, note=note)


def _read(forward, inputs: dict, run: _Pass) -> tuple[torch.Tensor, Kept]:
    """forward(**inputs) as the long pass `run` -> (its logits, or last hidden states; what its probes kept)."""
    with switched(run), torch.inference_mode():
        try:
            outputs = forward(**inputs)
        except Exception:
            run.kept.close()
            raise
    return (outputs.logits if getattr(outputs, "logits", None) is not None else outputs.last_hidden_state), run.kept
