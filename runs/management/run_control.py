"""What the run-control commands share (send_input, inputs, thread_interrupt,
set_priority): finding rows by the ids an operator types, checking a priority, and one
line per input."""

from __future__ import annotations

import uuid
from typing import Any, TypeVar

from django.core.management.base import CommandError
from django.db import models
from django.utils import timezone

from common.audit import Actor
from runs.models import PendingInput
from runs.services.submission import priority_error

M = TypeVar("M", bound=models.Model)


def cli_actor(label: str) -> Actor:
    return Actor(label=label or "cli", source="cli")


def find(queryset: models.QuerySet[M], raw: Any, what: str) -> M:
    """The row whose id is `raw`, or a CommandError naming it."""
    try:
        ident = uuid.UUID(str(raw).strip())
    except ValueError:
        raise CommandError(f"unknown {what} {raw!r}: not an id") from None
    row = queryset.filter(pk=ident).first()
    if row is None:
        raise CommandError(f"unknown {what} {raw!r}")
    return row


def check_priority(value: int | None) -> int | None:
    """`value` (None: not given), or the priority rule's refusal as a CommandError."""
    if value is not None and (error := priority_error(value)) is not None:
        raise CommandError(error)
    return value


def _ago(when: Any) -> str:
    seconds = int((timezone.now() - when).total_seconds())
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def input_line(input_: PendingInput) -> str:
    """`#2 pending queue priority 128 by cli 5s ago <id>`, then the text, indented."""
    where = ""
    if input_.status == PendingInput.Status.PENDING and input_.run_id:
        where = f" into run {input_.run_id}"
    elif input_.status == PendingInput.Status.DELIVERED:
        where = f" to run {input_.delivered_run_id} at {input_.boundary}"
    head = (
        f"#{input_.seq} {input_.status}{where} · {input_.mode} · priority {input_.priority} · "
        f"by {input_.actor_label or 'system'} · {_ago(input_.created_at)} · {input_.pk}"
    )
    text = "\n".join(f"    {line}" for line in (input_.text or "(no text)").splitlines())
    return f"{head}\n{text}\n"
