"""Saved views: a user's named filters of the runs list and the inbox (their query
strings). The name is the key: saving a view under a name the user already gave one of
the page's views replaces its filters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction
from django.http import QueryDict

from common.errors import InvalidInput
from runs.accounts.models.saved_views import SavedView

# The filters each page keeps in a saved view: its known parameters, in this order (never
# the cursor: a view is the filter, not a position in it).
PAGE_PARAMS: dict[str, tuple[str, ...]] = {
    SavedView.Page.RUNS: (
        "status",
        "waiting_reason",
        "agent",
        "thread",
        "since",
        "until",
        "q",
        "provider",
        "endpoint",
        "reason",
        "waiting_tool",
        "waiting_longer_than",
        "sort",
    ),
    SavedView.Page.INBOX: ("agent", "tool", "waiting_longer_than", "sort", "who"),
}
MAX_VIEWS = 50  # per user and page
NAME_MAX = SavedView._meta.get_field("name").max_length or 100
QUERY_MAX = SavedView._meta.get_field("query").max_length or 2000


def normalised_query(page: str, params: Mapping[str, Any] | str) -> str:
    """The page's known filter parameters of `params` (a query string or a mapping) that
    have a value, in a fixed order, URL-encoded."""
    if isinstance(params, str):
        params = QueryDict(params)
    query = QueryDict(mutable=True)
    for name in PAGE_PARAMS.get(page, ()):
        value = str(params.get(name) or "").strip()
        if value:
            query[name] = value
    return query.urlencode()


def saved_views_of(user: Any, page: str) -> list[SavedView]:
    return list(SavedView.objects.filter(user=user, page=page).order_by("name")[:MAX_VIEWS])


def saved_view_save(*, user: Any, page: str, name: str, query: str) -> tuple[SavedView, bool]:
    """Save the user's view of `page` (or replace the filters of their view of that name);
    returns it and whether it is new."""
    if page not in PAGE_PARAMS:
        raise InvalidInput(f"page must be one of {', '.join(PAGE_PARAMS)}", {"field": "page"})
    name = name.strip()
    if not name:
        raise InvalidInput("Give the view a name.", {"field": "name"})
    if len(name) > NAME_MAX:
        raise InvalidInput(f"A name has at most {NAME_MAX} characters.", {"field": "name"})
    query = normalised_query(page, query)
    if len(query) > QUERY_MAX:
        raise InvalidInput("These filters are too long to save.", {"field": "query"})
    existing = SavedView.objects.filter(user=user, page=page, name=name).first()
    if existing is not None:
        existing.query = query
        existing.save(update_fields=["query"])
        return existing, False
    if SavedView.objects.filter(user=user, page=page).count() >= MAX_VIEWS:
        raise InvalidInput(f"You have {MAX_VIEWS} saved views of this page: delete one first.")
    try:
        with transaction.atomic():
            return SavedView.objects.create(user=user, page=page, name=name, query=query), True
    except IntegrityError:  # the same name saved at the same moment: that one stands
        return SavedView.objects.get(user=user, page=page, name=name), False
