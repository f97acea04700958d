"""Snapshots during training: the attention maps of fixed probe inputs at log-spaced steps (attention forming).

    recorder = SnapshotRecorder(settings, log_steps(settings.steps), probe_texts(settings.max_len))
    model, card = train(settings, observe=recorder)
    recorder.save("attention_viz/data/models/study/NAME", model="NAME")   # beside the checkpoint NAME

The file format and its loader are attention_viz.data.snapshots. Recording runs the model in eval mode
under no_grad and draws no random numbers, so a run with snapshots trains exactly as one without.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attention_viz.core.model import Transformer
from attention_viz.data.snapshots import quantise, save_snapshots
from attention_viz.data.tasks import heldout_strings, make_batch
from attention_viz.data.tokenizer import CharTokenizer
from attention_viz.train.trainer import TrainSettings, accuracies, sequence_loss

SNAPSHOT_POINTS = 24  # steps with a snapshot, 0 and the last included
PROBE_COUNT = 5


def log_steps(last: int, count: int = SNAPSHOT_POINTS) -> list[int]:
    """0, then at least count - 1 distinct steps from 1 to `last` (both included) evenly spaced on a log scale
    as far as integers allow (the first few are then consecutive); every step when last < count."""
    if last < count:
        return list(range(last + 1))
    points = count - 1
    while True:
        marks = sorted({round(last ** (i / (points - 1))) for i in range(points)})
        if len(marks) >= count - 1:
            return [0, *marks]
        points += 1


def probe_texts(max_len: int, count: int = PROBE_COUNT) -> list[str]:
    """`count` held-out strings of decreasing length, max_len down to about max_len / 2: the first held-out string
    of each length (the held-out strings have their own seed, never a training stream's)."""
    wanted = list(dict.fromkeys(round(max_len - i * (max_len - max(1, max_len // 2)) / max(1, count - 1))
                                for i in range(count)))
    pool = heldout_strings(max_len)
    return [next(text for text in pool if len(text) == n) for n in wanted]


class SnapshotRecorder:
    """A trainer observer that keeps every attention map of the probe inputs at the given steps.

    Also keeps, per snapshot, the training batch's loss and accuracies (as the trainer reports them) and the
    teacher-forced loss and accuracies on the probe inputs themselves.
    """

    def __init__(self, settings: TrainSettings, steps: list[int], texts: list[str]) -> None:
        self.settings, self.steps, self.texts = settings, sorted(set(steps)), list(texts)
        self.tokenizer = CharTokenizer(max_len=settings.max_len)
        self.batch = make_batch(self.texts, settings.task, self.tokenizer)
        self.recorded: list[int] = []
        self.maps: dict[str, list[np.ndarray]] = {}  # key -> float32 [P, H, Q, K] per recorded step
        self.train: dict[str, list] = {"loss": [], "token_acc": [], "exact_match": []}
        self.probe: dict[str, list] = {"loss": [], "token_acc": [], "exact_match": []}

    @torch.no_grad()
    def __call__(self, step: int, model: Transformer, batch: dict | None) -> None:
        if step not in self.steps or step in self.recorded:
            return
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        b = self.batch.to(device)
        try:
            logits, maps = model(b.src, b.tgt_in, scale=self.settings.scale)
        finally:
            model.train(was_training)
        for key, weights in maps.to_numpy().items():
            self.maps.setdefault(key, []).append(weights)  # (P, H, Q, K)
        self.recorded.append(step)
        for column in self.train:
            self.train[column].append(None if batch is None else round(float(batch[column]), 5))
        pad = self.tokenizer.pad_id
        token_acc, exact = accuracies(logits, b.tgt_out, pad)
        loss = sequence_loss(logits, b.tgt_out, pad).item()
        for column, value in zip(("loss", "token_acc", "exact_match"), (loss, token_acc, exact)):
            self.probe[column].append(round(value, 5))

    def final_maps(self) -> dict[str, np.ndarray]:
        """float32 [P, H, Q, K] per key at the last recorded step."""
        return {key: values[-1] for key, values in self.maps.items()}

    def save(self, stem: str | Path, **meta) -> Path:
        """Write STEM.snapshots.npz and STEM.snapshots.json (see attention_viz.data.snapshots); returns the JSON path."""
        if self.recorded != self.steps:
            missing = sorted(set(self.steps) - set(self.recorded))
            raise RuntimeError(f"snapshots missing at steps {missing}: was the recorder passed to train()?")
        return save_snapshots(stem, self.meta(**meta), self.quantised(), self.final_maps())

    def quantised(self) -> dict[str, np.ndarray]:
        """uint8 [n_recorded, P, H, Q, K] per key: the snapshots so far, as the file stores them."""
        return {key: quantise(np.stack(values)) for key, values in self.maps.items()}

    def meta(self, **extra) -> dict:
        """The snapshots' description so far (data.snapshots' JSON without the fields save_snapshots fills in)."""
        s = self.settings
        return {
            "task": s.task, "scale": s.scale, "compatibility": s.compatibility, "init": s.init, "d_k": s.d_k,
            "seed": s.seed, "steps": list(self.recorded), "probes": self.texts,
            "src_tokens": [self.tokenizer.tokens(self.tokenizer.encode(t).ids) for t in self.texts],
            "tgt_tokens": [self.tokenizer.tokens(row[: len(t) + 1]) for t, row in zip(self.texts, self.batch.tgt_in.tolist())],
            "teacher_forced": True, "train": self.train, "probe": self.probe, **extra,
        }
