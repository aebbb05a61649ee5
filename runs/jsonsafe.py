"""PostgreSQL stores no NUL character in text or jsonb ("unsupported Unicode escape
sequence"). Input from clients is refused with a clear error; text from models and tools
is stored with NUL replaced by U+FFFD, so a binary web page cannot crash a checkpoint."""

from __future__ import annotations

from typing import Any

NUL = "\x00"
REPLACEMENT = "\ufffd"


def find_nul(value: Any, path: str = "$") -> str | None:
    """The JSON path of the first string or key holding a NUL character, else None."""
    if isinstance(value, str):
        return path if NUL in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and NUL in key:
                return f"{path} (a key)"
            found = find_nul(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_nul(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def without_nul(value: Any) -> Any:
    """A copy of a JSON value with NUL replaced in every string and key."""
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT) if NUL in value else value
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    return value
