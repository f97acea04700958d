"""A run's stacks read as one mixing each, for the explorer: attention rollout and attention flow (Abnar & Zuidema
2020) of every self-attention stack it has, computed by the package (core.rollout, core.flow) with the paper's
residual 0.5, and a sentence on what each covers.

Rollout costs under a millisecond and comes with every run. Flow solves T² maximum-flow problems on L·T² edges in
plain Python (its work grows as L·T⁴): it comes with a run only while L·T⁴ <= FLOW_WORK (about 10 ms a stack of CPU,
measured in docs/research.md), once per distinct run (the packed run is cached); past that the sentence says why.

Axes: L layers, T positions (queries = keys in self-attention).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from attention_viz.core.flow import MAX_FLOW_TOKENS, attention_flow
from attention_viz.core.maps import kind_key, layers_of
from attention_viz.core.rollout import rollout
from attention_viz.service.limits import FLOW_WORK

RESIDUAL = 0.5  # the paper's share of the residual connection in each layer's mixing matrix
STACK_KINDS = {"encoder": "encoder.self_attn", "decoder": "decoder.self_attn"}


def flow_refusal(n_layers: int, n_tokens: int) -> str | None:
    """Why attention flow is not computed for a stack of this size in the app (None: it is)."""
    if n_tokens > MAX_FLOW_TOKENS:
        return (f"Attention flow is not computed past {MAX_FLOW_TOKENS} tokens (it solves T² maximum-flow problems); "
                f"this stack has {n_tokens}.")
    if n_layers * n_tokens ** 4 > FLOW_WORK:
        return (f"Attention flow is computed in the app for short inputs only (layers × tokens⁴ at most {FLOW_WORK:,}, "
                f"about 10 ms a stack); this stack's {n_layers} layers × {n_tokens} tokens need more: "
                "attention_viz.attention_flow computes it in a notebook.")
    return None


def stack_views(maps: Mapping[str, np.ndarray], encoder_decoder: bool) -> dict[str, dict]:
    """Per self-attention kind: {"rollout": [T, T], "flow": [T, T] or None, "note": str}, from maps key -> [H, T, T].

    encoder_decoder: whether the decoder (if any) reads an encoder, so its rollout covers masked self-attention only.
    Flow is normalised per output row (the paper's code) so that its rows, like rollout's, sum to 1.
    """
    out = {}
    for stack, kind in STACK_KINDS.items():
        n_layers = layers_of(maps, STACK_KINDS[stack])
        if not n_layers:
            continue
        n_tokens = np.asarray(maps[kind_key(kind, 0)]).shape[-1]
        rolled = rollout(maps, stack, RESIDUAL)[0]  # (T, T)
        refusal = flow_refusal(n_layers, n_tokens)
        flow = None if refusal else attention_flow(maps, stack, RESIDUAL, normalise=True)[0]  # (T, T)
        note = (f"the {stack} stack's {n_layers} self-attention layer{'s' if n_layers != 1 else ''}, heads averaged, "
                f"residual {RESIDUAL} as Abnar & Zuidema (2020) define it")
        if stack == "decoder" and encoder_decoder:
            note += "; masked self-attention only: encoder-decoder attention mixes in source tokens and is left out"
        out[kind] = {"rollout": rolled, "flow": flow, "note": note + ".", "flow_note": refusal or ""}
    return out
