"""Cached runs: text + settings -> greedy decode and every attention map; the step view and comparisons from them.

A control that only changes the view (kind, layer, head, colour scale) never reruns the model: runs are cached
by the Settings that change the computation. Each run is asked of the model the settings name, as the service asks
any model (service.models.ServedModel: ours or a real one, whichever it is).

Axes: L layers, H heads, Q query positions, K key positions.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from attention_viz.core.maps import kind_key
from attention_viz.service.catalog import Catalog, SizedCache
from attention_viz.service.checks import check_choice
from attention_viz.service.limits import COMPARISONS, RUN_CACHE_BYTES
from attention_viz.service.models import Run, ServedModel, Steps
from attention_viz.service.requests import Settings, parse_head, parse_settings


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
    """About the bytes a run holds: its maps, a real model's masks and value norms, and a little for the rest."""
    arrays = [*run.maps.values(), *(run.applied or {}).values(), *(run.norms or {}).values()]
    return sum(array.nbytes for array in arrays) + 4096


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

    def attention_model(self, settings: Settings) -> ServedModel:
        """The model `settings` runs as the service asks it (service.models), its heads' means from this cache."""
        return self.catalog.attention_model(settings, self.head_means)

    def head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        """Each head's mean output [H, d_v] per map key under `settings`' scaling and masks: what mean ablation puts
        in a switched-off head's place. The reference: a trained model's task's first MEAN_REFERENCE_STRINGS
        held-out strings (the untrained model's: copy's), a real model's REAL_REFERENCE_TEXTS and what it writes for
        them; cached per model and switches."""
        plain = replace(settings.switched(heads_off=(), ablation="zero"), text="", typed=None, pad_tokens=0)
        return self._means(plain)

    def _head_means(self, settings: Settings) -> dict[str, torch.Tensor]:
        return self.catalog.attention_model(settings).head_means(settings)

    # -- runs

    def _run(self, settings: Settings) -> Run:
        """Greedy-decode the text and keep the maps of the last step (cached by `run`)."""
        return self.attention_model(settings).run(settings)

    def step_maps(self, run: Run) -> list[dict[str, np.ndarray]] | None:
        """Without the causal mask, each decode step's own decoder maps (step t: key -> [H, t + 1, K]; earlier rows
        change as tokens arrive); None under it, where step t's rows are rows 0..t of run.maps. Computed when asked
        (the packed run keeps them), not kept with the cached run: they are ~T/2 times its decoder maps."""
        if run.settings.causal_mask or "decoder.self_attn" not in run.kinds:
            return None
        return self.attention_model(run.settings).step_maps(run)

    def value_norms(self, run: Run) -> dict[str, np.ndarray]:
        """‖v_j^h W_O^h‖ per map key [H, K] of `run`'s own pass (its source and decoder input, its switches and heads
        off): with its maps, what flows (Kobayashi et al. 2020) is maps x these, key by key."""
        return self.attention_model(run.settings).value_norms(run)

    def teacher_forced_maps(self, run: Run, settings: Settings) -> dict[str, np.ndarray]:
        """Maps [H, Q, K] of one forward pass on `run`'s source and decoder input under other `settings`."""
        return self.attention_model(settings).teacher_forced_maps(run, settings)

    def steps(self, settings: Settings, kind: object, layer: object, head: object) -> Steps:
        """Every intermediate of Eq. 1 for one head (Figure 2, left), recomputed from that layer's inputs.

        The inputs are what the attention receives in forward on the run's ids; the weights are the map forward
        records.
        """
        run = self.run(settings)
        request = parse_head(run.config, kind, layer, head)
        return self.attention_model(settings).steps(run, request)

    def compare(self, settings: Settings, what: object, kind: object, layer: object, head: object) -> Comparison:
        """One head with a switch on (a) and off (b), on the same source and decoder input."""
        what = check_choice("comparison", what, {key: key.replace("_", " ") for key in COMPARISONS})
        run = self.run(settings)
        request = parse_head(run.config, kind, layer, head)
        if what == "position_bias" and not self.attention_model(settings).abilities.position_bias:
            raise ValueError("This model adds no position bias to QKᵀ: there is none to switch off. Compare it on a "
                             "model that adds one (T5, Bloom).")
        if what == "scaling":
            a, b = settings.switched(scale="sqrt_dk"), settings.switched(scale="none")
        else:
            a, b = settings.switched(**{what: True}), settings.switched(**{what: False})
        key = kind_key(request.kind, request.layer)
        weights_a = self.teacher_forced_maps(run, a)[key][request.head]
        weights_b = self.teacher_forced_maps(run, b)[key][request.head]
        queries, keys = run.tokens(request.kind)
        outputs = (self.run(a).output, self.run(b).output)
        model = self.attention_model(settings)  # the masks as it applies them under each setting
        masks = tuple(model.masks_under(run, s)[request.kind] for s in (a, b))
        return Comparison(what, COMPARISONS[what], weights_a, weights_b, queries, keys, outputs, masks)
