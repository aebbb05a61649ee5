"""Our agents served over A2A, in process: the stock a2a-sdk client over both bindings
through httpx's ASGI transport into the site's ASGI application; runs are driven by the
test (tests/integration/test_a2a_serving.py has the real daphne and worker)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import TaskState

from awaken_site.asgi import application
from common.models import AuditEntry
from runs.models import Decision, Run, Thread, Ticket
from runs.runtime.backends.a2a.mapping import payload_text
from tests.factories import (
    APPROVAL,
    AgentFactory,
    call,
    note_call,
    scripted_agent,
    token_for,
    user_with_role,
)
from tests.runs.a2a_client import JSONRPC, REFUSED, REST, A2AClient, message, run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db(transaction=True)
BASE = "http://testserver"


@pytest.fixture(params=[JSONRPC, REST])
def binding(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def client(slug: str, token: str | None, binding: str = JSONRPC) -> A2AClient:
    return A2AClient(BASE, slug, token=token, binding=binding, app=application)


@pytest.fixture
def operator_token() -> str:
    return token_for(user_with_role("operator", "a2a-operator"))


def the_run(task: Any) -> Run:
    return Run.objects.get(pk=task.id)


def get_json(path: str) -> httpx.Response:
    async def fetch() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            return await http.get(path)

    return run(fetch())


# --- cards ---------------------------------------------------------------------------------


def test_agent_card_lists_the_agent_its_tools_both_bindings_and_bearer_auth() -> None:
    agent = AgentFactory(slug="helper", name="Helper", description="Helps with notes.")
    card = run(client("helper", None).card())
    assert card.name == "Helper" and card.description == "Helps with notes."
    assert card.version == "1"
    assert [s.id for s in card.skills] == ["helper", "tool:calculator", "tool:write_note"]
    assert "note" in card.skills[2].description.lower()
    assert {(i.protocol_binding, i.url) for i in card.supported_interfaces} == {
        ("JSONRPC", f"{BASE}/a2a/helper/jsonrpc"),
        ("HTTP+JSON", f"{BASE}/a2a/helper"),
    }
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert "bearer" in card.security_requirements[0].schemes
    assert agent.slug == "helper"


def test_site_card_directory_and_what_is_not_served(settings: Any) -> None:
    AgentFactory(slug="beta")
    AgentFactory(slug="alpha")
    AgentFactory(slug="draft-only", published=False)
    assert get_json("/.well-known/agent-card.json").json()["name"] == "alpha"
    settings.AWAKEN_A2A_DEFAULT_AGENT = "beta"
    assert get_json("/.well-known/agent-card.json").json()["name"] == "beta"
    listed = get_json("/a2a/").json()["agents"]
    assert [a["slug"] for a in listed] == ["alpha", "beta"]
    assert listed[0]["card"] == f"{BASE}/a2a/alpha/.well-known/agent-card.json"
    missing = get_json("/a2a/draft-only/.well-known/agent-card.json")
    assert missing.status_code == 404 and "draft-only" in missing.json()["error"]["message"]
    settings.AWAKEN_A2A_SERVE = ["beta"]
    assert get_json("/a2a/alpha/.well-known/agent-card.json").status_code == 404
    assert get_json("/a2a/beta/.well-known/agent-card.json").status_code == 200


def test_cards_need_a_token_when_not_public(settings: Any, operator_token: str) -> None:
    AgentFactory(slug="private")
    settings.AWAKEN_A2A_PUBLIC_CARDS = False
    assert get_json("/a2a/private/.well-known/agent-card.json").status_code == 401
    assert run(client("private", operator_token).card()).name == "private"


def test_unknown_host_is_refused() -> None:
    AgentFactory(slug="hosted")

    async def fetch() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as h:
            return await h.get("/a2a/hosted/.well-known/agent-card.json")

    assert run(fetch()).status_code == 400


# --- authentication and roles ----------------------------------------------------------------


def test_calls_without_a_valid_token_are_refused(binding: str) -> None:
    AgentFactory(slug="guarded")
    for token in (None, "awk_nope_nope"):
        with pytest.raises(REFUSED) as refused:
            run(client("guarded", token, binding).send(message("hi"), wait=False))
        assert "401" in str(refused.value)
    assert not Run.objects.exists()


def test_a_viewer_reads_tasks_but_cannot_start_answer_or_cancel(
    binding: str, operator_token: str
) -> None:
    AgentFactory(slug="watched")
    viewer = client("watched", token_for(user_with_role("viewer", "a2a-viewer")), binding)
    with pytest.raises(REFUSED, match=r"permission denied.*runs\.start_run"):
        run(viewer.send(message("hi"), wait=False))
    assert not Run.objects.exists()
    task = run(client("watched", operator_token, binding).send(message("hi"), wait=False))
    assert run(viewer.get(task.id)).id == task.id
    with pytest.raises(REFUSED, match=r"permission denied.*runs\.cancel_run"):
        run(viewer.cancel(task.id))
    assert the_run(task).status == Run.Status.CREATED


# --- running -------------------------------------------------------------------------------------


def test_a_message_starts_a_run_whose_task_completes_with_the_answer(
    binding: str, operator_token: str
) -> None:
    scripted_agent([{"text": "4, the sum"}], slug="adder")
    a2a = client("adder", operator_token, binding)
    task = run(a2a.send(message("what is 2+2?"), wait=False))
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    record = the_run(task)
    assert task.context_id == str(record.thread_id)
    drive(record)
    done = run(a2a.get(task.id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in done.artifacts[0].parts] == ["4, the sum"]
    assert [(m.role, m.parts[0].text) for m in done.history] == [
        (1, "what is 2+2?"),
        (2, "4, the sum"),
    ]
    assert done.metadata["run_id"] == task.id
    started = AuditEntry.objects.get(action="run.start", target_id=task.id)
    assert (started.source, started.actor_label) == ("a2a", "a2a-operator (token test)")
    assert run(a2a.get(task.id, history_length=0)).history == []
    # the same context continues the conversation in a new run of the same thread
    again = run(a2a.send(message("and 3+3?", context_id=task.context_id), wait=False))
    assert again.id != task.id and again.context_id == task.context_id
    assert the_run(again).thread_id == record.thread_id
    listed = run(a2a.list(context_id=task.context_id))
    assert [t.id for t in listed.tasks] == [again.id, task.id] and listed.total_size == 2


def test_a_repeated_message_id_is_the_same_task(operator_token: str) -> None:
    AgentFactory(slug="retry")
    a2a = client("retry", operator_token)
    first = run(a2a.send(message("hi", message_id="m-1"), wait=False))
    second = run(a2a.send(message("hi", message_id="m-1"), wait=False))
    assert first.id == second.id and Run.objects.count() == 1


def test_bad_input_gets_a_clear_error_and_changes_nothing(
    binding: str, operator_token: str
) -> None:
    AgentFactory(slug="strict")
    other = AgentFactory(slug="other")
    a2a = client("strict", operator_token, binding)
    cases = [
        (message("hi", context_id="not-a-uuid"), "unknown contextId"),
        (message("hi", task_id="0190f7a0-0000-7000-8000-000000000000"), "not found"),
        (message(data={"x": 1}), "needs text"),
    ]
    for msg, error in cases:
        with pytest.raises(REFUSED, match=error):
            run(a2a.send(msg, wait=False))
    foreign = run(client("other", operator_token, binding).send(message("hi"), wait=False))
    with pytest.raises(REFUSED, match="not found"):
        run(a2a.get(foreign.id))
    with pytest.raises(REFUSED, match="not a conversation with this agent"):
        run(a2a.send(message("hi", context_id=foreign.context_id), wait=False))
    with pytest.raises(REFUSED, match="open task"):
        run(
            client("other", operator_token, binding).send(
                message("again", context_id=foreign.context_id), wait=False
            )
        )
    assert Run.objects.count() == 1 and Run.objects.get().agent == other


def test_a_ticket_is_input_required_and_an_answer_continues_the_run(
    binding: str, operator_token: str
) -> None:
    scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("lunch")]}, {"text": "noted"}],
        slug="noter",
        permission=APPROVAL,
    )
    a2a = client("noter", operator_token, binding)
    task = run(a2a.send(message("write it down"), wait=False))
    drive(the_run(task))
    waiting = run(a2a.get(task.id))
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    asked = waiting.status.message
    assert "Approve write_note" in asked.parts[0].text
    ticket = Ticket.objects.get(run_id=task.id)
    assert asked.parts[1].data.struct_value["ticket_id"] == ticket.ticket_id
    with pytest.raises(REFUSED, match="reply 'approve'"):
        run(a2a.send(message("maybe later", task_id=task.id), wait=False))
    answered = run(a2a.send(message("approve looks fine", task_id=task.id), wait=False))
    assert answered.id == task.id
    assert answered.status.state == TaskState.TASK_STATE_WORKING
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.comment) == ("approve", "looks fine")
    assert "(token test)" in decision.actor_label
    drive(the_run(task))
    assert run(a2a.get(task.id)).status.state == TaskState.TASK_STATE_COMPLETED
    with pytest.raises(REFUSED, match="has ended"):
        run(a2a.send(message("approve", task_id=task.id), wait=False))


def test_a_rejection_with_a_data_part_and_an_answer_to_a_question(operator_token: str) -> None:
    scripted_agent(
        [{"text": "noting", "tool_calls": [note_call("x")]}, {"text": "not noted"}],
        slug="rejected",
        permission=APPROVAL,
    )
    a2a = client("rejected", operator_token, REST)
    task = run(a2a.send(message("note x"), wait=False))
    drive(the_run(task))
    run(a2a.send(message(task_id=task.id, data={"action": "reject", "comment": "no"}), wait=False))
    assert Decision.objects.get(ticket__run_id=task.id).action == "reject"

    scripted_agent(
        [
            {"text": "asking", "tool_calls": [call("ask_human", {"question": "Which city?"})]},
            {"text": "Paris it is"},
        ],
        slug="asker",
        tools=["ask_human"],
    )
    asker = client("asker", operator_token, REST)
    task = run(asker.send(message("plan a trip"), wait=False))
    drive(the_run(task))
    asked = run(asker.get(task.id))
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.message.parts[0].text == "Which city?"
    run(asker.send(message("Paris", task_id=task.id), wait=False))
    decision = Decision.objects.get(ticket__run_id=task.id)
    assert decision.action == "respond" and payload_text(decision.payload) == "Paris"


def test_cancel_maps_to_the_run(binding: str, operator_token: str) -> None:
    AgentFactory(slug="stoppable")
    a2a = client("stoppable", operator_token, binding)
    task = run(a2a.send(message("hi"), wait=False))
    cancelled = run(a2a.cancel(task.id))
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    record = the_run(task)
    assert (record.status, record.status_reason) == (Run.Status.DONE, "cancelled")
    with pytest.raises(REFUSED, match="already ended"):
        run(a2a.cancel(task.id))
    assert Thread.objects.count() == 1


def test_hostile_messages_are_refused_with_a_reason(binding: str, operator_token: str) -> None:
    AgentFactory(slug="hardened")
    a2a = client("hardened", operator_token, binding)
    cases = [
        (message("nul \x00 inside"), "NUL"),
        (message("fine", message_id="id-\x00"), "NUL"),
        (message("x" * 32_001), "at most 32,000 are allowed"),
    ]
    for msg, reason in cases:
        with pytest.raises(REFUSED, match=reason):
            run(a2a.send(msg, wait=False))
    assert not Run.objects.exists() and not Thread.objects.exists()


def test_calls_share_the_api_tokens_throttle(settings: Any, operator_token: str) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"api_token": "2/min"},
    }
    AgentFactory(slug="busy")
    a2a = client("busy", operator_token, REST)
    task = run(a2a.send(message("hi"), wait=False))
    run(a2a.get(task.id))
    with pytest.raises(REFUSED, match="429"):
        run(a2a.get(task.id))
    assert run(client("busy", token_for(user_with_role("operator", "other")), REST).get(task.id))
