"""Run control on the pages: the thread page's pending input (its panel, edit, retract),
interrupting a thread, a queued run's priority, and the thread page's panels that refresh
live (its transcript, its pending input, its runs). Actions are POST only, CSRF
protected, permission checked here whatever the page showed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from common.audit import Actor, request_actor
from runs import selectors
from runs.models import PendingInput, Run, Thread
from runs.permissions import (
    CANCEL,
    EDIT_INPUT,
    PRIORITIZE,
    VIEW_THREAD,
    capabilities,
    denied,
    may_see,
    require,
)
from runs.selectors.base import Rows, newest_rows
from runs.services.inputs import input_edit, input_retract, thread_interrupt
from runs.services.runs import run_set_priority
from runs.services.submission import priority_parse
from runs.views.forms import page_action

Mode = PendingInput.Mode
PENDING_SHOWN = 50  # pending inputs listed on a page; the API lists them all
DELIVERED_SHOWN = 5  # the latest deliveries the thread page recalls


@dataclass(frozen=True)
class ModeChoice:
    value: str
    label: str
    help: str


MODE_CHOICES = {
    Mode.QUEUE: ModeChoice(
        Mode.QUEUE, "Queue", "waits, and starts the thread's next run when the open run ends"
    ),
    Mode.STEER: ModeChoice(
        Mode.STEER,
        "Steer",
        "goes into the open run at its next step, so the model reads it now; queued if the "
        "run ends first",
    ),
    Mode.INTERRUPT_THEN_QUEUE: ModeChoice(
        Mode.INTERRUPT_THEN_QUEUE,
        "Interrupt, then queue",
        "cancels the open run, then starts a run with this message",
    ),
    Mode.RESUME_OPEN_RUN: ModeChoice(
        Mode.RESUME_OPEN_RUN,
        "Resume the waiting run",
        "continues the waiting run now with this message; its open tickets are rejected",
    ),
}


def actor_for(request: HttpRequest) -> Actor:
    return request_actor(request, "ui")


def input_modes(open_run: Run | None, can: dict[str, bool]) -> list[ModeChoice]:
    """The modes that make sense for the thread now: none while it has no open run (the
    message starts one), resume only while the open run waits, interrupt only for those
    who may cancel runs."""
    if open_run is None:
        return []
    modes = [MODE_CHOICES[Mode.QUEUE], MODE_CHOICES[Mode.STEER]]
    if can.get("cancel"):
        modes.append(MODE_CHOICES[Mode.INTERRUPT_THEN_QUEUE])
    if open_run.status == Run.Status.WAITING:
        modes.append(MODE_CHOICES[Mode.RESUME_OPEN_RUN])
    return modes


def pending_inputs(**where: Any) -> Rows:
    """Pending inputs in order of acceptance (the first PENDING_SHOWN)."""
    rows = (
        PendingInput.objects.filter(status=PendingInput.Status.PENDING, **where)
        .select_related("agent")
        .order_by("seq")
    )
    found = list(rows[: PENDING_SHOWN + 1])
    return Rows(found[:PENDING_SHOWN], more=len(found) > PENDING_SHOWN)


def _open_run(thread: Thread) -> Run | None:
    if thread.open_run_id is None:
        return None
    return Run.objects.filter(pk=thread.open_run_id).exclude(status=Run.Status.DONE).first()


def inputs_context(thread: Thread, can: dict[str, bool], open_run: Run | None) -> dict[str, Any]:
    """What the thread page's pending-input panel shows."""
    delivered = PendingInput.objects.filter(
        thread=thread, status=PendingInput.Status.DELIVERED
    ).select_related("delivered_run")
    return {
        "thread": thread,
        "can": can,
        "pending_inputs": pending_inputs(thread=thread),
        "delivered_inputs": list(reversed(newest_rows(delivered, DELIVERED_SHOWN))),
        "open_run": open_run,
    }


def _thread(request: HttpRequest, thread_id: Any) -> Thread:
    """The thread, if the user may see its team's threads (another team's: 404)."""
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None or not may_see(request.user, thread, VIEW_THREAD):
        raise Http404("no such thread")
    return thread


@require(VIEW_THREAD, "view threads")
def thread_inputs(request: HttpRequest, thread_id: Any) -> HttpResponse:
    """The thread page's pending-input panel, refreshed live."""
    thread = _thread(request, thread_id)
    context = inputs_context(thread, capabilities(request.user, thread), _open_run(thread))
    return render(request, "runs/partials/thread_inputs.html", context)


@require(VIEW_THREAD, "view threads")
def thread_runs(request: HttpRequest, thread_id: Any) -> HttpResponse:
    """The thread page's runs panel, refreshed live."""
    thread = _thread(request, thread_id)
    runs = newest_rows(Run.objects.filter(thread=thread).select_related("agent"))
    return render(request, "runs/partials/thread_runs.html", {"thread": thread, "runs": runs})


@require(VIEW_THREAD, "view threads")
def thread_transcript(request: HttpRequest, thread_id: Any) -> HttpResponse:
    """The thread page's messages from `?from_seq=` on (its first message), refreshed live."""
    thread = _thread(request, thread_id)
    raw = request.GET.get("from_seq", "")
    from_seq = int(raw) if raw.isdigit() and len(raw) <= 18 else None
    window = selectors.thread_transcript(thread.pk, from_seq=from_seq)
    return render(
        request,
        "runs/partials/thread_transcript.html",
        {"thread_id": thread.pk, "thread_messages": window},
    )


def _back(request: HttpRequest, thread_id: Any, run_id: Any = None) -> HttpResponse:
    """Back to the page the form was on: the run page (`back=run`) or the thread page."""
    if request.POST.get("back") == "run" and run_id is not None:
        return redirect("runs:run-detail", run_id=run_id)
    return redirect("runs:thread-detail", thread_id=thread_id)


# where these forms show their errors (that module imports this one's page helpers)
INPUT_ERROR = "runs.views.page_errors.input_error"
THREAD_ERROR = "runs.views.page_errors.thread_error"
RUN_ERROR = "runs.views.detail.run_form_error"


@require_POST
@page_action(INPUT_ERROR)
@require(EDIT_INPUT, "edit pending input")
def edit_input(request: HttpRequest, input_id: Any) -> HttpResponse:
    input_ = get_object_or_404(PendingInput.objects.select_related("agent"), pk=input_id)
    if (refused := denied(request, EDIT_INPUT, input_, "change input in this team")) is not None:
        return refused
    edited = input_edit(
        input_id=input_.pk,
        messages=request.POST.get("message", ""),
        priority=priority_parse(request.POST.get("priority")),
        actor=actor_for(request),
    )
    messages.success(request, f"Input #{edited.seq} changed.")
    return _back(request, input_.thread_id, input_.run_id)


@require_POST
@page_action(INPUT_ERROR)
@require(EDIT_INPUT, "retract pending input")
def retract_input(request: HttpRequest, input_id: Any) -> HttpResponse:
    input_ = get_object_or_404(PendingInput.objects.select_related("agent"), pk=input_id)
    if (refused := denied(request, EDIT_INPUT, input_, "change input in this team")) is not None:
        return refused
    input_retract(input_id=input_.pk, actor=actor_for(request))
    messages.success(request, f"Input #{input_.seq} retracted: it will not be delivered.")
    return _back(request, input_.thread_id, input_.run_id)


@require_POST
@page_action(THREAD_ERROR)
@require(CANCEL, "interrupt threads")
def interrupt_thread(request: HttpRequest, thread_id: Any) -> HttpResponse:
    thread = get_object_or_404(Thread, pk=thread_id)
    if (refused := denied(request, CANCEL, thread, "interrupt threads in this team")) is not None:
        return refused
    reason = request.POST.get("reason", "").strip()
    result = thread_interrupt(thread=thread, actor=actor_for(request), reason=reason)
    run, count = result["run"], len(result["cancelled_inputs"])
    parts = []
    if run is not None:  # as it is now (the service answers it as it was)
        stopped = Run.objects.filter(pk=run.pk, status=Run.Status.DONE).exists()
        parts.append(
            f"run {str(run.pk)[-8:]} "
            + ("cancelled" if stopped else "asked to stop (it ends at its next check)")
        )
    parts.append(f"{count} pending input{'' if count == 1 else 's'} cancelled")
    messages.success(request, "Interrupted: " + ", ".join(parts) + ".")
    return redirect("runs:thread-detail", thread_id=thread.pk)


@require_POST
@page_action(RUN_ERROR)
@require(PRIORITIZE, "change run priorities")
def set_priority(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("agent"), pk=run_id)
    if (refused := denied(request, PRIORITIZE, run, "change priorities in this team")) is not None:
        return refused
    priority = priority_parse(request.POST.get("priority"))
    run_set_priority(run=run, priority=priority, actor=actor_for(request))
    messages.success(request, f"Priority set to {priority}.")
    return redirect("runs:run-detail", run_id=run.pk)


def run_steer_inputs(run: Run) -> Rows:
    """Steer input waiting for the run's next step boundary (for the run page)."""
    return pending_inputs(run=run)
