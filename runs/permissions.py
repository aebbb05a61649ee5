"""Who may do what. Every page, partial, action and websocket checks on the server."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import render_to_string

from agents.models import Agent
from common.access import allowed_unfrozen, frozen_team_of, visible_teams
from common.teams import ensure_not_frozen_only

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


ACTIONS = {
    "start": START,
    "cancel": CANCEL,
    "retry": RETRY,
    "decide": DECIDE,
    "prioritize": PRIORITIZE,
    "edit_input": EDIT_INPUT,
}


def capabilities(user: Any, obj: Any = None) -> dict[str, Any]:
    """What the templates may offer; the views check again on every request. With `obj`
    (a run, ticket, thread, agent ...) the role in that object's team decides; without,
    "may somewhere". When `obj`'s team is frozen, `frozen` is that team and the actions
    the role would allow stay offered: the templates show them disabled, with why."""
    frozen = frozen_team_of(user, obj) if obj is not None else None
    if frozen is not None:
        can: dict[str, Any] = {
            name: allowed_unfrozen(user, perm, obj) for name, perm in ACTIONS.items()
        }
    else:
        can = {name: user.has_perm(perm, obj) for name, perm in ACTIONS.items()}
    can["audit"] = user.has_perm(AUDIT, obj)
    can["frozen"] = frozen
    return can


def may_see(user: Any, obj: Any, perm: str = VIEW) -> bool:
    """`user` may see `obj` (a run, ticket, thread, input, agent ...): its team allows it."""
    return obj is not None and bool(user.has_perm(perm, obj))


def visible_or_404(user: Any, obj: Any, perm: str = VIEW) -> Any:
    """`obj` when `user` may see it; otherwise 404, as for an unknown id (another team's
    object is not confirmed to exist)."""
    if not may_see(user, obj, perm):
        raise Http404("not found")
    return obj


def visible_agent_ids(user: Any, perm: str = VIEW) -> list[int] | None:
    """The ids of the agents of the teams where `user` may `perm`; None: every agent. A
    short list: lists filter `agent_id__in` it rather than join the team."""
    teams = visible_teams(user, perm)
    if teams is None:
        return None
    if not teams:
        return []
    return list(Agent.objects.filter(team_id__in=teams).values_list("pk", flat=True))


def denied(request: HttpRequest, perm: str, obj: Any, what: str) -> HttpResponse | None:
    """404 when the user may not see `obj`, a 403 response when they may see it but their
    role in its team does not allow `perm`; None when allowed. When only the team's
    freeze refuses it, raises `Frozen` (409 team_frozen): the caller is a page action
    (runs.views.forms.page_action) that shows it inside its form."""
    visible_or_404(request.user, obj)
    if not request.user.has_perm(perm, obj):
        ensure_not_frozen_only(request.user, perm, obj)
        return forbidden(request, what)
    return None


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
            # a role that allows it only in frozen teams goes on: the object's check
            # answers 409 team_frozen there
            if not request.user.has_perm(perm) and not allowed_unfrozen(request.user, perm):
                return forbidden(request, what)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
