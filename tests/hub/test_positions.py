"""A text longer than a real model's positions, met by the package as the app meets it: long_run reads the first
tokens its positions hold and says so in the app's sentence (the run's note, given and length; a TextCutWarning unless
warn=False); forward and greedy_decode refuse naming the limit; show reads at length or refuses; never a raw torch
error. Every kind of model (encoder, decoder, encoder-decoder) at one under, exactly at, one over and far over its
positions (the tiny models have 256), the app's cap (`most`) and an empty text."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("transformers")

from attention_viz.hub import TextTooLongError, load_pretrained  # noqa: E402
from attention_viz.hub.long import TextCutWarning  # noqa: E402
from attention_viz.hub.positions import reading  # noqa: E402
from attention_viz.hub.long_kept import LongRunError  # noqa: E402

KINDS = {"bert": "encoder", "gpt2": "decoder", "llama": "decoder", "marian": "encoder-decoder"}
POSITIONS = 256  # devtools.hub_models' tiny models
PAGE = "the cat sat on the mat and the model reads every word of the sentence. " * 60  # > 600 tokens for each


@pytest.fixture(scope="module", params=sorted(KINDS))
def model(request, tiny_folder):
    model = load_pretrained(tiny_folder(request.param))
    assert model.layout == KINDS[request.param] and model.positions == POSITIONS
    return model


def page_ids(model, n: int) -> torch.Tensor:
    ids = model.encode(PAGE).ids
    assert ids.numel() >= n
    return ids[:n]  # (n,)


def long_run(model, ids_or_text, **options):
    """model.long_run with the warnings it gave."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        run = model.long_run(ids_or_text, **options)
    run.close()
    return run, [w for w in heard if issubclass(w.category, TextCutWarning)]


@pytest.mark.parametrize("n", [POSITIONS - 1, POSITIONS, POSITIONS + 1, 3 * POSITIONS - 100])
def test_long_run_reads_what_the_positions_hold_and_says_so(model, n):
    run, heard = long_run(model, page_ids(model, n))
    read = min(n, POSITIONS)
    assert (run.length, run.given) == (read, n)
    if n <= POSITIONS:
        assert run.note == "" and heard == []
    else:
        assert run.note == (f"Read the first {POSITIONS} of the text's {n:,} tokens: {model.name}'s positions end "
                            f"at {POSITIONS}.")
        assert [str(w.message) for w in heard] == [run.note]
        assert heard[0].filename == __file__  # the warning points at the caller's line
        assert (run.length, run.note) == reading(model, n)  # the one rule, as the app and show ask it
    quiet, heard = long_run(model, page_ids(model, n), warn=False)
    assert heard == [] and (quiet.length, quiet.given, quiet.note) == (run.length, run.given, run.note)


def test_the_cut_run_is_the_run_of_the_first_tokens(model):
    """Reading the first 256 of 300 tokens computes exactly what a run of those 256 does."""
    cut, _ = long_run(model, page_ids(model, 300), keep="memory")
    first, _ = long_run(model, page_ids(model, POSITIONS), keep="memory")
    assert cut.keys == first.keys
    for key in cut.keys:
        for stat, values in cut.summaries[key].items():
            assert (values == first.summaries[key][stat]).all(), (key, stat)
    torch.testing.assert_close(cut.logits, first.logits, rtol=0, atol=0)


def test_a_text_given_as_a_string_is_cut_too(model):
    run, heard = long_run(model, PAGE)
    assert run.length == POSITIONS < run.given == model.encode(PAGE).ids.numel() and len(heard) == 1


def test_most_caps_a_page_below_the_positions_and_is_checked(model):
    """The app's cap (a page is at most 4,096 tokens) as the package's `most`: the fewer of it and the positions."""
    run, heard = long_run(model, page_ids(model, 200), most=100)
    assert (run.length, run.given) == (100, 200)
    assert run.note == "Read the first 100 of the text's 200 tokens: a page is at most 100 tokens." == str(
        heard[0].message)
    run, _ = long_run(model, page_ids(model, 300), most=4096)  # the positions end first: they are named
    assert run.length == POSITIONS and run.note.endswith(f"{model.name}'s positions end at {POSITIONS}.")
    for bad in (0, -1, True, 2.5, "100"):
        with pytest.raises(LongRunError, match="most must be a positive whole number"):
            model.long_run(page_ids(model, 10), most=bad)


def test_an_empty_text_is_refused_with_a_sentence(model):
    with pytest.raises(LongRunError, match="no tokens"):
        model.long_run(torch.tensor([], dtype=torch.long))
    empty = torch.zeros(1, 0, dtype=torch.long)  # (1, 0)
    with pytest.raises(ValueError, match="The input has no tokens: give at least one"):
        model.forward(empty, decoder_input(model))
    if model.abilities.writes_text:
        with pytest.raises(ValueError, match="The input has no tokens"):
            model.greedy_decode(empty, max_new_tokens=3)
    if model.layout == "encoder-decoder":
        with pytest.raises(ValueError, match="The decoder's input has no tokens"):
            model.forward(page_ids(model, 5)[None], torch.zeros(1, 0, dtype=torch.long))


def decoder_input(model, n: int = 3):
    return torch.tensor([[model.start_id] * n]) if model.layout == "encoder-decoder" else None


@pytest.mark.parametrize("n", [POSITIONS - 1, POSITIONS, POSITIONS + 1, 3 * POSITIONS - 100])
def test_forward_runs_up_to_the_positions_and_refuses_past_them_naming_them(model, n):
    ids = page_ids(model, n)[None]  # (1, n)
    if n <= POSITIONS:
        logits, maps = model.forward(ids, decoder_input(model))
        assert next(iter(maps.values())).shape[-1] == n
        return
    with pytest.raises(TextTooLongError) as refused:
        model.forward(ids, decoder_input(model))
    message = str(refused.value)
    assert f"The input has {n:,} tokens; {model.name} reads at most {POSITIONS} positions at once" in message
    assert "long_run" in message
    for call in (model.value_norms, model.head_outputs):  # every pass of the model asks the same check
        with pytest.raises(TextTooLongError):
            call(ids, decoder_input(model))


def test_an_encoder_decoders_decoder_input_is_checked_too(tiny_folder):
    model = load_pretrained(tiny_folder("marian"))
    with pytest.raises(TextTooLongError, match=f"The decoder's input has {POSITIONS + 1} tokens"):
        model.forward(page_ids(model, 5)[None], decoder_input(model, POSITIONS + 1))


def test_greedy_decode_refuses_what_it_could_not_write_naming_the_room(model):
    if not model.abilities.writes_text:
        with pytest.raises(ValueError, match="does not write text; use forward"):
            model.greedy_decode(page_ids(model, 5)[None], max_new_tokens=3)
        return
    prompt = 1 if model.layout == "encoder-decoder" else 250
    ids = page_ids(model, 250)[None]
    room = POSITIONS - prompt + 1
    written, _ = model.greedy_decode(ids, max_new_tokens=room)  # the last step reads exactly every position
    assert written.size(1) <= room
    with pytest.raises(TextTooLongError, match=f"it can write at most {room} tokens; ask for max_new_tokens={room}"):
        model.greedy_decode(ids, max_new_tokens=room + 1)
    with pytest.raises(TextTooLongError, match=f"The input has {POSITIONS + 1} tokens"):
        model.greedy_decode(page_ids(model, POSITIONS + 1)[None], max_new_tokens=1)


def test_start_id_of_a_model_of_one_stack_is_a_sentence_not_an_attribute_error(model):
    if model.layout == "encoder-decoder":
        assert isinstance(model.start_id, int)
        return
    with pytest.raises(ValueError, match=f"{model.name} is an? (encoder|decoder)-only model: it has no decoder start"):
        model.start_id


def test_show_reads_a_long_text_at_length_or_refuses_naming_the_limit(model):
    from attention_viz.explorer.notebook import show

    ids = model.encode(PAGE).ids
    if model.layout == "encoder-decoder":  # shown as a translation unless asked: refused, naming the limit
        with pytest.raises(TextTooLongError, match=f"reads at most {POSITIONS} positions"):
            show(model, PAGE)
    view = show(model, PAGE, long=True)
    payload = view.payload
    assert (payload["read"], payload["of"]) == (POSITIONS, ids.numel())
    assert payload["note"].startswith(reading(model, ids.numel())[1])  # the package's sentence, word for word
