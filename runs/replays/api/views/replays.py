"""/api/v1/replays (docs/replays.md): start a replay set (replays.replay_runs: admins), list
and read sets with their items (replays.view_replayset), cancel one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.access import scope
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found
from common.api.errors import error_responses
from runs.api.views.lookups import allowed
from runs.replays.api import replay_serializers as sr
from runs.replays.models.replays import ReplaySet
from runs.replays.selectors.replays import public_summary, replay_rows, replay_sets, replay_summary
from runs.replays.services.replays import replay_cancel, replay_create, replay_request

VIEW = "replays.view_replayset"
REPLAY = "replays.replay_runs"
SET_ID = OpenApiParameter(
    "set_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Replay set id."
)
TAGS = ["replays"]


def replay_json(replay_set: ReplaySet, *, items: bool) -> dict[str, Any]:
    rows = replay_rows(replay_set)
    summary = replay_summary(replay_set, rows)
    data: dict[str, Any] = {
        "id": str(replay_set.pk),
        "agent_id": replay_set.agent.slug,
        "version": replay_set.version.number,
        "draft": replay_set.version.draft,
        "filters": replay_set.filters,
        "ticket_policy": replay_set.ticket_policy,
        "http_mode": replay_set.http_mode,
        "concurrency": replay_set.concurrency,
        "status": replay_set.status,
        "created_by": replay_set.created_by.get_username() if replay_set.created_by else None,
        "created_at": replay_set.created_at.isoformat(),
        "finished_at": replay_set.finished_at.isoformat() if replay_set.finished_at else None,
        "progress": summary,
    }
    if items:
        data["items"] = [
            {
                "position": row.item.position,
                "status": row.item.status,
                "note": row.item.note,
                "original": public_summary(row.original_summary),
                "replay": public_summary(row.replay_summary),
                "changed": row.changed,
                "compare_url": row.compare_url,
            }
            for row in rows
        ]
    return data


def _set(set_id: str, request: Request) -> ReplaySet:
    queryset = ReplaySet.objects.select_related("agent", "version", "created_by")
    return allowed(request, get_or_not_found(queryset, "replay set", set_id), "replay set", set_id)


class ReplayListView(ApiView):
    required_perms = {"GET": VIEW, "POST": REPLAY}

    @extend_schema(
        operation_id="replays_list",
        summary="Replay sets",
        description="The latest 50 replay sets, newest first, with their progress.",
        tags=TAGS,
        responses={200: sr.ReplaySetPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        sets = list(scope(replay_sets(), request.user, "agent__team_id")[:50])
        return Response({"items": [replay_json(s, items=False) for s in sets]})

    @extend_schema(
        operation_id="replays_create",
        summary="Replay past runs on a version",
        description="Picks the agent's newest finished runs that match `filters` (at most "
        "`limit`, ≤ 200) and replays each one's initial user input as a new run on "
        "`version` (`latest`, `draft` or a published number), at most `concurrency` at "
        "once (≤ 8; all sets together at most AWAKEN_REPLAY_CONCURRENCY). Replays never "
        "act: write_note and send_email are dry, http_get is live or answered from the "
        "original's recorded result (`http_mode`), tickets are decided by `ticket_policy`.",
        tags=TAGS,
        request=sr.ReplayCreateSerializer,
        responses={
            201: OpenApiResponse(sr.ReplaySetSerializer, description="Started."),
            **error_responses(body=True),
        },
    )
    def post(self, request: Request) -> Response:
        # another team's agent is refused as an unknown one (400 "no agent"); a visible
        # agent of a team where the role may not replay is 403
        checked = replay_request(request.data, user=request.user)
        allowed(request, checked.agent, "agent", checked.agent.slug)
        replay_set = replay_create(request=checked, actor=actor_for(request))
        return Response(replay_json(_set(str(replay_set.pk), request), items=False), status=201)


class ReplayDetailView(ApiView):
    required_perms = {"GET": VIEW}

    @extend_schema(
        operation_id="replays_read",
        summary="A replay set with its items",
        description="Each item: its original and its replay summarized (outcome, steps, "
        "tokens, cost, duration, tickets, tools), and whether the outcome changed.",
        tags=TAGS,
        parameters=[SET_ID],
        responses={200: sr.ReplaySetDetailSerializer, **error_responses(404)},
    )
    def get(self, request: Request, set_id: str) -> Response:
        return Response(replay_json(_set(set_id, request), items=True))


class ReplayCancelView(ApiView):
    required_perms = {"POST": REPLAY}

    @extend_schema(
        operation_id="replays_cancel",
        summary="Cancel a replay set",
        description="Items not started are skipped; running replays are cancelled. 409 "
        "when the set is not running.",
        tags=TAGS,
        parameters=[SET_ID],
        request=None,
        responses={200: sr.ReplaySetSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, set_id: str) -> Response:
        replay_set = replay_cancel(replay_set=_set(set_id, request), actor=actor_for(request))
        return Response(replay_json(_set(str(replay_set.pk), request), items=False))
