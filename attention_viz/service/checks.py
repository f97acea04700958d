"""Checking what users send: every check returns the clean value or raises ValueError with a message for them.

Gradio checks little on the server (a slider's range, but not NaN; no types for checkboxes; text of any
length), and any HTTP client can call the app, so the package checks everything itself. The messages
name the input and what it accepts, and the app shows them as they are.
"""

from __future__ import annotations

import math
import numbers
import unicodedata

from attention_viz.core.messages import shown
from attention_viz.data.tokenizer import PRINTABLE_ASCII


def _number(value: float | int) -> str:
    """A number for a message: compact (%g), a whole number of any size cut like shown()."""
    return shown(value) if isinstance(value, numbers.Integral) else f"{float(value):g}"


def _finite_real(name: str, value: object, kind: str) -> float | int:
    """value as a finite real number (strings are parsed, booleans refused); ValueError says it must be `kind`.
    A whole number stays an int of any size (JSON allows 10**400, which no float holds): the range check refuses it."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"{name} must be {kind}, got {shown(value)}") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be {kind}, got {shown(value)}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {shown(value)}")
    return value


def check_int(name: str, value: object, low: int, high: int) -> int:
    """value as an int in [low, high]; whole floats (3.0) and digit strings are accepted."""
    value = _finite_real(name, value, "a whole number")
    if not isinstance(value, int) and not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number, got {_number(value)}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}, got {_number(value)}")
    return int(value)


def check_float(name: str, value: object, low: float, high: float) -> float:
    """value as a finite float in [low, high]."""
    value = _finite_real(name, value, "a number")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}, got {_number(value)}")
    return float(value)


_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off", ""}


def check_bool(name: str, value: object) -> bool:
    """Coerce a checkbox value: bools, 0/1, and "true"/"false"/"on"/"off"/"yes"/"no"/"1"/"0"; None is False."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, numbers.Real) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{name} must be true or false, got {shown(value)}")


def check_choice(name: str, value: object, choices: dict[str, str]) -> str:
    """The key of `choices` that `value` names, by key or by label."""
    if isinstance(value, str):
        if value in choices:
            return value
        for key, label in choices.items():
            if value == label:
                return key
    options = ", ".join(repr(key) for key in choices)
    raise ValueError(f"{name} must be one of {options}; got {shown(value)}")


def check_text(text: object, max_len: int) -> str:
    """The text, if it has 1..max_len characters (the app's limit: Catalog.tokenizer.max_len), all printable ASCII;
    else ValueError naming the problem."""
    if not isinstance(text, str):
        raise ValueError(f"Text must be a string, got {type(text).__name__}.")
    if len(text) > max_len:
        raise ValueError(f"Text is {len(text)} characters; the maximum is {max_len}.")
    if not text:
        raise ValueError(f"Text is empty; type 1 to {max_len} characters.")
    unknown = list(dict.fromkeys(char for char in text if char not in PRINTABLE_ASCII))
    if unknown:
        names = ", ".join(repr(char) for char in unknown)
        raise ValueError(
            f"Unknown characters: {names}. The tokenizer reads printable ASCII only "
            "(letters, digits, punctuation and space)."
        )
    return text


def check_unicode_text(text: object, max_chars: int) -> str:
    """A real model's text: 1..max_chars characters of any script, no control characters (a tab or a line break
    is refused: the text box is one line); else ValueError naming the problem."""
    if not isinstance(text, str):
        raise ValueError(f"Text must be a string, got {type(text).__name__}.")
    if not text.strip():
        raise ValueError(f"Text is empty; type 1 to {max_chars} characters.")
    if len(text) > max_chars:
        raise ValueError(f"Text is {len(text)} characters; the maximum is {max_chars}.")
    control = list(dict.fromkeys(ch for ch in text if unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn")))
    if control:
        raise ValueError("Text holds control or unassigned characters ("
                         + ", ".join(f"U+{ord(ch):04X}" for ch in control[:5]) + "); type plain text.")
    return text
