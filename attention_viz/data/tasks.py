"""Toy sequence-to-sequence tasks (copy, reverse, sort) over random strings, generated on the fly."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from attention_viz.data.tokenizer import CharTokenizer

ALPHABET = "abcdefghijklmnopqrstuvwxyz"  # the characters training strings are drawn from
TASKS = ("copy", "reverse", "sort")  # cross-attention: a diagonal, an anti-diagonal, a permutation
HELDOUT_SEED = 1_000_003  # the held-out strings' own seed; training streams use the run's seed
HELDOUT_SIZE = 1000

# Axis legend: B batch, S source positions (text + <eos>), T target positions (<bos> + text, or text + <eos>).


@dataclass(frozen=True)
class Batch:
    """One padded batch: encoder input, decoder input (starts with <bos>) and the decoder's targets."""

    src: torch.Tensor  # [B, S] long
    tgt_in: torch.Tensor  # [B, T] long
    tgt_out: torch.Tensor  # [B, T] long

    def to(self, device: torch.device | str) -> Batch:
        """The same batch on `device`."""
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device))


def target(task: str, text: str) -> str:
    """The string the model must produce for `text` under `task`."""
    if task == "copy":
        return text
    if task == "reverse":
        return text[::-1]
    if task == "sort":
        return "".join(sorted(text))
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


def alignment(task: str, text: str) -> list[tuple[int, ...]]:
    """The task's known alignment: for each character t of target(task, text), the source positions that hold
    what it is written from (copy: t; reverse: n-1-t; sort: every position holding that character).

    Cross-attention that has learnt the task puts its weight there; `core.maps.alignment_scores` measures it.
    The <eos> steps have no entry: nothing in the text says where they should look.
    """
    answer = target(task, text)
    n = len(text)
    if task == "copy":
        return [(t,) for t in range(n)]
    if task == "reverse":
        return [(n - 1 - t,) for t in range(n)]
    return [tuple(i for i, ch in enumerate(text) if ch == written) for written in answer]  # sort


def sample_strings(n: int, max_len: int, rng: random.Random, alphabet: str = ALPHABET) -> list[str]:
    """`n` random strings, lengths uniform in 1..max_len, characters uniform over `alphabet`."""
    return ["".join(rng.choices(alphabet, k=rng.randint(1, max_len))) for _ in range(n)]


def heldout_strings(max_len: int, n: int = HELDOUT_SIZE, seed: int = HELDOUT_SEED) -> list[str]:
    """The fixed evaluation strings: drawn from their own seed, never from a training stream's.

    Short strings recur by necessity (there are only 26 of length 1), so "held out" means an
    independent draw, not a set disjoint from everything seen in training.
    """
    return sample_strings(n, max_len, random.Random(seed))


def make_batch(texts: list[str], task: str, tokenizer: CharTokenizer) -> Batch:
    """Encode `texts` and their targets into padded (src, tgt_in, tgt_out) tensors."""
    src, tgt_in, tgt_out = [], [], []
    for text in texts:
        src.append(tokenizer.encode(text).ids)  # text + <eos>
        answer = tokenizer.encode(target(task, text)).ids  # answer + <eos>
        tgt_in.append([tokenizer.bos_id] + answer[:-1])  # <bos> + answer
        tgt_out.append(answer)
    return Batch(_pad(src, tokenizer.pad_id), _pad(tgt_in, tokenizer.pad_id), _pad(tgt_out, tokenizer.pad_id))


def batches(task: str, tokenizer: CharTokenizer, batch_size: int, seed: int) -> Iterator[Batch]:
    """An endless, seeded stream of fresh training batches for `task`."""
    target(task, "")  # fail fast on an unknown task
    rng = random.Random(seed)
    while True:
        yield make_batch(sample_strings(batch_size, tokenizer.max_len, rng), task, tokenizer)


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids to one length."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)  # [B, width]
