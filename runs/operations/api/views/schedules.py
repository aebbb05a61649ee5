"""/api/v1/schedules (docs/schedules.md, "Over the API"): list, create, read, change,
delete, pause, resume and run now a schedule, and its last runs.

The same rules as the schedules pages and the admin: everyone in a schedule's team reads
it (`runs.view_schedule`); its team's operators and admins create, change, pause, resume
(`runs.add_schedule`, `change_schedule`) and run it now (`runs.run_schedule`); only its
admins delete it (`delete_schedule`). Another team's schedule is not found (404); a
frozen team's is 409 `team_frozen`. A schedule is validated by the form the admin and
the pages use (`ScheduleForm`, through the service's rules): the same messages, per
field. Every change is the service's, audited there; run now starts its run through the
submission command, as a firing does."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.forms.models import model_to_dict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from common.access import scope
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found, validated
from common.api.errors import error_responses
from common.errors import InvalidInput
from common.teams import ensure_may
from runs.api import serializers as run_serializers
from runs.api.pagination import check_cursor
from runs.models import Schedule
from runs.operations.api import schedule_serializers as ss
from runs.operations.schedule_forms import FORM_FIELDS, ScheduleForm
from runs.operations.services.schedules import (
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_run_now,
    schedule_save,
)
from runs.selectors import runs_for_list
from runs.selectors.base import keyset_page

VIEW = "runs.view_schedule"
ADD = "runs.add_schedule"
CHANGE = "runs.change_schedule"
DELETE = "runs.delete_schedule"
RUN = "runs.run_schedule"
TAGS = ["schedules"]
SCHEDULE_ID = OpenApiParameter(
    "schedule_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="Schedule id."
)

CREATE_EXAMPLE = OpenApiExample(
    "Weekdays at 09:00 in Berlin",
    value={
        "name": "morning report",
        "agent_id": "assistant",
        "message": "Report on the night.",
        "kind": "cron",
        "cron": "0 9 * * 1-5",
        "timezone": "Europe/Berlin",
    },
    request_only=True,
)


# --- lookups ----------------------------------------------------------------------------------


def _rows() -> QuerySet[Schedule]:
    return Schedule.objects.select_related("agent", "agent__team", "created_by")


def _visible(request: Request) -> QuerySet[Schedule]:
    return scope(_rows(), request.user, "agent__team_id", VIEW)


def _schedule(request: Request, schedule_id: Any, perm: str = "", what: str = "") -> Schedule:
    """The schedule when the user sees it (404 otherwise, another team's too) and, with
    `perm`, may do that to it in its team (403, or 409 when only a freeze refuses)."""
    schedule = get_or_not_found(_visible(request), "schedule", schedule_id)
    if perm:
        ensure_may(request.user, perm, schedule, f"{what} schedule {schedule.name}")
    return schedule


def _agent(request: Request, slug: str, perm: str) -> Agent:
    """The agent a schedule starts: one the user sees (another team's is refused as an
    unknown one, 400), of a team where their role allows `perm` (403)."""
    agents = scope(
        Agent.objects.select_related("team"), request.user, "team_id", "agents.view_agent"
    )
    found = agents.filter(slug=slug).first()
    if found is None:
        raise InvalidInput(f"no agent {slug!r}", {"agent_id": [f"no agent {slug!r}"]})
    ensure_may(request.user, perm, found, f"schedule agent {slug}")
    return found


def _json(schedule: Schedule) -> Any:
    return ss.ScheduleSerializer(schedule).data


# --- the shared form --------------------------------------------------------------------------

API_NAMES = {"agent": "agent_id"}  # the form's field -> the API's


def _form_data(current: Schedule | None, data: dict[str, Any], agent: Agent | None) -> Any:
    """The form's data: the schedule's values (a new one: the model's defaults), with the
    fields the request sent in their place."""
    if current is None:
        fields = {field.name: field for field in Schedule._meta.concrete_fields}
        values = {name: fields[name].get_default() for name in FORM_FIELDS}
    else:
        values = model_to_dict(current, fields=FORM_FIELDS)
    values.update({name: value for name, value in data.items() if name in FORM_FIELDS})
    if agent is not None:
        values["agent"] = agent.pk
    return values


def _checked(current: Schedule | None, data: dict[str, Any], agent: Agent | None) -> Schedule:
    """The schedule as the form validated it (not saved); InvalidInput with the form's
    messages, by field, otherwise."""
    form = ScheduleForm(_form_data(current, data, agent), instance=current)
    if form.is_valid():
        return form.instance  # type: ignore[no-any-return]
    details = {
        API_NAMES.get(field, field): [str(message) for message in messages]
        for field, messages in form.errors.items()
    }
    text = " ".join(f"{field}: {messages[0]}" for field, messages in details.items())
    raise InvalidInput(text, details)


# --- views ------------------------------------------------------------------------------------


class ScheduleListView(ApiView):
    required_perms = {"GET": VIEW, "POST": ADD}

    @extend_schema(
        operation_id="schedules_list",
        summary="Schedules, newest first",
        description="The schedules of your teams' agents; `agent_id` and `paused` filter.",
        tags=TAGS,
        parameters=[ss.ScheduleListQuerySerializer],
        responses={200: ss.SchedulePageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(ss.ScheduleListQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        rows = _visible(request)
        if query.get("agent_id"):
            rows = rows.filter(agent__slug=query["agent_id"])
        if query.get("paused") is not None:
            rows = rows.filter(enabled=not query["paused"])
        page = keyset_page(rows, cursor, query["limit"])
        items = ss.ScheduleSerializer(page.items, many=True).data
        return Response(
            {"items": items, "next_cursor": page.next_cursor, "prev_cursor": page.prev_cursor}
        )

    @extend_schema(
        operation_id="schedules_create",
        summary="Create a schedule",
        description="Validated as the admin's form validates it (the same messages, in "
        "`details` by field; `agent_id` for the agent); its next run is planned from now "
        "(none when `enabled` is false). Audited as `schedule.create`. An agent you "
        "cannot see is refused as an unknown one (400).",
        tags=TAGS,
        request=ss.ScheduleWriteSerializer,
        examples=[CREATE_EXAMPLE],
        responses={
            201: OpenApiResponse(ss.ScheduleSerializer, description="Created."),
            **error_responses(409, body=True),
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(ss.ScheduleWriteSerializer, request.data)
        agent = _agent(request, data["agent_id"], ADD)
        schedule = schedule_save(_checked(None, data, agent), actor_for(request))
        return Response(_json(_schedule(request, schedule.pk)), status=201)


class ScheduleDetailView(ApiView):
    required_perms = {"GET": VIEW, "PATCH": CHANGE, "DELETE": DELETE}

    @extend_schema(
        operation_id="schedules_retrieve",
        summary="A schedule",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        responses={200: ss.ScheduleSerializer, **error_responses(404)},
    )
    def get(self, request: Request, schedule_id: str) -> Response:
        return Response(_json(_schedule(request, schedule_id)))

    @extend_schema(
        operation_id="schedules_partial_update",
        summary="Change a schedule",
        description="Only the fields sent change; validated as the admin's form validates "
        "it. Saving plans the next run again from now (none while paused). Another "
        "`agent_id`: one of a team where you manage schedules. Audited as "
        "`schedule.update` with the fields before and after.",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        request=ss.ScheduleWriteSerializer(partial=True),
        responses={200: ss.ScheduleSerializer, **error_responses(404, 409, body=True)},
    )
    def patch(self, request: Request, schedule_id: str) -> Response:
        data = validated(ss.ScheduleWriteSerializer, request.data, partial=True)
        with transaction.atomic():  # the row stays as read until the change commits
            schedule = _schedule(request, schedule_id, CHANGE, "change")
            current = Schedule.objects.select_for_update(of=("self",)).get(pk=schedule.pk)
            agent = _agent(request, data["agent_id"], CHANGE) if "agent_id" in data else None
            schedule_save(_checked(current, data, agent), actor_for(request))
        return Response(_json(_schedule(request, schedule_id)))

    @extend_schema(
        operation_id="schedules_destroy",
        summary="Delete a schedule",
        description="Its runs stay (no longer linked to it). Audited as `schedule.delete`.",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        responses={204: None, **error_responses(404, 409)},
    )
    def delete(self, request: Request, schedule_id: str) -> Response:
        schedule = _schedule(request, schedule_id, DELETE, "delete")
        schedule_delete(schedule, actor_for(request))
        return Response(status=204)


class SchedulePauseView(ApiView):
    required_perms = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_pause",
        summary="Pause a schedule",
        description="No next run until resumed. Pausing a paused schedule changes nothing "
        "(200, no audit entry); otherwise audited as `schedule.pause`.",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        request=None,
        responses={200: ss.ScheduleSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        schedule = _schedule(request, schedule_id, CHANGE, "pause")
        schedule_pause(schedule, actor_for(request))
        return Response(_json(_schedule(request, schedule_id)))


class ScheduleResumeView(ApiView):
    required_perms = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_resume",
        summary="Resume a schedule",
        description="The next run is planned from now; the slots missed while paused are "
        "not caught up. Resuming a running schedule changes nothing (200, its next run "
        "stays, no audit entry); otherwise audited as `schedule.resume`.",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        request=None,
        responses={200: ss.ScheduleSerializer, **error_responses(404, 409)},
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        schedule = _schedule(request, schedule_id, CHANGE, "resume")
        schedule_resume(schedule, actor_for(request))
        return Response(_json(_schedule(request, schedule_id)))


class ScheduleRunNowView(ApiView):
    required_perms = {"POST": RUN}

    @extend_schema(
        operation_id="schedules_run_now",
        summary="Run a schedule now",
        description="Starts its run at once, paused or not, as a firing does (its message, "
        "priority and thread policy; `run_mode` scheduled), leaving its regular slots as "
        "they are. 409 when its one thread's previous run is still open (thread policy "
        "same). Audited as `schedule.run_now`, the run as `run.start` by you.",
        tags=TAGS,
        parameters=[SCHEDULE_ID],
        request=None,
        responses={
            201: OpenApiResponse(ss.ScheduleRunNowSerializer, description="Started."),
            **error_responses(404, 409),
        },
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        schedule = _schedule(request, schedule_id, RUN, "run")
        run = schedule_run_now(schedule, actor_for(request))
        run = runs_for_list().get(pk=run.pk)
        body = {
            "run": run_serializers.RunSummarySerializer(run).data,
            "schedule": _json(_schedule(request, schedule_id)),
        }
        return Response(body, status=201)


class ScheduleRunsView(ApiView):
    required_perms = {"GET": VIEW}

    @extend_schema(
        operation_id="schedules_runs",
        summary="A schedule's last runs, newest first",
        description="The runs it started (fired or run now); 10 by default.",
        tags=TAGS,
        parameters=[SCHEDULE_ID, ss.ScheduleRunsQuerySerializer],
        responses={200: run_serializers.RunPageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, schedule_id: str) -> Response:
        schedule = _schedule(request, schedule_id)
        query = validated(ss.ScheduleRunsQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        page = keyset_page(runs_for_list().filter(schedule=schedule), cursor, query["limit"])
        items = run_serializers.RunSummarySerializer(page.items, many=True).data
        return Response(
            {"items": items, "next_cursor": page.next_cursor, "prev_cursor": page.prev_cursor}
        )
