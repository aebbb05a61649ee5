"""Keyset (cursor) pagination, newest first by (created_at, pk), with the same cursor
format as the operator pages (`runs.selectors`); a `prev_cursor` pages back."""

from __future__ import annotations

from common.errors import InvalidInput
from runs.selectors.base import cursor_problem


def check_cursor(cursor: str | None, *, uuid_pk: bool) -> str | None:
    """The cursor if well-formed (None when absent); 400 otherwise."""
    if not cursor:
        return None
    if cursor_problem(cursor, uuid_pk=uuid_pk) is not None:
        raise InvalidInput("cursor is not valid: pass next_cursor from a page", {"cursor": cursor})
    return cursor
