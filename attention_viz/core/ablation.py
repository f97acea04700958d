"""Heads switched off (§3.2.2 taken apart): a head's output replaced before W_O, as a forward argument.

    heads_off = {"decoder.1.cross_attn": [0, 2]}       # our map keys -> head indices
    logits, maps = model(src, tgt, heads_off=heads_off)                     # "zero": Michel et al.'s gate ξ_h = 0
    logits, maps = model(src, tgt, heads_off=heads_off, ablation="mean", head_means=means)   # each head's mean

A switched-off head's weights are still computed and recorded (the maps show them); only what it passes to W_O
changes: zero, or its mean output over a reference batch (`head_means`), which keeps the average signal the
layers above expect and removes only what varies with the input. `gates` ([H] per key, 1 = on) multiply the
heads' outputs instead, for the gradient ∂L/∂ξ_h of Michel et al. (2019). Nothing off leaves every pass as it was,
bit for bit.

Axes: B batch, H heads, Q query positions, d_v the value width per head.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from attention_viz.core.messages import shown

ABLATIONS = ("zero", "mean")


@dataclass(frozen=True)
class HeadSwitch:
    """What one attention does to its heads' outputs [B, H, Q, d_v] before W_O."""

    heads: tuple[int, ...] = ()          # heads switched off
    means: torch.Tensor | None = None    # [H, d_v]: each head's mean output (mean ablation); None: zero
    gates: torch.Tensor | None = None    # [H] or per batch row [B, H]: every head's output times its gate (1 = as it
                                         # is); with means, a gate of 0 gives the head's mean instead of 0

    def __call__(self, heads: torch.Tensor) -> torch.Tensor:
        """heads [B, H, Q, d_v] -> the same with this switch applied."""
        if self.gates is not None:
            gates = self.gates.to(heads.dtype)
            gates = gates[None, :, None, None] if gates.dim() == 1 else gates[:, :, None, None]  # (1|B, H, 1, 1)
            if self.means is None:
                heads = heads * gates
            else:  # 1 keeps the head as it is, 0 puts its mean output in its place
                heads = heads * gates + (1 - gates) * self.means.to(heads.dtype)[None, :, None, :]
            return heads
        if self.heads:
            heads = heads.clone()
            index = list(self.heads)
            if self.means is None:
                heads[:, index] = 0.0
            else:
                heads[:, index] = self.means[index].to(heads.dtype)[None, :, None, :]  # (1, n_off, 1, d_v)
        return heads


def switches(
    keys: Mapping[str, int],
    heads_off: Mapping[str, Sequence[int]] | None = None,
    ablation: str = "zero",
    head_means: Mapping[str, torch.Tensor] | None = None,
    gates: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, HeadSwitch] | None:
    """Checked per-attention switches from the user's arguments; None when nothing changes (the plain pass).

    keys: every map key of the model -> its number of heads. Raises ValueError naming an unknown key, a head out of
    range, an unknown ablation, missing or misshapen means, or every head of the model off.
    """
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation must be one of {list(ABLATIONS)}, got {shown(ablation)}")
    if not heads_off and not gates:
        return None
    result: dict[str, HeadSwitch] = {}
    for key, heads in (heads_off or {}).items():
        if key not in keys:
            raise ValueError(f"heads_off names {shown(key)}, which this model does not have; its keys are "
                             f"{', '.join(keys)}")
        if isinstance(heads, (str, bytes)) or not isinstance(heads, Sequence):
            raise ValueError(f"heads_off[{key!r}] must be a list of head indices, got {shown(heads)}")
        off = []
        for head in heads:
            if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < keys[key]:
                raise ValueError(f"heads_off[{key!r}]: head {shown(head)} does not exist; {key} has heads 0 to "
                                 f"{keys[key] - 1}")
            off.append(head)
        means = None
        if off and ablation == "mean":
            means = (head_means or {}).get(key)
            if means is None:
                raise ValueError(f"mean ablation needs head_means[{key!r}] ([H, d_v]: each head's mean output; "
                                 "see core.ablation.mean_outputs)")
            if means.dim() != 2 or means.size(0) != keys[key]:
                raise ValueError(f"head_means[{key!r}] must be [H, d_v] with H = {keys[key]}, got "
                                 f"{list(means.shape)}")
        if off:
            result[key] = HeadSwitch(tuple(sorted(set(off))), means)
    if sum(len(s.heads) for s in result.values()) == sum(keys.values()):
        raise ValueError("every head of the model is switched off; leave at least one on")
    for key, gate in (gates or {}).items():
        if key not in keys:
            raise ValueError(f"gates names {shown(key)}, which this model does not have")
        if gate.dim() not in (1, 2) or gate.shape[-1] != keys[key]:
            raise ValueError(f"gates[{key!r}] must have shape [{keys[key]}] or [B, {keys[key]}], got "
                             f"{list(gate.shape)}")
        if key in result:
            raise ValueError(f"{key!r} has both heads_off and gates; give one")
        means = (head_means or {}).get(key) if ablation == "mean" else None
        if ablation == "mean" and means is None:
            raise ValueError(f"mean ablation needs head_means[{key!r}] ([H, d_v]: each head's mean output)")
        result[key] = HeadSwitch(means=means, gates=gate)
    return result


def mean_outputs(outputs: Mapping[str, torch.Tensor], query_masks: Mapping[str, torch.Tensor | None] | None = None
                 ) -> dict[str, torch.Tensor]:
    """Each head's mean output [H, d_v] per key from the heads' outputs [B, H, Q, d_v] of a reference batch (a
    model's head_outputs), over the batch and the query positions that count (query_masks: key -> [B, Q] bool,
    e.g. the tokens that are not <pad>; None: every position): head_means for mean ablation."""
    means = {}
    for key, heads in outputs.items():
        mask = (query_masks or {}).get(key)
        if mask is None:
            means[key] = heads.mean(dim=(0, 2))
        else:
            weight = mask.to(heads.dtype)[:, None, :, None]  # (B, 1, Q, 1)
            means[key] = (heads * weight).sum(dim=(0, 2)) / weight.sum(dim=(0, 2)).clamp_min(1)
    return means
