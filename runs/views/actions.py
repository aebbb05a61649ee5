"""Operator actions: decide a ticket, cancel, retry, send a message. POST only, CSRF
protected, permission checked here whatever the page showed."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from agents.models import Agent
from common.access import allowed_unfrozen
from common.audit import Actor, request_actor
from common.errors import Forbidden, InvalidInput, ServiceError
from common.teams import ensure_not_frozen_only
from runs.models import PendingInput, Run, Thread, Ticket
from runs.permissions import (
    CANCEL,
    DECIDE,
    RETRY,
    START,
    VIEW_THREAD,
    denied,
    require,
    visible_or_404,
)
from runs.services.locks import lock_thread_with_open_run
from runs.services.runs import run_cancel, run_retry
from runs.services.submission import Submission, priority_parse
from runs.services.submission_flow import SubmissionOutcome, submission_accept
from runs.services.tickets import decision_submit
from runs.ticket_forms import edited_arguments, parse_answer
from runs.views.detail import PARTIAL_SECTIONS, run_form_error, run_page_context
from runs.views.forms import FormError, page_action
from runs.views.htmx import is_htmx
from runs.views.lists import thread_page_context, tickets_superseded
from runs.views.page_errors import composer_error
from runs.wording import decision_done


def actor_for(request: HttpRequest) -> Actor:
    return request_actor(request, "ui")


def _tickets_panel(request: HttpRequest, run: Run, flash: dict[str, str]) -> HttpResponse:
    context = run_page_context(request, run.pk, PARTIAL_SECTIONS["run_tickets"])
    context["flash"] = flash
    return render(request, "runs/partials/run_tickets.html", context)


def _ticket_error(request: HttpRequest, error: FormError, ticket_id: Any) -> HttpResponse:
    ticket = get_object_or_404(Ticket.objects.only("run_id"), pk=ticket_id)
    return run_form_error(request, error, ticket.run_id)


def _run_error(request: HttpRequest, error: FormError, run_id: Any) -> HttpResponse:
    return run_form_error(request, error, run_id)


@require_POST
@page_action(_ticket_error)
@require(DECIDE, "decide tickets")
def decide(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    ticket = get_object_or_404(
        Ticket.objects.select_related("run__agent", "tool_call"), pk=ticket_id
    )
    refused = denied(request, DECIDE, ticket.run, "decide tickets in this team")
    if refused is not None:
        return refused
    action = request.POST.get("action", "")
    arguments = payload = None
    if action == "edit":
        arguments = edited_arguments(ticket, request.POST)
    elif action == "respond":
        payload = parse_answer(request.POST.get("answer", ""))
    decision = decision_submit(
        ticket=ticket,
        action=action,
        arguments=arguments,
        payload=payload,
        comment=request.POST.get("comment", "").strip(),
        decision_id=request.POST.get("decision_id") or None,
        actor=actor_for(request),
    )
    text = decision_done(decision.action, ticket.tool_name)
    if is_htmx(request):
        return _tickets_panel(request, ticket.run, {"level": "success", "text": text})
    messages.success(request, text)
    return redirect("runs:run-detail", run_id=ticket.run_id)


def _preview_error(request: HttpRequest, error: FormError, ticket_id: Any) -> HttpResponse:
    ticket = get_object_or_404(Ticket.objects.select_related("run__agent"), pk=ticket_id)
    visible_or_404(request.user, ticket.run)  # another team's: 404, as an unknown id
    context = {"rows": [], "error": error.text}
    return render(request, "runs/partials/edit_diff.html", context, status=error.status)


@require_POST
@page_action(_preview_error)
@require(DECIDE, "decide tickets")
def edit_preview(request: HttpRequest, ticket_id: Any) -> HttpResponse:
    ticket = get_object_or_404(Ticket.objects.select_related("run__agent"), pk=ticket_id)
    refused = denied(request, DECIDE, ticket.run, "decide tickets in this team")
    if refused is not None:
        return refused
    rows = []
    error = ""
    try:
        after = edited_arguments(ticket, request.POST)
        before = ticket.arguments or {}
        for name in sorted(set(before) | set(after)):
            if before.get(name) != after.get(name):
                rows.append({"name": name, "before": before.get(name), "after": after.get(name)})
    except ServiceError as exc:
        error = exc.message
    return render(request, "runs/partials/edit_diff.html", {"rows": rows, "error": error})


@require_POST
@page_action(_run_error)
@require(CANCEL, "cancel runs")
def cancel(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("agent"), pk=run_id)
    refused = denied(request, CANCEL, run, "cancel runs in this team")
    if refused is not None:
        return refused
    reason = request.POST.get("reason", "").strip()
    run = run_cancel(run=run, actor=actor_for(request), reason=reason)
    text = (
        "Cancelled."
        if run.status == Run.Status.DONE
        else "Cancel requested; the worker stops at its next check."
    )
    messages.success(request, text)
    if is_htmx(request):
        return HttpResponse(headers={"HX-Redirect": f"/runs/{run.pk}/"})
    return redirect("runs:run-detail", run_id=run.pk)


@require_POST
@page_action(_run_error)
@require(RETRY, "retry runs")
def retry(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("agent"), pk=run_id)
    refused = denied(request, RETRY, run, "retry runs in this team")
    if refused is not None:
        return refused
    new = run_retry(run=run, actor=actor_for(request))
    messages.success(request, f"Retrying as run {new.pk}.")
    return redirect("runs:run-detail", run_id=new.pk)


@require_POST
@page_action(composer_error)
@require(START, "start runs")
def send_message(request: HttpRequest, thread_id: Any = None) -> HttpResponse:
    """The composer: a new thread's first message, or input for a thread in the mode the
    form chose (queue by default; resume_open_run asks to confirm the open tickets it
    rejects)."""
    thread = get_object_or_404(Thread, pk=thread_id) if thread_id else None
    if thread is not None:
        visible_or_404(request.user, thread, VIEW_THREAD)
    agent = Agent.objects.filter(slug=request.POST.get("agent", "")).first()
    if agent is not None and not allowed_unfrozen(request.user, START, agent):
        agent = None  # another team's agent: as if unknown (a frozen team's: 409 below)
    if agent is None:
        raise InvalidInput("Choose an agent.", {"field": "agent"})
    text = request.POST.get("message", "")
    mode = request.POST.get("mode") or PendingInput.Mode.QUEUE
    priority = priority_parse(request.POST.get("priority"))
    if mode == PendingInput.Mode.INTERRUPT_THEN_QUEUE and not request.user.has_perm(CANCEL, agent):
        ensure_not_frozen_only(request.user, CANCEL, agent)
        raise Forbidden("You may not cancel runs, so you may not interrupt one.")
    outcome: SubmissionOutcome | None = None
    with transaction.atomic():
        if mode != PendingInput.Mode.RESUME_OPEN_RUN or not _supersede_unconfirmed(request, thread):
            command = Submission.build(
                agent=agent,
                messages=text,
                thread=thread,
                mode=mode,
                priority=priority,
                actor=actor_for(request),
            )
            outcome = submission_accept(command)
    if outcome is None:
        assert thread is not None
        return _ask_to_confirm(request, thread, agent, text, priority)
    if outcome.run is not None:
        return redirect("runs:run-detail", run_id=outcome.run.pk)
    messages.success(request, _waiting_text(outcome))
    if thread is not None:
        return redirect("runs:thread-detail", thread_id=thread.pk)
    return redirect("runs:thread-list")


def _waiting_text(outcome: SubmissionOutcome) -> str:
    input_ = outcome.input
    assert input_ is not None  # it waits
    if input_.mode == PendingInput.Mode.STEER and input_.run_id:
        return f"Input #{input_.seq} goes into the open run at its next step."
    if outcome.interrupted is not None and outcome.interrupted.status == Run.Status.DONE:
        return (
            f"The open run was cancelled; input #{input_.seq} is queued behind the thread's "
            "earlier input."
        )
    if outcome.interrupted is not None:
        return (
            f"Input #{input_.seq} is queued; the open run was asked to stop and the input "
            "starts the next run when it has."
        )
    return f"Input #{input_.seq} is queued: it starts the thread's next run when the open one ends."


def _supersede_unconfirmed(request: HttpRequest, thread: Thread | None) -> bool:
    """True when the message would reject open tickets of the thread's waiting run and the
    form did not confirm exactly those (its checkbox carries a token naming the set it
    listed). Runs in the sending transaction with the open run and then the thread locked
    (the lock order: runs.services.locks): the run cannot resume and open other tickets
    between this check and the rejection."""
    if thread is None:
        return False
    _, run = lock_thread_with_open_run(thread.pk)
    if run is None:
        return False
    found = tickets_superseded(run)
    return found is not None and request.POST.get("supersede", "") != found.token


def _ask_to_confirm(
    request: HttpRequest, thread: Thread, agent: Agent, text: str, priority: int
) -> HttpResponse:
    """Nothing was sent: the thread page again with the message kept, listing the tickets
    it would reject and asking to confirm."""
    context = thread_page_context(request, thread.pk)
    context.update(
        message=text,
        default_agent=agent.slug,
        supersede_asked=True,
        mode=PendingInput.Mode.RESUME_OPEN_RUN,
        priority=priority,
    )
    return render(request, "runs/thread_detail.html", context)
