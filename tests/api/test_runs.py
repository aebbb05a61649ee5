"""Runs over the API: start, list with filters and cursor, get the RunRecord, cancel,
retry, events pages, idempotency; each response conforms to the OpenAPI schema."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from common.models import AuditEntry
from runs.models import Run, Thread
from runs.services.submission_flow import run_start
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import (
    AgentFactory,
    bearer,
    done_run,
    scripted_agent,
    token_for,
    user_with_role,
    waiting_run,
)
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

RUNS = "/api/v1/runs"


def start_body(agent, text="hello", **extra):
    return {"agent_id": agent.slug, "messages": [{"role": "user", "content": text}], **extra}


def test_start_a_run_returns_201_and_the_run_record(operator_api, operator_user):
    agent = scripted_agent([{"text": "hi there"}])
    response = conforms(operator_api.post(RUNS, start_body(agent), format="json"), "POST", RUNS)
    assert response.status_code == 201
    body = response.json()
    run = Run.objects.get(pk=body["run_id"])
    assert body["status"] == "created" and body["agent_id"] == agent.slug
    assert body["input"]["range"] == {"from_seq": 1, "to_seq": 1}
    assert body["request"]["sender_id"] == "olga (token ops)"
    assert response["X-Request-ID"]
    entry = AuditEntry.objects.get(action="run.start")
    assert (entry.actor, entry.actor_label, entry.source) == (
        operator_user,
        "olga (token ops)",
        "api",
    )
    assert entry.request_id == response["X-Request-ID"]

    drive(run)
    record = conforms(operator_api.get(f"{RUNS}/{run.pk}"), "GET", RUNS + "/{run_id}").json()
    assert record["status"] == "done" and record["status_reason"] == "natural"
    assert record["termination_reason"] == {"type": "natural_end"}
    assert record["final_output"] == "hi there"
    assert record["output"]["range"] == {"from_seq": 2, "to_seq": 2}
    assert record["waiting"] is None and record["last_event_seq"] == run.last_event_seq


def test_request_id_header_is_recorded(operator_api):
    agent = scripted_agent([{"text": "x"}])
    response = operator_api.post(RUNS, start_body(agent), format="json", HTTP_X_REQUEST_ID="req-42")
    assert response["X-Request-ID"] == "req-42"
    assert AuditEntry.objects.get(action="run.start").request_id == "req-42"


def test_start_accepts_text_blocks_and_an_existing_thread(operator_api):
    first = done_run()
    body = {
        "agent_id": first.agent.slug,
        "thread_id": str(first.thread_id),
        "messages": [{"role": "user", "content": [{"type": "text", "text": "again"}]}],
    }
    response = operator_api.post(RUNS, body, format="json")
    assert response.status_code == 201
    assert response.json()["thread_id"] == str(first.thread_id)
    assert response.json()["input"]["range"] == {"from_seq": 1, "to_seq": 3}


def test_waiting_run_record_has_its_tickets(operator_api):
    run = waiting_run()
    record = conforms(operator_api.get(f"{RUNS}/{run.pk}"), "GET", RUNS + "/{run_id}").json()
    assert record["status"] == "waiting" and record["waiting_reason"] == "tool_permission"
    waiting = record["waiting"]
    assert waiting["reason"] == "tool_permission"
    [ticket] = waiting["tickets"]
    assert ticket["ticket_id"] == waiting["ticket_ids"][0]
    assert ticket["tool_name"] == "write_note" and ticket["status"] == "pending"
    assert ticket["arguments"] == {"title": "lunch", "body": "b"}
    assert ticket["resume_mode"] == "replay_tool_call"


def test_idempotency_key_returns_the_same_run_with_200(operator_api):
    agent = scripted_agent([{"text": "x"}])
    first = operator_api.post(RUNS, start_body(agent, idempotency_key="k-1"), format="json")
    again = operator_api.post(
        RUNS, start_body(agent, "other text", idempotency_key="k-1"), format="json"
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["run_id"] == again.json()["run_id"]
    assert Run.objects.count() == 1
    header = operator_api.post(RUNS, start_body(agent), format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    header_again = operator_api.post(
        RUNS, start_body(agent), format="json", HTTP_IDEMPOTENCY_KEY="k-2"
    )
    assert (header.status_code, header_again.status_code) == (201, 200)
    assert header.json()["run_id"] == header_again.json()["run_id"]


def test_idempotency_keys_are_per_submitter(operator_api, operator_user):
    agent = scripted_agent([{"text": "x"}])
    other = bearer(token_for(user_with_role("operator", "other-operator"), "theirs"))
    second_token = bearer(token_for(operator_user, "ops-2"))

    mine = operator_api.post(RUNS, start_body(agent, idempotency_key="order-1"), format="json")
    theirs = other.post(RUNS, start_body(agent, idempotency_key="order-1"), format="json")
    # the same user through another of their tokens is the same submitter
    mine_again = second_token.post(
        RUNS, start_body(agent, idempotency_key="order-1"), format="json"
    )

    assert (mine.status_code, theirs.status_code, mine_again.status_code) == (201, 201, 200)
    assert mine.json()["run_id"] != theirs.json()["run_id"]
    assert mine_again.json()["run_id"] == mine.json()["run_id"]
    assert Run.objects.count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_repeats_of_one_key_start_one_run():
    agent = scripted_agent([{"text": "x"}])
    raw = token_for(user_with_role("operator"), "ops")
    barrier = threading.Barrier(8)
    responses: list[tuple[int, str]] = []
    lock = threading.Lock()

    def post() -> None:
        try:
            barrier.wait()
            response = bearer(raw).post(
                RUNS, start_body(agent, idempotency_key="pay-7"), format="json"
            )
            with lock:
                responses.append((response.status_code, response.json().get("run_id", "")))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert Run.objects.count() == 1
    run_id = str(Run.objects.get().pk)
    assert sorted(code for code, _ in responses) == [200] * 7 + [201]
    assert {found for _, found in responses} == {run_id}


def test_a_message_to_a_waiting_thread_continues_the_same_run_with_200(operator_api):
    run = waiting_run()
    body = start_body(run.agent, "never mind", thread_id=str(run.thread_id))
    response = operator_api.post(RUNS, body, format="json")
    assert response.status_code == 200
    assert response.json()["run_id"] == str(run.pk)


def test_list_runs_with_filters_and_cursor(operator_api):
    waiting = waiting_run()
    finished = [done_run(f"text {i}") for i in range(3)]
    page = conforms(operator_api.get(RUNS, {"limit": 2}), "GET", RUNS).json()
    assert [r["run_id"] for r in page["items"]] == [str(finished[2].pk), str(finished[1].pk)]
    more = operator_api.get(RUNS, {"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [r["run_id"] for r in more["items"]] == [str(finished[0].pk), str(waiting.pk)]
    assert more["next_cursor"] is None

    def ids(**params):
        response = conforms(operator_api.get(RUNS, params), "GET", RUNS)
        assert response.status_code == 200, response.content
        return {r["run_id"] for r in response.json()["items"]}

    assert ids(status="waiting") == {str(waiting.pk)}
    assert ids(waiting_reason="tool_permission") == {str(waiting.pk)}
    assert ids(waiting_reason="user_input") == set()
    assert ids(agent_id=waiting.agent.slug) == {str(waiting.pk)}
    assert ids(thread_id=str(finished[0].thread_id)) == {str(finished[0].pk)}
    assert ids(q="write it down") == {str(waiting.pk)}
    assert ids(q=str(finished[1].pk)) == {str(finished[1].pk)}
    assert len(ids(created_after="2000-01-01T00:00:00Z")) == 4
    assert ids(created_before="2000-01-01T00:00:00Z") == set()
    assert ids(reason="suspended") == {str(waiting.pk)}
    assert ids(reason="natural") == {str(run.pk) for run in finished}
    assert ids(endpoint="nowhere") == set()
    assert ids(provider="nobody", status="waiting") == set()
    item = operator_api.get(RUNS, {"status": "waiting"}).json()["items"][0]
    assert item["open_tickets"] == 1 and item["waiting_reason"] == "tool_permission"


@pytest.mark.parametrize(
    "params, field",
    [
        ({"status": "sleeping"}, "status"),
        ({"waiting_reason": "bored"}, "waiting_reason"),
        ({"limit": 0}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"thread_id": "not-a-uuid"}, "thread_id"),
        ({"cursor": "garbage"}, "cursor"),
    ],
)
def test_list_runs_rejects_bad_query_params(operator_api, params, field):
    error = assert_error(conforms(operator_api.get(RUNS, params), "GET", RUNS), 400, "invalid")
    assert field in error["details"]


def test_cancel_a_waiting_run_then_409_when_done(operator_api):
    run = waiting_run()
    path = f"{RUNS}/{run.pk}/cancel"
    response = conforms(operator_api.post(path), "POST", RUNS + "/{run_id}/cancel")
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["status_reason"]) == ("done", "cancelled")
    assert body["termination_reason"] == {"type": "cancelled"}
    assert body["waiting"] is None
    again = conforms(operator_api.post(path), "POST", RUNS + "/{run_id}/cancel")
    error = assert_error(again, 409, "conflict")
    assert "already finished" in error["message"]
    assert error["details"]["status"] == "done"
    assert AuditEntry.objects.filter(action="run.cancel", source="api").count() == 1


def test_retry_a_failed_run_then_409_for_one_that_did_not_fail(operator_api):
    agent = scripted_agent([{"error": "flaky"}])
    failed = drive(run_start(agent=agent, messages="go"))
    assert failed.status_reason == "error"
    record = operator_api.get(f"{RUNS}/{failed.pk}").json()
    assert record["termination_reason"] == {"type": "error", "value": "flaky"}
    assert record["error_payload"] == {"message": "flaky"}
    response = conforms(
        operator_api.post(f"{RUNS}/{failed.pk}/retry"), "POST", RUNS + "/{run_id}/retry"
    )
    assert response.status_code == 201
    retry = response.json()
    assert retry["retry_of"] == str(failed.pk) and retry["status"] == "created"
    assert retry["thread_id"] == str(failed.thread_id)
    ok = done_run()
    assert_error(operator_api.post(f"{RUNS}/{ok.pk}/retry"), 409, "conflict")


def test_events_pages_after_seq(operator_api):
    run = done_run()
    path = f"{RUNS}/{run.pk}/events"
    page = conforms(operator_api.get(path, {"limit": 3}), "GET", RUNS + "/{run_id}/events").json()
    assert [e["seq"] for e in page["items"]] == [1, 2, 3]
    assert page["items"][0]["event_type"] == "run_start"
    assert page["items"][0]["run_id"] == str(run.pk) and page["items"][0]["created_at"]
    assert page["next_after_seq"] == 3 and page["has_more"] is True
    rest = operator_api.get(path, {"after_seq": page["next_after_seq"], "limit": 100}).json()
    assert [e["seq"] for e in rest["items"]] == list(range(4, run.last_event_seq + 1))
    assert rest["items"][-1]["event_type"] == "run_finish"
    assert rest["has_more"] is False
    empty = operator_api.get(path, {"after_seq": run.last_event_seq}).json()
    assert empty == {"items": [], "next_after_seq": run.last_event_seq, "has_more": False}
    assert_error(operator_api.get(path, {"after_seq": -1}), 400, "invalid")


@pytest.mark.parametrize(
    "suffix, method",
    [
        ("", "get"),
        ("/cancel", "post"),
        ("/retry", "post"),
        ("/events", "get"),
        ("/decisions", "post"),
    ],
)
def test_unknown_run_is_404(operator_api, suffix, method):
    for run_id in ["0190e7a0-0000-7000-8000-000000000000", "not-a-uuid"]:
        response = getattr(operator_api, method)(f"{RUNS}/{run_id}{suffix}", {}, format="json")
        assert_error(response, 404, "not_found")


def test_start_with_unknown_agent_or_thread_is_404(operator_api):
    agent = AgentFactory()
    error = assert_error(
        operator_api.post(RUNS, start_body(agent, agent_id="ghost"), format="json"),
        404,
        "not_found",
    )
    assert "ghost" in error["message"]
    body = start_body(agent, thread_id="0190e7a0-0000-7000-8000-000000000000")
    assert_error(operator_api.post(RUNS, body, format="json"), 404, "not_found")
    assert not Thread.objects.exists()
