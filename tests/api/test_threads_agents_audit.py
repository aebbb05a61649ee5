"""Threads and their messages, agents, and the audit log over the API."""

from __future__ import annotations

import pytest

from common.models import AuditEntry
from runs.models import Message, Run, Thread
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import AgentFactory, done_run, scripted_agent, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

THREADS = "/api/v1/threads"
MESSAGES = THREADS + "/{thread_id}/messages"


def test_create_list_and_get_threads(operator_api):
    response = conforms(
        operator_api.post(THREADS, {"title": "Support #1", "custom": {"ticket": 1}}, format="json"),
        "POST",
        THREADS,
    )
    assert response.status_code == 201
    thread = response.json()
    assert thread["title"] == "Support #1" and thread["message_count"] == 0
    assert thread["custom"] == {"ticket": 1} and thread["open_run_id"] is None
    assert AuditEntry.objects.get(action="thread.create").target_id == thread["id"]
    run = done_run()
    page = conforms(operator_api.get(THREADS), "GET", THREADS).json()
    assert {t["id"] for t in page["items"]} == {thread["id"], str(run.thread_id)}
    assert [t["id"] for t in operator_api.get(THREADS, {"q": "Support"}).json()["items"]] == [
        thread["id"]
    ]
    detail = conforms(
        operator_api.get(f"{THREADS}/{run.thread_id}"), "GET", THREADS + "/{thread_id}"
    ).json()
    assert detail["latest_run_id"] == str(run.pk) and detail["message_count"] == 2
    assert [r["run_id"] for r in detail["runs"]] == [str(run.pk)]
    assert_error(
        operator_api.get(f"{THREADS}/0190e7a0-0000-7000-8000-000000000000"), 404, "not_found"
    )
    assert_error(operator_api.post(THREADS, {"title": "x" * 301}, format="json"), 400, "invalid")


def test_messages_after_seq_and_by_run(operator_api):
    first = done_run("first answer")
    agent = first.agent
    agent.model.script = [{"text": "second answer"}]
    agent.model.save()
    path = MESSAGES.format(thread_id=first.thread_id)
    response = operator_api.post(
        path, {"messages": [{"role": "user", "content": "more"}]}, format="json"
    )
    conforms(response, "POST", MESSAGES)
    assert response.status_code == 201, response.content
    second = drive(Run.objects.get(pk=response.json()["run_id"]))
    assert second.agent_id == agent.pk
    page = conforms(operator_api.get(path), "GET", MESSAGES).json()
    assert [(m["seq"], m["role"]) for m in page["items"]] == [
        (1, "user"),
        (2, "assistant"),
        (3, "user"),
        (4, "assistant"),
    ]
    assert page["items"][1]["content"] == [{"type": "text", "text": "first answer"}]
    assert page["items"][1]["run_id"] == str(first.pk) and page["items"][0]["run_id"] is None
    assert page["next_after_seq"] == 4 and page["has_more"] is False
    later = operator_api.get(path, {"after_seq": 1, "limit": 2}).json()
    assert [m["seq"] for m in later["items"]] == [2, 3] and later["has_more"] is True
    by_run = operator_api.get(path, {"run_id": str(second.pk)}).json()["items"]
    assert [m["seq"] for m in by_run] == [3, 4]
    assert_error(
        operator_api.get(path, {"run_id": "0190e7a0-0000-7000-8000-000000000000"}), 404, "not_found"
    )


def test_message_to_a_waiting_thread_continues_its_run(operator_api):
    run = waiting_run()
    path = MESSAGES.format(thread_id=run.thread_id)
    body = {"messages": [{"content": "forget the note"}], "mode": "resume_open_run"}
    response = operator_api.post(path, body, format="json")
    assert response.status_code == 200
    assert response.json()["run_id"] == str(run.pk)
    assert AuditEntry.objects.filter(action="run.continue").count() == 1
    assert Message.objects.filter(thread=run.thread, role="user").count() == 2


def test_message_to_a_new_thread_needs_an_agent(operator_api):
    thread = Thread.objects.create(title="empty")
    path = MESSAGES.format(thread_id=thread.pk)
    body = {"messages": [{"content": "hi"}]}
    error = assert_error(operator_api.post(path, body, format="json"), 400, "invalid")
    assert "agent_id" in error["details"]
    agent = scripted_agent([{"text": "hello"}])
    response = operator_api.post(path, {**body, "agent_id": agent.slug}, format="json")
    assert response.status_code == 201
    assert_error(
        operator_api.post(path, {**body, "agent_id": "ghost"}, format="json"), 404, "not_found"
    )


def test_message_to_a_thread_with_an_unfinished_run_is_queued_or_409_to_resume(operator_api):
    agent = scripted_agent([{"text": "hello"}])
    thread = Thread.objects.create()
    path = MESSAGES.format(thread_id=thread.pk)
    body = {"agent_id": agent.slug, "messages": [{"content": "hi"}]}
    assert operator_api.post(path, body, format="json").status_code == 201
    queued = operator_api.post(path, body, format="json")  # mode queue, the default
    assert queued.status_code == 202 and queued.json()["status"] == "pending"
    resume = {**body, "mode": "resume_open_run"}
    error = assert_error(operator_api.post(path, resume, format="json"), 409, "conflict")
    assert error["details"]["status"] == "created"


def test_agents(operator_api):
    helper = AgentFactory(slug="helper")
    main = AgentFactory(slug="main", description="does things")
    main.delegates.add(helper)  # a draft change: v1 has no delegates
    done_run()
    page = conforms(operator_api.get("/api/v1/agents"), "GET", "/api/v1/agents").json()
    slugs = [a["id"] for a in page["items"]]
    assert "main" in slugs and "helper" in slugs
    one = conforms(
        operator_api.get("/api/v1/agents/main"), "GET", "/api/v1/agents/{agent_id}"
    ).json()
    assert one["description"] == "does things" and one["delegates"] == ["helper"]
    assert one["tools"] == ["calculator", "write_note"] and one["version"] == 1
    assert one["draft_status"] == "changed" and one["endpoint"] is None
    assert one["model"] == main.model.slug
    draft = AgentFactory(slug="draft", published=False)
    fresh = operator_api.get(f"/api/v1/agents/{draft.slug}").json()
    assert (fresh["version"], fresh["draft_status"]) == (None, "never_published")
    assert_error(operator_api.get("/api/v1/agents/ghost"), 404, "not_found")


def test_audit_log_filters_and_cursor(operator_api):
    runs = [waiting_run(f"t{i}") for i in range(3)]
    for run in runs:
        operator_api.post(f"/api/v1/runs/{run.pk}/cancel")
    path = "/api/v1/audit"
    page = conforms(
        operator_api.get(path, {"action": "run.cancel", "limit": 2}), "GET", path
    ).json()
    assert [e["run_id"] for e in page["items"]] == [str(runs[2].pk), str(runs[1].pk)]
    assert page["items"][0]["actor"] == "olga (token ops)" and page["items"][0]["source"] == "api"
    more = operator_api.get(
        path, {"action": "run.cancel", "limit": 2, "cursor": page["next_cursor"]}
    ).json()
    assert [e["run_id"] for e in more["items"]] == [str(runs[0].pk)] and more["next_cursor"] is None
    by_user = operator_api.get(path, {"actor": "olga"}).json()["items"]
    assert {e["action"] for e in by_user} == {"run.cancel"}
    by_label = operator_api.get(path, {"actor": "olga (token ops)"}).json()["items"]
    assert len(by_label) == 3
    by_run = operator_api.get(path, {"run": str(runs[0].pk)}).json()["items"]
    assert [e["action"] for e in by_run] == ["run.cancel", "run.start"]
    assert_error(operator_api.get(path, {"cursor": "bad"}), 400, "invalid")
