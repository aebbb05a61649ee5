"""Tickets (tool calls waiting for a person), their decisions, and who handles them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.fields import uuid7_default
from runs.models.core import Run, ToolCall

DELEGATE_TICKET_PREFIX = "delegate_run:"


class TicketQuerySet(models.QuerySet):
    def for_operators(self) -> TicketQuerySet:
        """Pending tickets a person decides: not the waits on a child run, which the
        child answers when it finishes."""
        return self.filter(status=Ticket.Status.PENDING).exclude(
            ticket_id__startswith=DELEGATE_TICKET_PREFIX
        )


class Ticket(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        DECIDED = "decided"
        CANCELLED = "cancelled"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Global ticket id."
    )
    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="tickets", help_text="Waiting run."
    )
    agent = models.ForeignKey(
        "agents.Agent",
        null=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_index=False,
        help_text="The run's agent, copied so the inbox filters by it without a join.",
    )
    tool_call = models.ForeignKey(
        ToolCall, on_delete=models.CASCADE, related_name="tickets", help_text="Suspended call."
    )
    ticket_id = models.CharField(
        max_length=300, help_text="Upstream ticket id: suspension id, else call id."
    )
    tool_name = models.CharField(max_length=200, help_text="Tool waiting.")
    arguments = models.JSONField(
        null=True, blank=True, help_text="Arguments as the model sent them."
    )
    resume_mode = models.CharField(max_length=40, help_text="How a decision resumes the call.")
    reason = models.CharField(
        max_length=200, blank=True, help_text="Ticket action, e.g. tool:PermissionConfirm."
    )
    message = models.TextField(blank=True, help_text="What the tool asks (ask_human question).")
    status = models.CharField(
        max_length=10,
        choices=Status.choices,
        default=Status.PENDING,
        help_text="pending until decided or closed.",
    )
    deadline_at = models.DateTimeField(
        null=True, blank=True, help_text="After this the system applies default_action."
    )
    default_action = models.CharField(
        max_length=10, default="reject", help_text="Applied at the deadline."
    )
    default_payload = models.JSONField(
        null=True, blank=True, help_text="The answer given when the default action is respond."
    )
    warn_at = models.DateTimeField(
        null=True, blank=True, help_text="When operators are warned that the deadline nears."
    )
    warned_at = models.DateTimeField(
        null=True, blank=True, help_text="When that warning was queued."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="When the run suspended.")
    closed_at = models.DateTimeField(null=True, blank=True, help_text="Decided or cancelled at.")
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Operator handling it now (a claim, until claimed_until).",
    )
    claimed_until = models.DateTimeField(
        null=True, blank=True, help_text="When the claim lapses unless renewed."
    )
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Operator it is assigned to.",
    )

    objects = TicketQuerySet.as_manager()

    class Meta:
        ordering = ["created_at"]
        permissions = [("decide_ticket", "Can approve, edit, reject or answer tickets")]
        # approvals inbox: pending tickets, oldest first, by agent or by tool
        indexes = [
            models.Index(fields=["status", "created_at", "id"], name="ticket_inbox_idx"),
            # the admin's list: every ticket oldest first, and its values of tool_name
            models.Index(fields=["created_at", "id"], name="ticket_recent_idx"),
            models.Index(fields=["tool_name", "created_at", "id"], name="ticket_tool_recent_idx"),
            # the dashboard's waits and the inbox's count of the pending tickets, an
            # operator's or not, of some agents: from the index alone
            models.Index(
                fields=["created_at"],
                include=["ticket_id", "agent"],
                condition=models.Q(status="pending"),
                name="ticket_pending_age_idx",
            ),
            models.Index(
                fields=["agent", "created_at", "id"],
                condition=models.Q(status="pending"),
                name="ticket_inbox_agent_idx",
            ),
            models.Index(
                fields=["tool_name", "created_at", "id"],
                condition=models.Q(status="pending"),
                name="ticket_inbox_tool_idx",
            ),
            models.Index(
                fields=["warn_at"],
                condition=models.Q(status="pending", warned_at__isnull=True),
                name="ticket_warn_due_idx",
            ),
            models.Index(
                fields=["assigned_to", "created_at", "id"],
                condition=models.Q(status="pending"),
                name="ticket_inbox_assigned_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "ticket_id"],
                condition=models.Q(status="pending"),
                name="ticket_unique_pending_per_run",
            )
        ]

    def __str__(self) -> str:
        return f"{self.ticket_id} ({self.tool_name})"

    @property
    def child_run_id(self) -> str | None:
        """The child run whose answer this ticket waits for, if it is a delegation."""
        if self.ticket_id.startswith(DELEGATE_TICKET_PREFIX):
            return self.ticket_id.removeprefix(DELEGATE_TICKET_PREFIX)
        return None


class Decision(models.Model):
    class Action(models.TextChoices):
        APPROVE = "approve"
        EDIT = "edit"
        REJECT = "reject"
        RESPOND = "respond"

    id = models.UUIDField(
        primary_key=True, default=uuid7_default, editable=False, help_text="Decision id."
    )
    ticket = models.OneToOneField(
        Ticket,
        on_delete=models.CASCADE,
        related_name="decision",
        help_text="The first decision wins.",
    )
    action = models.CharField(
        max_length=10, choices=Action.choices, help_text="approve, edit, reject or respond."
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="decisions",
        help_text="User who decided (null for the system).",
    )
    actor_label = models.CharField(
        max_length=200, help_text="Who, as shown: username, token name or 'system'."
    )
    comment = models.TextField(blank=True, help_text="Reason or note given with the decision.")
    decision_id = models.CharField(
        max_length=200, help_text="Client idempotency key (generated if absent)."
    )
    payload = models.JSONField(
        null=True, blank=True, help_text="Respond payload / decision result."
    )
    arguments_before = models.JSONField(
        null=True, blank=True, help_text="Edit: the model's arguments."
    )
    arguments_after = models.JSONField(
        null=True, blank=True, help_text="Edit: the arguments the tool ran with."
    )
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was decided.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor_label}"
