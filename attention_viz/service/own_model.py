"""Our own models as the service asks them (service.models.AttentionModel): a shipped checkpoint or the untrained
Transformer, our character tokenizer and the checkpoint's card.

Every call into core goes through OwnModel._switches: the settings' scaling, masks and heads off as forward
arguments. The model is shared between users: never mutated.

Axes: H heads, Q query positions, K key positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from attention_viz.core.attention import attention_steps, scale_factor
from attention_viz.core.model import Transformer
from attention_viz.data.tasks import heldout_strings, target_or_none, task_max_len
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.importance import head_importance, head_means
from attention_viz.qkstats import qk_statistics
from attention_viz.service import texts
from attention_viz.service.limits import EXTRA_DECODE_STEPS, MEAN_REFERENCE_STRINGS, SCALE_CHOICES
from attention_viz.service.models import Abilities, HeadMeans, Run, Steps, frozen
from attention_viz.service.requests import HeadRequest, Settings, model_keys
from attention_viz.service.scores import EOS


def additive_steps(scores: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """Figure 2 (left)'s intermediates for additive attention: scores w_hᵀ tanh(q_h + k_h) [Q, K] (nothing scales
    them, so "scaled" is the same), masked (-inf where hidden), weights (softmax; exactly 0 where masked), output."""
    masked = scores if mask is None else scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(masked, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return {"scores": scores, "scaled": scores, "masked": masked, "weights": weights, "output": weights @ v}


class OwnModel:
    """One of our Transformers (eval mode, shared) with its card (None when untrained) and the app's tokenizer."""

    sink = EOS

    def __init__(self, network: Transformer, card: dict | None, tokenizer: CharTokenizer, device: torch.device,
                 means: HeadMeans | None = None) -> None:
        self.network, self.card, self.tokenizer, self.device = network, card, tokenizer, device
        self.shape = network.config
        self._means = means or self.head_means
        additive = self.shape.compatibility == "additive"
        self.abilities = Abilities(writes_text=True, fills_masks=False, causal=True,
                                   compatibility=self.shape.compatibility,
                                   scalings=() if additive else tuple(SCALE_CHOICES), d_k_fixed=False,
                                   scored_on="task" if card is not None else None)

    @property
    def keys(self) -> dict[str, int]:
        return model_keys(self.shape)

    @property
    def task(self) -> str:
        """Its task ("copy" for the untrained model: the reference of its means)."""
        return self.card.get("task", "copy") if self.card else "copy"

    def tokens(self, text: str) -> list[str]:
        return self.tokenizer.tokens(self.tokenizer.encode(text).ids)

    def _switches(self, settings: Settings, heads: bool = True) -> dict:
        """core's arguments under `settings`: its Variation (without the heads off when not `heads`) and, for mean
        ablation, the heads' means (computed first)."""
        if not (heads and settings.heads_off):
            return {"variation": replace(settings.variation, heads_off=(), ablation="zero")}
        means = self._means(settings) if settings.ablation == "mean" else None
        return {"variation": settings.variation, "head_means": means}

    def _ids(self, run: Run) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.tensor([run.src_ids], device=self.device),  # (1, S)
                torch.tensor([run.tgt_ids], device=self.device))  # (1, T)

    def run(self, settings: Settings) -> Run:
        tok, card = self.tokenizer, self.card
        src_ids = tok.encode(settings.text).ids + [tok.pad_id] * settings.pad_tokens
        src = torch.tensor([src_ids], device=self.device)  # (1, S)
        # The tasks' answers are at most as long as the text; a trained model may overrun a little (shown as
        # unfinished), an untrained one never emits <eos>, so it decodes exactly as many tokens as the source has.
        max_len = len(settings.text) + 1 + (EXTRA_DECODE_STEPS if card is not None else 0)
        with torch.inference_mode():
            generated, maps = self.network.greedy_decode(src, max_len=max_len, bos_id=tok.bos_id, eos_id=tok.eos_id,
                                                         **self._switches(settings))
        out_ids = generated[0].tolist()
        tgt_ids = [tok.bos_id] + out_ids[:-1]  # the decoder input whose maps greedy_decode returned
        arrays = frozen({key: value[0] for key, value in maps.to_numpy().items()})  # key -> (H, Q, K)
        return Run(
            settings=settings, config=self.shape, card=card,
            src_ids=tuple(src_ids), tgt_ids=tuple(tgt_ids),
            src_tokens=tuple(tok.tokens(src_ids)), tgt_tokens=tuple(tok.tokens(tgt_ids)),
            generated=tuple(tok.tokens(out_ids)), output=tok.decode(out_ids), finished=tok.eos_id in out_ids,
            expected=target_or_none(card["task"], settings.text) if card and "task" in card else None,
            maps=arrays,
        )

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            _, maps = self.network(*self._ids(run), **self._switches(settings))
        return {key: value[0] for key, value in maps.to_numpy().items()}

    def masks_under(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        return run.masks_under(settings)

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]]:
        with torch.inference_mode():
            steps = self.network.step_maps(*self._ids(run), **self._switches(run.settings))
        return [{key: value[0] for key, value in step.to_numpy().items()} for step in steps]

    def steps(self, run: Run, request: HeadRequest) -> Steps:
        """The inputs are what the attention receives in forward on the run's ids (Transformer.attention_inputs:
        the stacks run up to that attention, no hooks on the shared model)."""
        settings, kind, head = run.settings, request.kind, request.head
        module = self.network.attention_module(kind, request.layer)
        with torch.inference_mode():
            query, key, value, mask = self.network.attention_inputs(
                *self._ids(run), kind, request.layer, **self._switches(settings),
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

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            norms = self.network.value_norms(*self._ids(run), **self._switches(run.settings))
        return {key: value[0].float().cpu().numpy() for key, value in norms.items()}

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Over its task's first MEAN_REFERENCE_STRINGS held-out strings (the untrained model's: copy's)."""
        task = self.task
        strings = heldout_strings(min(task_max_len(task), self.tokenizer.max_len), MEAN_REFERENCE_STRINGS, task=task)
        with torch.inference_mode():
            return head_means(self.network, strings, task, self.tokenizer, **self._switches(settings, heads=False))

    def head_importance(self, settings: Settings, ablation: str, n_texts: int, chunk: int,
                        partial: Callable | None = None):
        return head_importance(self.network, self.card["task"], scale=settings.scale, ablation=ablation,
                               n_texts=n_texts)

    def qk_statistics(self, n_texts: int, sentences: tuple[str, ...]) -> dict:
        card = self.card
        strings = heldout_strings(card["max_len"], n_texts, task=card["task"])
        return qk_statistics(self.network, strings, tokenizer=CharTokenizer(max_len=card["max_len"]),
                             scale=card["scale"], keep_logits=True)

    def qk_texts(self, n_texts: int, sentences: tuple[str, ...]) -> str:
        return f"{n_texts} held-out strings of its task ({self.card['task']}), decoded as it writes them"

    def notes(self, run: Run) -> list[str]:
        return texts.own_notes(run)

    def output_text(self, run: Run) -> str:
        return texts.own_output(run)
