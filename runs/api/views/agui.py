"""`POST /api/v1/agents/{slug}/ag-ui`: an AG-UI run (docs/ag-ui.md).

The body is AG-UI's `RunAgentInput`. Its `threadId` is our thread's id: a thread the
caller may see is continued, another team's is not found, an unknown one is created with
that id. What the request asks decides what it does, in this order:

- `resume` entries answer the interrupts (tickets) a previous AG-UI run ended with: each
  one still pending is decided as the tickets API would (`decision_submit`), and the
  stream shows the run from the first of those decisions on;
- otherwise the trailing user messages of `messages` (those after the last message of
  another role: the client sends the whole conversation) are new input, handed to the
  submission command as `POST /runs` does (mode START: a new run, or the continuation
  of the thread's waiting run), with the idempotency key `ag-ui:<runId>`;
- otherwise (nothing new) the stream follows the thread's open run from now on.

The answer is the AG-UI event stream (runs/api/agui_stream.py); errors before it starts
are the API's JSON errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import uuid
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request

from agents.models import Agent
from common.api.errors import error_responses
from common.audit import Actor, request_actor
from common.errors import DecisionConflict, Forbidden, InvalidInput, NotFound
from runs import permissions as perms
from runs.api.stream import SseView
from runs.api.views.lookups import allowed, get_agent
from runs.models import Run, RunEvent, Thread, Ticket
from runs.services.submission import Origin, Submission
from runs.services.submission_flow import submission_accept
from runs.services.tickets import decision_submit, normalize_decision_body, ticket_for_target

if TYPE_CHECKING:
    from ag_ui.core import ResumeEntry, RunAgentInput

    from runs.api.agui_events import AguiTranslator

SOURCE = "ag-ui"
KEY_PREFIX = "ag-ui:"
EXAMPLE = OpenApiExample(
    "A user message on a new thread",
    value={
        "threadId": "0190e7a0-1111-7000-8000-000000000001",
        "runId": "run-1",
        "messages": [{"id": "m1", "role": "user", "content": "What is 6*7?"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
    },
    request_only=True,
)
RESUME_EXAMPLE = OpenApiExample(
    "Resume: approve the interrupt the last run ended with",
    value={
        "threadId": "0190e7a0-1111-7000-8000-000000000001",
        "runId": "run-2",
        "messages": [],
        "resume": [
            {
                "interruptId": "perm_call_46c73b5d9f64dde8",
                "status": "resolved",
                "payload": {"action": "approve"},
            }
        ],
    },
    request_only=True,
)


def _protocol() -> Any:
    """`runs.api.agui_stream`, and with it ag-ui-protocol and pydantic (about 20 MB a
    process): loaded by the first AG-UI request, not by every process at start-up."""
    return importlib.import_module("runs.api.agui_stream")


def run_agent_input(data: Any) -> RunAgentInput:
    """The body as AG-UI's RunAgentInput, else a 400 naming the first bad field."""
    if not isinstance(data, dict):
        raise InvalidInput("the body must be an AG-UI RunAgentInput JSON object")
    try:
        return _protocol().RunAgentInput.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError
        errors: list[dict[str, Any]] = getattr(exc, "errors", lambda: [])()
        fields: dict[str, list[str]] = {}
        for error in errors[:20]:
            where = ".".join(str(part) for part in error.get("loc", ())) or "body"
            fields.setdefault(where, []).append(str(error.get("msg", "invalid")))
        first = next(iter(fields.items()), ("body", ["invalid"]))
        raise InvalidInput(f"invalid RunAgentInput: {first[0]}: {first[1][0]}", fields) from None


def thread_uuid(thread_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(thread_id)
    except ValueError:
        raise InvalidInput(
            "threadId must be a UUID: it is the thread's id here (a new one starts the thread)",
            {"threadId": [thread_id[:100]]},
        ) from None


def new_user_messages(data: RunAgentInput) -> list[dict[str, Any]]:
    """The trailing user messages, as the submission's [{role, content}]; text parts only."""
    trailing: list[Any] = []
    for message in reversed(data.messages):
        if getattr(message, "role", None) != "user":
            break
        trailing.append(message)
    found = []
    for message in reversed(trailing):
        index = data.messages.index(message)
        found.append({"role": "user", "content": _text(message.content, index)})
    return found


def _text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        kind = getattr(part, "type", None)
        if kind != "text":
            raise InvalidInput(
                f"messages[{index}].content: only text parts are supported, got {kind!r}",
                {f"messages.{index}.content": [f"unsupported part {kind!r}"]},
            )
        parts.append(part.text)
    return "".join(parts)


class AguiRunView(SseView):
    required_perms = {"POST": perms.START}

    def perform_content_negotiation(self, request: Any, force: bool = False) -> Any:
        return super().perform_content_negotiation(request, force=True)  # any Accept

    @extend_schema(
        operation_id="agents_ag_ui",
        summary="Run the agent over AG-UI",
        description="Takes AG-UI's `RunAgentInput` and answers its event stream "
        "(`text/event-stream`, `data: <event JSON>` per event, encoded by ag-ui-protocol): "
        "RUN_STARTED, STEP_STARTED/FINISHED, TEXT_MESSAGE_START/CONTENT/END, "
        "TOOL_CALL_START/ARGS/END/RESULT, STATE_SNAPSHOT, CUSTOM (`awaken.*`), then "
        "RUN_FINISHED (with an `interrupt` outcome when tickets wait: resume with "
        "`resume` entries on the same threadId) or RUN_ERROR. `threadId` is the thread's "
        "id (a UUID; unknown: a new thread with that id). The trailing user messages are "
        "the new input; `state`, `tools`, `context` and `forwardedProps` are accepted and "
        "not used. Our run's id is in `X-Run-ID` and RUN_STARTED's metadata. See "
        "docs/ag-ui.md.",
        tags=["agents"],
        parameters=[OpenApiParameter("agent_id", OpenApiTypes.STR, OpenApiParameter.PATH)],
        request=OpenApiTypes.OBJECT,
        examples=[EXAMPLE, RESUME_EXAMPLE],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="The AG-UI event stream."
            ),
            **error_responses(404, 409, body=True),
        },
    )
    def post(self, request: Request, agent_id: str) -> HttpResponse | StreamingHttpResponse:
        data = run_agent_input(request.data)
        thread_pk = thread_uuid(data.thread_id)
        agent = get_agent(agent_id, request)
        thread = self.visible_thread(request, thread_pk, data.thread_id)
        actor = request_actor(request, SOURCE)
        if data.resume:
            if thread is None:
                raise NotFound(f"thread {data.thread_id} not found", {"threadId": data.thread_id})
            return self.resume(request, thread, data, actor)
        messages = new_user_messages(data)
        if messages:
            return self.start(request, agent, thread, thread_pk, data, messages, actor)
        return self.follow(request, thread, data)

    @staticmethod
    def visible_thread(request: Request, pk: uuid.UUID, raw: str) -> Thread | None:
        thread = Thread.objects.filter(pk=pk).first()
        return None if thread is None else allowed(request, thread, "thread", raw)

    def start(
        self,
        request: Request,
        agent: Agent,
        thread: Thread | None,
        thread_pk: uuid.UUID,
        data: RunAgentInput,
        messages: list[dict[str, Any]],
        actor: Actor,
    ) -> StreamingHttpResponse:
        command = Submission.build_start(
            agent=agent,
            messages=messages,
            thread=thread,
            idempotency_key=(KEY_PREFIX + data.run_id)[:200],
            actor=actor,
        )
        if thread is None:
            command = dataclasses.replace(command, origin=Origin(thread_id=thread_pk))
        try:
            outcome = submission_accept(command)
        except IntegrityError:  # another request created the thread meanwhile: join it
            thread = self.visible_thread(request, thread_pk, data.thread_id)
            if thread is None:
                raise
            outcome = submission_accept(dataclasses.replace(command, thread=thread))
        run = outcome.run
        assert run is not None  # START never leaves input waiting
        after = 0 if outcome.created else run.last_event_seq
        if outcome.repeat:
            after = 0
        return _protocol().agui_stream_response(
            request, run, after=after, translator=_translator(data, run)
        )

    def resume(
        self, request: Request, thread: Thread, data: RunAgentInput, actor: Actor
    ) -> HttpResponse | StreamingHttpResponse:
        run = Run.objects.filter(thread=thread).order_by("-created_at").first()
        if run is None:
            raise NotFound(f"thread {thread.pk} has no run to resume")
        decided = [
            self.answer(request, run, entry, data.run_id, actor) for entry in data.resume or []
        ]
        after = min(_decided_seq(run, ticket) for ticket in decided) - 1
        run.refresh_from_db()
        translator = _translator(data, run)
        if run.status == Run.Status.WAITING:
            interrupts = _protocol().pending_interrupts(run.pk)
            if interrupts:  # others still wait: this AG-UI run ends on them at once
                return _protocol().agui_finished_response(
                    run, [*translator.started(), *translator.interrupted(interrupts)]
                )
        return _protocol().agui_stream_response(request, run, after=after, translator=translator)

    @staticmethod
    def answer(request: Request, run: Run, entry: ResumeEntry, run_id: str, actor: Actor) -> Ticket:
        """Decide the ticket `entry` answers, unless it was decided already."""
        ticket = ticket_for_target(run=run, target=entry.interrupt_id)
        if not request.user.has_perm(perms.DECIDE, ticket):
            raise Forbidden("your role in this thread's team does not allow deciding tickets")
        if ticket.status != Ticket.Status.PENDING:
            return ticket
        body = _decision_body(entry)
        with contextlib.suppress(DecisionConflict):  # decided meanwhile: the stream shows it
            decision_submit(
                ticket=ticket,
                action=body["action"],
                arguments=body.get("arguments"),
                payload=body.get("payload"),
                comment=body.get("comment") or "",
                decision_id=f"{KEY_PREFIX}{run_id}:{entry.interrupt_id}"[:200],
                actor=actor,
            )
        return ticket

    def follow(
        self, request: Request, thread: Thread | None, data: RunAgentInput
    ) -> HttpResponse | StreamingHttpResponse:
        open_run = thread.open_run_id if thread is not None else None
        run = Run.objects.filter(pk=open_run).first() if open_run is not None else None
        if run is None:
            raise InvalidInput(
                "nothing to run: end messages with a user message, or answer the interrupts "
                "with resume entries",
                {"messages": ["no new user message"]},
            )
        translator = _translator(data, run)
        interrupts = (
            _protocol().pending_interrupts(run.pk) if run.status == Run.Status.WAITING else []
        )
        if interrupts:
            return _protocol().agui_finished_response(
                run, [*translator.started(), *translator.interrupted(interrupts)]
            )
        return _protocol().agui_stream_response(
            request, run, after=run.last_event_seq, translator=translator
        )


def _translator(data: RunAgentInput, run: Run) -> AguiTranslator:
    return _protocol().AguiTranslator(
        thread_id=data.thread_id, run_id=data.run_id, our_run_id=str(run.pk)
    )


def _decision_body(entry: ResumeEntry) -> dict[str, Any]:
    """A resume entry as a decision: `cancelled` rejects; a payload with an `action` is
    the tickets API's body; any other payload is upstream's resume (approve, or the
    answer of a ticket that asks)."""
    payload = entry.payload
    if entry.status == "cancelled":
        comment = payload.get("comment") if isinstance(payload, dict) else None
        return {"action": "reject", "comment": str(comment or "cancelled over AG-UI")}
    if isinstance(payload, dict) and "action" in payload:
        return normalize_decision_body(payload)
    return normalize_decision_body({"action": "resume", "payload": payload})


def _decided_seq(run: Run, ticket: Ticket) -> int:
    """The seq of the ticket's `ticket_decided` event (the log's end if none yet)."""
    seq = (
        RunEvent.objects.filter(
            run=run, event_type="ticket_decided", payload__ticket=str(ticket.pk)
        )
        .values_list("seq", flat=True)
        .first()
    )
    if seq is None:
        seq = Run.objects.filter(pk=run.pk).values_list("last_event_seq", flat=True).first() or 0
        seq += 1
    return int(seq)
