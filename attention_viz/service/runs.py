"""Cached runs: text + settings -> greedy decode and every attention map; the step view and comparisons from them.

A control that only changes the view (kind, layer, head, colour scale) never reruns the model: runs are cached
by the Settings that change the computation.

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from attention_viz.core.attention import attention_masks, attention_steps, scale_factor
from attention_viz.core.config import TransformerConfig
from attention_viz.core.maps import KINDS, head_statistics, kind_key, split_kind, stack_kind
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import heldout_strings, target_or_none, task_max_len
from attention_viz.importance import head_means, real_head_means
from attention_viz.service.catalog import Catalog, SizedCache
from attention_viz.service.checks import check_choice
from attention_viz.service.limits import (
    COMPARISONS,
    EXTRA_DECODE_STEPS,
    MEAN_REFERENCE_STRINGS,
    REAL_REFERENCE_TEXTS,
    RUN_CACHE_BYTES,
    real_new_tokens,
)
from attention_viz.service.requests import HeadRequest, Settings, parse_head, parse_settings


@dataclass(frozen=True)
class Run:
    """The result of one forward pass: tokens, output string and every map as [H, Q, K] numpy arrays."""

    settings: Settings
    config: TransformerConfig
    card: dict | None = field(repr=False, hash=False, compare=False)
    src_ids: tuple[int, ...]               # text + <eos> + pads
    tgt_ids: tuple[int, ...]               # the decoder input of the last step: <bos> + output[:-1]
    src_tokens: tuple[str, ...]
    tgt_tokens: tuple[str, ...]
    generated: tuple[str, ...]             # the greedy output tokens, <eos> included when emitted
    output: str                            # the generated text, up to <eos>
    finished: bool                         # <eos> was emitted
    expected: str | None                   # what the trained task asks for, None when untrained
    maps: dict[str, np.ndarray] = field(repr=False, hash=False, compare=False)  # key -> [H, Q, K], read-only
    applied: dict[str, np.ndarray] | None = field(default=None, repr=False, hash=False, compare=False)
    # a real model's masks as it applied them (kind -> [Q, K] bool), since its rules are its own; None for ours
    notes: tuple[str, ...] = ()            # what the run itself has to say (a real model's unfinished output, ...)

    @property
    def real(self) -> bool:
        """A run of a real model (attention_viz.hub): config is its service.real_models.RealShape."""
        return self.settings.real

    @property
    def kinds(self) -> list[str]:
        """The kinds of attention this run's model has, in KINDS order."""
        return [kind for kind in KINDS if kind in getattr(self.config, "kinds", KINDS) and self.n_layers(kind)]

    @property
    def trained(self) -> bool:
        return self.card is not None

    def n_layers(self, kind: str) -> int:
        """Number of layers that have attention of this kind."""
        stack, _ = split_kind(kind)
        return self.config.n_encoder_layers if stack == "encoder" else self.config.n_decoder_layers

    def weights(self, kind: str) -> np.ndarray:
        """Every layer of one kind stacked: [L, H, Q, K]."""
        return stack_kind(self.maps, kind, self.n_layers(kind))

    def head_request(self, kind: object, layer: object, head: object) -> HeadRequest:
        """Kind, layer and head checked against this run's model."""
        return parse_head(self.config, kind, layer, head)

    def head(self, kind: object, layer: object, head: object) -> np.ndarray:
        """One head's weights [Q, K], with kind, layer and head checked against this model."""
        request = self.head_request(kind, layer, head)
        return self.maps[kind_key(request.kind, request.layer)][request.head]

    def ids(self, kind: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(query ids, key ids) of one kind."""
        queries = self.src_ids if kind == "encoder.self_attn" else self.tgt_ids
        keys = self.tgt_ids if kind == "decoder.self_attn" else self.src_ids
        return queries, keys

    def tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of one kind: the axes of its heatmaps."""
        queries = self.src_tokens if kind == "encoder.self_attn" else self.tgt_tokens
        keys = self.tgt_tokens if kind == "decoder.self_attn" else self.src_tokens
        return list(queries), list(keys)

    @functools.cached_property
    def masks(self) -> dict[str, np.ndarray]:
        """Kind -> [Q, K] bool, True = may attend: the masks the model applied to this run's ids (core's
        attention_masks of src_ids and tgt_ids under the run's switches; a real model's as it applied them)."""
        if self.applied is not None:
            return self.applied
        return self.masks_under(self.settings)

    def masks_under(self, settings: Settings) -> dict[str, np.ndarray]:
        """Kind -> [Q, K] bool: the masks a forward pass on this run's ids applies under other settings' switches."""
        src, tgt = torch.tensor([self.src_ids]), torch.tensor([self.tgt_ids])  # (1, S), (1, T)
        masks = attention_masks(src, tgt, self.config.pad_id, settings.causal_mask, settings.padding_mask,
                                dense=True)  # kind -> (1, Q, K)
        arrays = {kind: mask[0].numpy() for kind, mask in masks.items()}
        for array in arrays.values():
            array.setflags(write=False)  # shared between users through the cache
        return arrays

    def mask(self, kind: str) -> np.ndarray:
        """[Q, K] bool in the package's convention, True = may attend: the mask the model applied (drawn grey)."""
        split_kind(kind)  # KeyError for an unknown kind
        return self.masks[kind]

    def statistics(self, kind: str) -> list[list[float]]:
        """One row per (layer, head) of this kind, columns as STAT_HEADERS (maps.head_statistics)."""
        stats = head_statistics(self.weights(kind))  # each [L, H]
        n_layers, n_heads = stats["entropy"].shape
        return [
            [layer, head] + [round(float(stats[name][layer, head]), 4)
                             for name in ("entropy", "max_weight", "mean_distance", "diagonal")]
            for layer in range(n_layers) for head in range(n_heads)
        ]


@dataclass(frozen=True)
class Steps:
    """Figure 2 (left) for one head: QKᵀ, scaled, masked, softmax weights [Q, K] and weights·V [Q, d_v]."""

    arrays: dict[str, np.ndarray]
    query_tokens: list[str]
    key_tokens: list[str]
    factor: float               # what QKᵀ was multiplied by


@dataclass(frozen=True)
class Comparison:
    """One head under two settings that differ in one switch, on the same input (teacher-forced decoder)."""

    what: str
    labels: tuple[str, str]
    a: np.ndarray               # [Q, K]
    b: np.ndarray               # [Q, K]
    query_tokens: list[str]
    key_tokens: list[str]
    outputs: tuple[str, str]    # the free-running greedy outputs under each setting
    masks: tuple[np.ndarray, np.ndarray]  # [Q, K] bool each, True = may attend, under each setting

    @property
    def difference(self) -> np.ndarray:
        return self.a - self.b


def run_bytes(run: Run) -> int:
    """About the bytes a run holds: its maps, a real model's masks, and a little for the rest."""
    arrays = [*run.maps.values(), *(run.applied or {}).values()]
    return sum(array.nbytes for array in arrays) + 4096


def additive_steps(scores: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Figure 2 (left)'s intermediates for additive attention: scores w_hᵀ tanh(q_h + k_h) [Q, K] (nothing scales
    them, so "scaled" is the same), masked (-inf where hidden), weights (softmax; exactly 0 where masked), output."""
    masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return {"scores": scores, "scaled": scores, "masked": masked, "weights": weights, "output": weights @ v}


class Runs:
    """Runs of the app's models, cached; one per server, safe to share between users.

    Args:
        catalog: the models (default: the shipped ones, on the CPU).
        run_cache_bytes: runs kept while their maps total at most this (the most recently used; a run holds every
            map of one input: ~20 kB for a trained model's short text, up to ~0.5 MB for the widest untrained one).
    """

    def __init__(self, catalog: Catalog | str | Path | None = None, run_cache_bytes: int = RUN_CACHE_BYTES) -> None:
        self.catalog = catalog if isinstance(catalog, Catalog) else Catalog(catalog)
        self.tokenizer = self.catalog.tokenizer
        self.device = self.catalog.device
        self.run = SizedCache(self._run, run_cache_bytes, run_bytes, serial=False)  # runs side by side (RUN_SLOTS)
        self._means = functools.lru_cache(maxsize=16)(self._head_means)

    def settings(self, *args, **kwargs) -> Settings:
        """requests.parse_settings against this server's models (raw control values -> Settings)."""
        return parse_settings(self.catalog, *args, **kwargs)

    def model(self, settings: Settings) -> tuple[Transformer, dict | None]:
        """The model (eval mode, shared: never mutate it) and its card (None when untrained)."""
        if settings.checkpoint is None:
            return self.catalog.untrained(settings.d_model, settings.n_heads, settings.d_k), None
        return self.catalog.trained(settings.checkpoint)

    # -- heads switched off

    def means_for(self, settings: Settings) -> dict[str, torch.Tensor] | None:
        """The head_means a pass under `settings` needs beside its variation: mean ablation's, None otherwise."""
        return self.head_means(settings) if settings.heads_off and settings.ablation == "mean" else None

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Each head's mean output [H, d_v] per map key under `settings`' scaling and masks: what mean ablation puts
        in a switched-off head's place. The reference: a trained model's task's first MEAN_REFERENCE_STRINGS
        held-out strings (the untrained model's: copy's), a real model's REAL_REFERENCE_TEXTS and what it writes for
        them; cached per model and switches."""
        plain = replace(settings, text="", typed=None, pad_tokens=0, heads_off=(), ablation="zero")
        return self._means(plain)

    def _head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        if settings.real:
            model = self.catalog.real.get(settings.model)
            with torch.inference_mode(), self.catalog.real.busy:
                return real_head_means(model, list(REAL_REFERENCE_TEXTS), variation=settings.variation)
        model, card = self.model(settings)
        task = card.get("task", "copy") if card else "copy"
        texts = heldout_strings(min(task_max_len(task), self.tokenizer.max_len), MEAN_REFERENCE_STRINGS, task=task)
        with torch.inference_mode():
            return head_means(model, texts, task, self.tokenizer, variation=settings.variation)

    # -- runs

    def _run(self, settings: Settings) -> Run:
        """Greedy-decode the text and keep the maps of the last step (cached by `run`)."""
        if settings.real:
            return self._real_run(settings)
        model, card = self.model(settings)
        tok = self.tokenizer
        src_ids = tok.encode(settings.text).ids + [tok.pad_id] * settings.pad_tokens
        src = torch.tensor([src_ids], device=self.device)  # (1, S)
        # The tasks' answers are at most as long as the text; a trained model may overrun a little (shown as
        # unfinished), an untrained one never emits <eos>, so it decodes exactly as many tokens as the source has.
        max_len = len(settings.text) + 1 + (EXTRA_DECODE_STEPS if card is not None else 0)
        with torch.inference_mode():
            generated, maps = model.greedy_decode(
                src, max_len=max_len, bos_id=tok.bos_id, eos_id=tok.eos_id, variation=settings.variation,
                head_means=self.means_for(settings),
            )
        out_ids = generated[0].tolist()
        tgt_ids = [tok.bos_id] + out_ids[:-1]  # the decoder input whose maps greedy_decode returned
        arrays = {}
        for key, value in maps.to_numpy().items():
            array = value[0]  # (H, Q, K)
            array.setflags(write=False)  # shared between users through the cache
            arrays[key] = array
        return Run(
            settings=settings, config=model.config, card=card,
            src_ids=tuple(src_ids), tgt_ids=tuple(tgt_ids),
            src_tokens=tuple(tok.tokens(src_ids)), tgt_tokens=tuple(tok.tokens(tgt_ids)),
            generated=tuple(tok.tokens(out_ids)), output=tok.decode(out_ids), finished=tok.eos_id in out_ids,
            expected=target_or_none(card["task"], settings.text) if card and "task" in card else None,
            maps=arrays,
        )

    def _real_run(self, settings: Settings) -> Run:
        """A real model's run (attention_viz.hub.text_run): its own tokens, output, maps and masks."""
        from attention_viz.hub.text_run import run_text  # the hub extra, present whenever a real model is set up

        model = self.catalog.real.get(settings.model)
        budget = real_new_tokens(len(model.encode(settings.text).ids), model.layout == "encoder-decoder")
        heads = self.real_heads(model, settings)
        with self.catalog.real.busy:
            result = run_text(model, settings.text, max_new_tokens=budget, pad_tokens=settings.pad_tokens,
                              variation=settings.variation, heads=heads)
        for array in (*result.maps.values(), *result.masks.values()):
            array.setflags(write=False)  # shared between users through the cache
        return Run(
            settings=settings, config=self.catalog.real.shape(settings.model), card=None,
            src_ids=result.src_ids, tgt_ids=result.tgt_ids, src_tokens=result.src_tokens, tgt_tokens=result.tgt_tokens,
            generated=result.written, output=result.output, finished=result.finished, expected=None,
            maps=result.maps, applied=result.masks, notes=result.notes,
        )

    def real_heads(self, model, settings: Settings) -> dict | None:
        """A real model's core.ablation switches for `settings`' heads off (None: every head on)."""
        if not settings.heads_off:
            return None
        return model.head_switches(settings.off, settings.ablation, self.means_for(settings))

    def _real_pass(self, run: Run, settings: Settings, inputs_of: str | None = None):
        """One pass of a real model on `run`'s source and decoder input under `settings`' switches (hub Recorded)."""
        model = self.catalog.real.get(settings.model)
        heads = self.real_heads(model, settings)
        src = torch.tensor([run.src_ids], device=model.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=model.device)  # (1, T)
        with torch.inference_mode(), self.catalog.real.busy:
            if model.layout == "encoder-decoder":
                return model.forward_pass(src, tgt, inputs_of=inputs_of, variation=settings.variation, heads=heads)
            return model.forward_pass(src if model.layout == "encoder" else tgt, inputs_of=inputs_of,
                                      variation=settings.variation, heads=heads)

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]] | None:
        """Without the causal mask, each decode step's own decoder maps (step t: key -> [H, t + 1, K]; earlier rows
        change as tokens arrive); None under it, where step t's rows are rows 0..t of run.maps. Computed when asked
        (the packed run keeps them), not kept with the cached run: they are ~T/2 times its decoder maps."""
        if run.settings.causal_mask or "decoder.self_attn" not in run.kinds:
            return None
        if run.real:
            steps = []
            for t in range(len(run.tgt_ids)):
                prefix = replace(run, tgt_ids=run.tgt_ids[: t + 1])
                maps = self._real_pass(prefix, run.settings).maps.to_numpy()
                steps.append({key: value[0] for key, value in maps.items() if key.startswith("decoder.")})
            return steps
        model, _ = self.model(run.settings)
        src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
        with torch.inference_mode():
            steps = model.step_maps(src, tgt, variation=run.settings.variation,
                                    head_means=self.means_for(run.settings))  # causal mask off: checked above
        return [{key: value[0] for key, value in step.to_numpy().items()} for step in steps]

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        """‖v_j^h W_O^h‖ per map key [H, K] of `run`'s own pass (its source and decoder input, its switches and heads
        off): with its maps, what flows (Kobayashi et al. 2020) is maps x these, key by key."""
        settings = run.settings
        if run.real:
            from attention_viz.hub.text_run import run_value_norms  # the hub extra, present whenever a real model is

            model = self.catalog.real.get(settings.model)
            heads = self.real_heads(model, settings)  # before the run line: mean ablation's means take it too
            with self.catalog.real.busy:
                return run_value_norms(model, run.src_ids, run.tgt_ids, variation=settings.variation, heads=heads)
        model, _ = self.model(settings)
        src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
        with torch.inference_mode():
            norms = model.value_norms(src, tgt, variation=settings.variation, head_means=self.means_for(settings))
        return {key: value[0].float().cpu().numpy() for key, value in norms.items()}

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """Maps [H, Q, K] of one forward pass on `run`'s source and decoder input under other `settings`."""
        if run.real:
            return {key: value[0] for key, value in self._real_pass(run, settings).maps.to_numpy().items()}
        model, _ = self.model(settings)
        src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
        with torch.inference_mode():
            _, maps = model(src, tgt, variation=settings.variation, head_means=self.means_for(settings))
        return {key: value[0] for key, value in maps.to_numpy().items()}

    def steps(self, settings: Settings, kind: object, layer: object, head: object) -> Steps:
        """Every intermediate of Eq. 1 for one head (Figure 2, left), recomputed from that layer's inputs.

        The inputs are what the attention receives in forward on the run's ids (Transformer.attention_inputs: the
        stacks run up to that attention, no hooks on the shared model); the weights are the map forward records.
        """
        run = self.run(settings)
        request = parse_head(run.config, kind, layer, head)
        kind, layer, head = request.kind, request.layer, request.head
        if run.real:
            return self._real_steps(run, kind, layer, head)
        model, _ = self.model(settings)
        module = model.attention_module(kind, layer)
        src = torch.tensor([run.src_ids], device=self.device)  # (1, S)
        tgt = torch.tensor([run.tgt_ids], device=self.device)  # (1, T)
        with torch.inference_mode():
            query, key, value, mask = model.attention_inputs(
                src, tgt, kind, layer, variation=settings.variation, head_means=self.means_for(settings),
            )  # (1, Q, D), (1, K, D), (1, K, D), mask broadcastable to (1, H, Q, K) or None
            q, k, v = module.project(query, key, value)  # (1, H, Q, d_k), (1, H, K, d_k), (1, H, K, d_v)
            head_mask = None
            if mask is not None:
                head_mask = torch.broadcast_to(mask, (1, module.n_heads, q.size(2), k.size(2)))[0, head]  # (Q, K)
            if module.compatibility == "additive":
                intermediates = additive_steps(module.scores(q, k)[0, head], v[0, head], head_mask)
            else:
                intermediates = attention_steps(q[0, head], k[0, head], v[0, head], head_mask, settings.scale)
        queries, keys = run.tokens(kind)
        arrays = {name: t.float().cpu().numpy() for name, t in intermediates.items()}
        return Steps(arrays, queries, keys, scale_factor(settings.scale, settings.d_k))

    def _real_steps(self, run: Run, kind: str, layer: int, head: int) -> Steps:
        """A real model's Eq. 1 intermediates for one head, from the q, k, v its attention received (after any
        rotary positions) and the mask it applied; "sqrt_dk" is the model's own factor."""
        key = kind_key(kind, layer)
        recorded = self._real_pass(run, run.settings, inputs_of=key)
        kept = recorded.run.kept
        q, k, v = kept["q"][0, head], kept["k"][0, head], kept["v"][0, head]  # (Q, d_k), (K, d_k), (K, d_v)
        mask = recorded.masks.get(key)
        head_mask = None if mask is None else torch.broadcast_to(mask, (1, 1, q.size(0), k.size(0)))[0, 0]  # (Q, K)
        factor = recorded.run.factors[key] if run.settings.scale == "sqrt_dk" else scale_factor(run.settings.scale,
                                                                                                q.size(-1))
        with torch.inference_mode():
            intermediates = attention_steps(q, k, v, head_mask, factor)
        queries, keys = run.tokens(kind)
        arrays = {name: t.float().cpu().numpy() for name, t in intermediates.items()}
        return Steps(arrays, queries, keys, factor)

    def compare(self, settings: Settings, what: object, kind: object, layer: object, head: object) -> Comparison:
        """One head with a switch on (a) and off (b), on the same source and decoder input."""
        what = check_choice("comparison", what, {key: key.replace("_", " ") for key in COMPARISONS})
        run = self.run(settings)
        request = parse_head(run.config, kind, layer, head)
        if what == "scaling":
            a, b = replace(settings, scale="sqrt_dk"), replace(settings, scale="none")
        else:
            a, b = replace(settings, **{what: True}), replace(settings, **{what: False})
        key = kind_key(request.kind, request.layer)
        weights_a = self.teacher_forced_maps(run, a)[key][request.head]
        weights_b = self.teacher_forced_maps(run, b)[key][request.head]
        queries, keys = run.tokens(request.kind)
        outputs = (self.run(a).output, self.run(b).output)
        if run.real:  # a real model's masks as it applies them under each setting
            masks = tuple(dense_real_masks(self._real_pass(run, s))[request.kind] for s in (a, b))
        else:
            masks = (run.masks_under(a)[request.kind], run.masks_under(b)[request.kind])
        return Comparison(what, COMPARISONS[what], weights_a, weights_b, queries, keys, outputs, masks)


def dense_real_masks(recorded) -> dict[str, np.ndarray]:
    """Kind -> [Q, K] bool of a real model's pass (hub Recorded): the masks it applied."""
    from attention_viz.hub.text_run import dense_masks

    return dense_masks(recorded.maps, recorded.masks)
