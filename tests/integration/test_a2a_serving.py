"""Our agents over A2A in the distributed mode: a daphne process serves them, Celery
workers run the runs (PostgreSQL, Redis; conftest.py).

- The stock a2a-sdk client, over both bindings: a blocking send completes a run; a
  streamed send stops at input-required, a streamed answer continues the run to its
  answer; a working task is cancelled; a subscription follows a task; no token, a wrong
  token and a viewer's token are refused.
- Our own remote-endpoint backend calling our own server: an agent whose endpoint is
  another Awaken Ops agent completes, passes the inner agent's approval question to an
  operator as its own ticket, and cancels the inner run when it is cancelled.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from a2a.types import TaskState

from agents.models import RemoteEndpoint
from runs.models import Run, Ticket
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import (
    APPROVAL,
    AgentFactory,
    call,
    note_call,
    scripted_agent,
    token_for,
    user_with_role,
)
from tests.processes import free_port, wait_for
from tests.runs.a2a_client import JSONRPC, REFUSED, REST, A2AClient, message, run

SLEEP_SECONDS = 30


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=[JSONRPC, REST])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def served(processes: Any, service_env: dict[str, str], binding: str) -> str:
    """daphne and two workers; the base URL. The cards list `binding` first, so our
    backend (which takes the first binding it speaks) uses it."""
    service_env["AWAKEN_ENDPOINTS_ALLOW_PRIVATE"] = "true"  # the backend calls 127.0.0.1
    service_env["AWAKEN_A2A_PREFERRED_BINDING"] = binding
    port = free_port()
    processes("worker", "worker-a", concurrency=3)
    processes("worker", "worker-b", concurrency=3)
    processes("daphne", port=port)
    return f"http://127.0.0.1:{port}"


def approval_agent() -> Any:
    return scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "all done"}],
        permission=APPROVAL,
        slug=unique("noter"),
    )


def sleepy_agent() -> Any:
    return scripted_agent(
        [
            {"text": "", "tool_calls": [call("sleep", {"seconds": SLEEP_SECONDS})]},
            {"text": "rested"},
        ],
        tools=["sleep"],
        slug=unique("sleepy"),
    )


def states(events: list[Any]) -> list[int]:
    found = []
    for item in events:
        if item.HasField("task"):
            found.append(item.task.status.state)
        elif item.HasField("status_update"):
            found.append(item.status_update.status.state)
    return found


def test_the_stock_client_runs_answers_cancels_and_follows_tasks(served: str, binding: str):
    operator = token_for(user_with_role("operator", unique("op")))
    answerer = scripted_agent([{"text": "forty-two"}], slug=unique("answerer"))

    # blocking send: the answer comes back with the task
    done = run(
        A2AClient(served, answerer.slug, token=operator, binding=binding).send(
            message("the answer?")
        )
    )
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
    assert done.artifacts[0].parts[0].text == "forty-two"
    assert Run.objects.get(pk=done.id).thread_id == uuid.UUID(done.context_id)

    # streamed: stops at the ticket; the streamed answer runs it to the end
    noter = A2AClient(served, approval_agent().slug, token=operator, binding=binding)
    events = run(noter.stream(message("write it down")))
    assert states(events)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED, events
    task_id = events[0].task.id
    asked = events[-1].status_update.status.message.parts[0].text
    assert "Approve write_note" in asked
    events = run(noter.stream(message("approve", task_id=task_id)))
    assert states(events)[-1] == TaskState.TASK_STATE_COMPLETED, events
    artifacts = [e.artifact_update.artifact for e in events if e.HasField("artifact_update")]
    assert artifacts[0].parts[0].text == "all done"
    assert Ticket.objects.get(run_id=task_id).decision.action == "approve"

    # a working task is cancelled while its tool sleeps; a subscription sees it end
    sleepy = A2AClient(served, sleepy_agent().slug, token=operator, binding=binding)
    task = run(sleepy.send(message("rest"), wait=False))
    wait_for(lambda: Run.objects.filter(pk=task.id, status="running").exists(), 30, "running")
    cancelled = run(sleepy.cancel(task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED, cancelled
    record = Run.objects.get(pk=task.id)
    assert (record.status, record.status_reason) == ("done", "cancelled")
    with pytest.raises(REFUSED, match="has ended"):
        run(sleepy.subscribe(task.id))

    second = run(noter.send(message("write it down again"), wait=False))
    followed = run(noter.subscribe(second.id))
    assert states(followed)[-1] == TaskState.TASK_STATE_INPUT_REQUIRED

    # refused: no token, a wrong one, a viewer starting a task
    viewer = token_for(user_with_role("viewer", unique("viewer")))
    for token in (None, "awk_wrong_token"):
        with pytest.raises(REFUSED, match="401"):
            run(A2AClient(served, answerer.slug, token=token, binding=binding).send(message("x")))
    with pytest.raises(REFUSED, match="permission denied"):
        run(A2AClient(served, answerer.slug, token=viewer, binding=binding).send(message("x")))
    assert run(A2AClient(served, answerer.slug, token=viewer, binding=binding).get(done.id)).id


def remote_agent_of(served: str, inner: Any, token: str) -> Any:
    endpoint = RemoteEndpoint(
        slug=unique("self"),
        name="Another Awaken Ops agent",
        base_url=f"{served}/a2a/{inner.slug}",
        poll_interval_ms=100,
    )
    endpoint.set_token(token)
    endpoint.save()
    return AgentFactory(slug=unique("outer"), model=None, endpoint=endpoint, tools=[])


def test_our_backend_calls_our_server(served: str, binding: str):
    operator = user_with_role("operator", unique("op"))
    token = token_for(operator)

    # completes with the inner agent's answer
    outer = remote_agent_of(served, scripted_agent([{"text": "hello from inside"}]), token)
    card = run(A2AClient(served, outer.endpoint.base_url.rsplit("/", 1)[1]).card())
    assert card.supported_interfaces[0].protocol_binding == binding
    first = run_start(agent=outer, messages="say hello")
    wait_for(lambda: Run.objects.filter(pk=first.pk, status="done").exists(), 60, "the run")
    first.refresh_from_db()
    assert (first.status_reason, first.final_output) == ("natural", "hello from inside")
    inner_run = Run.objects.exclude(agent=outer).get(thread__title="say hello")
    assert inner_run.status_reason == "natural"

    # the inner agent's approval question is the outer run's ticket; the answer continues both
    outer = remote_agent_of(served, approval_agent(), token)
    asking = run_start(agent=outer, messages="write it down")
    wait_for(lambda: Ticket.objects.filter(run=asking, status="pending").exists(), 60, "ticket")
    ticket = Ticket.objects.get(run=asking, status="pending")
    assert "Approve write_note" in ticket.message
    decision_submit(ticket=ticket, action="respond", payload="approve")
    wait_for(lambda: Run.objects.filter(pk=asking.pk, status="done").exists(), 60, "the answer")
    asking.refresh_from_db()
    assert asking.final_output == "all done"
    inner_ticket = Ticket.objects.exclude(run=asking).get(run__thread__title="write it down")
    assert inner_ticket.decision.action == "approve"
    assert str(operator.username) in inner_ticket.decision.actor_label

    # cancelling the outer run cancels the inner one
    outer = remote_agent_of(served, sleepy_agent(), token)
    slow = run_start(agent=outer, messages="rest a while")
    inner = Run.objects.exclude(agent=outer).filter(thread__title="rest a while")
    wait_for(lambda: inner.filter(status="running").exists(), 60, "the inner run")
    run_cancel(run=Run.objects.get(pk=slow.pk))
    wait_for(lambda: inner.filter(status="done").exists(), 30, "the inner run to end")
    assert inner.get().status_reason == "cancelled"
