"""Runs seen as A2A tasks (read side).

A run is a task (task id = run id) and its thread the task's context (context id =
thread id). The task's state comes from the run:

    created                              submitted
    running, or waiting on background
    work or on a child run               working
    waiting on an operator's ticket      input-required (the status message asks)
    done: natural end                    completed (the final answer is the artifact)
    done: cancelled                      canceled
    done: blocked by a rule              rejected
    done: error, timeout, stop condition failed (the status message says why)
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Artifact,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import InvalidParamsError
from django.db.models import Q, QuerySet
from google.protobuf.json_format import ParseDict

from agents.models import Agent
from runs.message_rows import message_range, message_text
from runs.models import Message as MessageRow
from runs.models import Run, Ticket
from runs.runtime import types as rt
from runs.services.stats import outcome

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# A stream or a blocking send stops at these: nothing moves until the client acts.
SETTLED = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED}

DONE_STATES = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
    "blocked": TaskState.TASK_STATE_REJECTED,
    "failed": TaskState.TASK_STATE_FAILED,
}
HISTORY_DEFAULT = 50  # messages of the run a task carries when the client names no length
PAGE_DEFAULT, PAGE_MAX = 50, 100


def answers_with_text(ticket: Ticket) -> bool:
    """The ticket waits for an answer (ask_human, a remote agent's question), not a yes/no."""
    return ticket.resume_mode == rt.ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT


def operator_tickets(run: Run) -> list[Ticket]:
    """The run's open tickets a person answers, oldest first (not its waits on children)."""
    return list(Ticket.objects.filter(run=run).for_operators().order_by("created_at", "pk"))


def ticket_question(ticket: Ticket) -> str:
    if answers_with_text(ticket):
        return ticket.message or f"{ticket.tool_name} asks for an answer."
    arguments = json.dumps(ticket.arguments, ensure_ascii=False, sort_keys=True)
    reason = f" ({ticket.reason})" if ticket.reason else ""
    return (
        f"Approve {ticket.tool_name} with {arguments}?{reason} "
        "Reply 'approve', or 'reject' followed by a reason."
    )


def ticket_data(ticket: Ticket) -> dict[str, Any]:
    """What a client needs to answer the ticket with a data part instead of text."""
    return {
        "ticket_id": ticket.ticket_id,
        "tool": ticket.tool_name,
        "arguments": ticket.arguments,
        "kind": "question" if answers_with_text(ticket) else "approval",
        "actions": ["respond", "reject"]
        if answers_with_text(ticket)
        else ["approve", "reject", "edit"],
        "deadline_at": ticket.deadline_at.isoformat() if ticket.deadline_at else None,
    }


@dataclass(frozen=True)
class TaskView:
    """A run's task, and what a stream compares to tell whether it moved."""

    task: Task

    @property
    def state(self) -> int:
        return int(self.task.status.state)

    @property
    def settled(self) -> bool:
        return self.state in SETTLED

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def mark(self) -> tuple[int, str]:
        return self.state, self.task.status.message.SerializeToString(deterministic=True)


def _agent_message(run: Run, texts: list[str], data: list[dict[str, Any]] | None = None) -> Message:
    message = Message(
        role=Role.ROLE_AGENT,
        message_id=f"{run.pk}-status-{run.last_event_seq}",
        task_id=str(run.pk),
        context_id=str(run.thread_id),
        parts=[Part(text=text) for text in texts],
    )
    for item in data or []:
        part = message.parts.add()
        ParseDict(item, part.data)
    return message


def _state_and_message(run: Run) -> tuple[TaskState, Message | None]:
    if run.status == Run.Status.CREATED:
        return TaskState.TASK_STATE_SUBMITTED, None
    if run.status == Run.Status.RUNNING:
        return TaskState.TASK_STATE_WORKING, None
    if run.status == Run.Status.WAITING:
        tickets = operator_tickets(run) if run.open_tickets else []
        if not tickets:
            return TaskState.TASK_STATE_WORKING, None
        return TaskState.TASK_STATE_INPUT_REQUIRED, _agent_message(
            run, [ticket_question(t) for t in tickets], [ticket_data(t) for t in tickets]
        )
    state = DONE_STATES[outcome(run.status, run.status_reason)]
    if state == TaskState.TASK_STATE_COMPLETED:
        return state, None
    detail = (run.error_payload or {}).get("message") if run.error_payload else None
    why = detail or run.status_reason.replace("_", " ") or "ended"
    return state, _agent_message(run, [f"The run ended: {why}."])


def _history(run: Run, length: int) -> list[Message]:
    """The user and agent text messages of the run's part of its thread, the newest
    `length` of them, oldest first."""
    if length <= 0:
        return []
    seqs = message_range(run)
    rows = MessageRow.objects.filter(
        thread_id=run.thread_id, role__in=("user", "assistant")
    ).exclude(visibility="internal")
    if seqs is not None:
        rows = rows.filter(seq__gte=seqs[0])
        if run.status == Run.Status.DONE:
            rows = rows.filter(seq__lte=seqs[1])
    else:
        rows = rows.filter(produced_by_run=run)
    found = []
    for row in rows.order_by("-seq").only("id", "role", "content")[: length * 2]:
        text = message_text(row.content)
        if not text:
            continue  # an assistant turn that only called tools
        role = Role.ROLE_USER if row.role == "user" else Role.ROLE_AGENT
        found.append(
            Message(
                message_id=str(row.id),
                role=role,
                task_id=str(run.pk),
                context_id=str(run.thread_id),
                parts=[Part(text=text)],
            )
        )
        if len(found) == length:
            break
    return found[::-1]


def task_of(run: Run, *, history_length: int | None = None) -> TaskView:
    state, message = _state_and_message(run)
    status = TaskStatus(state=state)
    if message is not None:
        status.message.CopyFrom(message)
    status.timestamp.FromDatetime(run.finished_at or run.updated_at)
    task = Task(id=str(run.pk), context_id=str(run.thread_id), status=status)
    if state == TaskState.TASK_STATE_COMPLETED and run.final_output:
        task.artifacts.append(
            Artifact(
                artifact_id=f"{run.pk}-answer", name="answer", parts=[Part(text=run.final_output)]
            )
        )
    length = HISTORY_DEFAULT if history_length is None else history_length
    task.history.extend(_history(run, length))
    task.metadata.update(
        {
            "run_id": str(run.pk),
            "thread_id": str(run.thread_id),
            "run_status": run.status,
            "status_reason": run.status_reason,
            "steps": run.steps,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "agent_version": run.agent_version.number if run.agent_version_id else None,
        }
    )
    return TaskView(task)


def agent_run(agent: Agent, task_id: str) -> Run | None:
    """The run `task_id` names if it is one of `agent`'s (another agent's task is not
    found here)."""
    try:
        run_id = uuid.UUID(task_id)
    except ValueError:
        return None
    return Run.objects.select_related("agent_version").filter(pk=run_id, agent=agent).first()


def _state_filter(state: int) -> Q:
    if state == TaskState.TASK_STATE_SUBMITTED:
        return Q(status=Run.Status.CREATED)
    if state == TaskState.TASK_STATE_WORKING:
        return Q(status=Run.Status.RUNNING) | Q(status=Run.Status.WAITING, open_tickets=0)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return Q(status=Run.Status.WAITING, open_tickets__gt=0)
    done = Q(status=Run.Status.DONE)
    if state == TaskState.TASK_STATE_COMPLETED:
        return done & Q(status_reason__in=("natural", "behavior_requested"))
    if state == TaskState.TASK_STATE_CANCELED:
        return done & Q(status_reason="cancelled")
    if state == TaskState.TASK_STATE_REJECTED:
        return done & Q(status_reason__startswith="blocked:")
    if state == TaskState.TASK_STATE_FAILED:
        return (
            done
            & ~Q(status_reason__in=("natural", "behavior_requested", "cancelled"))
            & ~Q(status_reason__startswith="blocked:")
        )
    return Q()


def agent_tasks(agent: Agent, request: ListTasksRequest) -> ListTasksResponse:
    """tasks/list: the agent's runs, newest first, by context, state and last change;
    `page_token` is the last task id of the previous page (run ids grow with time). A
    page size is 1 to PAGE_MAX (the spec's range): PAGE_DEFAULT only when none is given."""
    size = request.page_size if request.HasField("page_size") else PAGE_DEFAULT
    if not 1 <= size <= PAGE_MAX:
        raise InvalidParamsError(
            f"page size {size} is out of range: the minimum page size is 1, the maximum "
            f"page size is {PAGE_MAX}"
        )
    runs: QuerySet[Run] = Run.objects.filter(agent=agent).select_related("agent_version")
    if request.context_id:
        try:
            runs = runs.filter(thread_id=uuid.UUID(request.context_id))
        except ValueError:
            return ListTasksResponse(page_size=0, total_size=0)
    if request.status:
        runs = runs.filter(_state_filter(request.status))
    if request.HasField("status_timestamp_after"):
        runs = runs.filter(updated_at__gt=request.status_timestamp_after.ToDatetime(tzinfo=dt.UTC))
    total = runs.count()
    if request.page_token:
        try:
            runs = runs.filter(pk__lt=uuid.UUID(request.page_token))
        except ValueError:
            raise InvalidParamsError("page_token is not one this server gave") from None
    page = list(runs.order_by("-pk")[: size + 1])
    history = request.history_length if request.HasField("history_length") else 0
    response = ListTasksResponse(page_size=size, total_size=total)
    for run in page[:size]:
        task = task_of(run, history_length=history).task
        if not request.include_artifacts:
            del task.artifacts[:]
        response.tasks.append(task)
    if len(page) > size:
        response.next_page_token = str(page[size - 1].pk)
    return response
