"""Keyset (cursor) pagination, newest first by (created_at, pk), with the same cursor
format as the operator pages (`runs.selectors`)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet

from runs.selectors import Page, decode_cursor, encode_cursor
from runs.services.errors import InvalidInput


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


def keyset_page(queryset: QuerySet[Any], cursor: str | None, size: int) -> Page:
    if cursor:
        position = decode_cursor(cursor)
        if position is not None:
            created, pk = position
            queryset = queryset.filter(Q(created_at__lt=created) | Q(created_at=created, pk__lt=pk))
    rows = list(queryset.order_by("-created_at", "-pk")[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(rows[-1].created_at, rows[-1].pk) if more and rows else None)
