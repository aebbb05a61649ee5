"""Run control: input for a thread or a run in one of four modes, the thread's pending
input (list, read, edit, retract) and interrupting a thread."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from common.api.auth import actor_for
from common.api.base import ApiView, get_or_not_found, validated
from common.api.errors import error_responses
from runs import permissions as perms
from runs.api import input_serializers as si
from runs.api import team_serializers as st
from runs.api.views.lookups import allowed, get_run, get_thread
from runs.api.views.params import IDEMPOTENCY_KEY, RUN_ID, THREAD_ID, path_uuid
from runs.api.views.records import run_record_json
from runs.models import PendingInput, Run, Thread
from runs.services.inputs import input_edit, input_retract
from runs.services.inputs import thread_interrupt as interrupt_thread
from runs.services.submission import KEY_CHARS, Submission
from runs.services.submission_flow import SubmissionOutcome, submission_accept

INPUT_ID = path_uuid("input_id", "Input id (the `id` of a pending input).")

# The answers of POST /threads/{id}/messages and POST /runs/{id}/inputs.
INPUT_RESPONSES = {
    201: OpenApiResponse(
        si.InputRunSerializer,
        description="A run started with the input (the thread had no open run, or "
        "interrupt_then_queue ended the open one at once).",
    ),
    200: OpenApiResponse(
        si.InputRunSerializer,
        description="resume_open_run: the waiting run continued (`superseded_tickets`: the "
        "open tickets it rejected); or a repeat of an idempotency key: the run it started.",
    ),
    202: OpenApiResponse(
        si.QueuedInputSerializer,
        description="The input waits (queue, steer, interrupt_then_queue while the open run "
        "stops): its pending record, to edit or retract at /inputs/{id}.",
    ),
    **error_responses(404, 409, body=True),
}

INPUT_MODES_TEXT = (
    "`mode` says what happens when the thread has an open (created, running or waiting) run: "
    "`queue` (the default) waits and starts the thread's next run when the open one ends, "
    "one run per input in order of acceptance (HTTP 202, the pending input); `steer` is "
    "delivered into the open run at its next step boundary, or queued if it ends first "
    "(202); `interrupt_then_queue` cancels the open run and queues the message (202, or "
    "201 when the run ended at once and the input started the next one); "
    "`resume_open_run` continues the open run while it waits for a decision or an answer "
    "(HTTP 200, same run; its open tickets are rejected as superseded, listed in "
    "`superseded_tickets`), 409 while it is created or running. With no open run any mode "
    "starts a run at once (HTTP 201) with `priority` (0 high … 255 low). Pending input "
    "can be edited or retracted at /inputs/{input_id} until delivered. A repeat of "
    "`idempotency_key` (or `Idempotency-Key`) by the same user returns the run the first "
    "request started (HTTP 200); it does not deduplicate input that waits."
)


def input_json(input_: PendingInput) -> dict[str, Any]:
    return dict(si.PendingInputSerializer(input_).data)


def _run_answer(run: Run, status: int, outcome: SubmissionOutcome | None = None) -> Response:
    record = run_record_json(run)
    interrupted = outcome.interrupted if outcome else None
    record.update(
        input_id=str(outcome.input.pk) if outcome and outcome.input else None,
        superseded_tickets=list(outcome.superseded) if outcome else [],
        interrupted_run_id=str(interrupted.pk) if interrupted else None,
    )
    return Response(record, status=status)


def submit_input(
    request: Request,
    data: dict[str, Any],
    *,
    agent: Agent | None = None,
    thread: Thread | None = None,
    run: Run | None = None,
) -> Response:
    """The submission accepted, and its answer: 201 a run started, 200 the waiting run continued (or
    the run an idempotency key started), 202 the input waits."""
    if data["mode"] == PendingInput.Mode.INTERRUPT_THEN_QUEUE and not request.user.has_perm(
        perms.CANCEL
    ):
        raise PermissionDenied(
            f"You need the permission {perms.CANCEL} to interrupt the open run this way."
        )
    key = data.get("idempotency_key") or request.headers.get("Idempotency-Key", "")[:KEY_CHARS]
    command = Submission.build(
        agent=agent,
        messages=[dict(m) for m in data["messages"]],
        thread=thread,
        run=run,
        mode=data["mode"],
        priority=data["priority"],
        idempotency_key=key,
        actor=actor_for(request),
    )
    # its own transaction (run again on a lock conflict: runs.services.locks)
    outcome = submission_accept(command)
    if outcome.repeat:  # the run the key started (also when a concurrent request won)
        assert outcome.run is not None
        return _run_answer(outcome.run, 200)
    if outcome.run is None:
        assert outcome.input is not None
        interrupted = outcome.interrupted
        body = {
            **input_json(outcome.input),
            "interrupted_run_id": str(interrupted.pk) if interrupted else None,
        }
        return Response(body, status=202)
    return _run_answer(outcome.run, 201 if outcome.created else 200, outcome)


def get_input(input_id: Any, request: Request) -> PendingInput:
    input_ = get_or_not_found(PendingInput.objects.select_related("agent"), "input", input_id)
    return allowed(request, input_, "input", input_id)


class RunInputsView(ApiView):
    required_perms = {"POST": perms.START}

    @extend_schema(
        operation_id="runs_inputs_create",
        summary="Send input to a run",
        description="Input for the run's thread, addressed to this run: `steer` and "
        "`resume_open_run` target it (`resume_open_run` is 409 unless it is the thread's "
        "open, waiting run; `steer` for a run that ended is queued for the thread's next "
        "run). The agent is the thread's open or latest run's. " + INPUT_MODES_TEXT,
        tags=["inputs"],
        parameters=[RUN_ID, IDEMPOTENCY_KEY],
        request=si.RunInputCreateSerializer,
        responses=INPUT_RESPONSES,
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = get_run(run_id, request)
        data = validated(si.RunInputCreateSerializer, request.data)
        return submit_input(request, data, run=run)


class ThreadInputListView(ApiView):
    required_perms = {"GET": perms.VIEW_INPUT}

    @extend_schema(
        operation_id="threads_inputs_list",
        summary="A thread's pending input",
        description="In order of acceptance (seq): what still waits (`status=pending`, the "
        "default), or every input with its delivery (`status=all`).",
        tags=["inputs"],
        parameters=[THREAD_ID, si.InputListQuerySerializer],
        responses={200: si.InputPageSerializer, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id, request)
        query = validated(si.InputListQuerySerializer, request.query_params)
        after, limit = query["after_seq"], query["limit"]
        rows = PendingInput.objects.filter(thread=thread, seq__gt=after).select_related("agent")
        if query["status"] == "pending":
            rows = rows.filter(status=PendingInput.Status.PENDING)
        found = list(rows.order_by("seq")[: limit + 1])
        items = [input_json(row) for row in found[:limit]]
        return Response(
            {
                "items": items,
                "next_after_seq": items[-1]["seq"] if items else after,
                "has_more": len(found) > limit,
            }
        )


class InputDetailView(ApiView):
    required_perms = {
        "GET": perms.VIEW_INPUT,
        "PATCH": perms.EDIT_INPUT,
        "DELETE": perms.EDIT_INPUT,
    }

    @extend_schema(
        operation_id="inputs_retrieve",
        summary="A pending input, or the record of its delivery",
        tags=["inputs"],
        parameters=[INPUT_ID],
        responses={200: si.PendingInputSerializer, **error_responses(404)},
    )
    def get(self, request: Request, input_id: str) -> Response:
        return Response(input_json(get_input(input_id, request)))

    @extend_schema(
        operation_id="inputs_update",
        summary="Edit a pending input",
        description="Replace its messages, change its priority, or both, while it is "
        "pending. 409 once it was delivered, retracted or cancelled.",
        tags=["inputs"],
        parameters=[INPUT_ID],
        request=si.InputEditSerializer,
        responses={200: si.PendingInputSerializer, **error_responses(404, 409, body=True)},
    )
    def patch(self, request: Request, input_id: str) -> Response:
        input_ = get_input(input_id, request)
        data = validated(si.InputEditSerializer, request.data)
        messages = data.get("messages")
        edited = input_edit(
            input_id=input_.pk,
            messages=[dict(m) for m in messages] if messages is not None else None,
            priority=data.get("priority"),
            actor=actor_for(request),
        )
        return Response(input_json(edited))

    @extend_schema(
        operation_id="inputs_retract",
        summary="Retract a pending input",
        description="It will never be delivered (status `retracted`). 409 once it was "
        "delivered, retracted or cancelled.",
        tags=["inputs"],
        parameters=[INPUT_ID],
        request=None,
        responses={200: si.PendingInputSerializer, **error_responses(404, 409)},
    )
    def delete(self, request: Request, input_id: str) -> Response:
        input_ = get_input(input_id, request)
        retracted = input_retract(input_id=input_.pk, actor=actor_for(request))
        return Response(input_json(retracted))


class ThreadInterruptView(ApiView):
    required_perms = {"POST": perms.CANCEL}

    @extend_schema(
        operation_id="threads_interrupt",
        summary="Interrupt a thread",
        description="Cancels the thread's open run (a running one stops at its next check: "
        "`cancel_requested_at` is set) and every input still pending, in one action. `run` "
        "is null when the thread had no open run.",
        tags=["inputs"],
        parameters=[THREAD_ID],
        request=st.CancelRequestSerializer,
        responses={200: si.ThreadInterruptSerializer, **error_responses(404, 409, body=True)},
    )
    def post(self, request: Request, thread_id: str) -> Response:
        thread = get_thread(thread_id, request)
        body = request.data if isinstance(request.data, dict) and request.data else {}
        reason = validated(st.CancelRequestSerializer, body)["reason"]
        result = interrupt_thread(thread=thread, actor=actor_for(request), reason=reason)
        run = result["run"]
        return Response(
            {
                "run": run_record_json(run) if run is not None else None,
                "cancelled_inputs": result["cancelled_inputs"],
            }
        )
