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
from common.errors import Forbidden, InvalidInput, NotFound, ServiceError
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
from runs.permissions import forbidden

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


@require_GET
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = _team(request, slug)
    members = Membership.objects.filter(team=team).select_related("user").order_by("user__username")
    context: dict[str, Any] = {
        "nav": "teams",
        "team": team,
        "role": role_in(request.user, team),
        "manage": may_manage(request.user, team),
        "members": members,
        "roles": Role.choices,
        "audit": AuditEntry.objects.filter(team=team)[:RECENT_AUDIT],
    }
    return render(request, "runs/teams/detail.html", context)


def _act(request: HttpRequest, slug: str, action: Any, done: str) -> HttpResponse:
    """Run `action(team, actor)` as a team admin; the outcome is a flash on the team page."""
    team = _team(request, slug)
    try:
        ensure_manage(request.user, team)
        action(team, request_actor(request, "ui"))
    except Forbidden as exc:
        return forbidden(request, exc.message.removeprefix("you may not "))
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("runs:team-detail", slug=team.slug)
    messages.success(request, done)
    return redirect("runs:team-detail", slug=team.slug)


@require_POST
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
def team_freeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(
        request,
        slug,
        lambda team, actor: team_freeze(team=team, actor=actor, reason=reason),
        "The team is frozen.",
    )


@require_POST
def team_unfreeze_view(request: HttpRequest, slug: str) -> HttpResponse:
    reason = request.POST.get("reason", "")
    return _act(
        request,
        slug,
        lambda team, actor: team_unfreeze(team=team, actor=actor, reason=reason),
        "The freeze is lifted.",
    )


@require_POST
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
def team_member_remove(request: HttpRequest, slug: str, username: str) -> HttpResponse:
    return _act(
        request,
        slug,
        lambda team, actor: member_remove_local(team=team, username=username, actor=actor),
        f"{username} is no longer a member.",
    )
