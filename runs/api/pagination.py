"""Keyset (cursor) pagination, newest first by (created_at, pk), with the same cursor
format as the operator pages (`runs.selectors`)."""

from __future__ import annotations

import uuid

from common.errors import InvalidInput
from runs.selectors import decode_cursor


def check_cursor(cursor: str | None, *, uuid_pk: bool) -> str | None:
    """The cursor if well-formed (None when absent); 400 otherwise."""
    if not cursor:
        return None
    position = decode_cursor(cursor)
    valid = position is not None and position[0].tzinfo is not None
    if valid and position is not None:
        pk = position[1]
        try:
            if uuid_pk:
                uuid.UUID(pk)
            else:
                int(pk)
        except ValueError:
            valid = False
    if not valid:
        raise InvalidInput("cursor is not valid: pass next_cursor from a page", {"cursor": cursor})
    return cursor
