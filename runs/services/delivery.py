"""Delivering pending input: recording the delivery with the receiving run, and starting
a thread's next run from its oldest queued input once the thread is free."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from runs.models import PendingInput, Run, Thread
from runs.runtime import events as ev
from runs.runtime import types as rt
from runs.services.creation import thread_open_run
from runs.services.submission import Submission
from runs.services.submission_start import submission_start

SubmissionEvents = Callable[[Run, list[str]], list[dict[str, Any]]]


def messages_json(messages: list[rt.Message]) -> list[dict[str, Any]]:
    return [{"role": m.role.value, "content": m.content} for m in messages]


def messages_from_json(stored: list[dict[str, Any]]) -> list[rt.Message]:
    """The inverse of `messages_json`, for input validated when it was accepted."""
    return [rt.Message(role=rt.Role(m["role"]), content=list(m["content"])) for m in stored]


def mark_delivered(input_: PendingInput, run: Run, boundary: str, message_ids: list[str]) -> None:
    """Record `input_` (saved, or new and inserted here) as delivered to `run`."""
    now = timezone.now()
    input_.status = PendingInput.Status.DELIVERED
    input_.delivered_run = run
    input_.boundary = boundary
    input_.message_ids = message_ids
    input_.run = None
    input_.closed_at = input_.updated_at = now
    if input_._state.adding:
        input_.save(force_insert=True)
        return
    input_.save(
        update_fields=[
            "status",
            "delivered_run",
            "boundary",
            "message_ids",
            "run",
            "closed_at",
            "updated_at",
        ]
    )


def delivered_event(input_: PendingInput, boundary: str, message_ids: list[str]) -> dict[str, Any]:
    return ev.input_delivered(str(input_.pk), input_.mode, boundary, message_ids, input_.messages)


def delivery_events(input_: PendingInput, boundary: str) -> SubmissionEvents:
    """For `submission_start` / `run_continue`: mark `input_` delivered to the run they write
    and answer its `input_delivered` event, appended in the same transaction."""

    def events(run: Run, message_ids: list[str]) -> list[dict[str, Any]]:
        mark_delivered(input_, run, boundary, message_ids)
        return [delivered_event(input_, boundary, message_ids)]

    return events


def thread_deliver_next(run: Run, inputs_accepted: int | None = None) -> Run | None:
    """Called in the transaction that ended `run`, after its thread's run pointers were
    updated (which locks the thread row): the steer input it did not take is queued, and
    the thread's oldest queued input starts the next run. Returns that run.

    `inputs_accepted`: the thread's `input_seq` as that update returned it, if known. Every
    pending input is accepted through `runs.services.inputs`, which counts it there under
    the thread's lock: a thread that never accepted one has none queued (no query)."""
    if run.pending_inputs:
        PendingInput.objects.filter(run_id=run.pk, status=PendingInput.Status.PENDING).update(
            run=None, updated_at=timezone.now()
        )
        Run.objects.filter(pk=run.pk).update(pending_inputs=0)
        run.pending_inputs = 0
    if inputs_accepted == 0:
        return None
    return thread_start_next(run.thread_id)


def thread_start_next(thread_id: Any) -> Run | None:
    """Start the thread's next run from its oldest queued input, if the thread is free
    (also the sweep's repair for a thread whose pump was lost)."""
    waiting = PendingInput.objects.filter(
        thread_id=thread_id, status=PendingInput.Status.PENDING, run__isnull=True
    )
    if not waiting.exists():
        return None
    thread = Thread.objects.select_for_update(no_key=True).get(pk=thread_id)
    if thread_open_run(thread) is not None:
        return None
    input_ = waiting.select_related("agent", "actor").order_by("seq").first()
    if input_ is None:
        return None
    # the thread is locked and free: the submission's start, without a lock of its own
    cmd = Submission.build_delivery(input_, messages_from_json(input_.messages))
    return submission_start(
        cmd,
        thread,
        input_.agent,
        events=delivery_events(input_, PendingInput.Boundary.NEW_RUN),
    )
