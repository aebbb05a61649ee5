"""Response shapes of the API, and the fields and choices its requests share (the
requests: `runs.api.request_serializers`). Output serializers render the rows; the
RunRecord is built by `runs.store` and described here for the OpenAPI schema."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agents.pricing import cost_text, run_cost_usd
from runs.api.claims import ClaimantField, ClaimedUntilField
from runs.models import BackgroundTask, Decision, Message, PendingInput, Run, Thread, Ticket
from runs.selectors import WAITING_REASONS
from runs.services.tickets import decision_json

OUR_DECISION_ACTIONS = ["approve", "edit", "reject", "respond"]
DECISION_ACTIONS = [*OUR_DECISION_ACTIONS, "resume", "cancel"]
RUN_STATUSES = list(Run.Status.values)
TICKET_STATUSES = list(Ticket.Status.values)
INPUT_MODES = list(PendingInput.Mode.values)
INPUT_STATUSES = list(PendingInput.Status.values)
INPUT_MODE_HELP = (
    "What happens when the thread has an open run: `queue` (default) waits and starts the "
    "thread's next run when it ends; `steer` is delivered into the open run at its next "
    "step boundary (queued if the run ends first); `interrupt_then_queue` cancels the open "
    "run and queues the message; `resume_open_run` continues the open run while it waits "
    "(its open tickets are rejected as superseded; 409 if it is not waiting). With no open "
    "run every mode starts a run at once."
)
INPUT_PRIORITY_HELP = "Priority of the run it starts: 0 (high) … 255 (low)."

TEXT_BLOCK = {
    "type": "object",
    "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}},
    "required": ["type", "text"],
}


class BlankAsNullCharField(serializers.CharField):
    """Model strings that are blank when absent render as null."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> Any:
        return value or None


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "items": TEXT_BLOCK, "minItems": 1},
        ],
        "description": "Text, or a list of text blocks [{type: text, text}].",
    }
)
class ContentField(serializers.JSONField):
    pass


@extend_schema_field(OpenApiTypes.ANY)
class AnyField(serializers.JSONField):
    pass


# --- responses ---------------------------------------------------------------------------------------


class DecisionSerializer(serializers.Serializer):
    id = serializers.CharField()
    ticket = serializers.CharField(help_text="Global ticket id.")
    action = serializers.ChoiceField(choices=OUR_DECISION_ACTIONS)
    actor = serializers.CharField(help_text="Who decided: username, 'user (token name)', system.")
    comment = serializers.CharField(allow_blank=True)
    decision_id = serializers.CharField(help_text="Client idempotency key (generated if absent).")
    payload = AnyField(allow_null=True)
    arguments_before = AnyField(allow_null=True)
    arguments_after = AnyField(allow_null=True)
    created_at = serializers.DateTimeField()


class DecisionResultSerializer(DecisionSerializer):
    run_id = serializers.CharField()
    ticket_id = serializers.CharField(help_text="Upstream ticket id.")


class TicketSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="Global ticket id (POST /tickets/{id}/decision).")
    ticket_id = serializers.CharField(help_text="Upstream ticket id: suspension id or call id.")
    run_id = serializers.UUIDField()
    agent_id = serializers.CharField(source="run.agent.slug")
    tool_call_id = serializers.CharField(source="tool_call.call_id")
    tool_name = serializers.CharField()
    arguments = AnyField(allow_null=True)
    resume_mode = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=TICKET_STATUSES)
    deadline_at = serializers.DateTimeField(allow_null=True)
    default_action = serializers.CharField(help_text="Applied at the deadline by the system.")
    default_payload = AnyField(
        allow_null=True, help_text="The answer given at the deadline when the action is respond."
    )
    warn_at = serializers.DateTimeField(
        allow_null=True, help_text="When operators are warned that the deadline nears."
    )
    warned_at = serializers.DateTimeField(allow_null=True, help_text="When that warning went out.")
    created_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)
    claimed_by = ClaimantField(help_text="Username of the operator on it now (null: nobody).")
    claimed_until = ClaimedUntilField(help_text="When that claim lapses unless renewed.")
    assigned_to = serializers.CharField(
        source="assigned_to.username", allow_null=True, read_only=True, help_text="Assignee."
    )
    decision = serializers.SerializerMethodField()

    @extend_schema_field(DecisionSerializer(allow_null=True))
    def get_decision(self, ticket: Ticket) -> dict[str, Any] | None:
        if ticket.status == Ticket.Status.PENDING:  # undecided: no lookup
            return None
        try:
            decision = ticket.decision
        except Decision.DoesNotExist:
            return None
        return decision_json(decision)


class RangeSerializer(serializers.Serializer):
    from_seq = serializers.IntegerField()
    to_seq = serializers.IntegerField()


class RunInputSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    range = RangeSerializer(required=False)
    trigger_message_ids = serializers.ListField(child=serializers.CharField())
    selected_message_ids = serializers.ListField(child=serializers.CharField())
    context_policy = AnyField(required=False)
    compacted_snapshot_id = serializers.CharField(required=False)


class RunOutputSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    range = RangeSerializer(required=False)
    message_ids = serializers.ListField(child=serializers.CharField())


class TerminationSerializer(serializers.Serializer):
    type = serializers.CharField(
        help_text="natural_end, behavior_requested, stopped, cancelled, blocked, suspended, error."
    )
    value = AnyField(required=False, help_text="stopped: {code, detail}; blocked/error: text.")


class WaitingSerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=WAITING_REASONS)
    ticket_ids = serializers.ListField(child=serializers.CharField())
    tickets = TicketSerializer(many=True, help_text="The open tickets the run waits for.")
    since_dispatch_id = serializers.CharField(required=False)
    message = serializers.CharField(required=False)


class RequestSnapshotSerializer(serializers.Serializer):
    origin = serializers.CharField()
    sender_id = serializers.CharField(required=False)
    input_message_ids = serializers.ListField(child=serializers.CharField())
    input_message_count = serializers.IntegerField(required=False)


class OutcomeSerializer(serializers.Serializer):
    termination_reason = TerminationSerializer()
    final_output = serializers.CharField(required=False, allow_blank=True)
    error_payload = AnyField(required=False)


class BackgroundTaskSerializer(serializers.Serializer):
    """Work a tool of the run started that outlives its step (docs/background-work.md)."""

    task_id = serializers.UUIDField(source="id")
    tool_call_id = serializers.CharField(help_text="The tool call that started it.")
    kind = serializers.CharField(help_text="The job that does the work, e.g. report.")
    label = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=list(BackgroundTask.Status.values))
    attempt = serializers.IntegerField(help_text="Executions started so far.")
    result = AnyField(allow_null=True, help_text="What the job returned (completed).")
    error = BlankAsNullCharField(help_text="Why it failed.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(
        allow_null=True, help_text="When the run's activation received its result."
    )


class RunRecordSerializer(serializers.Serializer):
    """Upstream's RunRecord (times in unix seconds) plus this service's bookkeeping."""

    run_id = serializers.UUIDField()
    thread_id = serializers.UUIDField()
    agent_id = serializers.CharField(help_text="Agent slug.")
    parent_run_id = serializers.UUIDField(allow_null=True)
    request = RequestSnapshotSerializer(allow_null=True)
    input = RunInputSerializer(allow_null=True)
    output = RunOutputSerializer(allow_null=True)
    status = serializers.ChoiceField(choices=RUN_STATUSES)
    status_reason = serializers.CharField(allow_null=True)
    termination_reason = TerminationSerializer(allow_null=True)
    final_output = serializers.CharField(allow_null=True, allow_blank=True)
    error_payload = AnyField(allow_null=True)
    dispatch_id = serializers.CharField(allow_null=True)
    session_id = serializers.CharField(allow_null=True)
    transport_request_id = serializers.CharField(allow_null=True)
    waiting = WaitingSerializer(allow_null=True)
    outcome = OutcomeSerializer(allow_null=True)
    created_at = serializers.IntegerField(help_text="Unix seconds.")
    started_at = serializers.IntegerField(allow_null=True)
    finished_at = serializers.IntegerField(allow_null=True)
    updated_at = serializers.IntegerField()
    steps = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    state = serializers.DictField(
        allow_null=True, help_text="PersistedState {revision, extensions}."
    )
    # bookkeeping beyond upstream
    waiting_reason = serializers.ChoiceField(choices=WAITING_REASONS, allow_null=True)
    agent_version = serializers.IntegerField(help_text="Pinned agent version number.")
    retry_of = serializers.UUIDField(allow_null=True)
    last_event_seq = serializers.IntegerField(help_text="Seq of the last persisted event.")
    cancel_requested_at = serializers.IntegerField(allow_null=True)
    idempotency_key = serializers.CharField(allow_null=True)
    cost_usd = serializers.CharField(
        allow_null=True,
        help_text="USD at the prices its model had when the run was created, e.g. "
        '"0.0123"; null: unpriced.',
    )
    priority = serializers.IntegerField(
        help_text="0 (high) … 255 (low): workers take due runs by priority, then age."
    )
    run_mode = serializers.CharField(help_text="How it started: foreground or scheduled.")
    schedule_id = serializers.UUIDField(
        allow_null=True, help_text="The schedule that started it (run_mode scheduled)."
    )
    pending_inputs = serializers.IntegerField(
        help_text="Steer inputs waiting for its next step boundary."
    )
    background_tasks = BackgroundTaskSerializer(
        many=True, help_text="Background work its tools started, oldest first."
    )


class RunSummarySerializer(serializers.Serializer):
    run_id = serializers.UUIDField(source="id")
    thread_id = serializers.UUIDField()
    agent_id = serializers.CharField(source="agent.slug")
    parent_run_id = serializers.UUIDField(allow_null=True)
    status = serializers.ChoiceField(choices=RUN_STATUSES)
    status_reason = BlankAsNullCharField()
    waiting_reason = serializers.ChoiceField(choices=WAITING_REASONS, allow_null=True)
    termination_reason = TerminationSerializer(allow_null=True)
    open_tickets = serializers.SerializerMethodField()
    steps = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    last_event_seq = serializers.IntegerField()
    created_at = serializers.SerializerMethodField(help_text="Unix seconds.")
    updated_at = serializers.SerializerMethodField()
    finished_at = serializers.SerializerMethodField()
    cost_usd = serializers.SerializerMethodField(
        help_text="USD at the prices its model had when the run was created, e.g. "
        '"0.0123"; null: unpriced.'
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cost_usd(self, run: Run) -> str | None:
        return cost_text(run_cost_usd(run))

    def get_open_tickets(self, run: Run) -> int:
        return run.open_tickets

    def get_created_at(self, run: Run) -> int:
        return int(run.created_at.timestamp())

    def get_updated_at(self, run: Run) -> int:
        return int(run.updated_at.timestamp())

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_finished_at(self, run: Run) -> int | None:
        return int(run.finished_at.timestamp()) if run.finished_at else None


class RunPageSerializer(serializers.Serializer):
    items = RunSummarySerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as ?cursor= for more.")
    prev_cursor = serializers.CharField(
        allow_null=True,
        help_text="Pass as ?cursor= for the page before this one (newer runs); null on the "
        "first page.",
    )


class EventSerializer(serializers.Serializer):
    """An AgentEvent as persisted: its own fields (docs/run-model.md) plus seq and time."""

    seq = serializers.IntegerField(help_text="Per-run 1, 2, 3 … with no gaps.")
    event_type = serializers.CharField(help_text="run_start, step_start, text_delta, …")
    created_at = serializers.DateTimeField()


class EventPageSerializer(serializers.Serializer):
    items = EventSerializer(many=True)
    next_after_seq = serializers.IntegerField(help_text="Pass as ?after_seq= for what follows.")
    has_more = serializers.BooleanField()


class TicketPageSerializer(serializers.Serializer):
    items = TicketSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="Pass as ?cursor= for more.")


class ThreadSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(allow_blank=True)
    resource_id = serializers.CharField(allow_blank=True)
    parent_thread_id = serializers.UUIDField(allow_null=True)
    message_count = serializers.IntegerField()
    open_run_id = serializers.UUIDField(allow_null=True)
    active_run_id = serializers.UUIDField(allow_null=True)
    latest_run_id = serializers.UUIDField(allow_null=True)
    custom = serializers.DictField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ThreadDetailSerializer(ThreadSerializer):
    runs = serializers.SerializerMethodField()

    @extend_schema_field(RunSummarySerializer(many=True))
    def get_runs(self, thread: Thread) -> list[dict[str, Any]]:
        rows = Run.objects.filter(thread=thread).select_related("agent").order_by("created_at")
        return list(RunSummarySerializer(rows[:200], many=True).data)


class ThreadPageSerializer(serializers.Serializer):
    items = ThreadSerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class MessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    seq = serializers.IntegerField(help_text="1-based position in the thread's log.")
    role = serializers.ChoiceField(choices=Message.Role.values)
    content = serializers.ListField(child=serializers.DictField(), help_text="Content blocks.")
    tool_calls = serializers.ListField(
        child=serializers.DictField(), allow_null=True, help_text="[{id, name, arguments}]."
    )
    tool_call_id = BlankAsNullCharField()
    run_id = serializers.UUIDField(source="produced_by_run_id", allow_null=True)
    step_index = serializers.IntegerField(allow_null=True)
    created_at = serializers.DateTimeField()


class MessagePageSerializer(serializers.Serializer):
    items = MessageSerializer(many=True)
    next_after_seq = serializers.IntegerField()
    has_more = serializers.BooleanField()


class AuditEntrySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    actor = serializers.CharField(source="actor_label")
    actor_id = serializers.IntegerField(allow_null=True, help_text="User id (null: system/cli).")
    action = serializers.CharField()
    target_type = serializers.CharField()
    target_id = serializers.CharField()
    run_id = serializers.UUIDField(allow_null=True)
    before = AnyField(allow_null=True)
    after = AnyField(allow_null=True)
    comment = serializers.CharField(allow_blank=True)
    source = serializers.CharField()
    request_id = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()


class AuditPageSerializer(serializers.Serializer):
    items = AuditEntrySerializer(many=True)
    next_cursor = serializers.CharField(allow_null=True)
