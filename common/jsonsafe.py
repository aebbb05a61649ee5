"""What PostgreSQL cannot store, and JSON too deep to handle.

PostgreSQL stores no NUL character in text or jsonb ("unsupported Unicode escape
sequence"), and no lone surrogate (U+D800-U+DFFF without its pair: not encodable as
UTF-8; JSON's "\\ud800" escape decodes to one). Input from clients is refused with a clear
error; text from models and tools is stored with either replaced by U+FFFD, so a binary
web page cannot crash a checkpoint.

Python's JSON decoder, and every recursive walk over a decoded value (serializers, the
encoder, the checks here), runs out of stack at about a thousand levels of nesting: JSON
from clients is refused beyond MAX_JSON_DEPTH levels, long before that."""

from __future__ import annotations

import json
import re
from typing import Any

NUL = "\x00"
REPLACEMENT = "\ufffd"
MAX_JSON_DEPTH = 100
TOO_DEEP = f"nested too deeply (more than {MAX_JSON_DEPTH} levels of arrays and objects)"

# A decoded JSON string holds a surrogate only when it was escaped without its pair: a
# valid pair ("\ud83d\ude00") decodes to one character outside this range.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JsonTooDeep(ValueError):
    pass


def unstorable_in(text: str) -> str | None:
    """What in `text` PostgreSQL refuses, said for an error message, else None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == NUL:
        return "NUL characters (\\u0000)"
    return f"lone surrogates (\\u{ord(found.group()):04x})"


def find_unstorable(value: Any, path: str = "$") -> tuple[str, str] | None:
    """The JSON path of the first string or key holding a NUL character or a lone
    surrogate, and what it holds; else None."""
    if isinstance(value, str):
        what = unstorable_in(value)
        return (path, what) if what else None
    if isinstance(value, dict):
        for key, item in value.items():
            what = unstorable_in(key) if isinstance(key, str) else None
            if what:
                return f"{path} (a key)", what
            found = find_unstorable(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = find_unstorable(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def without_nul(value: Any) -> Any:
    """A copy of a JSON value with NUL and lone surrogates replaced in every string and
    key."""
    if isinstance(value, str):
        return _UNSTORABLE.sub(REPLACEMENT, value) if _UNSTORABLE.search(value) else value
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    return value


def check_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise JsonTooDeep when arrays and objects nest more than `limit` levels (found
    without recursing)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            raise JsonTooDeep(TOO_DEEP)
        stack.extend((child, depth + 1) for child in children)


def json_loads(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads for client input: JsonTooDeep (a ValueError) instead of a RecursionError,
    and for anything nested more than MAX_JSON_DEPTH levels."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise JsonTooDeep(TOO_DEEP) from None
    check_depth(value)
    return value
