"""Threads: list, create, read, their messages, and new input for them."""

from __future__ import annotations

from django.db.models import Q
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from common.access import visible_teams
from common.api.auth import actor_for
from common.api.base import ApiView, parse_uuid, validated
from common.api.errors import error_responses
from common.errors import NotFound
from common.teams import team_for_new
from runs import permissions as perms
from runs import selectors
from runs.api import request_serializers as sq
from runs.api import serializers as s
from runs.api.pagination import check_cursor
from runs.api.views.inputs import INPUT_MODES_TEXT, INPUT_RESPONSES, submit_input
from runs.api.views.lookups import get_agent, get_thread
from runs.api.views.params import IDEMPOTENCY_KEY, THREAD_ID
from runs.models import Message, Run
from runs.services.threads import thread_create


class ThreadListView(ApiView):
    required_perms = {"GET": perms.VIEW_THREAD, "POST": perms.START}

    @extend_schema(
        operation_id="threads_list",
        summary="List threads, newest first",
        tags=["threads"],
        parameters=[sq.ThreadListQuerySerializer],
        responses={200: s.ThreadPageSerializer, **error_responses()},
    )
    def get(self, request: Request) -> Response:
        query = validated(sq.ThreadListQuerySerializer, request.query_params)
        cursor = check_cursor(query.get("cursor"), uuid_pk=True)
        page = selectors.thread_list(
            cursor=cursor,
            q=(query.get("q") or "").strip(),
            teams=visible_teams(request.user, perms.VIEW_THREAD),
        )
        items = s.ThreadSerializer(page.items, many=True).data
        return Response({"items": items, "next_cursor": page.next_cursor})

    @extend_schema(
        operation_id="threads_create",
        summary="Create an empty thread",
        description="The thread belongs to a team, whose members see it, and its runs "
        "must be of that team's agents. `team` names it: a team where you may start runs "
        "(a team you are not in is refused as an unknown one: 400). Without `team`: the "
        "one team where you may start runs, or for a site-wide role the default team; "
        "when you may start runs in several teams, `team` is required (400 naming them).",
        tags=["threads"],
        request=sq.ThreadCreateSerializer,
        responses={201: s.ThreadSerializer, **error_responses(body=True)},
    )
    def post(self, request: Request) -> Response:
        data = validated(sq.ThreadCreateSerializer, request.data)
        team = team_for_new(request.user, perms.START, data["team"], "create threads")
        thread = thread_create(
            title=data["title"],
            resource_id=data["resource_id"],
            custom=data["custom"],
            team=team,
            actor=actor_for(request),
        )
        return Response(s.ThreadSerializer(thread).data, status=201)


class ThreadDetailView(ApiView):
    required_perms = {"GET": perms.VIEW_THREAD}

    @extend_schema(
        operation_id="threads_retrieve",
        summary="A thread and its runs",
        tags=["threads"],
        parameters=[THREAD_ID],
        responses={200: s.ThreadDetailSerializer, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        return Response(s.ThreadDetailSerializer(get_thread(thread_id, request)).data)


class ThreadMessagesView(ApiView):
    required_perms = {"GET": perms.VIEW_THREAD, "POST": perms.START}

    @extend_schema(
        operation_id="threads_messages_list",
        summary="A thread's messages after a seq",
        tags=["threads"],
        parameters=[THREAD_ID, sq.ThreadMessagesQuerySerializer],
        responses={200: s.MessagePageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id, request)
        query = validated(sq.ThreadMessagesQuerySerializer, request.query_params)
        after, limit = query["after_seq"], query["limit"]
        messages = Message.objects.filter(thread=thread, seq__gt=after).exclude(
            visibility="internal"
        )
        if query.get("run_id"):
            run = Run.objects.filter(pk=query["run_id"], thread=thread).first()
            if run is None:
                raise NotFound(f"run {query['run_id']} not found in thread {thread.pk}")
            trigger = set((run.request or {}).get("input_message_ids") or [])
            trigger |= set((run.input or {}).get("trigger_message_ids") or [])
            ids = [parse_uuid(i, "message") for i in trigger]
            messages = messages.filter(Q(produced_by_run=run) | Q(pk__in=ids))
        rows = list(messages.order_by("seq")[: limit + 1])
        items = s.MessageSerializer(rows[:limit], many=True).data
        return Response(
            {
                "items": items,
                "next_after_seq": items[-1]["seq"] if items else after,
                "has_more": len(rows) > limit,
            }
        )

    @extend_schema(
        operation_id="threads_messages_create",
        summary="Send messages to a thread",
        description="Input for the thread, run by `agent_id` (by default the agent of the "
        "thread's open or latest run; required when the thread has no run yet). "
        + INPUT_MODES_TEXT
        + " Changed with the input modes: a message to a thread whose open run waits used "
        "to continue that run; now it is queued unless it says `mode: resume_open_run`, and "
        "a message to a thread whose run is executing is queued (202) instead of 409.",
        tags=["threads"],
        parameters=[THREAD_ID, IDEMPOTENCY_KEY],
        request=sq.ThreadMessageCreateSerializer,
        responses=INPUT_RESPONSES,
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id, request)
        data = validated(sq.ThreadMessageCreateSerializer, request.data)
        agent = get_agent(data["agent_id"], request) if data.get("agent_id") else None
        return submit_input(request, data, agent=agent, thread=thread)
