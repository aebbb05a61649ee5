"""Who may do what. Every page, partial, action and websocket checks on the server."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

VIEW = "runs.view_run"
START = "runs.start_run"
FORK = START  # a fork starts a run: operators fork, viewers see the forks
CANCEL = "runs.cancel_run"
RETRY = "runs.retry_run"
DECIDE = "runs.decide_ticket"
VIEW_THREAD = "runs.view_thread"
VIEW_TICKET = "runs.view_ticket"
AUDIT = "common.view_auditentry"
PRIORITIZE = "runs.prioritize_run"
VIEW_INPUT = "runs.view_pendinginput"
EDIT_INPUT = "runs.edit_pendinginput"


def capabilities(user: Any) -> dict[str, bool]:
    """What the templates may offer; the views check again on every request."""
    return {
        "start": user.has_perm(START),
        "cancel": user.has_perm(CANCEL),
        "retry": user.has_perm(RETRY),
        "decide": user.has_perm(DECIDE),
        "audit": user.has_perm(AUDIT),
        "prioritize": user.has_perm(PRIORITIZE),
        "edit_input": user.has_perm(EDIT_INPUT),
    }


def forbidden(request: HttpRequest, what: str) -> HttpResponse:
    html = render_to_string(
        "runs/partials/flash.html", {"level": "error", "text": f"You may not {what}."}
    )
    return HttpResponse(html, status=403)


def require(
    perm: str, what: str
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.has_perm(perm):
                return forbidden(request, what)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
