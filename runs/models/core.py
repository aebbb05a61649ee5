"""Threads, their append-only message logs, runs, tool calls, tickets, decisions and the
per-run event log. Field names follow upstream's RunRecord (docs/run-model.md)."""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from common.fields import usd_per_million_tokens
from common.models import default_team_id
from runs.fields import RowJSONField, uuid7_default
from runs.runtime.types import RunStatus, waiting_reason_from_status_reason

# Upstream's bounds: 0 is the highest, 255 the lowest. The rule that checks them is
# runs.services.submission.priority_check; these validators are the database's guard.
PRIORITY_MIN, PRIORITY_MAX = 0, 255
DEFAULT_PRIORITY = 128
PRIORITY_VALIDATORS = [MinValueValidator(PRIORITY_MIN), MaxValueValidator(PRIORITY_MAX)]


class Thread(models.Model):
    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Thread id (UUID v7)."
    )
    title = models.CharField(max_length=300, blank=True, help_text="Optional title.")
    resource_id = models.CharField(max_length=200, blank=True, help_text="Tenant/grouping key.")
    team = models.ForeignKey(
        "common.Team",
        on_delete=models.PROTECT,
        default=default_team_id,
        related_name="+",
        help_text="Team that sees it: its first run's agent's.",
    )
    parent_thread = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="Thread this one was spawned from (delegation).",
    )
    message_count = models.PositiveIntegerField(
        default=0, help_text="Committed messages; the checkpoint guard (optimistic concurrency)."
    )
    open_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Created, running or waiting run that new input continues.",
    )
    active_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Run executing right now.",
    )
    latest_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Most recently checkpointed run.",
    )
    custom = models.JSONField(default=dict, blank=True, help_text="Free-form metadata.")
    created_at = models.DateTimeField(default=timezone.now, help_text="Creation time.")
    updated_at = models.DateTimeField(default=timezone.now, help_text="Last message or run change.")
    input_seq = models.PositiveIntegerField(
        default=0, help_text="Inputs accepted so far: the order pending inputs are delivered in."
    )

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            # threads list, newest first (keyset on created_at, id)
            models.Index(fields=["-created_at", "-id"], name="thread_recent_idx"),
            models.Index(fields=["team", "-created_at", "-id"], name="thread_team_recent_idx"),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class Message(models.Model):
    class Role(models.TextChoices):
        SYSTEM = "system"
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Message id (UUID v7)."
    )
    thread = models.ForeignKey(  # indexed by the (thread, seq) constraint
        Thread,
        on_delete=models.CASCADE,
        related_name="messages",
        db_index=False,
        help_text="Owning thread.",
    )
    seq = models.PositiveIntegerField(help_text="1-based position in the thread's append-only log.")
    role = models.CharField(max_length=10, choices=Role.choices, help_text="Author role.")
    content = RowJSONField(default=list, help_text="Content blocks, e.g. [{type: text, text}].")
    tool_calls = RowJSONField(
        null=True, blank=True, help_text="Assistant tool calls [{id, name, arguments}]."
    )
    tool_call_id = models.CharField(
        max_length=200, blank=True, help_text="Tool messages: the call answered."
    )
    visibility = models.CharField(
        max_length=10, default="all", help_text="all, or internal (hidden from API consumers)."
    )
    produced_by_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="produced_messages",
        help_text="Run that produced it (metadata.run_id).",
    )
    step_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="0-based step that produced it."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was committed.")

    class Meta:
        ordering = ["thread", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="message_unique_thread_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.role}"

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content or [] if b.get("type") == "text")


class Run(models.Model):
    class Status(models.TextChoices):
        CREATED = RunStatus.CREATED.value
        RUNNING = RunStatus.RUNNING.value
        WAITING = RunStatus.WAITING.value
        DONE = RunStatus.DONE.value

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Run id (UUID v7)."
    )
    # No single-column indexes on these three: the list indexes below start with them.
    thread = models.ForeignKey(
        Thread,
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,
        help_text="Thread it reads and writes.",
    )
    agent = models.ForeignKey(
        "agents.Agent",
        on_delete=models.PROTECT,
        related_name="runs",
        db_index=False,
        help_text="Agent that runs.",
    )
    agent_version = models.ForeignKey(
        "agents.AgentVersion",
        on_delete=models.PROTECT,
        related_name="runs",
        db_index=False,
        help_text="Pinned configuration: the run resumes with it even after a newer publish.",
    )
    parent_run = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="children",
        help_text="Delegating run (sub-agent lineage).",
    )
    parent_tool_call_id = models.CharField(
        max_length=200, blank=True, help_text="Parent's delegating tool call."
    )
    retry_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="retries",
        help_text="Failed run this one retries from its last checkpoint.",
    )
    forked_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="forks",
        help_text="Run whose thread this one's was copied from, up to a step boundary.",
    )
    fork_step = models.PositiveIntegerField(
        null=True, blank=True, help_text="Forks: the step boundary of the original it starts at."
    )
    fork_edit = models.JSONField(
        null=True,
        blank=True,
        help_text="Forks: the message changed in the copy {seq, role, before, after}.",
    )
    origin = models.CharField(
        max_length=20, default="user", help_text="user, subagent or internal."
    )
    request = models.JSONField(null=True, blank=True, help_text="RunRequestSnapshot.")
    input = models.JSONField(
        null=True, blank=True, help_text="RunMessageInput: range read from the log."
    )
    output = models.JSONField(
        null=True, blank=True, help_text="RunMessageOutput: messages produced."
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.CREATED, help_text="RunStatus."
    )
    status_reason = models.CharField(
        max_length=500, blank=True, help_text="e.g. suspended, natural, stopped:max_rounds."
    )
    termination_reason = models.JSONField(
        null=True, blank=True, help_text="TerminationReason {type, value} once done."
    )
    final_output = models.TextField(
        null=True, blank=True, help_text="Last assistant text when done."
    )
    error_payload = models.JSONField(null=True, blank=True, help_text='{"message": …} for errors.')
    dispatch_id = models.CharField(
        max_length=100, blank=True, help_text="Dispatch that delivered the activation."
    )
    session_id = models.CharField(max_length=100, blank=True, help_text="Protocol session id.")
    transport_request_id = models.CharField(
        max_length=100, blank=True, help_text="Transport request id."
    )
    waiting = models.JSONField(null=True, blank=True, help_text="RunWaitingState while waiting.")
    created_at = models.DateTimeField(default=timezone.now, help_text="Submitted.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="First execution start.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="Set when done.")
    updated_at = models.DateTimeField(
        default=timezone.now, help_text="Last checkpoint or transition."
    )
    steps = models.PositiveIntegerField(
        default=0, help_text="Completed steps over all activations."
    )
    input_tokens = models.PositiveBigIntegerField(default=0, help_text="Prompt tokens so far.")
    output_tokens = models.PositiveBigIntegerField(default=0, help_text="Completion tokens so far.")
    state = models.JSONField(
        null=True, blank=True, help_text="PersistedState {revision, extensions}."
    )
    last_event_seq = models.PositiveBigIntegerField(
        default=0, help_text="Seq of the last persisted event."
    )
    open_tickets = models.PositiveIntegerField(
        default=0,
        help_text="Pending tickets, kept in the transaction that opens or closes one (lists "
        "show it without counting).",
    )
    # Execution bookkeeping: the database is the truth, the queue a doorbell.
    due = models.BooleanField(
        default=False, help_text="A worker should pick it up (new, all tickets decided, retry)."
    )
    lease_owner = models.CharField(max_length=200, blank=True, help_text="Worker holding the run.")
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Lease end; renewed while working."
    )
    attempt = models.PositiveIntegerField(
        default=0, help_text="Claims so far; fences stale workers' writes."
    )
    cancel_requested_at = models.DateTimeField(
        null=True, blank=True, help_text="Cooperative cancel requested."
    )
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="Last time a task was enqueued for it."
    )
    recoveries = models.PositiveIntegerField(
        default=0,
        help_text="Times it was taken back after losing its segment (a dead worker, a lost "
        "database connection).",
    )
    input_price_per_million_usd = usd_per_million_tokens(
        "Its model's USD per million input tokens when the run was created."
    )
    output_price_per_million_usd = usd_per_million_tokens(
        "Its model's USD per million output tokens when the run was created."
    )
    idempotency_key = models.CharField(
        max_length=200, blank=True, help_text="Client key: a repeat returns this run."
    )
    idempotency_scope = models.CharField(
        max_length=64,
        blank=True,
        help_text="Whose key it is: 'user:<id>' of the submitter, '' for the system. "
        "Keys of different submitters never meet.",
    )
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY,
        validators=PRIORITY_VALIDATORS,
        help_text="0 (high) … 255 (low): workers take due runs by priority, then age.",
    )
    run_mode = models.CharField(
        max_length=20,
        default="foreground",
        help_text="How it started: foreground, scheduled, fork or replay.",
    )
    schedule = models.ForeignKey(
        "Schedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        db_index=False,
        help_text="Schedule that started it.",
    )
    pending_inputs = models.PositiveIntegerField(
        default=0,
        help_text="Steer inputs waiting for its next step boundary (kept with the inputs, so "
        "a checkpoint knows without a query whether to deliver).",
    )

    class Meta:
        ordering = ["-created_at"]
        permissions = [
            ("start_run", "Can start runs and send messages to threads"),
            ("cancel_run", "Can cancel runs"),
            ("retry_run", "Can retry failed runs"),
            ("prioritize_run", "Can change the priority of queued runs"),
        ]
        # The runs list is a keyset scan, newest first by (created_at, id): one index per
        # filter it offers, each ending in that order, so a page reads 51 index entries.
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="run_recent_idx"),
            models.Index(fields=["status", "-created_at", "-id"], name="run_status_recent_idx"),
            models.Index(fields=["agent", "-created_at", "-id"], name="run_agent_recent_idx"),
            models.Index(
                fields=["agent", "status", "-created_at", "-id"], name="run_agent_status_idx"
            ),
            models.Index(
                fields=["status_reason", "-created_at", "-id"], name="run_reason_recent_idx"
            ),
            models.Index(
                fields=["agent_version", "-created_at", "-id"], name="run_version_recent_idx"
            ),
            models.Index(fields=["thread", "-created_at", "-id"], name="run_thread_recent_idx"),
            # the dashboard's counts of the runs not done, by status, reason and version
            models.Index(
                fields=["status", "status_reason", "agent_version"],
                condition=~models.Q(status="done"),
                name="run_open_idx",
            ),
            # sweep: runs due or with an expired lease
            models.Index(fields=["due", "lease_expires_at"], name="run_sweep_idx"),
            # workers take due runs by priority, then age
            models.Index(
                fields=["priority", "created_at", "id"],
                condition=models.Q(due=True),
                name="run_due_priority_idx",
            ),
            # a schedule's last runs
            models.Index(
                fields=["schedule", "-created_at"],
                condition=models.Q(schedule__isnull=False),
                name="run_schedule_recent_idx",
            ),
            # the dashboard's recent failures
            models.Index(
                fields=["-finished_at"],
                condition=models.Q(status="done")
                & (
                    models.Q(status_reason__in=["error", "timeout"])
                    | models.Q(status_reason__startswith="stopped:")
                ),
                name="run_failures_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["idempotency_scope", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_unique_idempotency_key",
            )
        ]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def waiting_reason(self) -> str | None:
        if self.status != RunStatus.WAITING:
            return None
        return waiting_reason_from_status_reason(self.status_reason or None).value

    @property
    def is_failed(self) -> bool:
        reason = self.status_reason or ""
        return self.status == RunStatus.DONE and (
            reason in ("error", "timeout") or reason.startswith("stopped:")
        )


class ToolCall(models.Model):
    class Status(models.TextChoices):
        NEW = "new"
        RUNNING = "running"
        SUSPENDED = "suspended"
        RESUMING = "resuming"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="tool_calls", help_text="Run that made it."
    )
    call_id = models.CharField(max_length=200, help_text="The model's tool call id.")
    tool_name = models.CharField(max_length=200, help_text="Tool called.")
    arguments = models.JSONField(
        null=True, blank=True, help_text="Arguments (edited ones after an edit)."
    )
    status = models.CharField(max_length=10, choices=Status.choices, help_text="ToolCallStatus.")
    resume_mode = models.CharField(
        max_length=40, default="replay_tool_call", help_text="ToolCallResumeMode."
    )
    suspension_id = models.CharField(
        max_length=300, blank=True, help_text="Ticket id when suspended."
    )
    suspension_reason = models.CharField(
        max_length=200, blank=True, help_text="Ticket action, e.g. tool:PermissionConfirm."
    )
    resume_input = models.JSONField(
        null=True, blank=True, help_text="ToolCallResume applied, until replayed."
    )
    step_index = models.PositiveIntegerField(
        null=True, blank=True, help_text="Step that made the call."
    )
    duration_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="How long the call took when it finished, as its worker timed it (none "
        "for calls that were not timed: replayed after a decision, interrupted).",
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="First seen.")
    updated_at = models.DateTimeField(default=timezone.now, help_text="Last transition.")

    class Meta:
        ordering = ["run", "created_at", "call_id"]
        constraints = [
            models.UniqueConstraint(fields=["run", "call_id"], name="toolcall_unique_run_call"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.call_id}"


class RunEvent(models.Model):
    run = models.ForeignKey(  # indexed by the (run, seq) constraint
        Run,
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
        help_text="Run it belongs to.",
    )
    seq = models.PositiveBigIntegerField(help_text="Per-run 1, 2, 3 … with no gaps.")
    event_type = models.CharField(max_length=40, help_text="AgentEvent type.")
    payload = RowJSONField(help_text="The full event JSON (with event_type).")
    created_at = models.DateTimeField(default=timezone.now, help_text="Commit time.")

    class Meta:
        ordering = ["run", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="runevent_unique_run_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.event_type}"

    def as_frame(self) -> dict:
        return {**self.payload, "seq": self.seq, "created_at": self.created_at.isoformat()}
