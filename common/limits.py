"""How large what people send may be, in one place. A 100,000-character message was
accepted and then took the pages half a minute to render; each limit is a setting
(awaken_site/settings.py, the README's settings table) read when it is checked, and too
much is an `InvalidInput` naming the field, its length and the limit, which the API
answers as a 400, the pages show in their form and the terminal commands print.

- `AWAKEN_MAX_MESSAGE_CHARS`: the text of a message (a run's input, input for a thread,
  an edit of pending input, a fork's edited message);
- `AWAKEN_MAX_ANSWER_CHARS`: a ticket's answer and its edited arguments, as JSON text;
- `AWAKEN_MAX_COMMENT_CHARS`: a decision's comment and a reason (cancel, interrupt,
  reject, freeze).

Shorter fixed limits are their columns' sizes (a saved view's name) or the filters'
(`runs.selectors.filters.SEARCH_MAX_CHARS`)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from common.errors import InvalidInput


def message_chars() -> int:
    return int(settings.AWAKEN_MAX_MESSAGE_CHARS)


def answer_chars() -> int:
    return int(settings.AWAKEN_MAX_ANSWER_CHARS)


def comment_chars() -> int:
    return int(settings.AWAKEN_MAX_COMMENT_CHARS)


def too_long(field: str, what: str, length: int, limit: int) -> InvalidInput:
    return InvalidInput(
        f"{what} is {length:,} characters long; at most {limit:,} are allowed",
        {"field": field, field: [f"Ensure this field has no more than {limit} characters."]},
    )


def check_chars(value: Any, limit: int, field: str, what: str) -> None:
    """Refuse a text longer than `limit` characters (anything else is left to its checks)."""
    if isinstance(value, str) and len(value) > limit:
        raise too_long(field, what, len(value), limit)


def check_json_chars(value: Any, limit: int, field: str, what: str) -> None:
    """Refuse a value whose JSON text (as stored) is longer than `limit` characters."""
    if value is None:
        return
    if isinstance(value, str):
        check_chars(value, limit, field, what)
        return
    length = len(json.dumps(value, ensure_ascii=False, default=str))
    if length > limit:
        raise too_long(field, f"{what} (as JSON)", length, limit)
