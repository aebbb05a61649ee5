"""Saved views on the runs list and the inbox: save the page's current filters under a
name, list the user's views as links, delete one (runs/accounts/views/saved_view_forms.py). Each
user sees and deletes only their own (another user's view is a 404)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from runs.accounts.models.saved_views import SavedView
from runs.accounts.services.saved_views import normalised_query, saved_views_of
from runs.selectors.filters import NUL_FIELDS

PAGE_URLS: dict[str, str] = {
    SavedView.Page.RUNS: "runs:run-list",
    SavedView.Page.INBOX: "runs:inbox",
}


def page_url(page: str, query: str = "") -> str:
    url = reverse(PAGE_URLS[page])
    return f"{url}?{query}" if query else url


def saved_views_context(request: HttpRequest, page: str) -> dict[str, Any]:
    """What runs/accounts/templates/runs/partials/saved_views.html shows: the user's views of the page
    and the page's current filters (what "Save this view" saves; a filter that held a NUL
    character is left out, as the list leaves it out)."""
    held = getattr(request.GET, NUL_FIELDS, ())
    params = {name: value for name, value in request.GET.items() if name not in held}
    return {
        "saved_views": saved_views_of(request.user, page),
        "saved_page": page,
        "saved_url": reverse(PAGE_URLS[page]),
        "saved_query": normalised_query(page, params),
    }
