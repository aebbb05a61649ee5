"""Team pages: /teams/ (the teams you are in, with your role) and /teams/<slug>/ (members,
settings, freeze, recent audit entries). A team's admins change it here; everyone else
sees it read-only; a team you are not in is a 404. The work is in common.teams."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from common.audit import request_actor
from common.errors import InvalidInput, NotFound
from common.models import AuditEntry, Membership, Role, Team
from common.teams import (
    ensure_manage,
    may_manage,
    member_remove_local,
    member_set_local,
    role_in,
    team_freeze,
    team_unfreeze,
    team_update,
    team_visible,
    teams_visible,
)
from runs.views.forms import FormError, page_action, render_form_error

RECENT_AUDIT = 25


def _team(request: HttpRequest, slug: str) -> Team:
    try:
        return team_visible(request.user, slug)
    except NotFound:
        raise Http404("no such team") from None


@require_GET
def team_list(request: HttpRequest) -> HttpResponse:
    rows = [
        {"team": team, "role": role_in(request.user, team)} for team in teams_visible(request.user)
    ]
    return render(request, "runs/teams/list.html", {"nav": "teams", "rows": rows})


def _team_context(request: HttpRequest, team: Team) -> dict[str, Any]:
    members = Membership.objects.filter(team=team).select_related("user").order_by("user__username")
    return {
        "nav": "teams",
        "team": team,
        "role": role_in(request.user, team),
        "manage": may_manage(request.user, team),
        "members": members,
        "roles": Role.choices,
        "audit": AuditEntry.objects.filter(team=team)[:RECENT_AUDIT],
    }


@require_GET
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    return render(request, "runs/teams/detail.html", _team_context(request, team))


def _team_error(request: HttpRequest, error: FormError, slug: str, **_: Any) -> HttpResponse:
    """The team page with the error inside the form that was sent (403 for a role that
    may not manage the team, 409 while it is frozen, 400 for bad input)."""
    team = _team(request, slug)
    return render_form_error(request, "runs/teams/detail.html", _team_context(request, team), error)


def _act(request: HttpRequest, slug: str, action: Any, done: str) -> HttpResponse:
    """Run `action(team, actor)` as a team admin; success is a flash on the team page,
    an error raises to `page_action` (shown inside the form)."""
    team = _team(request, slug)
    ensure_manage(request.user, team)
    action(team, request_actor(request, "ui"))
    messages.success(request, done)
    return redirect("runs:team-detail", slug=team.slug)


@require_POST
@page_action(_team_error)
def team_settings(request: HttpRequest, slug: str) -> HttpResponse:
    raw = request.POST.get("bulk_confirm_above", "").strip()

    def change(team: Team, actor: Any) -> None:
        if not raw.isdigit():
            raise InvalidInput("Bulk threshold: give a whole number (0: always ask).")
        team_update(
            team=team,
            actor=actor,
            name=request.POST.get("name", ""),
            reason_required=request.POST.get("reason_required") == "on",
            bulk_confirm_above=int(raw),
        )

    return _act(request, slug, change, "Settings saved.")


@require_POST
@page_action(_team_error)
def team_freeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(
        request,
        slug,
        lambda team, actor: team_freeze(team=team, actor=actor, reason=reason),
        "The team is frozen.",
    )


@require_POST
@page_action(_team_error)
def team_unfreeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(
        request,
        slug,
        lambda team, actor: team_unfreeze(team=team, actor=actor, reason=reason),
        "The freeze is lifted.",
    )


@require_POST
@page_action(_team_error)
def team_member_set(request: HttpRequest, slug: str) -> HttpResponse:
    username = request.POST.get("username", "").strip()
    role = request.POST.get("role", "")
    return _act(
        request,
        slug,
        lambda team, actor: member_set_local(team=team, username=username, role=role, actor=actor),
        f"{username} is {role} of the team.",
    )


@require_POST
@page_action(_team_error)
def team_member_remove(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda team, actor: member_remove_local(team=team, username=username, actor=actor),
        f"{username} is no longer a member.",
    )
