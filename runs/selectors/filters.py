"""The filters of a list page's query string (the runs list, the inbox, the threads list,
the audit log and their CSV exports), read in one way: each value is checked, and a bad one
is named with what is expected instead of being dropped in silence. The page then answers
400 with the list (without the bad filters) under the message.

The API checks the same parameters with its serializers, on the same limits
(SEARCH_MAX_CHARS, runs.selectors.waiting.MAX_MINUTES, the text lengths below) and the
same cursor check (runs.selectors.base.cursor_problem)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.http import QueryDict
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from runs.selectors.base import cursor_problem
from runs.selectors.waiting import MAX_MINUTES, parse_minutes

# The longest text a search box takes (the runs list's and the threads list's `q`, the
# API's `q`): a search is a run or thread id or a few words, and each character more is
# work for the text index. Longer answers 400 with this limit named (docs/scale.md).
SEARCH_MAX_CHARS = 200
SLUG_MAX_CHARS = 63  # agent, provider and endpoint slugs
NAME_MAX_CHARS = 200  # a tool name, an actor
REASON_MAX_CHARS = 100  # a run's status_reason
ACTION_MAX_CHARS = 40  # an audit action prefix

SHOWN_CHARS = 60  # of a bad value, quoted in the message

NUL = "\x00"
SHOWN_NUL = "\ufffd"  # where a refused NUL was, in the value shown again
# On a query string made by `without_nul`: the parameters whose value held a NUL.
NUL_FIELDS = "nul_fields"


def without_nul(params: QueryDict) -> QueryDict:
    """A copy of `params` with each NUL character (which the database cannot store) shown
    as U+FFFD; the parameters that held one are listed in its `nul_fields` attribute, for
    `QueryFilters` to name them as bad filters."""
    shown = QueryDict(mutable=True)
    held: set[str] = set()
    for key, values in params.lists():
        name = key.replace(NUL, SHOWN_NUL)
        if NUL in key or any(NUL in value for value in values):
            held.add(name)
        shown.setlist(name, [value.replace(NUL, SHOWN_NUL) for value in values])
    shown._mutable = False
    setattr(shown, NUL_FIELDS, frozenset(held))
    return shown


def has_nul(params: QueryDict) -> bool:
    return any(NUL in key or any(NUL in v for v in values) for key, values in params.lists())


def _quoted(value: str) -> str:
    text = value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "…"
    return f'"{text}"'


class QueryFilters:
    """Reads filters from `params` (a QueryDict or any mapping of strings). Each reader
    returns the value, or the empty value when it is absent or bad; what was bad is kept
    in `errors` (parameter -> what is wrong and what is expected)."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params
        self.errors: dict[str, str] = {}
        for name in getattr(params, NUL_FIELDS, ()):
            if SHOWN_NUL in name:  # a NUL in the parameter's name: no filter reads it
                self.errors[name] = (
                    f"Parameter {_quoted(name)}: its name contains a NUL character "
                    "(\\u0000): remove it"
                )

    def raw(self, name: str) -> str:
        value = self.params.get(name, "")
        return value if isinstance(value, str) else str(value or "")

    def _value(self, name: str, label: str) -> str:
        """The stripped value; "" (and the filter named) when it held a NUL."""
        value = self.raw(name)
        if NUL in value or name in getattr(self.params, NUL_FIELDS, ()):
            self._bad(name, label, "contains a NUL character (\\u0000): remove it")
            return ""
        return value.strip()

    def _bad(self, name: str, label: str, problem: str) -> None:
        self.errors[name] = f"{label} ({name}): {problem}"

    def text(self, name: str, label: str, *, max_chars: int) -> str:
        value = self._value(name, label)
        if len(value) > max_chars:
            self._bad(name, label, f"at most {max_chars} characters, not {len(value)}")
            return ""
        return value

    def choice(self, name: str, label: str, choices: Iterable[str]) -> str:
        value = self._value(name, label)
        allowed = [choice for choice in choices if choice]
        if value and value not in allowed:
            self._bad(name, label, f"{_quoted(value)} is not one of {', '.join(allowed)}")
            return ""
        return value

    def when(self, name: str, label: str) -> dt.datetime | None:
        """A date (midnight) or a date and time, in the server's time zone unless given."""
        value = self._value(name, label)
        if not value:
            return None
        try:
            parsed = parse_datetime(value) or parse_datetime(value + "T00:00:00")
        except ValueError:  # well-formed but impossible, e.g. month 13
            parsed = None
        if parsed is None:
            self._bad(
                name,
                label,
                f"{_quoted(value)} is not a date; use YYYY-MM-DD or YYYY-MM-DDTHH:MM",
            )
            return None
        return timezone.make_aware(parsed) if timezone.is_naive(parsed) else parsed

    def minutes(self, name: str, label: str) -> int | None:
        value = self._value(name, label)
        if not value:
            return None
        minutes = parse_minutes(value)
        if minutes is None:
            self._bad(
                name,
                label,
                f"{_quoted(value)} is not whole minutes from 0 to {MAX_MINUTES} (a year)",
            )
        return minutes

    def ident(self, name: str, label: str) -> str:
        """A UUID, as its canonical text."""
        value = self._value(name, label)
        if not value:
            return ""
        try:
            return str(uuid.UUID(value))
        except ValueError:
            self._bad(name, label, f"{_quoted(value)} is not an id (a UUID)")
            return ""

    def cursor(self, *, uuid_pk: bool = True, name: str = "cursor") -> str | None:
        value = self._value(name, "Page link")
        if not value:
            return None
        if cursor_problem(value, uuid_pk=uuid_pk) is not None:
            self._bad(
                name,
                "Page link",
                "not one this list made; follow the list's own Older / Newer links, or "
                "start again from its first page",
            )
            return None
        return value

    @property
    def messages(self) -> list[str]:
        return list(self.errors.values())


def filter_errors_context(errors: dict[str, str]) -> dict[str, Any]:
    """What a list page's template shows above the list (runs/partials/filter_errors.html)."""
    return {"filter_errors": list(errors.values())}
