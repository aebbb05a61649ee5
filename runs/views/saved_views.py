"""Saved views on the runs list and the inbox: save the page's current filters under a
name, list the user's views as links, delete one. Each user sees and deletes only their
own (another user's view is a 404)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import ServiceError
from runs.models import SavedView
from runs.permissions import VIEW, require
from runs.services.saved_views import (
    PAGE_PARAMS,
    normalised_query,
    saved_view_save,
    saved_views_of,
)

PAGE_URLS: dict[str, str] = {
    SavedView.Page.RUNS: "runs:run-list",
    SavedView.Page.INBOX: "runs:inbox",
}


def page_url(page: str, query: str = "") -> str:
    url = reverse(PAGE_URLS[page])
    return f"{url}?{query}" if query else url


def saved_views_context(request: HttpRequest, page: str) -> dict[str, Any]:
    """What templates/runs/partials/saved_views.html shows: the user's views of the page
    and the page's current filters (what "Save this view" saves)."""
    return {
        "saved_views": saved_views_of(request.user, page),
        "saved_page": page,
        "saved_url": reverse(PAGE_URLS[page]),
        "saved_query": normalised_query(page, request.GET),
    }


@require_POST
@require(VIEW, "save views")
def save_view(request: HttpRequest, page: str) -> HttpResponse:
    if page not in PAGE_PARAMS:
        raise Http404("no such page")
    query = request.POST.get("query", "")
    try:
        view, _ = saved_view_save(
            user=request.user, page=page, name=request.POST.get("name", ""), query=query
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect(page_url(page, normalised_query(page, query)))
    messages.success(request, f"Saved the view “{view.name}”.")
    return redirect(page_url(page, view.query))


@require_POST
@require(VIEW, "delete views")
def delete_view(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(SavedView, pk=view_id, user=request.user)  # another's: 404
    page, name = view.page, view.name
    view.delete()
    messages.success(request, f"Deleted the view “{name}”.")
    return redirect(page_url(page, normalised_query(page, request.POST.get("query", ""))))
