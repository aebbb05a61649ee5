"""Request shapes of the API: the bodies it accepts and the query parameters of its lists,
validated before a view reads them. The fields and choices they share with the responses
are in `runs.api.serializers`."""

from __future__ import annotations

from rest_framework import serializers

from runs.api.fields import input_mode_field, input_priority_field
from runs.api.serializers import (
    DECISION_ACTIONS,
    INPUT_MODE_HELP,
    INPUT_PRIORITY_HELP,
    RUN_STATUSES,
    TICKET_STATUSES,
    AnyField,
    ContentField,
)
from runs.api.team_serializers import NEW_THREAD_TEAM_HELP
from runs.selectors import WAITING_REASONS
from runs.selectors.filters import SEARCH_MAX_CHARS
from runs.selectors.waiting import LONGEST_WAITING, LONGEST_WAITING_HELP, MAX_MINUTES, WAITED_HELP


class MessageInSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["user", "assistant", "system"], default="user")
    content = ContentField()


class RunCreateSerializer(serializers.Serializer):
    agent_id = serializers.CharField(max_length=63, help_text="Agent slug.")
    thread_id = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="Existing thread to continue; a new thread when absent.",
    )
    messages = MessageInSerializer(many=True, min_length=1, max_length=50)
    idempotency_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="A repeat of the key by the same user returns the same run (HTTP 200).",
    )


class RunListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=RUN_STATUSES, required=False, allow_blank=True)
    waiting_reason = serializers.ChoiceField(
        choices=WAITING_REASONS, required=False, allow_blank=True
    )
    agent_id = serializers.CharField(required=False, allow_blank=True, max_length=63)
    thread_id = serializers.UUIDField(required=False, allow_null=True)
    created_after = serializers.DateTimeField(required=False, help_text="Inclusive.")
    created_before = serializers.DateTimeField(required=False, help_text="Exclusive.")
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=SEARCH_MAX_CHARS,
        help_text="A run or thread id, or text in the thread's messages.",
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=100, help_text="Exact status_reason."
    )
    provider = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=63,
        help_text="Model provider slug of the run's pinned agent version.",
    )
    endpoint = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=63,
        help_text="Remote endpoint slug of the run's pinned agent version.",
    )
    waiting_tool = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Waiting on this tool."
    )
    waiting_longer_than = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_MINUTES, help_text=WAITED_HELP
    )
    sort = serializers.ChoiceField(
        choices=["newest", LONGEST_WAITING], default="newest", help_text=LONGEST_WAITING_HELP
    )
    cursor = serializers.CharField(
        required=False, allow_blank=True, max_length=400, help_text="next_cursor of a page."
    )
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)


class EventsQuerySerializer(serializers.Serializer):
    after_seq = serializers.IntegerField(min_value=0, default=0, help_text="Events after this seq.")
    limit = serializers.IntegerField(min_value=1, max_value=1000, default=200)


class StreamQuerySerializer(serializers.Serializer):
    after_seq = serializers.IntegerField(
        min_value=0,
        required=False,
        help_text="Resume after this seq (the Last-Event-ID header wins when both are sent).",
    )
    follow = serializers.BooleanField(
        default=False,
        help_text="Keep streaming after run_finish while the run may resume; "
        "close only when the run is done.",
    )


class DecisionRequestSerializer(serializers.Serializer):
    action = serializers.ChoiceField(
        choices=DECISION_ACTIONS,
        help_text="approve | edit | reject | respond, or upstream's resume | cancel.",
    )
    arguments = serializers.DictField(
        required=False, allow_null=True, help_text="edit: the arguments the tool runs with."
    )
    payload = AnyField(
        required=False, allow_null=True, help_text="respond: the tool result; upstream payload."
    )
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="Reason or note: at most AWAKEN_MAX_COMMENT_CHARS characters (2,000 by "
        "default); `payload` and `arguments`, as JSON, at most AWAKEN_MAX_ANSWER_CHARS "
        "(32,000 by default).",
    )
    decision_id = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=200,
        help_text="Client idempotency key: a repeat returns the first result.",
    )
    ticket_id = serializers.CharField(
        required=False,
        max_length=300,
        help_text="POST /runs/{id}/decisions: the ticket (upstream ticket id, tool call id "
        "or global ticket id).",
    )
    toolCallId = serializers.CharField(
        required=False, max_length=300, help_text="Upstream: the tool call or ticket id."
    )
    tool_call_id = serializers.CharField(required=False, max_length=300)
    reason = serializers.CharField(
        required=False, allow_blank=True, help_text="Upstream alias of comment."
    )


class ThreadCreateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
    resource_id = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default=""
    )
    custom = serializers.DictField(required=False, default=dict)
    team = serializers.CharField(
        max_length=63, required=False, allow_blank=True, default="", help_text=NEW_THREAD_TEAM_HELP
    )


class ThreadListQuerySerializer(serializers.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=SEARCH_MAX_CHARS,
        help_text="Thread id or title text.",
    )
    cursor = serializers.CharField(required=False, allow_blank=True, max_length=400)


class ThreadMessagesQuerySerializer(serializers.Serializer):
    after_seq = serializers.IntegerField(min_value=0, default=0)
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    run_id = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="Only the run's input (trigger) messages and the messages it produced.",
    )


class ThreadMessageCreateSerializer(serializers.Serializer):
    agent_id = serializers.CharField(
        max_length=63,
        required=False,
        allow_blank=True,
        help_text="Defaults to the agent of the thread's latest run.",
    )
    messages = MessageInSerializer(many=True, min_length=1, max_length=50)
    idempotency_key = serializers.CharField(max_length=200, required=False, allow_blank=True)
    mode = input_mode_field(INPUT_MODE_HELP)
    priority = input_priority_field(INPUT_PRIORITY_HELP)


class TicketListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=TICKET_STATUSES, default="pending")
    agent_id = serializers.CharField(required=False, allow_blank=True, max_length=63)
    tool = serializers.CharField(required=False, allow_blank=True, max_length=200)
    waiting_longer_than = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_MINUTES, help_text=WAITED_HELP
    )
    cursor = serializers.CharField(
        required=False, allow_blank=True, max_length=400, help_text="next_cursor of a page."
    )
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)
    who = serializers.ChoiceField(
        choices=["all", "mine", "unassigned"],
        default="all",
        help_text="mine: assigned to you or claimed by you; unassigned: assigned to nobody.",
    )


class AuditQuerySerializer(serializers.Serializer):
    action = serializers.CharField(
        required=False, allow_blank=True, max_length=40, help_text="Prefix, e.g. ticket."
    )
    actor = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Actor label or username."
    )
    run = serializers.UUIDField(required=False, allow_null=True, help_text="Run id.")
    cursor = serializers.CharField(required=False, allow_blank=True, max_length=400)
    limit = serializers.IntegerField(min_value=1, max_value=200, default=50)
