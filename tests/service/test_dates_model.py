"""The dates model in the app: picked by a clear label, texts up to its 32 characters accepted, a date run checked
against the task's answer, free text run without one, and its alphabet said honestly."""

import pytest

from attention_viz.data.tasks import target
from attention_viz.service.catalog import Catalog, longest_text
from attention_viz.service.limits import DATE_EXAMPLES, EXAMPLES
from attention_viz.service.requests import parse_settings
from attention_viz.service.runs import Runs
from attention_viz.service.texts import alphabet_text
from attention_viz.service.views import Views

DATES = "dates/sqrt_dk"


@pytest.fixture(scope="module")
def views(one_thread):
    return Views(Runs(Catalog()))  # the shipped models


def run(views, text, model=DATES):
    return views.runs.run(parse_settings(views.runs.catalog, text, model, 16))


def test_the_dates_model_is_in_the_picker_with_a_date_to_type(views):
    assert ("dates (trained with 1/√d_k)", DATES) in views.runs.catalog.model_choices
    dates = list(views.model_controls(DATES, 16).examples)  # its own examples, offered with it only
    assert dates == DATE_EXAMPLES and all(target("dates", example) for example in dates)
    assert not any(" of " in example for example in views.model_controls("reverse/sqrt_dk", 16).examples)
    assert all(len(example) <= views.runs.catalog.tokenizer.max_len for example in [*EXAMPLES, *DATE_EXAMPLES])


def test_the_app_takes_texts_as_long_as_its_longest_model_was_trained_on(views):
    catalog = views.runs.catalog
    assert catalog.tokenizer.max_len == max(card["max_len"] for card in catalog.cards.values()) == 32
    assert run(views, "twenty seventh of september 2026").output == "2026-09-27"  # 32 characters
    with pytest.raises(ValueError, match="^Text is 33 characters; the maximum is 32.$"):
        run(views, "twenty seventh of september 20266")
    assert longest_text([]) == 20 and longest_text([{"max_len": 8}, {}]) == 20  # the untrained model keeps 20
    assert longest_text([{"max_len": 8}, {"max_len": 40}]) == 40


def test_a_date_runs_to_its_iso_form_and_is_checked(views):
    result = run(views, "twenty second of november 2026")
    assert (result.output, result.expected, result.finished) == ("2026-11-22", "2026-11-22", True)
    notes = views.visualize(result.settings).info
    assert "Output `2026-11-22` ✓ matches the task's answer `2026-11-22`." in notes
    assert "new to it" not in notes and "Trained on texts of at most" not in notes
    assert run(views, "first of may 1999").output == "1999-05-01"
    assert run(views, "twenty ninth of february 2024").output == "2024-02-29"


def test_free_text_runs_on_the_dates_model_without_an_answer(views):
    result = run(views, "hello")
    assert result.expected is None and result.output != ""
    notes = views.visualize(result.settings).info
    assert "task's answer" not in notes and "**dates**" in notes
    assert run(views, "thirtieth of february 2024").expected is None  # the form of a date, but no such day


def test_capitals_run_lower_cased_and_other_characters_are_named(views):
    result = run(views, "First of May 1999")
    assert (result.settings.text, result.output, result.expected) == ("first of may 1999", "1999-05-01", "1999-05-01")
    notes = views.visualize(result.settings).info
    assert "the model was trained on a–z, space and 0–9 only, so `First of May 1999` runs as" in notes
    assert "Trained on a–z, space and 0–9 only; new to it: '!', '-'." in views.visualize(
        run(views, "first of may 1999!-").settings).info


def test_a_string_model_on_a_longer_text_says_what_it_was_trained_on(views):
    notes = views.visualize(run(views, "abcdefghijklmnopqrstuvwxy", "reverse/sqrt_dk").settings).info
    assert "Trained on texts of at most 20 characters; this one has 25." in notes
    assert "Trained on a–z only; new to it: ' '" in views.visualize(run(views, "a b", "reverse/sqrt_dk").settings).info


def test_alphabets_in_words():
    assert alphabet_text("abcdefghijklmnopqrstuvwxyz") == "a–z"
    assert alphabet_text("abcdefghijklmnopqrstuvwxyz 0123456789") == "a–z, space and 0–9"
    assert alphabet_text("abxyz") == "a, b and x–z"
