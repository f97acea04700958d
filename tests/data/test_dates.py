"""The dates task: dates in words are valid and parse back, ISO targets, clear errors, the known alignment; and the
string tasks still draw exactly what their shipped models were trained and scored on."""

import datetime
import hashlib
import random

import pytest

from attention_viz.data.tasks import (
    DATE_YEARS,
    DATES_ALPHABET,
    DATES_MAX_LEN,
    DAYS,
    MONTHS,
    alignment,
    batches,
    date_in_words,
    heldout_strings,
    make_batch,
    parse_date,
    sample_dates,
    target,
    target_or_none,
    task_alphabet,
    task_max_len,
)
from attention_viz.data.tokenizer import CharTokenizer


def test_the_string_tasks_draw_what_they_drew_before_dates():
    """The shipped copy/reverse/sort models and their held-out scores rest on exactly these draws."""
    held = heldout_strings(20)
    assert held[:5] == ["rnnvlddztwiyatolj", "y", "yjtcmntctcr", "onrreqg", "mvitzdjw"]
    assert hashlib.sha256(repr(held).encode()).hexdigest() == (
        "4e71d5ae1cb0a54cacd3434fd5c5d1148f245945d75bb6bd174052b567184428")
    assert heldout_strings(20, task="reverse") == held == heldout_strings(20, task="sort")
    assert heldout_strings(8)[:3] == ["nnvldd", "fmmabv", "afyjt"]
    tok = CharTokenizer(20)
    first = next(batches("reverse", tok, 3, seed=0))
    assert [tok.decode(row) for row in first.src] == ["tkgnkuhmpxnht", "uznspdcbwiojiqfolnbx", "c"]


def test_days_are_spelled_the_usual_way():
    assert len(DAYS) == 31 and len(set(DAYS)) == 31
    assert (DAYS[0], DAYS[1], DAYS[2], DAYS[4], DAYS[7], DAYS[8], DAYS[11]) == (
        "first", "second", "third", "fifth", "eighth", "ninth", "twelfth")
    assert (DAYS[19], DAYS[20], DAYS[21], DAYS[22], DAYS[28], DAYS[29], DAYS[30]) == (
        "twentieth", "twenty first", "twenty second", "twenty third", "twenty ninth", "thirtieth", "thirty first")
    assert date_in_words(datetime.date(2026, 11, 22)) == "twenty second of november 2026"
    assert date_in_words(datetime.date(1999, 5, 1)) == "first of may 1999"


@pytest.mark.parametrize("seed", range(40))
def test_generated_dates_are_valid_and_parse_back(seed):
    texts = sample_dates(250, random.Random(seed))
    assert texts == sample_dates(250, random.Random(seed))
    for text in texts:
        date = parse_date(text)
        assert date.year in DATE_YEARS and date_in_words(date) == text
        assert target("dates", text) == date.isoformat() == f"{date.year:04d}-{date.month:02d}-{date.day:02d}"
        assert set(text) <= set(DATES_ALPHABET) and len(text) <= DATES_MAX_LEN


def test_generated_dates_cover_the_calendar():
    dates = [parse_date(text) for text in sample_dates(20_000, random.Random(0))]
    assert {d.day for d in dates} == set(range(1, 32)) and {d.month for d in dates} == set(range(1, 13))
    assert min(d.year for d in dates) < 1910 and max(d.year for d in dates) > 2089
    assert set("".join(date_in_words(d) for d in dates)) == set(DATES_ALPHABET) - set("kqz")  # none in the words


@pytest.mark.parametrize("year", [1900, 1999, 2000, 2024, 2026, 2099])
def test_every_day_of_a_year_goes_to_words_and_back(year):
    day, days = datetime.date(year, 1, 1), 0
    while day.year == year:
        text = date_in_words(day)
        assert parse_date(text) == day and target("dates", text) == day.isoformat()
        day, days = day + datetime.timedelta(days=1), days + 1
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    assert days == (366 if leap else 365)


def test_leap_days():
    assert target("dates", "twenty ninth of february 2024") == "2024-02-29"
    assert target("dates", "twenty ninth of february 2000") == "2000-02-29"
    for text in ("twenty ninth of february 1900", "twenty ninth of february 2026", "twenty ninth of february 2100"):
        with pytest.raises(ValueError, match="february .* has no twenty ninth day"):
            target("dates", text)


def test_the_longest_date_fits_the_task_max_len():
    assert len("twenty seventh of september 2026") == 32 == DATES_MAX_LEN == task_max_len("dates")
    assert task_max_len("reverse") == 20 and task_alphabet("dates") == DATES_ALPHABET
    assert max(len(date_in_words(d)) for d in (datetime.date(2026, 9, 27), datetime.date(1999, 9, 23))) == 32
    with pytest.raises(ValueError, match="dates run to 32 characters"):
        next(batches("dates", CharTokenizer(20), 4, seed=0))
    with pytest.raises(ValueError, match="unknown task"):
        task_max_len("rot13")


@pytest.mark.parametrize("text, message", [
    ("hello", "is not a date in words"),
    ("", "is not a date in words"),
    ("First of may 1999", "is not a date in words"),          # capitals: lower case only
    ("first of may  1999", "is not a date in words"),         # two spaces
    ("first of may 99", "is not a date in words"),            # a two-digit year
    ("first may 1999", "is not a date in words"),             # no "of"
    ("1st of may 1999", "is not a date in words"),
    ("twenty second of november 2026 ", "is not a date in words"),
    ("one of may 1999", "'one' is not a day of the month"),
    ("thirty second of may 1999", "'thirty second' is not a day of the month"),
    ("twentyfirst of may 1999", "'twentyfirst' is not a day of the month"),
    ("first of mayy 1999", "'mayy' is not a month"),
    ("thirty first of april 2026", "april 2026 has no thirty first day"),
    ("thirtieth of february 2024", "february 2024 has no thirtieth day"),
    ("first of may 0000", "may 0000 has no first day"),
])
def test_target_refuses_what_is_not_a_date(text, message):
    with pytest.raises(ValueError, match=message):
        target("dates", text)
    assert target_or_none("dates", text) is None


def test_target_or_none():
    assert target_or_none("dates", "first of may 1999") == "1999-05-01"
    assert target_or_none("reverse", "hello") == "olleh"
    with pytest.raises(ValueError, match="unknown task"):
        target_or_none("rot13", "hello")


def test_alignment_points_year_month_and_day_digits_at_their_words():
    text = "twenty second of november 2026"
    rows = alignment("dates", text)
    assert len(rows) == len(target("dates", text)) == 10
    words = ["".join(text[i] for i in row) for row in rows]
    assert words == ["2", "0", "2", "6", "", "november", "november", "", "twenty second", "twenty second"]
    assert rows[:4] == [(26,), (27,), (28,), (29,)] and rows[4] == rows[7] == ()
    assert rows[5] == tuple(range(17, 25)) and rows[8] == tuple(range(13))


@pytest.mark.parametrize("seed", range(5))
def test_alignment_rows_hold_the_written_digit_or_its_word(seed):
    for text in sample_dates(100, random.Random(seed)):
        date, rows = parse_date(text), alignment("dates", text)
        day, month = ("".join(text[i] for i in row) for row in (rows[8], rows[5]))
        assert day == DAYS[date.day - 1] and month == MONTHS[date.month - 1] and rows[9] == rows[8]
        answer = target("dates", text)
        assert all(text[row[0]] == answer[t] for t, row in enumerate(rows[:4]))


def test_heldout_dates_are_fixed_dates_and_batches_hold_their_targets():
    held = heldout_strings(32, task="dates")
    assert len(held) == 1000 and held == heldout_strings(32, task="dates")
    assert all(parse_date(text) for text in held)
    tok = CharTokenizer(DATES_MAX_LEN)
    batch = next(batches("dates", tok, 8, seed=0))
    texts = [tok.decode(row) for row in batch.src]
    assert [tok.decode(row) for row in batch.tgt_out] == [target("dates", text) for text in texts]
    assert make_batch(texts, "dates", tok).src.equal(batch.src)
    assert set(texts).isdisjoint(held) or len(set(texts) & set(held)) < 3  # independent draws
