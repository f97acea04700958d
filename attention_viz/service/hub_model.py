"""A real model as the service asks it (service.models.ServedModel): a loaded attention_viz.hub model (its own
tokenizer, its maps under our keys, the masks as it applies them) and the real models' run line; and a real model's
picker entry (RealEntry, a service.models.Entry) with the controls it gets (service.models.ModelControls), from its
shape.

Every pass takes the run line (service.real_models.RunLine) here, inside, and only around the model's own work:
whatever a pass needs first (mean ablation's means, which take the line themselves) is computed before. Every call
into the hub goes through HubModel._switches: the settings' Variation (scaling, masks, heads off) and, for mean
ablation, the heads' means, as the hub's arguments.

Axes: H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from attention_viz.core.attention import attention, scale_factor
from attention_viz.core.maps import kind_key
from attention_viz.importance import real_head_importance, real_head_means
from attention_viz.qkstats import qk_statistics
from attention_viz.service import texts
from attention_viz.service.checks import check_unicode_text
from attention_viz.service.limits import (
    LAYER_HEAD_LIMIT,
    REAL_EXAMPLES,
    REAL_REFERENCE_TEXTS,
    REAL_SOURCE_TOKENS,
    REAL_TEXT_CHARS,
    SCALE_CHOICES,
    real_new_tokens,
)
from attention_viz.service.models import Abilities, HeadMeans, ModelControls, Run, Steps, frozen, pass_arguments
from attention_viz.service.real_models import RealModels, RealShape, RunLine, display_name
from attention_viz.service.requests import HeadRequest, Member, Settings, model_keys


def hub_abilities(shape: RealShape) -> Abilities:
    """What a real model can do, by its shape: write text or fill masks (its head's), the causal mask where it has
    decoder self-attention, every scaling (Eq. 1 with its own d_k); its heads are scored on the text in the box
    where it writes text (the log-probability of its own output), else not, and `unscored` says why."""
    what = "an encoder alone" if shape.layout == "encoder" else "saved without its output head"
    unscored = "" if shape.writes_text else (
        f"{shape.name or shape.family} is {what}: it writes no text whose probability could drop, so its heads cannot be scored "
        "here. Pick a model that writes text (an encoder-decoder, or a decoder such as GPT-2).")
    return Abilities(writes_text=shape.writes_text, fills_masks=shape.fills_masks,
                     causal="decoder.self_attn" in shape.kinds, compatibility="dot_product",
                     scalings=tuple(SCALE_CHOICES), d_k_fixed=True, scored_on="text" if shape.writes_text else None,
                     unscored=unscored, position_bias=shape.position_bias)


class HubModel:
    """A real model (attention_viz.hub.PretrainedTransformer, shared), its shape and the run line it works under."""

    def __init__(self, model, shape: RealShape, busy: RunLine, means: HeadMeans | None = None) -> None:
        self.model, self.shape, self.busy = model, shape, busy
        self._means = means or self.head_means
        self.sink = shape.sink
        self.abilities = hub_abilities(shape)

    @property
    def keys(self) -> dict[str, int]:
        return model_keys(self.shape)

    def tokens(self, text: str) -> list[str]:
        return self.model.pieces(self.model.encode(text).ids)

    def _budget(self, text: str) -> int:
        """The tokens it may write for `text` (limits.real_new_tokens)."""
        return real_new_tokens(len(self.model.encode(text).ids), self.model.layout == "encoder-decoder")

    def _switches(self, settings: Settings, heads: bool = True) -> dict:
        """Its pass arguments under `settings` (models.pass_arguments, its own head means)."""
        return pass_arguments(settings, self._means, heads)

    def _pass(self, run: Run, settings: Settings, keep: tuple[str, ...] = (), at: tuple[str, ...] | None = None):
        """One pass on `run`'s source and decoder input under `settings`' switches, keeping core.trace's points `keep`
        at the map keys `at` (hub Recorded)."""
        model = self.model
        switches = self._switches(settings)
        src = torch.tensor([run.src_ids], device=model.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=model.device)  # (1, T)
        with torch.inference_mode(), self.busy:
            if model.layout == "encoder-decoder":
                return model.traced(src, tgt, keep=keep, at=at, **switches)
            return model.traced(src if model.layout == "encoder" else tgt, keep=keep, at=at, **switches)

    def run(self, settings: Settings) -> Run:
        """Its own tokens, output, maps and masks (attention_viz.hub.text_run)."""
        from attention_viz.hub.text_run import run_text  # the hub extra, present whenever a real model is set up

        budget = self._budget(settings.text)
        switches = self._switches(settings)
        with self.busy:
            result = run_text(self.model, settings.text, max_new_tokens=budget, pad_tokens=settings.pad_tokens,
                              values=True, **switches)  # what flows from the maps' own pass
        frozen(result.maps), frozen(result.masks), frozen(result.norms or {}), frozen(result.biases)
        return Run(
            settings=settings, config=self.shape, card=None,
            src_ids=result.src_ids, tgt_ids=result.tgt_ids, src_tokens=result.src_tokens, tgt_tokens=result.tgt_tokens,
            generated=result.written, output=result.output, finished=result.finished, expected=None,
            maps=result.maps, applied=result.masks, notes=result.notes, norms=result.norms, biases=result.biases,
        )

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        return {key: value[0] for key, value in self._pass(run, settings).maps.to_numpy().items()}

    def masks_under(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """The masks as it applies them under `settings` (one pass)."""
        from attention_viz.hub.text_run import dense_masks

        recorded = self._pass(run, settings)
        return dense_masks(recorded.maps, recorded.run.masks)

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]]:
        model = self.model
        src = torch.tensor([run.src_ids], device=model.device) if run.src_ids else None  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=model.device)  # (1, T)
        switches = self._switches(run.settings)
        with torch.inference_mode(), self.busy:
            return model.step_maps(src, tgt, **switches)

    def steps(self, run: Run, request: HeadRequest) -> Steps:
        """From the q, k, v its attention received (after any rotary positions), the mask it applied and what else it
        adds to Eq. 1: a position bias (T5's: in the "masked" step, added before the mask), a soft cap (Gemma 2), its
        sink (gpt-oss: the row's weights sum to 1 less the sink's share); "sqrt_dk" is the model's own factor."""
        key, head, settings = kind_key(request.kind, request.layer), request.head, run.settings
        recorded = self._pass(run, settings, keep=("q", "k", "v"), at=(key,))
        given = recorded.run.trace[key].kept  # what the pass kept there and recorded (hub.attention.RECORDED)
        q, k, v = given["q"][0, head], given["k"][0, head], given["v"][0, head]  # (Q, d_k), (K, d_k), (K, d_v)
        mask, bias, sink = given["mask"], given["bias"], given["sink"]  # bias (1, H, Q, K), sinks' logits [H] or None
        head_mask = None if mask is None else torch.broadcast_to(mask, (1, 1, q.size(0), k.size(0)))[0, 0]  # (Q, K)
        factor = given["factor"] if settings.scale == "sqrt_dk" else scale_factor(settings.scale, q.size(-1))
        with torch.inference_mode():
            intermediates: dict[str, torch.Tensor] = {}
            attention(q[None], k[None], v[None], head_mask, factor, bias=None if bias is None else bias[0, head],
                      softcap=given["softcap"], sink=None if sink is None else sink[head:head + 1],
                      steps=intermediates)  # one head as [1, Q, ·]: a sink joins its rows as the model's
        queries, keys = run.tokens(request.kind)
        arrays = {name: t[0].float().cpu().numpy() for name, t in intermediates.items()}
        return Steps(arrays, queries, keys, factor)

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        """Those its run kept from the maps' own pass (run() always keeps them)."""
        return run.norms

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Over REAL_REFERENCE_TEXTS and what it writes for them."""
        switches = self._switches(settings, heads=False)  # before the run line, as every pass's arguments
        with torch.inference_mode(), self.busy:
            return real_head_means(self.model, list(REAL_REFERENCE_TEXTS), **switches)

    def head_importance(self, settings: Settings, ablation: str, n_texts: int, chunk: int,
                        partial: Callable | None = None):
        """On the text in the box: the log-probability of what it writes for it, teacher-forced."""
        budget = self._budget(settings.text)
        with self.busy:
            return real_head_importance(self.model, [settings.text], ablation=ablation, max_new_tokens=budget,
                                        chunk=chunk, partial=partial)

    def qk_statistics(self, n_texts: int, sentences: tuple[str, ...]) -> dict:
        with torch.inference_mode(), self.busy:
            return qk_statistics(self.model, list(sentences), keep_logits=True)

    def qk_texts(self, n_texts: int, sentences: tuple[str, ...]) -> str:
        return f"{len(sentences)} fixed English sentences"

    def notes(self, run: Run) -> list[str]:
        return texts.real_notes(run)

    def output_text(self, run: Run) -> str:
        return texts.real_output(run)


class RealEntry:
    """A real model's picker entry (service.models.Entry): `key` ("hub:" + its name) among the server's RealModels,
    which load it on first use and keep it; its d_k and sizes are its own."""

    def __init__(self, key: str, real: RealModels) -> None:
        self.key, self.real = key, real
        self.label = real.label(key)

    def d_k_choices(self) -> list[int]:
        return [self.real.shape(self.key).d_k]

    def default_d_k(self) -> int:
        return self.real.shape(self.key).d_k

    def model_shape(self, d_k: object = None) -> RealShape:
        return self.real.shape(self.key)

    def largest(self) -> tuple[int, int]:
        return LAYER_HEAD_LIMIT, LAYER_HEAD_LIMIT  # it loads when first picked: the inputs' bounds cover any model

    def controls(self, d_k: int, layer: int, head: int, n_heads: object, progress=None) -> ModelControls:
        """From its shape (loaded the first time, telling progress(fraction, text))."""
        return real_controls(self.key, self.real.shape(self.key, progress), layer, head)

    def checked_text(self, text: object) -> str:
        """Any text up to REAL_TEXT_CHARS characters."""
        return check_unicode_text(text, REAL_TEXT_CHARS)

    def member(self, text: str, d_k: int, d_model: int, n_heads: int) -> Member:
        """Itself (loaded if need be), its tokens of the text at most REAL_SOURCE_TOKENS."""
        served = self.attention_model(None)
        n_tokens = len(served.tokens(text))
        if n_tokens > REAL_SOURCE_TOKENS:
            raise ValueError(f"Text is {n_tokens} tokens for this model's tokenizer; the maximum is "
                             f"{REAL_SOURCE_TOKENS}. Shorten it.")
        shape = served.shape
        return Member(display_name(self.key), shape.d_k, shape.d_model, shape.n_heads, text, None, "dot_product",
                      served.keys, self.label, shape.position_bias)

    def attention_model(self, settings: Settings | None, means: HeadMeans | None = None) -> HubModel:
        """Itself, whatever the settings (loaded on first use)."""
        key, real = self.key, self.real
        return HubModel(real.get(key), real.shape(key), real.line(key), means)


def real_controls(key: str, shape: RealShape, layer: int, head: int) -> ModelControls:
    """The controls for a real model: its own d_k (fixed by its weights), its layers and heads, what it reads."""
    max_layer = max(shape.n_encoder_layers, shape.n_decoder_layers) - 1
    log = math.log2(shape.d_k)
    return ModelControls(
        hub_abilities(shape), False, shape.d_k, log, log + 1, 1.0, max_layer, shape.n_heads - 1, min(layer, max_layer),
        min(head, shape.n_heads - 1), "sqrt_dk",
        f"d_k = {shape.d_k}: this model's own (its weights fix it); the scaling and the masks still switch.",
        trained_d_ks=(shape.d_k,),
        text_info=(f"{display_name(key)} is a real {shape.family} model ({shape.about}). It reads any text its "
                   f"tokenizer handles, up to {REAL_SOURCE_TOKENS} of its tokens ({REAL_TEXT_CHARS} characters), "
                   "and shows its own subword pieces. " + can_do(shape) + proven(shape)),
        text_label=f"Text (up to {REAL_SOURCE_TOKENS} tokens of this model)",
        d_k_label="d_k: this model's own",
        examples=REAL_EXAMPLES,
        scale_info=shape.scaling_note,
    )


def proven(shape: RealShape) -> str:
    """Its proof on load as a sentence beside its name ("" for a shape that carries none)."""
    return f" Our Eq. 1 inside it: {shape.fidelity}." if shape.fidelity else ""


def can_do(shape: RealShape) -> str:
    """What a real model can show besides its maps, said plainly (a checkpoint without an output head too)."""
    if shape.writes_text:
        return "It writes text: its output, and its heads scored by how much less likely that output becomes."
    if shape.fills_masks:
        return "It fills its mask token: put it in the text to see what it writes there."
    return ("It has no output head (saved as its base model): it shows its maps under the scaling and masks, and "
            "heads switched off (the maps after them change); it writes no text, fills no masks, and its heads "
            "cannot be scored by an output.")
