"""/teams: the caller's teams, a team's settings and freeze, and its members. Anyone may
read the teams they are in (site-wide roles: every team); a team's admins change it. A
team the caller is not in answers 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.api.auth import actor_for
from common.api.base import ApiView, validated
from common.api.errors import error_responses
from common.models import Membership, Team
from common.teams import (
    CHANGE_TEAM,
    VIEW_TEAM,
    ensure_manage,
    member_remove_local,
    member_set_local,
    role_in,
    team_freeze,
    team_unfreeze,
    team_update,
    team_visible,
    teams_visible,
)
from runs.api import team_serializers as st

SLUG = OpenApiParameter("slug", OpenApiTypes.STR, OpenApiParameter.PATH, description="Team slug.")
USERNAME = OpenApiParameter(
    "username", OpenApiTypes.STR, OpenApiParameter.PATH, description="A member's username."
)


def team_json(team: Team, user: Any) -> dict[str, Any]:
    return {
        "slug": team.slug,
        "name": team.name,
        "reason_required": team.reason_required,
        "bulk_confirm_above": team.bulk_confirm_above,
        "frozen": team.frozen,
        "frozen_reason": team.frozen_reason,
        "frozen_at": team.frozen_at,
        "frozen_by": team.frozen_by,
        "role": role_in(user, team),
    }


def _members(team: Team) -> list[dict[str, Any]]:
    rows = Membership.objects.filter(team=team).select_related("user").order_by("user__username")
    return [{"username": m.user.get_username(), "role": m.role, "source": m.source} for m in rows]


class TeamListView(ApiView):
    required_perms = {"GET": VIEW_TEAM}

    @extend_schema(
        operation_id="teams_list",
        summary="Your teams",
        description="The teams you are a member of, with your role; every team for "
        "superusers and site-wide role holders (role null).",
        tags=["teams"],
        responses={200: st.TeamListSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        teams = teams_visible(request.user)
        return Response({"items": [team_json(team, request.user) for team in teams]})


class TeamDetailView(ApiView):
    required_perms = {"GET": VIEW_TEAM, "PATCH": CHANGE_TEAM}

    @extend_schema(
        operation_id="teams_get",
        summary="A team's settings and freeze",
        tags=["teams"],
        parameters=[SLUG],
        responses={200: st.TeamSerializer, **error_responses(404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(team_json(team_visible(request.user, slug), request.user))

    @extend_schema(
        operation_id="teams_update",
        summary="Change a team's settings",
        description="Name, reason_required (rejecting a ticket and cancelling a run need a "
        "reason) and bulk_confirm_above (bulk decisions on more tickets need confirm). "
        "Team admins only; audited as team.settings.",
        tags=["teams"],
        parameters=[SLUG],
        request=st.TeamSettingsSerializer,
        responses={200: st.TeamSerializer, **error_responses(404, body=True)},
    )
    def patch(self, request: Request, slug: str) -> Response:
        team = team_visible(request.user, slug)
        ensure_manage(request.user, team)
        data = validated(st.TeamSettingsSerializer, request.data)
        team = team_update(team=team, actor=actor_for(request), **data)
        return Response(team_json(team, request.user))


class TeamFreezeView(ApiView):
    required_perms = {"POST": CHANGE_TEAM}

    @extend_schema(
        operation_id="teams_freeze",
        summary="Freeze a team (incident)",
        description="Until the freeze is lifted nothing of the team may change: starting "
        "runs, input, cancel, retry, priority, decisions, claims, forks, replays and "
        "schedule fires are refused (409 team_frozen). Running runs go on. Team admins only.",
        tags=["teams"],
        parameters=[SLUG],
        request=st.FreezeSerializer,
        responses={200: st.TeamSerializer, **error_responses(404, body=True)},
    )
    def post(self, request: Request, slug: str) -> Response:
        team = team_visible(request.user, slug)
        ensure_manage(request.user, team)
        data = validated(st.FreezeSerializer, request.data)
        team = team_freeze(team=team, actor=actor_for(request), reason=data["reason"])
        return Response(team_json(team, request.user))


class TeamUnfreezeView(ApiView):
    required_perms = {"POST": CHANGE_TEAM}

    @extend_schema(
        operation_id="teams_unfreeze",
        summary="Lift a team's freeze",
        tags=["teams"],
        parameters=[SLUG],
        request=st.UnfreezeSerializer,
        responses={200: st.TeamSerializer, **error_responses(404, body=True)},
    )
    def post(self, request: Request, slug: str) -> Response:
        team = team_visible(request.user, slug)
        ensure_manage(request.user, team)
        body = request.data if isinstance(request.data, dict) and request.data else {}
        data = validated(st.UnfreezeSerializer, body)
        team = team_unfreeze(team=team, actor=actor_for(request), reason=data["reason"])
        return Response(team_json(team, request.user))


class TeamMemberListView(ApiView):
    required_perms = {"GET": VIEW_TEAM}

    @extend_schema(
        operation_id="teams_members",
        summary="A team's members",
        description="Members and roles; source sso: the identity provider sets the role at "
        "each login.",
        tags=["teams"],
        parameters=[SLUG],
        responses={200: st.MemberListSerializer, **error_responses(404)},
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response({"items": _members(team_visible(request.user, slug))})


class TeamMemberView(ApiView):
    required_perms = {"PUT": CHANGE_TEAM, "DELETE": CHANGE_TEAM}

    @extend_schema(
        operation_id="teams_member_set",
        summary="Add a local member or change their role",
        tags=["teams"],
        parameters=[SLUG, USERNAME],
        request=st.MemberRoleSerializer,
        responses={200: st.MemberSerializer, **error_responses(404, body=True)},
    )
    def put(self, request: Request, slug: str, username: str) -> Response:
        team = team_visible(request.user, slug)
        ensure_manage(request.user, team)
        data = validated(st.MemberRoleSerializer, request.data)
        member = member_set_local(
            team=team, username=username, role=data["role"], actor=actor_for(request)
        )
        return Response({"username": username, "role": member.role, "source": member.source})

    @extend_schema(
        operation_id="teams_member_remove",
        summary="Remove a local member",
        tags=["teams"],
        parameters=[SLUG, USERNAME],
        request=None,
        responses={204: None, **error_responses(404)},
    )
    def delete(self, request: Request, slug: str, username: str) -> Response:
        team = team_visible(request.user, slug)
        ensure_manage(request.user, team)
        member_remove_local(team=team, username=username, actor=actor_for(request))
        return Response(status=204)
