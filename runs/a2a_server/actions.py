"""What A2A calls do to runs (write side), with the caller's permissions.

- A message without a task id starts a run on a new thread, or on the thread its context
  id names (which must be this agent's and have no open run).
- A message to a task whose run waits on a ticket answers its oldest open ticket: text
  answers a question ("respond"); for an approval the first word decides ("approve" /
  "reject <reason>"); a data part `{"action", "payload", "comment", "arguments",
  "ticket_id"}` says exactly what to do.
- A message to a task that is working steers it: the model reads it at the next step.
- Cancel cancels the run.

The A2A message id is the idempotency key: a client that sends the same message again
(a retry after a lost answer) gets the same run or the same decision.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from a2a.types import Message
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from agents.models import Agent
from common.audit import Actor
from common.errors import IllegalTransition, InvalidInput, NotFound
from common.jsonsafe import unstorable_in
from runs.a2a_server.tasks import agent_run, answers_with_text, operator_tickets
from runs.models import PendingInput, Run, Thread, Ticket
from runs.services.creation import run_for_idempotency_key, thread_open_run
from runs.services.runs import run_cancel
from runs.services.submission import Submission
from runs.services.submission_flow import submission_accept
from runs.services.tickets import decision_submit

VIEW_THREAD = "runs.view_thread"
KEY_CHARS = 180  # of the message id kept as the idempotency key
APPROVE_WORDS = {"approve", "approved", "yes", "y", "ok", "allow"}
REJECT_WORDS = {"reject", "rejected", "no", "n", "deny", "denied"}


@dataclass(frozen=True)
class Caller:
    """Who calls: the token's user, acting through the A2A surface."""

    user: Any
    token_name: str
    request_id: str = ""
    agent: Any = None  # the agent the URL names: its team's role decides

    @property
    def actor(self) -> Actor:
        label = f"{self.user.get_username()} (token {self.token_name})"
        return Actor(user=self.user, label=label[:200], source="a2a", request_id=self.request_id)

    def require(self, perm: str, doing: str) -> None:
        allowed = self.user.has_perm(perm, self.agent) if self.agent else self.user.has_perm(perm)
        if not allowed:
            # A2A has no error of its own for a refused role: an invalid request it is
            raise InvalidRequestError(f"permission denied: {doing} needs the permission {perm}")


@dataclass(frozen=True)
class Content:
    text: str
    data: list[Any]


def _content(message: Message) -> Content:
    texts, data = [], []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            data.append(MessageToDict(part.data))
        else:
            raise ContentTypeNotSupportedError(
                f"this agent reads text and data parts; a {kind} part was sent"
            )
    text = "\n".join(t for t in texts if t).strip()
    if not text and not data:
        raise InvalidParamsError("the message has no text and no data")
    return Content(text, data)


def _user_messages(content: Content) -> list[dict[str, Any]]:
    if not content.text:
        raise InvalidParamsError("a message that starts or steers a run needs text")
    return [{"role": "user", "content": content.text}]


def _key(message: Message) -> str:
    if not message.message_id:
        return ""
    unstorable = unstorable_in(message.message_id)
    if unstorable is not None:
        raise InvalidParamsError(f"messageId: {unstorable} are not allowed")
    return f"a2a:{message.message_id[:KEY_CHARS]}"


def _service_errors(exc: Exception) -> Exception:
    if isinstance(exc, NotFound):
        return TaskNotFoundError(str(exc))
    if isinstance(exc, InvalidInput):
        return InvalidParamsError(str(exc))
    return UnsupportedOperationError(str(exc))


def message_send(agent: Agent, message: Message, caller: Caller) -> uuid.UUID:
    """Act on an incoming message; the id of the run (task) it concerns."""
    content = _content(message)
    try:
        if message.task_id:
            return _to_task(agent, message, content, caller)
        return _new_task(agent, message, content, caller)
    except (InvalidInput, IllegalTransition, NotFound) as exc:
        raise _service_errors(exc) from exc


def _new_task(agent: Agent, message: Message, content: Content, caller: Caller) -> uuid.UUID:
    caller.require("runs.start_run", "starting a task")
    key = _key(message)  # a repeat answers the task it started (submission_accept)
    thread = _context_thread(agent, message.context_id, caller) if message.context_id else None
    if thread is not None:
        open_run = thread_open_run(thread)
        if open_run is not None:
            existing = run_for_idempotency_key(actor=caller.actor, key=key) if key else None
            if existing is not None:  # a repeat while the task it started is open
                return existing.pk
            raise UnsupportedOperationError(
                f"context {thread.pk} has an open task {open_run.pk} ({open_run.status}): "
                "send this message with that taskId to answer or steer it, or wait for it "
                "to end"
            )
    command = Submission.build(
        agent=agent,
        messages=_user_messages(content),
        thread=thread,
        mode=PendingInput.Mode.QUEUE,
        actor=caller.actor,
        idempotency_key=key,
    )
    outcome = submission_accept(command)
    if outcome.run is None:  # a run opened on the context meanwhile: the input waits
        assert outcome.input is not None
        raise UnsupportedOperationError(
            "another task opened on this context meanwhile; the message is queued behind "
            f"it as input {outcome.input.pk} and starts a task when that one ends"
        )
    return outcome.run.pk


def _context_thread(agent: Agent, context_id: str, caller: Caller) -> Thread:
    """The thread a contextId names. One the caller cannot see (another team's) is
    refused in the words of an unknown id: the answer does not tell that it exists."""
    unknown = InvalidParamsError(
        f"unknown contextId {context_id!r}: omit it to start a new context"
    )
    try:
        thread_id = uuid.UUID(context_id)
    except ValueError:
        raise unknown from None
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None or not caller.user.has_perm(VIEW_THREAD, thread):
        raise unknown
    if not Run.objects.filter(thread=thread, agent=agent).exists():
        raise InvalidParamsError(f"context {context_id} is not a conversation with this agent")
    return thread


def _to_task(agent: Agent, message: Message, content: Content, caller: Caller) -> uuid.UUID:
    run = agent_run(agent, message.task_id)
    if run is None:
        raise TaskNotFoundError(f"task {message.task_id} not found")
    if message.context_id and message.context_id != str(run.thread_id):
        raise InvalidParamsError(
            f"task {run.pk} belongs to context {run.thread_id}, not {message.context_id}"
        )
    if run.status == Run.Status.DONE:
        raise UnsupportedOperationError(
            f"task {run.pk} has ended ({run.status_reason}); send a message without "
            "taskId (same contextId) to continue the conversation"
        )
    tickets = operator_tickets(run) if run.status == Run.Status.WAITING else []
    if tickets:
        caller.require("runs.decide_ticket", "answering a task that waits for input")
        _answer(tickets, message, content, caller)
    else:
        caller.require("runs.start_run", "steering a working task")
        command = Submission.build(
            agent=None,
            messages=_user_messages(content),
            run=run,
            mode=PendingInput.Mode.STEER,
            actor=caller.actor,
        )
        submission_accept(command)
    return run.pk


def _answer(tickets: list[Ticket], message: Message, content: Content, caller: Caller) -> None:
    explicit = next((d for d in content.data if isinstance(d, dict) and "action" in d), None)
    ticket = tickets[0]
    if explicit is not None and explicit.get("ticket_id"):
        ticket = next((t for t in tickets if t.ticket_id == explicit["ticket_id"]), None)  # type: ignore[assignment]
        if ticket is None:
            raise InvalidParamsError(f"no open ticket {explicit['ticket_id']!r} on this task")
    if explicit is not None:
        action = str(explicit["action"])
        payload, comment = explicit.get("payload"), str(explicit.get("comment") or "")
        arguments = explicit.get("arguments")
        if action == "respond" and payload is None and content.text:
            payload = content.text
    else:
        action, payload, comment, arguments = _from_text(ticket, content)
    decision_submit(
        ticket=ticket,
        action=action,
        arguments=arguments,
        payload=payload,
        comment=comment,
        decision_id=_key(message) or None,
        actor=caller.actor,
    )


def _from_text(ticket: Ticket, content: Content) -> tuple[str, Any, str, Any]:
    if not content.text:
        raise InvalidParamsError(
            'answer with text, or a data part {"action": "approve|reject|respond|edit", …}'
        )
    if answers_with_text(ticket):
        return "respond", content.text, "", None
    first, _, rest = content.text.partition(" ")
    word = first.strip().strip(".!,:").lower()
    if word in APPROVE_WORDS:
        return "approve", None, rest.strip(), None
    if word in REJECT_WORDS:
        return "reject", None, rest.strip(), None
    raise InvalidParamsError(
        f"task waits for approval of {ticket.tool_name}: reply 'approve', or 'reject' "
        "followed by a reason"
    )


def task_cancel(agent: Agent, task_id: str, caller: Caller) -> uuid.UUID:
    caller.require("runs.cancel_run", "cancelling a task")
    run = agent_run(agent, task_id)
    if run is None:
        raise TaskNotFoundError(f"task {task_id} not found")
    if run.status == Run.Status.DONE:
        raise TaskNotCancelableError(f"task {run.pk} has already ended ({run.status_reason})")
    try:
        run_cancel(run=run, actor=caller.actor)
    except IllegalTransition as exc:  # it ended meanwhile
        raise TaskNotCancelableError(str(exc)) from exc
    return run.pk
