"""A tokenizer's pieces read as text: each piece's own characters, and the pieces merged into the words they spell.

    words = words_of(model.tokenizer, ids)          # ids [T] as the model read them
    words.pieces[5]       # "ing": piece 5's characters (bytes decoded, "Ġ" / "▁" as a space, "##" dropped)
    words.word_of[5]      # 2: the word piece 5 belongs to
    words.words[2]        # "reading": the word's pieces decoded together (a character split over pieces made whole)

A word starts at a piece that starts with a space marker ("Ġ" byte-level, "▁" SentencePiece) or whose characters
start with white space, or after a piece that ends with white space; white space alone (a lone "▁", a newline)
begins the word after it. Under WordPiece a word starts at every piece without "##". A special token ([CLS], <s>,
</s>...) is a word of its own. Punctuation written against a word ("word,") stays in it under byte-level BPE and
SentencePiece, as the tokenizer wrote it; WordPiece splits it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MARKERS = ("Ġ", "▁")  # a byte-level BPE's and SentencePiece's "a space before this piece"
CONTINUATION = "##"   # WordPiece's "this piece continues a word"


@dataclass(frozen=True)
class Words:
    """Pieces and words of one text: pieces [T] (each piece's characters), word_of [T] (its word's index), words [W]
    (each word's characters, its pieces decoded together), starts [W] (each word's first piece)."""

    pieces: list[str]
    word_of: list[int]
    words: list[str]
    starts: list[int]


def _wordpiece(tokenizer) -> bool:
    """True for a WordPiece tokenizer (BERT's): its continuing pieces start with "##"."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    model = getattr(backend, "model", None)
    if model is not None:
        return type(model).__name__ == "WordPiece"
    return CONTINUATION + "s" in (getattr(tokenizer, "vocab", None) or {})


def _text(tokenizer, pieces: Sequence[str]) -> str:
    """The characters of pieces decoded together, the space markers as spaces; "" where the tokenizer cannot."""
    try:
        text = tokenizer.convert_tokens_to_string(list(pieces))
    except Exception:  # noqa: BLE001 - a tokenizer that cannot decode its own pieces shows them as they are
        text = "".join(pieces)
    return text if isinstance(text, str) else ""


def piece_text(tokenizer, piece: str, wordpiece: bool) -> str:
    """One piece's characters: "Ġread" -> " read", "▁read" -> " read", "##ing" -> "ing", "<0x0A>" -> "\\n"."""
    if wordpiece:
        return piece[len(CONTINUATION):] if piece.startswith(CONTINUATION) else piece
    text = _text(tokenizer, [piece])
    if piece.startswith(MARKERS) and not text.startswith(" "):
        text = " " + text  # SentencePiece's decoder drops a text's first space
    return text


def words_of(tokenizer, ids: Sequence[int]) -> Words:
    """The pieces of ids [T] and the words they make (the module's rules)."""
    ids = [int(i) for i in ids]
    raw = tokenizer.convert_ids_to_tokens(ids)
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    wordpiece = _wordpiece(tokenizer)
    pieces = [str(tokenizer.convert_ids_to_tokens(i)) if i in special else piece_text(tokenizer, str(p), wordpiece)
              for i, p in zip(ids, raw)]
    word_of, starts = [], []
    for t, (i, p) in enumerate(zip(ids, raw)):
        p = str(p)
        if wordpiece:
            start = not p.startswith(CONTINUATION)
        elif t > 0 and not pieces[t - 1].strip():
            start = False  # after a space alone (a lone "Ġ" or "▁", a newline): the word it begins goes on
        else:
            start = p.startswith(MARKERS) or pieces[t][:1].isspace() or (t > 0 and pieces[t - 1][-1:].isspace())
        if t == 0 or start or i in special or ids[t - 1] in special:
            starts.append(t)
        word_of.append(len(starts) - 1)
    words = []
    for w, first in enumerate(starts):
        last = starts[w + 1] if w + 1 < len(starts) else len(ids)
        if ids[first] in special:
            words.append(pieces[first])
        elif wordpiece:
            words.append("".join(pieces[first:last]))
        else:
            words.append(_text(tokenizer, [str(p) for p in raw[first:last]]).strip() or pieces[first])
    return Words(pieces, word_of, words, starts)


def labels(tokens: Sequence[str]) -> Words:
    """Tokens that are no text, each a word of its own: a recording's times ("0.02 s"), a picture's patches."""
    tokens = [str(t) for t in tokens]
    return Words(tokens, list(range(len(tokens))), tokens, list(range(len(tokens))))
