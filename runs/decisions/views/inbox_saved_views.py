"""The inbox as a page of saved views (runs/accounts/views/saved_view_forms.py, setting
AWAKEN_SAVED_VIEW_PAGES): what is wrong with the filters of a query, and the inbox with a
saved-view form's error, on the filters the form carried."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, QueryDict

from runs.decisions.views.inbox import InboxFilters, _page_context
from runs.selectors.filters import filter_errors_context
from runs.views.forms import FormError, render_form_error


def filter_problems(params: QueryDict) -> list[str]:
    return list(InboxFilters.read(params)[1].values())


def error_page(request: HttpRequest, error: FormError) -> HttpResponse:
    filters, errors = InboxFilters.read(request.GET)
    context = {**_page_context(request, filters), **filter_errors_context(errors)}
    return render_form_error(request, "runs/inbox.html", context, error)
