"""Remote A2A agents end to end, against a real local A2A server (tests/a2a_server.py):
the remote root lifecycle, operator answers continuing the remote task, cancel and timeout,
capabilities, config validation, the SSRF guard, health checks, and the bearer token never
leaking (admin, API, logs, audit)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import AgentInterface
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent, RemoteEndpoint
from agents.services.endpoints import endpoint_config_errors, endpoint_probe
from agents.services.health import endpoint_health_record
from common.audit import Actor
from common.models import AuditEntry
from runs.models import Message, Run, RunEvent, Ticket
from runs.runtime.backends import (
    A2ABackend,
    A2AConfigError,
    BackendControl,
    BackendRootRunRequest,
    ExecutionBackendError,
    LocalBackend,
    a2a_validate,
)
from runs.runtime.backends.a2a import REMOTE_STATE_KEY
from runs.runtime.loop import RunIdentity
from runs.runtime.ports import NullEventSink
from runs.runtime.types import ResumeDecisionAction, ToolCallResume, ToolDescriptor
from runs.services.execution import run_advance, run_execute, runs_sweep
from runs.services.leases import run_claim
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.store import OrmCheckpointStore
from tests.a2a_server import JSONRPC, REST, A2AServer, interface_url
from tests.factories import AgentFactory
from tests.runs.helpers import assert_gap_free, drive, event_types, events, expire_lease

TOKEN = "tok-3f9a1c77e2b54d10a8c6-secret"


@pytest.fixture
def server() -> Iterator[A2AServer]:
    srv = A2AServer(token=TOKEN).start()
    yield srv
    srv.stop()


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = True


def make_endpoint(server: A2AServer, *, slug: str = "remote", token: str = TOKEN, **kwargs: Any):
    fields = {"name": "Remote agent", "base_url": server.base_url, "poll_interval_ms": 50}
    fields.update(kwargs)
    endpoint = RemoteEndpoint(slug=slug, **fields)
    endpoint.set_token(token)
    endpoint.save()
    return endpoint


def remote_agent(server: A2AServer, **kwargs: Any) -> Agent:
    endpoint = make_endpoint(server, **kwargs)
    return AgentFactory(slug="remote-agent", model=None, endpoint=endpoint, tools=[])


def remote_state(run: Run) -> dict[str, Any]:
    run.refresh_from_db()
    targets = run.state["extensions"][REMOTE_STATE_KEY]["targets"]
    assert len(targets) == 1
    return dict(next(iter(targets.values())))


def transcript(run: Run) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in Message.objects.filter(thread=run.thread).order_by("seq")]


LIFECYCLE = [
    "run_start",
    "step_start",
    "text_delta",
    "inference_complete",
    "step_end",
    "run_finish",
]


# --- the remote root lifecycle --------------------------------------------------------------------


@pytest.mark.django_db
def test_a_completed_remote_task_ends_the_run_with_its_answer(server, allow_private):
    run = drive(run_start(agent=remote_agent(server), messages="reply hello from afar"))
    assert (run.status, run.status_reason) == ("done", "natural")
    assert run.final_output == "hello from afar"
    assert run.termination_reason == {"type": "natural_end"}
    assert run.steps == 1 and (run.input_tokens, run.output_tokens) == (0, 0)
    assert event_types(run) == LIFECYCLE
    assert events(run, "text_delta")[0]["delta"] == "hello from afar"
    assert events(run, "inference_complete")[0]["model"] == "a2a:remote"
    assert "usage" not in events(run, "inference_complete")[0]
    finish = events(run, "run_finish")[0]
    assert finish["result"]["status"] == "done" and finish["result"]["status_reason"] == "natural"
    assert finish["result"]["output"]["text"] == "hello from afar"
    assert finish["result"]["output"]["artifacts"][0]["name"] == "answer"
    assert transcript(run) == [("user", "reply hello from afar"), ("assistant", "hello from afar")]
    reply = Message.objects.get(thread=run.thread, seq=2)
    assert (reply.produced_by_run_id, reply.step_index) == (run.pk, 0)
    assert run.output["range"] == {"from_seq": 2, "to_seq": 2}
    state = remote_state(run)
    assert state["last_state"] == "completed"
    assert state["task_id"] == server.recorder.prompts[0][0]
    assert server.recorder.authorization and set(server.recorder.authorization) == {
        f"Bearer {TOKEN}"
    }
    assert RemoteEndpoint.objects.get(slug="remote").health == "healthy"
    assert_gap_free(run)


@pytest.mark.django_db
def test_a_direct_message_reply_completes_in_one_step(server, allow_private):
    run = drive(run_start(agent=remote_agent(server), messages="message just this"))
    assert (run.status, run.status_reason, run.final_output) == ("done", "natural", "just this")
    assert run.steps == 1
    assert event_types(run) == LIFECYCLE


@pytest.mark.django_db
def test_input_required_opens_a_ticket_and_the_operators_answer_continues_the_same_task(
    server, allow_private
):
    run = drive(run_start(agent=remote_agent(server), messages="ask What is your name?"))
    assert (run.status, run.status_reason) == ("waiting", "input_required")
    assert run.waiting["reason"] == "user_input"
    assert event_types(run) == ["run_start", "step_start", "text_delta", "step_end", "run_finish"]
    finish = events(run, "run_finish")[0]
    assert finish["termination"] == {"type": "suspended"}
    assert finish["result"]["status"] == "waiting_input"
    ticket = Ticket.objects.get(run=run, status="pending")
    assert ticket.tool_name == "a2a_input" and ticket.resume_mode == "use_decision_as_tool_result"
    assert ticket.message == "What is your name?"
    assert run.waiting["ticket_ids"] == [ticket.ticket_id]
    task_id = remote_state(run)["task_id"]
    assert remote_state(run)["last_state"] == "input-required"
    first_segment = run.last_event_seq

    decision_submit(
        ticket=ticket, action="respond", payload="Alice", actor=Actor(label="olga", source="ui")
    )
    run = drive(run)
    assert (run.status, run.status_reason, run.final_output) == ("done", "natural", "Thanks: Alice")
    assert server.recorder.followups == [(task_id, "Alice")]
    assert remote_state(run)["task_id"] == task_id
    assert transcript(run) == [
        ("user", "ask What is your name?"),
        ("assistant", "What is your name?"),
        ("user", "Alice"),
        ("assistant", "Thanks: Alice"),
    ]
    assert run.steps == 2
    second = event_types(run, after=first_segment)
    assert second[0] == "ticket_decided"
    assert second[1:] == [
        "run_start",
        "tool_call_resumed",
        "step_start",
        "text_delta",
        "inference_complete",
        "step_end",
        "run_finish",
    ]
    assert Ticket.objects.get(pk=ticket.pk).status == "decided"
    assert_gap_free(run)


@pytest.mark.django_db
def test_without_streaming_the_backend_polls_the_task_and_targets_reach_the_tenant_path(
    allow_private,
):
    server = A2AServer(token=TOKEN, streaming=False, tenant="billing").start()
    try:
        agent = remote_agent(server, target="billing", poll_interval_ms=20)
        run = drive(run_start(agent=agent, messages="ask Invoice number?"))
        assert (run.status, run.status_reason) == ("waiting", "input_required")
        decision_submit(ticket=Ticket.objects.get(run=run), action="respond", payload="INV-7")
        run = drive(run)
        assert (run.status_reason, run.final_output) == ("natural", "Thanks: INV-7")
        paths = [p for p in server.recorder.paths if p != "/.well-known/agent-card.json"]
        assert paths[0] == "/billing/message:send"
        assert not any(p.endswith(":subscribe") for p in paths)  # the card says no streaming
        assert any(p.startswith("/billing/tasks/") and ":" not in p for p in paths)  # polled
    finally:
        server.stop()


@pytest.mark.django_db
def test_the_remote_question_shows_escaped_on_the_run_page_and_in_the_inbox(
    server, allow_private, client
):
    from runs.decisions.selectors.inbox import inbox_tickets
    from tests.factories import user_with_role

    run = drive(run_start(agent=remote_agent(server), messages="ask Your <b>PIN</b>?"))
    ticket = Ticket.objects.get(run=run)
    assert ticket in inbox_tickets().items
    client.force_login(user_with_role("operator", "olga"))
    page = client.get(reverse("runs:run-detail", args=[run.pk])).content.decode()
    assert "Your &lt;b&gt;PIN&lt;/b&gt;?" in page and "<b>PIN</b>" not in page
    assert "a2a_input" in page
    inbox = client.get(reverse("runs:inbox")).content.decode()
    assert "a2a_input" in inbox
    response = client.post(
        reverse("runs:ticket-decide", args=[ticket.pk]), {"action": "respond", "answer": "1234"}
    )
    assert response.status_code in (200, 302)
    run = drive(run)
    assert run.final_output == "Thanks: 1234"


@pytest.mark.django_db
def test_auth_required_waits_with_reason_auth_required(server, allow_private):
    run = drive(run_start(agent=remote_agent(server), messages="auth Sign in at the portal"))
    assert (run.status, run.status_reason) == ("waiting", "auth_required")
    assert run.waiting["reason"] == "tool_permission"
    ticket = Ticket.objects.get(run=run, status="pending")
    assert (ticket.tool_name, ticket.message) == ("a2a_auth", "Sign in at the portal")


@pytest.mark.django_db
@pytest.mark.parametrize("verb", ["fail", "reject"])
def test_a_failed_remote_task_fails_the_run_with_the_remote_message(server, allow_private, verb):
    run = drive(run_start(agent=remote_agent(server), messages=f"{verb} disk on fire"))
    assert (run.status, run.status_reason) == ("done", "error")
    assert run.error_payload == {"message": "disk on fire"}
    assert run.termination_reason == {"type": "error", "value": "disk on fire"}
    assert event_types(run) == ["run_start", "step_start", "step_end", "run_finish"]
    assert events(run, "run_finish")[0]["result"]["status"] == "failed"
    # the remote agent answered: the endpoint itself is fine
    assert RemoteEndpoint.objects.get(slug="remote").health == "healthy"


def _following_its_task(recorder: Any) -> bool:
    """The client got the task back from its send and follows it (subscribe or get): it
    knows what to cancel."""
    return any(path.startswith("/tasks/") for path in recorder.paths) or (
        recorder.paths.count("/rpc") >= 2  # JSON-RPC: the send, then the follow
    )


def _advance_in_thread(run: Run) -> threading.Thread:
    worker = threading.Thread(
        target=lambda: (run_advance(run_id=run.pk, worker="w1"), connection.close())
    )
    worker.start()
    return worker


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_run_aborts_the_remote_task_within_a_second(server, allow_private):
    run = run_start(agent=remote_agent(server), messages="slow")
    worker = _advance_in_thread(run)
    assert server.wait_for(lambda r: r.prompts), "the remote task never started"
    assert server.wait_for(_following_its_task), "the client never followed the task"
    asked = time.monotonic()
    run_cancel(run=run)
    worker.join(timeout=10)
    elapsed = time.monotonic() - asked
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    assert elapsed < 1.5, elapsed
    task_id = server.recorder.prompts[0][0]
    assert server.recorder.cancelled == [task_id]
    assert remote_state(run)["last_state"] == "canceled"
    assert event_types(run) == ["run_start", "step_start", "step_end", "run_finish"]
    assert events(run, "run_finish")[0]["termination"] == {"type": "cancelled"}
    assert_gap_free(run)


@pytest.mark.django_db
def test_cancelling_a_waiting_remote_run_aborts_its_task(
    server, allow_private, django_capture_on_commit_callbacks, monkeypatch
):
    from runs import tasks

    run = drive(run_start(agent=remote_agent(server), messages="ask Which account?"))
    assert run.status == "waiting"
    task_id = remote_state(run)["task_id"]
    enqueued: list[str] = []
    monkeypatch.setattr(tasks.abort_remote, "delay", enqueued.append)
    with django_capture_on_commit_callbacks(execute=True):
        run_cancel(run=run)
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")
    # the cancelling request only enqueues the abort; a worker runs it
    assert enqueued == [str(run.pk)] and server.recorder.cancelled == []
    tasks.abort_remote(enqueued[0])
    assert server.wait_for(lambda r: r.cancelled == [task_id])
    assert Ticket.objects.get(run=run).status == "cancelled"


class WorkerKilled(BaseException):
    """Stands for the worker process dying: nothing after it runs in that segment."""


@pytest.mark.django_db
def test_a_worker_killed_while_the_remote_task_runs_is_replaced_without_a_second_send(
    server, allow_private, monkeypatch
):
    run = run_start(agent=remote_agent(server), messages="wait 0.5 all done")
    claimed = run_claim(run_id=run.pk, worker="doomed")
    real_checkpoint = OrmCheckpointStore.checkpoint
    writes: list[bool] = []

    def dies_before_the_final_checkpoint(store, checkpoint):  # type: ignore[no-untyped-def]
        if writes:  # the first write records the sent task; the worker dies before the next
            raise WorkerKilled
        writes.append(True)
        real_checkpoint(store, checkpoint)

    with monkeypatch.context() as patched:
        patched.setattr(OrmCheckpointStore, "checkpoint", dies_before_the_final_checkpoint)
        with pytest.raises(WorkerKilled):
            run_execute(run=claimed, worker="doomed")
    run.refresh_from_db()
    assert run.status == "running" and remote_state(run)["awaiting"] is True
    sent_task = remote_state(run)["task_id"]

    expire_lease(run)
    assert runs_sweep()["recovered"] == 1
    run = drive(run)
    assert (run.status_reason, run.final_output) == ("natural", "all done")
    assert server.recorder.prompts == [(sent_task, "wait 0.5 all done")]  # sent once
    assert "awaiting" not in remote_state(run)
    assert_gap_free(run)
    assert Message.objects.filter(thread=run.thread).count() == 2


@pytest.mark.django_db
def test_a_worker_killed_before_recording_the_sent_task_resends_under_the_same_message_id(
    server, allow_private, monkeypatch
):
    run = run_start(agent=remote_agent(server), messages="wait 0.3 all done")
    claimed = run_claim(run_id=run.pk, worker="doomed")

    def dies_at_the_first_checkpoint(store, checkpoint):  # type: ignore[no-untyped-def]
        raise WorkerKilled  # the task was sent; nothing of it is recorded

    with monkeypatch.context() as patched:
        patched.setattr(OrmCheckpointStore, "checkpoint", dies_at_the_first_checkpoint)
        with pytest.raises(WorkerKilled):
            run_execute(run=claimed, worker="doomed")
    assert server.wait_for(lambda r: len(r.prompts) == 1)
    expire_lease(run)
    assert runs_sweep()["recovered"] == 1
    run = drive(run)

    assert (run.status_reason, run.final_output) == ("natural", "all done")
    # at-least-once: the message went twice, but as one message a remote can deduplicate
    assert [text for _, text in server.recorder.prompts] == ["wait 0.3 all done"] * 2
    first, second = server.recorder.message_ids
    assert first == second
    assert_gap_free(run)
    # the next exchange of the same run is a different message
    another = run_start(agent=run.agent, messages="reply again", thread=run.thread)
    drive(another)
    assert len(set(server.recorder.message_ids)) == 2


@pytest.mark.django_db
def test_a_remote_task_that_does_not_settle_in_time_ends_the_run_with_timeout(
    server, allow_private
):
    started = time.monotonic()
    run = drive(run_start(agent=remote_agent(server, timeout_ms=400), messages="slow"))
    assert time.monotonic() - started < 5
    assert (run.status, run.status_reason) == ("done", "timeout")
    assert run.termination_reason["type"] == "stopped"
    assert run.termination_reason["value"]["code"] == "timeout"
    assert events(run, "run_finish")[0]["result"]["status"] == "timeout"
    assert server.wait_for(lambda r: r.cancelled == [r.prompts[0][0]])
    assert run.is_failed


# --- capabilities and configuration ---------------------------------------------------------------


def _request(**kwargs: Any) -> BackendRootRunRequest:
    return BackendRootRunRequest(
        agent_id="remote-agent",
        messages=[],
        sink=NullEventSink(),
        resolver=None,  # type: ignore[arg-type]
        identity=RunIdentity(thread_id="t", run_id="r", agent_id="remote-agent"),
        **kwargs,
    )


def test_a_remote_agent_asked_for_features_it_lacks_gets_the_capability_error():
    backend = A2ABackend(a2a_validate({"base_url": "https://agents.example.com"}))
    decision = ToolCallResume("d1", ResumeDecisionAction.RESUME, {"approved": True})
    request = _request(
        decisions=[("call_1", decision)],
        overrides={"temperature": 0},
        frontend_tools=[ToolDescriptor("pick_color", "the browser picks")],
    )
    with pytest.raises(ExecutionBackendError) as caught:
        backend.execute_root(request)
    assert caught.value.message == (
        "agent 'remote-agent' backend does not support: decisions, overrides, frontend_tools"
    )
    with pytest.raises(ExecutionBackendError, match=r"does not support: decisions$"):
        backend.execute_root(_request(control=BackendControl(decisions_attached=True)))
    assert LocalBackend().capabilities().decisions  # the local backend takes all three


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ({"backend": "mcp", "base_url": "https://a.example"}, "cannot build backend 'mcp'"),
        ({"backend": " ", "base_url": "https://a.example"}, "backend must not be blank"),
        ({"base_url": ""}, "base_url must not be empty"),
        ({"base_url": "ftp://a.example"}, "must be an http(s) URL"),
        ({"base_url": "https://u:p@a.example"}, "must not contain credentials"),
        (
            {"base_url": "https://a.example", "auth": {"type": "basic", "token": "x"}},
            "auth type 'basic' is not supported (only 'bearer')",
        ),
        (
            {"base_url": "https://a.example", "auth": {"type": "bearer"}},
            "bearer auth requires a non-empty 'token'",
        ),
        (
            {"base_url": "https://a.example", "auth": {"type": "bearer", "token": "  "}},
            "bearer auth requires a non-empty 'token'",
        ),
        (
            {"base_url": "https://a.example", "options": {"poll_interval_ms": "fast"}},
            "'poll_interval_ms' must be a non-negative integer",
        ),
        (
            {"base_url": "https://a.example", "options": {"poll_interval_ms": True}},
            "'poll_interval_ms' must be a non-negative integer",
        ),
        (
            {"base_url": "https://a.example", "options": {"history_length": -1}},
            "'history_length' must be a non-negative integer",
        ),
        (
            {"base_url": "https://a.example", "options": {"return_immediately": "yes"}},
            "'return_immediately' must be a boolean",
        ),
        ({"base_url": "https://a.example", "timeout_ms": 0}, "timeout_ms must be a positive"),
        ({"base_url": "https://a.example", "target": "a/b"}, "single URL path segment"),
        (
            {"base_url": "https://a.example", "options": {"polling": 1}},
            "unknown A2A option(s) polling",
        ),
        (
            {"base_url": "https://a.example", "bearer_token": "x", "auth": {"type": "bearer"}},
            "cannot be mixed with canonical fields (auth)",
        ),
    ],
)
def test_a2a_config_validation_says_what_is_wrong(endpoint, message):
    with pytest.raises(A2AConfigError) as caught:
        a2a_validate(endpoint)
    assert message in str(caught.value)


def test_a2a_config_accepts_canonical_and_legacy_forms_and_hides_the_token():
    config = a2a_validate(
        {
            "backend": "a2a",
            "base_url": "https://agents.example.com/a2a/",
            "auth": {"type": "bearer", "token": TOKEN},
            "target": "billing",
            "timeout_ms": 1000,
            "options": {"poll_interval_ms": 20, "history_length": 5, "return_immediately": False},
        }
    )
    assert (config.base_url, config.target, config.timeout_ms) == (
        "https://agents.example.com/a2a",
        "billing",
        1000,
    )
    assert (config.poll_interval_ms, config.history_length, config.return_immediately) == (
        20,
        5,
        False,
    )
    assert TOKEN not in repr(config)
    legacy = a2a_validate(
        {
            "base_url": "https://a.example",
            "bearer_token": TOKEN,
            "agent_id": "x",
            "poll_interval_ms": 7,
        }
    )
    assert (legacy.token, legacy.target, legacy.poll_interval_ms) == (TOKEN, "x", 7)


@pytest.mark.django_db
def test_endpoint_config_errors_name_the_field_and_what_to_fix(allow_private):
    endpoint = RemoteEndpoint(
        slug="bad",
        name="Bad",
        backend="grpc",
        base_url="https://user:pw@agents.example.com",
        target="a b",
        timeout_ms=100,
        poll_interval_ms=500,
    )
    errors = endpoint_config_errors(endpoint)
    assert set(errors) == {"backend", "base_url", "target", "poll_interval_ms"}
    assert "only 'a2a'" in errors["backend"]
    assert "user:password" in errors["base_url"]
    assert "must not be longer than the timeout (100 ms)" in errors["poll_interval_ms"]


# --- the SSRF guard -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_loopback_endpoint_is_refused_at_save_time_unless_private_endpoints_are_allowed(
    server, settings
):
    endpoint = RemoteEndpoint(slug="local", name="Local", base_url=server.base_url)
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    errors = endpoint_config_errors(endpoint)
    assert "127.0.0.1 is loopback" in errors["base_url"]
    assert "AWAKEN_ENDPOINTS_ALLOW_PRIVATE" in errors["base_url"]
    for private in ("http://10.1.2.3", "http://169.254.169.254/latest", "http://[::1]:8080"):
        endpoint.base_url = private
        assert "non-public" in endpoint_config_errors(endpoint)["base_url"], private
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = True
    endpoint.base_url = server.base_url
    assert endpoint_config_errors(endpoint) == {}


@pytest.mark.django_db
def test_a_loopback_endpoint_is_refused_at_connect_time_too(server, settings):
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = True
    agent = remote_agent(server)  # saved while private endpoints were allowed
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    run = drive(run_start(agent=agent, messages="reply hi"))
    assert (run.status, run.status_reason) == ("done", "error")
    assert "refused to connect" in run.error_payload["message"]
    assert "127.0.0.1 is loopback" in run.error_payload["message"]
    assert server.recorder.paths == []  # nothing reached the server
    endpoint = RemoteEndpoint.objects.get(slug="remote")
    assert endpoint.health == "failing" and "loopback" in endpoint.health_error
    assert_gap_free(run)


@pytest.mark.django_db
def test_redirects_are_not_followed(server, allow_private):
    endpoint = make_endpoint(server, base_url=f"{server.base_url}/moved")
    result = endpoint_probe(endpoint)
    assert not result.ok and "302" in result.error
    run = drive(
        run_start(agent=AgentFactory(model=None, endpoint=endpoint, tools=[]), messages="reply x")
    )
    assert run.status_reason == "error" and "302" in run.error_payload["message"]
    assert all(path.startswith("/moved") for path in server.recorder.paths)


# --- health ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_health_check_fetches_the_agent_card_and_calls_its_transport(server, allow_private):
    endpoint = make_endpoint(server)
    result = endpoint_probe(endpoint)
    assert result.ok and result.card_name == "Scripted test agent"
    assert result.transport == f"HTTP+JSON at {server.base_url}"
    endpoint.refresh_from_db()
    assert (endpoint.health, endpoint.health_error) == ("healthy", "")
    assert endpoint.health_checked_at is not None
    card, probe = server.recorder.paths
    assert card == "/.well-known/agent-card.json"
    assert probe.startswith("/tasks/health-check-")  # a task that cannot exist: cheap
    assert server.recorder.prompts == []  # nothing was sent to the agent


@pytest.mark.django_db
def test_health_check_catches_a_refused_token_behind_a_public_card(server, allow_private):
    result = endpoint_probe(make_endpoint(server, token="wrong-token"))
    assert not result.ok
    assert f"the agent card offers HTTP+JSON at {server.base_url}" in result.error
    assert "HTTP Error 401" in result.error


@pytest.mark.django_db
def test_health_check_records_the_failure(server, allow_private):
    endpoint = make_endpoint(server, token="wrong-token")
    result = endpoint_probe(endpoint)
    assert not result.ok and "401" in result.error
    endpoint.refresh_from_db()
    assert endpoint.health == "failing" and "401" in endpoint.health_error
    server.stop()
    endpoint.set_token(TOKEN)
    endpoint.save()
    result = endpoint_probe(endpoint)
    assert not result.ok and result.error.startswith(f"A2A endpoint {server.base_url}")


@pytest.mark.django_db
def test_an_older_health_result_does_not_overwrite_a_newer_one(server, allow_private):
    endpoint = make_endpoint(server)
    now = timezone.now()
    assert endpoint_health_record(endpoint_id=endpoint.pk, ok=True, at=now)
    earlier = now - timezone.timedelta(seconds=5)
    assert not endpoint_health_record(endpoint_id=endpoint.pk, ok=False, error="x", at=earlier)
    endpoint.refresh_from_db()
    assert endpoint.health == "healthy"


@pytest.mark.django_db
def test_a_run_rejected_by_the_endpoint_fails_and_marks_the_endpoint_failing(server, allow_private):
    run = drive(run_start(agent=remote_agent(server, token="wrong-token"), messages="reply hi"))
    assert (run.status, run.status_reason) == ("done", "error")
    assert "HTTP Error 401" in run.error_payload["message"]
    endpoint = RemoteEndpoint.objects.get(slug="remote")
    assert endpoint.health == "failing" and "401" in endpoint.health_error


# --- the transport: negotiated from the agent card --------------------------------------------------


def _served_paths(server: A2AServer) -> set[str]:
    return {path for path in server.recorder.paths if path != "/.well-known/agent-card.json"}


@pytest.mark.django_db
@pytest.mark.parametrize("binding", [JSONRPC, REST])
def test_runs_and_health_checks_speak_the_binding_the_agent_card_offers(binding, allow_private):
    server = A2AServer(token=TOKEN, bindings=(binding,)).start()
    try:
        endpoint = make_endpoint(server)
        result = endpoint_probe(endpoint)
        assert result.ok, result.error
        probed = _served_paths(server)  # one cheap call over the chosen binding

        agent = AgentFactory(slug="remote-agent", model=None, endpoint=endpoint, tools=[])
        run = drive(run_start(agent=agent, messages="reply over the agreed binding"))
        assert (run.status, run.status_reason) == ("done", "natural"), run.error_payload
        assert run.final_output == "over the agreed binding"
        assert event_types(run) == LIFECYCLE

        assert result.transport == f"{binding} at {interface_url(server.base_url, binding)}"
        assert f"over {binding}" in result.summary
        if binding == JSONRPC:
            assert probed == {"/rpc"}
        else:
            (probe,) = probed
            assert probe.startswith("/tasks/health-check-")

        # a question and its answer continue the same remote task over the same binding
        run = drive(run_start(agent=agent, messages="ask Which binding?"))
        assert (run.status, run.status_reason) == ("waiting", "input_required")
        task_id = remote_state(run)["task_id"]
        decision_submit(ticket=Ticket.objects.get(run=run), action="respond", payload=binding)
        run = drive(run)
        assert (run.status_reason, run.final_output) == ("natural", f"Thanks: {binding}")
        assert server.recorder.followups == [(task_id, binding)]
        endpoint.refresh_from_db()
        assert endpoint.health == "healthy"
        paths = _served_paths(server)
        if binding == JSONRPC:
            assert paths == {"/rpc"}  # everything went to the card's JSON-RPC URL
        else:
            assert "/message:send" in paths and "/rpc" not in paths
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_run_cancels_the_remote_task_over_json_rpc(allow_private):
    server = A2AServer(token=TOKEN, bindings=(JSONRPC,)).start()
    try:
        run = run_start(agent=remote_agent(server), messages="slow")
        worker = _advance_in_thread(run)
        assert server.wait_for(lambda r: r.prompts), "the remote task never started"
        assert server.wait_for(_following_its_task), "the client never followed the task"
        run_cancel(run=run)
        worker.join(timeout=10)
        run.refresh_from_db()
        assert (run.status, run.status_reason) == ("done", "cancelled")
        assert server.recorder.cancelled == [server.recorder.prompts[0][0]]
        assert _served_paths(server) == {"/rpc"}
    finally:
        server.stop()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("bindings", "used", "unused"),
    [((JSONRPC, REST), "/rpc", "/message:send"), ((REST, JSONRPC), "/message:send", "/rpc")],
)
def test_the_remote_agents_preferred_binding_wins(bindings, used, unused, allow_private):
    server = A2AServer(token=TOKEN, bindings=bindings).start()
    try:
        result = endpoint_probe(make_endpoint(server))
        run = drive(run_start(agent=remote_agent(server, slug="other"), messages="reply hi"))
        assert run.final_output == "hi", run.error_payload
        assert used in server.recorder.paths and unused not in server.recorder.paths
        assert result.ok and result.transport.startswith(f"{bindings[0]} at ")
    finally:
        server.stop()


@pytest.mark.django_db
def test_a_protocol_0_3_card_is_read_through_preferred_transport_and_additional_interfaces(
    allow_private,
):
    """An older agent names its preferred transport (here gRPC, which this client does not
    speak) and lists the others under additionalInterfaces: the JSON-RPC one is used."""
    interfaces = [
        AgentInterface(protocol_binding="GRPC", url="127.0.0.1:50051", protocol_version="1.0"),
        AgentInterface(protocol_binding=JSONRPC, url="{base_url}/rpc", protocol_version="1.0"),
    ]
    server = A2AServer(token=TOKEN, bindings=(JSONRPC,), legacy_card=True, interfaces=interfaces)
    server.start()
    try:
        result = endpoint_probe(make_endpoint(server))
        assert result.ok, result.error
        run = drive(run_start(agent=remote_agent(server, slug="old"), messages="reply legacy"))
        assert (run.status_reason, run.final_output) == ("natural", "legacy"), run.error_payload
        assert result.transport == f"JSONRPC at {server.base_url}/rpc"
    finally:
        server.stop()


@pytest.mark.django_db
def test_a_card_offering_no_binding_we_speak_is_unhealthy_and_runs_fail_saying_why(
    allow_private,
):
    grpc = AgentInterface(protocol_binding="GRPC", url="127.0.0.1:50051", protocol_version="1.0")
    server = A2AServer(token=TOKEN, interfaces=[grpc]).start()  # it speaks REST, says gRPC
    try:
        endpoint = make_endpoint(server)
        result = endpoint_probe(endpoint)
        assert not result.ok
        assert "offers no transport this client speaks" in result.error
        assert "GRPC at 127.0.0.1:50051" in result.error and "JSONRPC, HTTP+JSON" in result.error
        endpoint.refresh_from_db()
        assert endpoint.health == "failing" and "GRPC" in endpoint.health_error

        agent = AgentFactory(slug="remote-agent", model=None, endpoint=endpoint, tools=[])
        run = drive(run_start(agent=agent, messages="reply hi"))
        assert (run.status, run.status_reason) == ("done", "error")
        assert "offers no transport this client speaks" in run.error_payload["message"]
        assert _served_paths(server) == set()  # nothing but the card was asked for
    finally:
        server.stop()


@pytest.mark.django_db
def test_the_health_check_fails_when_the_offered_interface_does_not_answer_its_binding(
    allow_private,
):
    """The card claims JSON-RPC at the base URL, where only REST is served: fetching the
    card alone would call this healthy, and then every run would fail."""
    wrong = AgentInterface(protocol_binding=JSONRPC, url="{base_url}", protocol_version="1.0")
    server = A2AServer(token=TOKEN, interfaces=[wrong]).start()
    try:
        result = endpoint_probe(make_endpoint(server))
        assert not result.ok
        assert f"offers JSONRPC at {server.base_url}" in result.error
        assert "nothing there answers JSONRPC" in result.error and "404" in result.error
    finally:
        server.stop()


# --- admin, API, and the token never leaking ------------------------------------------------------


def _admin_form(server: A2AServer, **overrides: Any) -> dict[str, Any]:
    form = {
        "slug": "remote",
        "name": "Remote agent",
        "backend": "a2a",
        "base_url": server.base_url,
        "target": "",
        "timeout_ms": 5000,
        "poll_interval_ms": 50,
        "history_length": "",
        "token": "",
    }
    form.update(overrides)
    return form


@pytest.mark.django_db
def test_the_admin_validates_an_endpoint_and_says_what_to_fix(server, root_client, settings):
    url = reverse("admin:agents_remoteendpoint_add")
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = False
    response = root_client.post(url, _admin_form(server, token=TOKEN))
    assert response.status_code == 200
    page = response.content.decode()
    assert "127.0.0.1 is loopback" in page and "AWAKEN_ENDPOINTS_ALLOW_PRIVATE=1" in page
    assert TOKEN not in page  # a rejected form does not echo the token back
    settings.AWAKEN_ENDPOINTS_ALLOW_PRIVATE = True
    response = root_client.post(
        url, _admin_form(server, token=TOKEN, clear_token="on", target="a/b", poll_interval_ms=9000)
    )
    page = response.content.decode()
    assert "Either enter a new token or remove it, not both." in page
    response = root_client.post(url, _admin_form(server, target="a/b", poll_interval_ms=9000))
    page = response.content.decode()
    assert "one URL path segment" in page
    assert "must not be longer than the timeout (5000 ms)" in page
    assert not RemoteEndpoint.objects.exists()


@pytest.mark.django_db
def test_the_admin_token_is_write_only_blank_keeps_it_and_the_checkbox_clears_it(
    server, root_client, allow_private
):
    response = root_client.post(
        reverse("admin:agents_remoteendpoint_add"), _admin_form(server, token=TOKEN)
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    endpoint = RemoteEndpoint.objects.get(slug="remote")
    assert endpoint.token() == TOKEN and TOKEN not in endpoint.token_encrypted
    change = reverse("admin:agents_remoteendpoint_change", args=[endpoint.pk])
    response = root_client.post(change, _admin_form(server, name="Renamed"))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.name, endpoint.token()) == ("Renamed", TOKEN)
    response = root_client.post(change, _admin_form(server, clear_token="on"))
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert not endpoint.has_token
    entries = list(AuditEntry.objects.filter(target_type="remoteendpoint").order_by("id"))
    assert [e.action for e in entries] == [
        "remoteendpoint.create",
        "remoteendpoint.update",
        "remoteendpoint.update",
    ]
    # the audit says whether a token is stored, never the token or its ciphertext
    assert entries[0].after["token_stored"] is True
    assert (entries[1].before["token_stored"], entries[1].after["token_stored"]) == (True, True)
    assert (entries[2].before["token_stored"], entries[2].after["token_stored"]) == (True, False)


@pytest.mark.django_db
def test_the_admin_checks_health_from_the_list_and_the_change_page(
    server, root_client, allow_private
):
    good = make_endpoint(server)
    bad = make_endpoint(server, slug="bad", token="wrong-token")
    changelist = reverse("admin:agents_remoteendpoint_changelist")
    response = root_client.post(
        changelist,
        {"action": "check_health", "_selected_action": [good.pk, bad.pk]},
        follow=True,
    )
    page = response.content.decode()
    assert "Remote: healthy — agent card &#x27;Scripted test agent&#x27;" in page
    assert "Bad: failing — A2A endpoint" in page and "401" in page
    good.refresh_from_db()
    bad.refresh_from_db()
    assert (good.health, bad.health) == ("healthy", "failing")
    change = reverse("admin:agents_remoteendpoint_change", args=[good.pk])
    assert "Check health" in root_client.get(change).content.decode()
    check = reverse("admin:agents_remoteendpoint_check_health", args=[good.pk])
    response = root_client.post(check, follow=True)
    assert "Remote: healthy" in response.content.decode()
    assert AuditEntry.objects.filter(action="remoteendpoint.check").count() == 3


@pytest.mark.django_db
def test_the_api_lists_endpoints_and_checks_health_without_the_token(server, allow_private):
    from tests.factories import bearer, token_for, user_with_role

    agent = remote_agent(server)
    admin_api = bearer(token_for(user_with_role("admin", "ada")))
    viewer_api = bearer(token_for(user_with_role("viewer", "vic")))
    listing = viewer_api.get("/api/v1/endpoints")
    assert listing.status_code == 200
    item = listing.json()["items"][0]
    assert (item["id"], item["has_token"], item["agents"]) == ("remote", True, [agent.slug])
    assert "token" not in item and "token_encrypted" not in item
    detail = viewer_api.get("/api/v1/endpoints/remote")
    assert detail.status_code == 200 and detail.json()["health"] == "unknown"
    assert viewer_api.post("/api/v1/endpoints/remote/check").status_code == 403
    missing = viewer_api.get("/api/v1/endpoints/nope")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    check = admin_api.post("/api/v1/endpoints/remote/check")
    assert check.status_code == 200, check.content
    body = check.json()
    assert (body["ok"], body["card_name"], body["endpoint"]["health"]) == (
        True,
        "Scripted test agent",
        "healthy",
    )
    for response in (listing, detail, check):
        assert TOKEN not in response.content.decode()


@pytest.mark.django_db
def test_the_bearer_token_never_reaches_pages_api_logs_events_state_or_audit(
    server, root_client, allow_private, caplog
):
    from django.contrib.admin.models import LogEntry

    from tests.factories import bearer, token_for, user_with_role

    caplog.set_level(logging.DEBUG)
    add = root_client.post(
        reverse("admin:agents_remoteendpoint_add"), _admin_form(server, token=TOKEN)
    )
    assert add.status_code == 302
    endpoint = RemoteEndpoint.objects.get(slug="remote")
    change = reverse("admin:agents_remoteendpoint_change", args=[endpoint.pk])
    assert root_client.post(change, _admin_form(server, token=TOKEN)).status_code == 302
    check = reverse("admin:agents_remoteendpoint_check_health", args=[endpoint.pk])
    root_client.post(check)
    agent = AgentFactory(slug="remote-agent", model=None, endpoint=endpoint, tools=[])
    run = drive(run_start(agent=agent, messages="ask Your name?"))
    decision_submit(ticket=Ticket.objects.get(run=run), action="respond", payload="Bob")
    run = drive(run)
    assert run.final_output == "Thanks: Bob"
    drive(run_start(agent=agent, messages="fail no luck"))
    api = bearer(token_for(user_with_role("admin", "ada")))

    bodies = [
        root_client.get(reverse("admin:agents_remoteendpoint_changelist")),
        root_client.get(change),
        root_client.get(reverse("admin:agents_remoteendpoint_history", args=[endpoint.pk])),
        root_client.get(reverse("admin:agents_agent_change", args=[agent.pk])),
        api.get("/api/v1/endpoints"),
        api.get("/api/v1/endpoints/remote"),
        api.post("/api/v1/endpoints/remote/check"),
        api.get(f"/api/v1/runs/{run.pk}"),
        api.get("/api/v1/agents"),
        api.get(f"/api/v1/agents/{agent.slug}"),
        api.get("/api/v1/tickets"),
        api.get(f"/api/v1/runs/{run.pk}/events"),
        api.get("/api/v1/audit"),
    ]
    for response in bodies:
        assert response.status_code == 200, (response.status_code, response.content[:300])
        assert TOKEN not in response.content.decode()
    stored = [
        *AuditEntry.objects.values_list("before", "after", "comment"),
        *RunEvent.objects.values_list("payload", flat=True),
        *Run.objects.values_list("state", "error_payload", "waiting", "request"),
        *Ticket.objects.values_list("arguments", "message"),
        *Message.objects.values_list("content", flat=True),
        *LogEntry.objects.values_list("change_message", "object_repr"),
        *RemoteEndpoint.objects.values_list("health_error", flat=True),
    ]
    assert AuditEntry.objects.filter(target_type="remoteendpoint").count() >= 3
    assert TOKEN not in repr(stored)
    # the test's A2A *server* runs in this process and logs what it received: not ours
    ours = "\n".join(
        f"{record.name} {record.getMessage()}"
        for record in caplog.records
        if not record.name.startswith(("a2a.server", "uvicorn", "sse_starlette"))
    )
    assert "a2a.client" in ours and "httpcore" in ours  # the client side did log, at DEBUG
    assert "Bearer" not in ours and TOKEN not in ours
    assert server.recorder.authorization.count(f"Bearer {TOKEN}") >= 4  # it was sent, though
