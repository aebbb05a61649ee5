"""The audit log page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render

from runs.accounts.selectors.audit import audit_list
from runs.permissions import AUDIT, require
from runs.selectors.filters import (
    ACTION_MAX_CHARS,
    NAME_MAX_CHARS,
    QueryFilters,
    filter_errors_context,
)
from runs.views.forms import filter_page


def read_audit_filters(params: QueryDict) -> tuple[dict[str, str], dict[str, str]]:
    """The audit page's filters (action prefix, actor, run id; its CSV export reads the
    same) and what was wrong with those left out."""
    read = QueryFilters(params)
    filters = {
        "action": read.text("action", "Action", max_chars=ACTION_MAX_CHARS),
        "actor": read.text("actor", "Actor", max_chars=NAME_MAX_CHARS),
        "run": read.ident("run", "Run"),
    }
    return filters, read.errors


@filter_page
@require(AUDIT, "view the audit log")
def audit(request: HttpRequest) -> HttpResponse:
    return audit_response(request)


def audit_response(request: HttpRequest) -> HttpResponse:
    """The audit page; 400 with the page and what was wrong above it for a bad filter."""
    params = request.GET
    filters, errors = read_audit_filters(params)
    read = QueryFilters(params)
    cursor = read.cursor(uuid_pk=False)
    errors = {**errors, **read.errors}
    page = audit_list(**filters, cursor=cursor, user=request.user)
    query = params.copy()
    query.pop("cursor", None)
    return render(
        request,
        "runs/audit.html",
        {
            "nav": "audit",
            "page": page,
            "params": params,
            "query": query.urlencode(),
            **filter_errors_context(errors),
        },
        status=400 if errors else 200,
    )
