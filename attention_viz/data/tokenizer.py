"""Character tokenizer: printable ASCII plus <pad> <bos> <eos> <unk>, with unknown characters reported."""

from __future__ import annotations

from dataclasses import dataclass

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")
PRINTABLE_ASCII = "".join(chr(code) for code in range(32, 127))  # the 95 characters space .. ~
VOCAB_SIZE = len(SPECIAL_TOKENS) + len(PRINTABLE_ASCII)  # 99
DEFAULT_MAX_LEN = 20  # the string tasks (copy, reverse, sort) train on 1..20 characters; dates need 32


@dataclass(frozen=True)
class Encoding:
    """Token ids of one text and the distinct characters that became <unk>, in order of appearance."""

    ids: list[int]
    unknown: list[str]


@dataclass(frozen=True)
class CharTokenizer:
    """Maps text to ids: 0 <pad>, 1 <bos>, 2 <eos>, 3 <unk>, then ' ' .. '~' as 4 .. 98.

    Args:
        max_len: the longest text, in characters, that `encode` accepts (the <eos> it appends is extra).
    """

    max_len: int = DEFAULT_MAX_LEN

    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    unk_id: int = UNK_ID

    def __post_init__(self) -> None:
        if not isinstance(self.max_len, int) or self.max_len < 1:
            raise ValueError(f"max_len must be a positive integer, got {self.max_len!r}")

    @property
    def vocab_size(self) -> int:
        """Number of token ids (99)."""
        return VOCAB_SIZE

    def encode(self, text: str, add_eos: bool = True) -> Encoding:
        """Encode `text` to ids (ending in <eos> unless add_eos=False); unknown characters map to <unk>.

        Raises:
            ValueError: when `text` is longer than `max_len` characters.
        """
        if len(text) > self.max_len:
            raise ValueError(
                f"text has {len(text)} characters, more than this tokenizer's maximum of {self.max_len}; "
                f"shorten it to at most {self.max_len} characters"
            )
        ids, unknown = [], []
        for char in text:
            token = token_id(char)
            if token == UNK_ID and char not in unknown:
                unknown.append(char)
            ids.append(token)
        if add_eos:
            ids.append(EOS_ID)
        return Encoding(ids=ids, unknown=unknown)

    def decode(self, ids) -> str:
        """Turn ids back into text, stopping at the first <eos> and skipping the other special tokens."""
        chars = []
        for token in ids:
            token = int(token)
            if token == EOS_ID:
                break
            if token >= len(SPECIAL_TOKENS):
                chars.append(id_to_token(token))
        return "".join(chars)

    def tokens(self, ids) -> list[str]:
        """One display label per id, special tokens by name (for heatmap axes)."""
        return [id_to_token(int(token)) for token in ids]


def token_id(char: str) -> int:
    """The id of one character, <unk> for anything outside printable ASCII."""
    index = PRINTABLE_ASCII.find(char) if len(char) == 1 else -1
    return UNK_ID if index < 0 else index + len(SPECIAL_TOKENS)


def id_to_token(token: int) -> str:
    """The text of one id: a character, or a special token's name."""
    if not 0 <= token < VOCAB_SIZE:
        raise ValueError(f"token id {token} is outside the vocabulary 0..{VOCAB_SIZE - 1}")
    if token < len(SPECIAL_TOKENS):
        return SPECIAL_TOKENS[token]
    return PRINTABLE_ASCII[token - len(SPECIAL_TOKENS)]
