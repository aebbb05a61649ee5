"""The audit log page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runs import selectors
from runs.permissions import AUDIT, require


@require(AUDIT, "view the audit log")
def audit(request: HttpRequest) -> HttpResponse:
    params = request.GET
    page = selectors.audit_list(
        action=params.get("action", ""),
        actor=params.get("actor", ""),
        run=params.get("run", ""),
        cursor=params.get("cursor") or None,
        user=request.user,  # the user's teams' entries only
    )
    query = params.copy()
    query.pop("cursor", None)
    return render(
        request,
        "runs/audit.html",
        {"nav": "audit", "page": page, "params": params, "query": query.urlencode()},
    )
