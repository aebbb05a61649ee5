"""Delegation: a delegate tool call runs its agent as a persisted child run, inline on
the parent's worker under its own lease (`delegate_runner`), and a finished child answers
its parent's delegate ticket so the parent resumes (`run_notify_parent`). Child runs are
durable: a replayed step finds its child and does not run it twice."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction

from agents.models import Agent
from agents.pricing import price_snapshot
from agents.resolver import VersionResolver
from agents.selectors import agent_version_current
from common.errors import ServiceError
from runs import metrics
from runs.message_rows import message_to_row
from runs.models import DELEGATE_TICKET_PREFIX, Message, Run, Thread, Ticket
from runs.runtime import types as rt
from runs.runtime.backends import (
    BackendControl,
    BackendDelegateRunRequest,
    BackendParentContext,
    BackendRunOutput,
    BackendRunResult,
    LocalBackend,
    delegate_result_payload,
    map_termination,
)
from runs.runtime.ports import CancellationToken, ToolCallContext
from runs.services import stats
from runs.services.creation import normalize_input_messages
from runs.services.events import apply_thread_projection, run_identity
from runs.services.leases import SEGMENT_STOPPED, renewer, run_claim, run_release
from runs.services.tickets import decision_submit
from runs.store import OrmCheckpointStore, OrmLiveSink, load_messages

logger = logging.getLogger(__name__)


def cancel_token(run: Run, parent: CancellationToken | None = None) -> CancellationToken:
    """The segment's cancellation: fired by the process's watch (`renewer`, which asks
    for every run the process holds in one query) or with the parent's."""
    token = CancellationToken()
    if parent is not None:
        parent.on_cancel(token.cancel)
    return token


def _child_result(child: Run) -> BackendRunResult:
    termination = (
        rt.TerminationReason.from_json(child.termination_reason)
        if child.termination_reason
        else rt.TerminationReason.suspended()
    )
    status = (
        rt.BackendRunStatus.suspended()
        if child.status == Run.Status.WAITING
        else map_termination(termination)
    )
    return BackendRunResult(
        agent_id=child.agent.slug,
        status=status,
        termination=termination,
        response=child.final_output,
        output=BackendRunOutput(text=child.final_output),
        steps=child.steps,
        run_id=str(child.pk),
    )


def delegate_runner(parent: Run, attempt: int, worker: str) -> Any:
    """Runs a delegate as a persisted child run, inline on this worker."""

    def run_delegate(agent_id: str, prompt: str, ctx: ToolCallContext) -> BackendRunResult:
        child = (
            Run.objects.filter(parent_run=parent, parent_tool_call_id=ctx.call_id)
            .select_related("agent")
            .first()
        )
        if child is not None and child.status in (Run.Status.DONE, Run.Status.WAITING):
            return _child_result(child)  # a replayed step: do not run the child twice
        if child is None:
            child = _child_create(parent, agent_id, prompt, ctx.call_id)
        claimed = run_claim(run_id=child.pk, worker=worker)
        if claimed is None:
            return _child_result(Run.objects.select_related("agent").get(pk=child.pk))
        if claimed.attempt == 1:
            metrics.run_started(claimed.agent.slug)
        interrupted: str | None = SEGMENT_STOPPED  # until the child's segment returns
        try:
            child = Run.objects.select_related("agent", "agent_version", "parent_run").get(
                pk=child.pk
            )
            token = cancel_token(child, parent=ctx.cancel)
            resolver = VersionResolver(
                {child.agent.slug: child.agent_version},
                delegate_runner=delegate_runner(child, claimed.attempt, worker),
            )
            sink = OrmLiveSink(child.pk, child.agent.slug)
            with renewer.hold(child.pk, claimed.attempt, token):
                result = LocalBackend().execute_delegate(
                    BackendDelegateRunRequest(
                        agent_id=agent_id,
                        messages=load_messages(child.thread_id),
                        sink=sink,
                        resolver=resolver,
                        parent=BackendParentContext(
                            str(parent.pk), str(parent.thread_id), ctx.call_id
                        ),
                        control=BackendControl(cancellation_token=token),
                        store=OrmCheckpointStore(
                            child.pk,
                            claimed.attempt,
                            settings.AWAKEN_LEASE_SECONDS,
                            timer=sink.timer,
                        ),
                        identity=run_identity(child),
                    )
                )
            interrupted = None
        finally:
            run_release(run_id=child.pk, attempt=claimed.attempt, interrupted=interrupted)
        return result

    return run_delegate


@transaction.atomic
def _child_create(parent: Run, agent_id: str, prompt: str, call_id: str) -> Run:
    agent = Agent.objects.get(slug=agent_id)
    thread = Thread.objects.create(
        title=prompt[:80], parent_thread_id=parent.thread_id, team_id=agent.team_id
    )
    messages = normalize_input_messages(prompt)
    Message.objects.bulk_create([message_to_row(thread.pk, 1, messages[0])])
    Thread.objects.filter(pk=thread.pk).update(message_count=1)
    trigger = [messages[0].id] if messages[0].id else []
    version = agent_version_current(agent=agent)
    child = Run.objects.create(
        thread=thread,
        agent=agent,
        agent_version=version,
        **price_snapshot(version.spec),
        parent_run=parent,
        parent_tool_call_id=call_id,
        priority=parent.priority,
        origin="subagent",
        status=Run.Status.CREATED,
        due=True,
        request=rt.RunRequestSnapshot(
            origin="A2A", input_message_ids=trigger, input_message_count=1
        ).to_json(),
        input=rt.RunMessageInput(
            thread_id=str(thread.pk),
            range=rt.MessageSeqRange.new(1, 1),
            trigger_message_ids=trigger,
        ).to_json(),
    )
    apply_thread_projection(child)
    stats.run_created(child)
    return child


def run_notify_parent(*, run_id: Any) -> None:
    """A finished child answers its parent's delegate ticket, so the parent resumes."""
    finished = Run.objects.filter(pk=run_id, status=Run.Status.DONE)
    parent_id = finished.values_list("parent_run_id", flat=True).first()
    if parent_id is None:  # a root run, or a child that is not done: one small query
        return
    child = finished.select_related("agent").get()
    ticket = Ticket.objects.filter(
        run_id=parent_id,
        ticket_id=f"{DELEGATE_TICKET_PREFIX}{child.pk}",
        status=Ticket.Status.PENDING,
    ).first()
    if ticket is None:
        return
    payload = delegate_result_payload(_child_result(child))
    try:
        decision_submit(ticket=ticket, action="respond", payload=payload)
    except ServiceError:
        logger.info("parent ticket for child run %s was already decided", run_id)
