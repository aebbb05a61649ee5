"""Request and response shapes of run control in the API: input for a thread or a run,
pending input, thread interrupt and run priority."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from runs.api.fields import PriorityField, input_mode_field, input_priority_field
from runs.api.request_serializers import MessageInSerializer
from runs.api.serializers import (
    INPUT_MODE_HELP,
    INPUT_MODES,
    INPUT_PRIORITY_HELP,
    INPUT_STATUSES,
    BlankAsNullCharField,
    RunRecordSerializer,
)
from runs.services.submission import PRIORITY_RANGE


class RunInputCreateSerializer(serializers.Serializer):
    messages = MessageInSerializer(many=True, min_length=1, max_length=50)
    mode = input_mode_field(INPUT_MODE_HELP)
    priority = input_priority_field(INPUT_PRIORITY_HELP)
    idempotency_key = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        help_text="When the input starts a run: a repeat of the key by the same user "
        "returns that run (HTTP 200).",
    )


class InputEditSerializer(serializers.Serializer):
    messages = MessageInSerializer(
        many=True, min_length=1, max_length=50, required=False, help_text="Replace the text."
    )
    priority = PriorityField(required=False, help_text=INPUT_PRIORITY_HELP)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "messages" not in attrs and "priority" not in attrs:
            raise serializers.ValidationError("send messages, priority or both")
        return attrs


class InputListQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(
        choices=["pending", "all"],
        default="pending",
        help_text="`pending`: what still waits; `all`: delivered, retracted and cancelled too.",
    )
    after_seq = serializers.IntegerField(
        min_value=0, default=0, help_text="Inputs after this seq (order of acceptance)."
    )
    limit = serializers.IntegerField(min_value=1, max_value=500, default=100)


class PrioritySerializer(serializers.Serializer):
    priority = PriorityField(help_text=f"{PRIORITY_RANGE}.")


class PendingInputSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="Input id (GET/PATCH/DELETE /inputs/{id}).")
    thread_id = serializers.UUIDField()
    seq = serializers.IntegerField(help_text="Order of acceptance on the thread.")
    mode = serializers.ChoiceField(choices=INPUT_MODES)
    status = serializers.ChoiceField(choices=INPUT_STATUSES)
    messages = serializers.ListField(
        child=serializers.DictField(), help_text="[{role, content: [text blocks]}] as accepted."
    )
    text = serializers.CharField(allow_blank=True, help_text="The messages' text.")
    agent_id = serializers.CharField(source="agent.slug", help_text="Agent of the run it starts.")
    priority = serializers.IntegerField()
    run_id = serializers.UUIDField(
        allow_null=True, help_text="Steer: the run it waits for, while pending."
    )
    delivered_run_id = serializers.UUIDField(allow_null=True, help_text="Run that received it.")
    boundary = BlankAsNullCharField(
        help_text="How it was delivered: next_step, new_run or resume_input."
    )
    message_ids = serializers.ListField(
        child=serializers.CharField(), help_text="Its messages in the thread's log, once delivered."
    )
    actor = serializers.CharField(source="actor_label", help_text="Who sent it.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)


class QueuedInputSerializer(PendingInputSerializer):
    status = serializers.ChoiceField(choices=["pending"], help_text="It waits.")
    interrupted_run_id = serializers.UUIDField(
        allow_null=True,
        help_text="interrupt_then_queue: the run it cancelled (it stops at its next check).",
    )


class InputPageSerializer(serializers.Serializer):
    items = PendingInputSerializer(many=True)
    next_after_seq = serializers.IntegerField(help_text="Pass as ?after_seq= for what follows.")
    has_more = serializers.BooleanField()


class InputRunSerializer(RunRecordSerializer):
    """The run an input started or continued, and what the input did on the way."""

    input_id = serializers.UUIDField(
        allow_null=True, help_text="The input's record (null: an idempotency key repeat)."
    )
    superseded_tickets = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="resume_open_run: the open tickets rejected as superseded.",
    )
    interrupted_run_id = serializers.UUIDField(
        allow_null=True, help_text="interrupt_then_queue: the run it cancelled."
    )


class ThreadInterruptSerializer(serializers.Serializer):
    run = RunRecordSerializer(allow_null=True, help_text="The open run, cancelled (or asked to).")
    cancelled_inputs = serializers.ListField(
        child=serializers.UUIDField(), help_text="The pending inputs cancelled."
    )
