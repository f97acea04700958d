"""What a refusal says of the value it refused: enough to name it, never a whole oversized input."""

from __future__ import annotations

ECHO = 40  # a refusal echoes at most this many characters of what it was given


def shown(value: object, limit: int = ECHO) -> str:
    """repr(value), cut to `limit` characters: a refusal names what came without echoing a whole oversized input."""
    got = repr(value)
    return got if len(got) <= limit else got[:limit - 1] + "…"
