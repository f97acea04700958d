"""Sequence-to-sequence tasks, generated on the fly: copy, reverse and sort random strings; dates in words to ISO."""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from attention_viz.data.tokenizer import DEFAULT_MAX_LEN, CharTokenizer

ALPHABET = "abcdefghijklmnopqrstuvwxyz"  # the characters training strings are drawn from
# cross-attention: a diagonal, an anti-diagonal, a permutation, and words reordered (the year jumps to the front)
TASKS = ("copy", "reverse", "sort", "dates")
HELDOUT_SEED = 1_000_003  # the held-out strings' own seed; training streams use the run's seed
HELDOUT_SIZE = 1000

# The dates task: "twenty second of november 2026" -> "2026-11-22"; lower case, one space between words.
DATE_YEARS = range(1900, 2100)  # the years training and held-out dates are drawn from
MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_UNITS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth")
_TEENS = ("tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
          "eighteenth", "nineteenth")
DAYS = (_UNITS + _TEENS + ("twentieth",) + tuple(f"twenty {unit}" for unit in _UNITS)
        + ("thirtieth", "thirty first"))  # DAYS[d - 1] is day d in words
DATES_ALPHABET = ALPHABET + " 0123456789"  # what dates are written with (of a-z, the words never use k, q, z)
DATES_MAX_LEN = max(len(day) for day in DAYS) + len(" of ") + max(len(month) for month in MONTHS) + len(" 2000")  # 32
_DATE_TEXT = re.compile(r"([a-z]+(?: [a-z]+)?) of ([a-z]+) ([0-9]{4})")  # day words, month, year

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
    """The string the model must produce for `text` under `task` (ValueError for dates when `text` is not one)."""
    if task == "copy":
        return text
    if task == "reverse":
        return text[::-1]
    if task == "sort":
        return "".join(sorted(text))
    if task == "dates":
        return parse_date(text).isoformat()
    raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")


def target_or_none(task: str, text: str) -> str | None:
    """target(task, text), or None when `text` is not an input of the (known) task, such as free text for dates."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    try:
        return target(task, text)
    except ValueError:
        return None


def date_in_words(date: datetime.date) -> str:
    """`date` as the dates task writes it: "twenty second of november 2026" (a year of four digits)."""
    return f"{DAYS[date.day - 1]} of {MONTHS[date.month - 1]} {date.year:04d}"


def parse_date(text: str) -> datetime.date:
    """The date written in words by `text` ("first of may 1999"); ValueError naming what does not fit the form."""
    form = 'a date in words such as "twenty second of november 2026"'
    match = _DATE_TEXT.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not {form}: day, \"of\", month, four-digit year, lower case, single spaces")
    day, month, year = match.groups()
    if day not in DAYS:
        raise ValueError(f"{day!r} is not a day of the month in words (first .. thirty first)")
    if month not in MONTHS:
        raise ValueError(f"{month!r} is not a month (january .. december)")
    try:
        return datetime.date(int(year), MONTHS.index(month) + 1, DAYS.index(day) + 1)
    except ValueError:
        raise ValueError(f"{month} {year} has no {day} day") from None


def alignment(task: str, text: str) -> list[tuple[int, ...]]:
    """The task's known alignment: for each character t of target(task, text), the source positions that hold
    what it is written from (copy: t; reverse: n-1-t; sort: every position holding that character; dates: a
    year digit, the same digit in the text; a month digit, the month's word; a day digit, the day's words with
    the space between them; each "-", nothing).

    Cross-attention that has learnt the task puts its weight there; `service.scores` measures it (core.maps.weight_on).
    The <eos> steps have no entry: nothing in the text says where they should look.
    """
    answer = target(task, text)
    n = len(text)
    if task == "copy":
        return [(t,) for t in range(n)]
    if task == "reverse":
        return [(n - 1 - t,) for t in range(n)]
    if task == "dates":
        day_end = text.index(" of ")  # text: DAY of MONTH YYYY; answer: YYYY-MM-DD
        month_start = day_end + len(" of ")
        day, month = tuple(range(day_end)), tuple(range(month_start, n - len(" YYYY")))
        year = [(n - 4 + k,) for k in range(4)]
        return [*year, (), month, month, (), day, day]
    return [tuple(i for i, ch in enumerate(text) if ch == written) for written in answer]  # sort


def sample_strings(n: int, max_len: int, rng: random.Random, alphabet: str = ALPHABET) -> list[str]:
    """`n` random strings, lengths uniform in 1..max_len, characters uniform over `alphabet`."""
    return ["".join(rng.choices(alphabet, k=rng.randint(1, max_len))) for _ in range(n)]


def sample_dates(n: int, rng: random.Random, years: range = DATE_YEARS) -> list[str]:
    """`n` dates in words, each day of `years` equally likely (so February 29 only in leap years)."""
    first, last = datetime.date(years[0], 1, 1).toordinal(), datetime.date(years[-1], 12, 31).toordinal()
    return [date_in_words(datetime.date.fromordinal(rng.randint(first, last))) for _ in range(n)]


def sample_texts(task: str, n: int, max_len: int, rng: random.Random) -> list[str]:
    """`n` inputs of `task`: dates in words for dates, else sample_strings (the same draws as before dates existed)."""
    return sample_dates(n, rng) if task == "dates" else sample_strings(n, max_len, rng)


def task_max_len(task: str) -> int:
    """The longest input `task` draws, in characters: 20 for the string tasks, 32 for dates."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    return DATES_MAX_LEN if task == "dates" else DEFAULT_MAX_LEN


def task_alphabet(task: str) -> str:
    """The characters the inputs of `task` are written with."""
    return DATES_ALPHABET if task == "dates" else ALPHABET


def heldout_strings(max_len: int, n: int = HELDOUT_SIZE, seed: int = HELDOUT_SEED, task: str = "copy") -> list[str]:
    """The fixed evaluation inputs of `task`: drawn from their own seed, never from a training stream's.

    Short strings recur by necessity (there are only 26 of length 1), so "held out" means an
    independent draw, not a set disjoint from everything seen in training. The string tasks share one draw.
    """
    return sample_texts(task, n, max_len, random.Random(seed))


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
    if tokenizer.max_len < task_max_len(task) and task == "dates":  # also fails fast on an unknown task
        raise ValueError(f"dates run to {DATES_MAX_LEN} characters; this tokenizer takes at most {tokenizer.max_len}")
    rng = random.Random(seed)
    while True:
        yield make_batch(sample_texts(task, batch_size, tokenizer.max_len, rng), task, tokenizer)


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """Right-pad lists of ids to one length."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)  # [B, width]
