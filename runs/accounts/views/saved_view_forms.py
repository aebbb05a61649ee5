"""The saved-view forms of the runs list and the inbox: "Save this view" and each view's
delete button. Their errors (no name, filters that are not valid, a NUL character) are
shown inside the form that was sent, on the page it was sent from, with what was typed
kept (runs/views/forms.py); a saved view never holds a filter the page would refuse.

Each page names a module with `filter_problems(params)` and `error_page(request, error)`
(setting AWAKEN_SAVED_VIEW_PAGES): the runs list's is this one, the inbox's is its app's
(runs/decisions/views/inbox_saved_views.py)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from common.errors import InvalidInput
from runs.accounts.models.saved_views import SavedView
from runs.accounts.services.saved_views import PAGE_PARAMS, normalised_query, saved_view_save
from runs.accounts.views.saved_views import page_url
from runs.permissions import VIEW, require
from runs.views.forms import FormError, page_action, render_form_error
from runs.views.lists import read_run_filters, run_list_context


def filter_problems(params: QueryDict) -> list[str]:
    """The runs list's: what is wrong with its filters in `params`."""
    return list(read_run_filters(params)[1].values())


def error_page(request: HttpRequest, error: FormError) -> HttpResponse:
    """The runs list's: the list with the form's error, on the filters of `request.GET`."""
    return render_form_error(request, "runs/run_list.html", run_list_context(request), error)


def page_module(page: str) -> Any:
    """The module that checks and shows `page`'s filters (AWAKEN_SAVED_VIEW_PAGES)."""
    return import_module(settings.AWAKEN_SAVED_VIEW_PAGES[page])


def _page_of(request: HttpRequest, page: str | None, view_id: int | None) -> str:
    if view_id is not None:
        page = get_object_or_404(SavedView, pk=view_id, user=request.user).page
    if page not in PAGE_PARAMS:
        raise Http404("no such page")
    return page


def saved_view_error(
    request: HttpRequest, error: FormError, page: str | None = None, view_id: int | None = None
) -> HttpResponse:
    """The page the form was sent from, on the filters the form carried, with the error
    inside that form."""
    page = _page_of(request, page, view_id)
    request.GET = QueryDict(normalised_query(page, error.value("query")))
    response: HttpResponse = page_module(page).error_page(request, error)
    return response


@require_POST
@page_action(saved_view_error)
@require(VIEW, "save views")
def save_view(request: HttpRequest, page: str) -> HttpResponse:
    page = _page_of(request, page, None)
    query = normalised_query(page, request.POST.get("query", ""))
    problems = page_module(page).filter_problems(QueryDict(query))
    if problems:
        raise InvalidInput(
            "Not saved: the page's filters are not valid. " + " ".join(problems),
            {"field": "query"},
        )
    view, _ = saved_view_save(
        user=request.user, page=page, name=request.POST.get("name", ""), query=query
    )
    messages.success(request, f"Saved the view “{view.name}”.")
    return redirect(page_url(page, view.query))


@require_POST
@page_action(saved_view_error)
@require(VIEW, "delete views")
def delete_view(request: HttpRequest, view_id: int) -> HttpResponse:
    view = get_object_or_404(SavedView, pk=view_id, user=request.user)  # another's: 404
    page, name = view.page, view.name
    view.delete()
    messages.success(request, f"Deleted the view “{name}”.")
    return redirect(page_url(page, normalised_query(page, request.POST.get("query", ""))))
