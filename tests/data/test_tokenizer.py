"""The character tokenizer: ids, round trips, unknown characters reported, over-long text refused."""

import pytest

from attention_viz.data.tokenizer import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    PRINTABLE_ASCII,
    UNK_ID,
    VOCAB_SIZE,
    CharTokenizer,
    id_to_token,
)


def test_vocabulary_is_four_specials_then_printable_ascii():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert len(PRINTABLE_ASCII) == 95 and VOCAB_SIZE == 99 == CharTokenizer().vocab_size
    assert CharTokenizer().encode(" ~a", add_eos=False).ids == [4, 98, 4 + ord("a") - 32]
    assert [id_to_token(i) for i in range(5)] == ["<pad>", "<bos>", "<eos>", "<unk>", " "]


def test_round_trip_of_every_printable_character():
    tok = CharTokenizer(max_len=len(PRINTABLE_ASCII))
    encoding = tok.encode(PRINTABLE_ASCII)
    assert encoding.ids[-1] == EOS_ID and encoding.unknown == []
    assert tok.decode(encoding.ids) == PRINTABLE_ASCII


def test_unknown_characters_are_reported_not_dropped():
    encoding = CharTokenizer().encode("héllo\tñé")
    h, ell, o = (ord(c) - 32 + 4 for c in "hlo")
    assert encoding.ids[:-1] == [h, UNK_ID, ell, ell, o, UNK_ID, UNK_ID, UNK_ID]
    assert encoding.unknown == ["é", "\t", "ñ"]  # distinct, in order of first appearance
    assert len(encoding.ids) == len("héllo\tñé") + 1


def test_text_over_max_length_is_a_clear_error():
    tok = CharTokenizer(max_len=5)
    assert len(tok.encode("abcde").ids) == 6
    with pytest.raises(ValueError, match="6 characters.*maximum of 5"):
        tok.encode("abcdef")


def test_decode_stops_at_eos_and_skips_specials():
    tok = CharTokenizer()
    ids = [BOS_ID] + tok.encode("ab", add_eos=False).ids + [UNK_ID, PAD_ID] + tok.encode("c").ids + [70, 71]
    assert tok.decode(ids) == "abc"
    assert tok.tokens([BOS_ID, 37, EOS_ID]) == ["<bos>", "A", "<eos>"]
    with pytest.raises(ValueError):
        tok.decode([VOCAB_SIZE])
