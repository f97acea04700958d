"""One traced pass: named probe points per map key, where a pass's interventions act and its recorders keep.

    traced = model.traced(src, tgt, variation=variation, keep=("v", "heads"))   # ours or a real model's
    traced.kept["decoder.1.cross_attn"]["heads"]        # [B, H, Q, d_v]: each head's output before W_O

The points of one attention, in the order a pass reaches them: inputs (query [B, Q, D], key, value [B, K, D], mask:
what it receives; ours), q, k, v per head [B, H, Q|K, d] as Eq. 1 reads them (a real model's q, k as its projections
give them, grouped keys and values repeated), weights [B, H, Q, K] and heads [B, H, Q, d_v] (each head's output before
W_O and any switch). Interventions act at heads (core.ablation.HeadSwitch: heads off by zero or mean, gates). A pass
that switches and keeps nothing has no probes (None): the plain pass, bit for bit. Probes belong to one call.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import torch

from attention_viz.core.ablation import HeadSwitch
from attention_viz.core.maps import AttentionMaps

POINTS = ("inputs", "q", "k", "v", "weights", "heads")
_POINTS = frozenset(POINTS)


class Stop(Exception):
    """Raised by a probe that stops its pass (Probe.stop) once it has kept every point it keeps."""


@dataclass(slots=True)
class Probe:
    """One attention's probe points in one pass: the switch on its heads' outputs, and the points it keeps."""

    switch: HeadSwitch | None = None
    keep: frozenset[str] = frozenset()
    kept: dict[str, object] = field(default_factory=dict)
    stop: bool = False  # the pass ends here once every point is kept (Stop): what comes after it is never run
    records: frozenset[str] = frozenset()  # points the pass records for itself (its maps, "weights"; what a real
    # model's added, hub.attention.RECORDED; a long pass's summaries, q, k and lse), kept beside those asked
    points: frozenset[str] = field(init=False)  # keep | records: every point it keeps

    def __post_init__(self) -> None:
        self.points = self.keep | self.records

    def __call__(self, point: str, value: object) -> None:
        """The pass at `point`: its value kept where asked or recorded."""
        if point in self.points:
            self.kept[point] = value
            if self.stop and self.kept.keys() >= self.keep:
                raise Stop

    def attended(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, weights: torch.Tensor | None,
                 heads: torch.Tensor) -> torch.Tensor:
        """Eq. 1's points kept where asked; heads [B, H, Q, d_v] -> the same, switched."""
        if self.points:
            for point, value in (("q", q), ("k", k), ("v", v), ("weights", weights), ("heads", heads)):
                if point in self.points:
                    self(point, value)
        return heads if self.switch is None else self.switch(heads)


Trace = dict[str, Probe]  # map key -> its probe


def trace(keys: Collection[str], switches: Mapping[str, HeadSwitch] | None = None, keep: Collection[str] = (),
          at: Collection[str] | None = None, records: Collection[str] = ()) -> Trace | None:
    """The probes of one pass over a model's map keys: its heads' switches (core.ablation.switches), the points
    `keep` kept at the keys `at` (None: every key) and those the pass records for itself at every key (`records`);
    None when nothing is switched, kept or recorded."""
    keep, records = frozenset(keep), frozenset(records)
    if not keep <= _POINTS:
        raise ValueError(f"a pass keeps the points {', '.join(POINTS)}; got {sorted(keep - _POINTS)}")
    if not switches and not keep and not records:
        return None
    switches = switches or {}
    return {key: Probe(switches.get(key), kept, records=records) for key in keys
            if (kept := keep if at is None or key in at else frozenset()) or records or key in switches}


def kept(probes: Trace | None) -> dict[str, dict[str, object]]:
    """Map key -> point -> what the probes of a pass kept of the points asked (keys that kept none left out)."""
    return {key: points for key, probe in (probes or {}).items()
            if (points := {point: value for point, value in probe.kept.items() if point in probe.keep})}


def recorded(probes: Trace | None, point: str) -> dict[str, object]:
    """Map key -> the value recorded at `point` by the probes of a pass (where it reached that point), in their
    order."""
    return {key: probe.kept[point] for key, probe in (probes or {}).items() if point in probe.kept}


@dataclass(frozen=True)
class Traced:
    """One traced pass: logits [B, T, V] (a model without an output head: its last states), every map, and what its
    probes kept (map key -> point -> value)."""

    logits: torch.Tensor
    maps: AttentionMaps
    kept: dict[str, dict[str, object]]

