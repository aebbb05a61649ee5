"""Run control: input that waits for a busy thread, background work a run waits for, and
schedules that start runs (docs/run-control.md)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.timezone import now

from runs.fields import uuid7_default
from runs.models.core import DEFAULT_PRIORITY, PRIORITY_VALIDATORS


class PendingInput(models.Model):
    """A message sent to a thread that is not delivered yet, or the record of its delivery.

    `queue` (and `interrupt_then_queue`, once the run it interrupted ended) starts the
    thread's next run; `steer` is appended to the running run's log at its next step
    boundary, or queued if that run ends first. Edits and retractions are allowed while it
    is pending; delivery is recorded in the receiving run's event log."""

    class Mode(models.TextChoices):
        QUEUE = "queue"
        STEER = "steer"
        INTERRUPT_THEN_QUEUE = "interrupt_then_queue"
        RESUME_OPEN_RUN = "resume_open_run"

    class Status(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        RETRACTED = "retracted"
        CANCELLED = "cancelled"

    class Boundary(models.TextChoices):
        NEXT_STEP = "next_step"
        NEW_RUN = "new_run"
        RESUME_INPUT = "resume_input"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Input id (UUID v7)."
    )
    thread = models.ForeignKey(
        "Thread",
        on_delete=models.CASCADE,
        related_name="inputs",
        db_index=False,
        help_text="Thread it was sent to.",
    )
    seq = models.PositiveIntegerField(help_text="Order of acceptance on the thread (1, 2, …).")
    mode = models.CharField(max_length=24, choices=Mode.choices, help_text="Input mode asked for.")
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, help_text="Where it is."
    )
    messages = models.JSONField(help_text="The messages, [{role, content}] as accepted.")
    agent = models.ForeignKey(
        "agents.Agent",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="Agent of the run it starts, when it starts one.",
    )
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY,
        validators=PRIORITY_VALIDATORS,
        help_text="Priority of the run it starts.",
    )
    run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="steer_inputs",
        help_text="Steer: the run it is for, while pending.",
    )
    delivered_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="delivered_inputs",
        help_text="Run that received it.",
    )
    boundary = models.CharField(
        max_length=12,
        choices=Boundary.choices,
        blank=True,
        help_text="How it was delivered: next_step, new_run or resume_input.",
    )
    message_ids = models.JSONField(
        default=list, blank=True, help_text="Ids of its messages in the thread's log."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="User who sent it.",
    )
    actor_label = models.CharField(max_length=200, help_text="Who sent it, as shown.")
    created_at = models.DateTimeField(default=now, help_text="Accepted at.")
    updated_at = models.DateTimeField(default=now, help_text="Last edit or transition.")
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="Delivered, retracted or cancelled at."
    )

    class Meta:
        ordering = ["thread", "seq"]
        permissions = [("edit_pendinginput", "Can edit or retract pending inputs")]
        constraints = [
            models.UniqueConstraint(fields=["thread", "seq"], name="pendinginput_unique_seq"),
        ]
        indexes = [
            models.Index(
                fields=["thread", "seq"],
                condition=models.Q(status="pending"),
                name="pendinginput_waiting_idx",
            ),
            models.Index(
                fields=["run", "seq"],
                condition=models.Q(status="pending"),
                name="pendinginput_steer_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}#{self.seq} {self.mode} ({self.status})"

    @property
    def text(self) -> str:
        return "\n".join(
            b.get("text", "")
            for m in self.messages or []
            for b in (m.get("content") or [])
            if isinstance(b, dict)
        )


class BackgroundTask(models.Model):
    """Work a tool started that outlives its step: executed by a worker under a lease
    (the sweep runs it again if that worker died), its result handed to the run's next
    activation. A run that ends its steps with such work unfinished waits
    (`awaiting_tasks`) and is woken when the last one finishes."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Task id."
    )
    run = models.ForeignKey(
        "Run",
        on_delete=models.CASCADE,
        related_name="background_tasks",
        help_text="Run that started it.",
    )
    tool_call_id = models.CharField(max_length=200, help_text="Tool call that started it.")
    kind = models.CharField(max_length=100, help_text="Registered job that does the work.")
    label = models.CharField(max_length=300, blank=True, help_text="What it does, as shown.")
    arguments = models.JSONField(default=dict, blank=True, help_text="The job's arguments.")
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, help_text="TaskStatus."
    )
    result = models.JSONField(null=True, blank=True, help_text="What the job returned.")
    error = models.TextField(blank=True, help_text="Why it failed.")
    attempt = models.PositiveIntegerField(default=0, help_text="Executions started so far.")
    lease_owner = models.CharField(max_length=200, blank=True, help_text="Worker executing it.")
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Lease end; renewed while it works."
    )
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="Last time a task was enqueued for it."
    )
    delivered_at = models.DateTimeField(
        null=True, blank=True, help_text="When the run's activation took its result."
    )
    created_at = models.DateTimeField(default=now, help_text="Started by the tool.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="First execution.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="Completed or failed.")

    class Meta:
        ordering = ["created_at"]
        indexes = [
            # the sweep: work not finished (never dispatched, or its worker died)
            models.Index(
                fields=["status", "lease_expires_at"],
                condition=models.Q(status__in=["pending", "running"]),
                name="backgroundtask_open_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.COMPLETED, self.Status.FAILED, self.Status.CANCELLED)


class Schedule(models.Model):
    """An agent started on a cron expression or an interval, in a time zone."""

    class Kind(models.TextChoices):
        CRON = "cron"
        INTERVAL = "interval"

    class ThreadPolicy(models.TextChoices):
        NEW = "new", "A new thread each time"
        SAME = "same", "One thread for every run"

    class CatchUp(models.TextChoices):
        SKIP = "skip", "Skip runs missed while down"
        ONCE = "once", "Run once for everything missed"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Schedule id."
    )
    name = models.CharField(max_length=200, unique=True, help_text="Shown in lists and runs.")
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.PROTECT, related_name="+", help_text="Agent it starts."
    )
    message = models.TextField(help_text="The user message each run starts with.")
    kind = models.CharField(
        max_length=10, choices=Kind.choices, default=Kind.CRON, help_text="cron or interval."
    )
    cron = models.CharField(
        max_length=120,
        blank=True,
        help_text="Five fields: minute hour day-of-month month day-of-week (e.g. */5 * * * *).",
    )
    interval_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds between runs (interval schedules)."
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="IANA time zone the cron expression is read in."
    )
    thread_policy = models.CharField(
        max_length=10,
        choices=ThreadPolicy.choices,
        default=ThreadPolicy.NEW,
        help_text="A new thread per run, or one thread for all.",
    )
    thread = models.ForeignKey(
        "Thread",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The one thread (thread policy 'same'), once it exists.",
    )
    catch_up = models.CharField(
        max_length=10,
        choices=CatchUp.choices,
        default=CatchUp.SKIP,
        help_text="What happens to runs missed while nothing was running.",
    )
    priority = models.PositiveSmallIntegerField(
        default=DEFAULT_PRIORITY,
        validators=PRIORITY_VALIDATORS,
        help_text="Priority of the runs it starts.",
    )
    enabled = models.BooleanField(default=True, help_text="Paused when off.")
    next_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Next time it fires (none while paused)."
    )
    last_run_at = models.DateTimeField(
        null=True, blank=True, help_text="Scheduled time of the last firing (run or skip)."
    )
    last_run = models.ForeignKey(
        "Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Run it started last.",
    )
    last_outcome = models.CharField(
        max_length=500, blank=True, help_text="What the last firing did (started, skipped, …)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who created it.",
    )
    created_at = models.DateTimeField(default=now, help_text="Created at.")
    updated_at = models.DateTimeField(default=now, help_text="Last change.")

    class Meta:
        ordering = ["name"]
        permissions = [("run_schedule", "Can run a schedule now")]
        indexes = [
            models.Index(
                fields=["next_run_at"],
                condition=models.Q(enabled=True),
                name="schedule_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.name
