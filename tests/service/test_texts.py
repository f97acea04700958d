"""service.texts: the Markdown the notes are written in holds any text (a user's, a model's output, a token) as it is.

A code span is checked the way the page shows it: rendered by a CommonMark parser (markdown-it-py, what the app
renders the notes with), its <code> must hold exactly the text: backticks, spaces at the edges and Markdown or HTML
inside included.
"""

from __future__ import annotations

import html
import random
import re
import string

import pytest
from markdown_it import MarkdownIt

from attention_viz.service.texts import code

MARKDOWN = MarkdownIt("commonmark", {"html": False})
HOSTILE = ["a`b", "`", "``x", "x`", "```", " a ", "  ", " `a` ", "**b** [l](javascript:x) <i>", "a\\`b", "_x_", "|a|b|"]


def shown(markdown: str) -> list[str]:
    """The text of each <code> of the rendered Markdown, as a browser shows it."""
    return [html.unescape(found) for found in re.findall(r"<code>(.*?)</code>", MARKDOWN.render(markdown), re.S)]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_code_span_holds_the_text_as_it_is(text):
    assert shown(f"Output {code(text)} differs from {code('z')}.") == [text, "z"]


def test_random_printable_texts_survive_as_code():
    rng = random.Random(0)
    alphabet = string.printable[:95]  # printable ASCII, the untrained model's vocabulary: backticks and spaces too
    for _ in range(500):
        text = "".join(rng.choice(alphabet + "``  ") for _ in range(rng.randint(1, 12)))
        assert shown(f"x {code(text)} y") == [text], repr(text)


def test_an_empty_text_is_a_box_with_one_space():
    assert shown(f"Output {code('')}.") == [" "]


def test_notes_on_a_text_of_backticks_and_markup(views):
    """The notes of a run on such a text name its output and the answer inside their own code spans."""
    text = "a`b*c_<i>"
    settings = views.runs.settings(text, "reverse/sqrt_dk", 16, "sqrt_dk")
    run = views.runs.run(settings)
    info = views.visualize(settings).info
    spans = shown(info)
    assert run.expected == text[::-1] and run.expected in spans and (run.output or " ") in spans, (info, spans)


@pytest.mark.parametrize("factor, same, trained", [(1.0, "the same run as *off (plain q·k)*", False),
                                                   (0.25, "the same run as *1/√d_k (paper)*", True),
                                                   (0.1, None, False)])
def test_a_custom_factor_that_is_another_modes_says_so(views, factor, same, trained):
    """Custom factor 1 after "off" looked like nothing happened: the notes say it is that mode's run."""
    info = views.visualize(views.runs.settings("attention", "reverse/sqrt_dk", 16, "custom", factor)).info
    assert (same in info) if same else ("the same run as" not in info)
    assert ("not as it was trained" in info) is not trained
    assert "Running it with scaling" not in info and "held-out exact match" in info
