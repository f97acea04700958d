"""The toy tasks: targets, seeded sampling, and padded (src, tgt_in, tgt_out) batches."""

import random

import pytest

from attention_viz.data.tasks import ALPHABET, batches, heldout_strings, make_batch, sample_strings, target
from attention_viz.data.tokenizer import BOS_ID, EOS_ID, PAD_ID, CharTokenizer


def test_targets():
    assert target("copy", "banana") == "banana"
    assert target("reverse", "banana") == "ananab"
    assert target("sort", "banana") == "aaabnn"
    with pytest.raises(ValueError, match="unknown task"):
        target("rot13", "abc")


def test_sampling_is_seeded_and_within_bounds():
    first = sample_strings(500, 24, random.Random(7))
    assert first == sample_strings(500, 24, random.Random(7))
    assert first != sample_strings(500, 24, random.Random(8))
    assert {len(s) for s in first} == set(range(1, 25))
    assert set("".join(first)) == set(ALPHABET)


def test_heldout_is_fixed_and_independent_of_training_streams():
    held = heldout_strings(24)
    assert len(held) == 1000 and held == heldout_strings(24)
    trained = sample_strings(1000, 24, random.Random(0))
    long_overlap = {s for s in held if len(s) > 6} & set(trained)
    assert not long_overlap


def test_batch_layout_for_reverse():
    tok = CharTokenizer(max_len=8)
    batch = make_batch(["abc", "x"], "reverse", tok)

    def ids(text: str) -> list[int]:
        return tok.encode(text, add_eos=False).ids

    assert batch.src.tolist() == [ids("abc") + [EOS_ID], ids("x") + [EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID] + ids("cba"), [BOS_ID] + ids("x") + [PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [ids("cba") + [EOS_ID], ids("x") + [EOS_ID, PAD_ID, PAD_ID]]
    assert tok.decode(batch.tgt_out[0]) == "cba"


def test_stream_is_reproducible():
    tok = CharTokenizer(max_len=16)
    a, b = batches("sort", tok, 4, seed=3), batches("sort", tok, 4, seed=3)
    for _ in range(3):
        x, y = next(a), next(b)
        assert x.src.equal(y.src) and x.tgt_out.equal(y.tgt_out)
    with pytest.raises(ValueError):
        next(batches("nope", tok, 4, seed=0))
