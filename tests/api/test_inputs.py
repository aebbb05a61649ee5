"""Run control over the API: the four input modes of POST /threads/{id}/messages and
/runs/{id}/inputs, the thread's pending input (list, edit, retract), interrupting a thread
and a queued run's priority; permissions, validation and the OpenAPI schema."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from common.models import AuditEntry
from runs.models import PendingInput, Run, Thread, Ticket
from runs.services.submission_flow import input_submit
from tests.api.helpers import assert_error
from tests.api.schema_check import conforms
from tests.factories import call, done_run, scripted_agent, waiting_run
from tests.runs.helpers import drive, events

pytestmark = pytest.mark.django_db

MESSAGES = "/api/v1/threads/{thread_id}/messages"
THREAD_INPUTS = "/api/v1/threads/{thread_id}/inputs"
INTERRUPT = "/api/v1/threads/{thread_id}/interrupt"
RUN_INPUTS = "/api/v1/runs/{run_id}/inputs"
PRIORITY = "/api/v1/runs/{run_id}/priority"
INPUT = "/api/v1/inputs/{input_id}"


def body(text: str = "and then?", **extra):
    return {"messages": [{"role": "user", "content": text}], **extra}


def send(api, thread_id, text="and then?", **extra):
    path = MESSAGES.format(thread_id=thread_id)
    return conforms(api.post(path, body(text, **extra), format="json"), "POST", MESSAGES)


def busy_thread(script=None) -> Run:
    """A thread whose open run is created (due, not taken by a worker yet)."""
    agent = scripted_agent(script or [{"text": "first"}])
    run = input_submit(agent=agent, messages="start").run
    assert run is not None and run.status == Run.Status.CREATED
    return run


def hold(run: Run) -> None:
    """A worker holds the run: a cancel is only requested, the priority is fixed."""
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        lease_owner="w1",
        lease_expires_at=timezone.now() + dt.timedelta(minutes=5),
    )


# --- the modes ------------------------------------------------------------------------------


def test_any_mode_on_an_idle_thread_starts_a_run_with_its_priority(operator_api):
    first = done_run("first answer")
    response = send(operator_api, first.thread_id, mode="steer", priority=7)
    assert response.status_code == 201, response.content
    record = response.json()
    assert record["run_id"] != str(first.pk) and record["status"] == "created"
    assert record["priority"] == 7 and record["run_mode"] == "foreground"
    assert record["schedule_id"] is None and record["pending_inputs"] == 0
    assert record["superseded_tickets"] == [] and record["interrupted_run_id"] is None
    input_ = PendingInput.objects.get(pk=record["input_id"])
    assert (input_.status, input_.boundary) == ("delivered", "new_run")
    assert str(input_.delivered_run_id) == record["run_id"]
    run = drive(Run.objects.get(pk=record["run_id"]))
    assert run.status == "done" and run.agent_id == first.agent_id  # the thread's agent
    delivered = events(run, "input_delivered")
    assert [(e["input_id"], e["mode"], e["boundary"]) for e in delivered] == [
        (str(input_.pk), "steer", "new_run")
    ]


def test_queue_waits_for_the_open_run_and_starts_the_next_one(operator_api):
    run = busy_thread()
    response = send(operator_api, run.thread_id, "after that", priority=3)
    assert response.status_code == 202, response.content
    queued = response.json()
    assert (queued["status"], queued["mode"], queued["seq"]) == ("pending", "queue", 2)
    assert queued["text"] == "after that" and queued["priority"] == 3
    assert queued["run_id"] is None and queued["interrupted_run_id"] is None
    assert queued["actor"] == "olga (token ops)" and queued["agent_id"] == run.agent.slug
    path = THREAD_INPUTS.format(thread_id=run.thread_id)
    page = conforms(operator_api.get(path), "GET", THREAD_INPUTS).json()
    assert [i["id"] for i in page["items"]] == [queued["id"]]

    drive(run)  # it ends: the queued input starts the thread's next run
    assert conforms(operator_api.get(path), "GET", THREAD_INPUTS).json()["items"] == []
    every = operator_api.get(path, {"status": "all"}).json()["items"]
    assert [(i["seq"], i["status"], i["boundary"]) for i in every] == [
        (1, "delivered", "new_run"),
        (2, "delivered", "new_run"),
    ]
    nxt = Run.objects.exclude(pk=run.pk).get(thread_id=run.thread_id)
    assert every[1]["delivered_run_id"] == str(nxt.pk) and nxt.priority == 3


def test_steer_is_delivered_into_the_open_run_at_its_next_step(operator_api):
    run = busy_thread(
        [
            {"text": "adding", "tool_calls": [call("calculator", {"expression": "1+1"})]},
            {"text": "done"},
        ]
    )
    response = send(operator_api, run.thread_id, "use 2+2 instead", mode="steer")
    assert response.status_code == 202, response.content
    steer = response.json()
    assert steer["mode"] == "steer" and steer["run_id"] == str(run.pk)
    record = operator_api.get(f"/api/v1/runs/{run.pk}").json()
    assert record["pending_inputs"] == 1
    run = drive(run)
    input_ = PendingInput.objects.get(pk=steer["id"])
    assert (input_.status, input_.boundary) == ("delivered", "next_step")
    assert input_.delivered_run_id == run.pk
    assert [e["input_id"] for e in events(run, "input_delivered")][-1] == steer["id"]
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1  # no run of its own
    detail = conforms(operator_api.get(INPUT.format(input_id=steer["id"])), "GET", INPUT)
    assert detail.json()["boundary"] == "next_step"


def test_interrupt_then_queue_cancels_the_open_run_and_starts_the_input(operator_api):
    run = busy_thread()
    response = send(operator_api, run.thread_id, "stop, do this", mode="interrupt_then_queue")
    assert response.status_code == 201, response.content  # the run ended at once
    record = response.json()
    assert record["interrupted_run_id"] == str(run.pk) and record["run_id"] != str(run.pk)
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")


def test_interrupt_then_queue_of_a_running_run_waits_for_it_to_stop(operator_api):
    run = busy_thread()
    hold(run)
    response = send(operator_api, run.thread_id, "stop, do this", mode="interrupt_then_queue")
    assert response.status_code == 202, response.content
    queued = response.json()
    assert queued["interrupted_run_id"] == str(run.pk) and queued["status"] == "pending"
    assert Run.objects.get(pk=run.pk).cancel_requested_at is not None


def test_resume_open_run_continues_a_waiting_run_and_reports_superseded_tickets(operator_api):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    response = send(operator_api, run.thread_id, "forget it", mode="resume_open_run")
    assert response.status_code == 200, response.content
    record = response.json()
    assert record["run_id"] == str(run.pk)
    assert record["superseded_tickets"] == [str(ticket.pk)]
    input_ = PendingInput.objects.get(pk=record["input_id"])
    assert (input_.status, input_.boundary) == ("delivered", "resume_input")


def test_a_message_to_a_waiting_run_is_queued_by_default(operator_api):
    run = waiting_run()
    response = send(operator_api, run.thread_id, "later")
    assert response.status_code == 202
    assert Ticket.objects.get(run=run).status == "pending"  # nothing superseded


def test_resume_open_run_is_409_while_the_run_is_not_waiting(operator_api):
    run = busy_thread()
    error = assert_error(send(operator_api, run.thread_id, mode="resume_open_run"), 409, "conflict")
    assert "not waiting" in error["message"] and error["details"]["status"] == "created"
    assert not PendingInput.objects.filter(thread_id=run.thread_id, seq__gt=1).exists()


def test_idempotency_key_returns_the_started_run(operator_api):
    first = done_run()
    one = send(operator_api, first.thread_id, idempotency_key="k-1")
    assert one.status_code == 201
    again = send(operator_api, first.thread_id, "other", idempotency_key="k-1")
    assert again.status_code == 200 and again.json()["run_id"] == one.json()["run_id"]
    assert again.json()["input_id"] is None
    assert one.json()["idempotency_key"] == "k-1"


# --- input addressed to a run ------------------------------------------------------------------


def test_run_inputs_steer_and_resume_target_that_run(operator_api):
    run = waiting_run()
    path = RUN_INPUTS.format(run_id=run.pk)
    steer = conforms(
        operator_api.post(path, body("also this", mode="steer"), format="json"), "POST", RUN_INPUTS
    )
    assert steer.status_code == 202 and steer.json()["run_id"] == str(run.pk)
    resumed = conforms(
        operator_api.post(path, body("go on", mode="resume_open_run"), format="json"),
        "POST",
        RUN_INPUTS,
    )
    assert resumed.status_code == 200 and resumed.json()["run_id"] == str(run.pk)


def test_run_inputs_resume_of_a_finished_run_is_409_and_steer_is_queued(operator_api):
    run = done_run()
    path = RUN_INPUTS.format(run_id=run.pk)
    error = assert_error(
        operator_api.post(path, body(mode="resume_open_run"), format="json"), 409, "conflict"
    )
    assert "only the thread's open, waiting run" in error["message"]
    started = operator_api.post(path, body(mode="steer"), format="json")
    assert started.status_code == 201  # the thread is idle: it starts the next run
    missing = RUN_INPUTS.format(run_id="0190e7a0-0000-7000-8000-000000000000")
    assert_error(operator_api.post(missing, body(), format="json"), 404, "not_found")


# --- validation ------------------------------------------------------------------------------


def test_bad_mode_priority_and_empty_text_are_400(operator_api):
    run = done_run()
    error = assert_error(send(operator_api, run.thread_id, mode="later"), 400, "invalid")
    assert error["message"].startswith("mode:") and "later" in error["message"]
    error = assert_error(send(operator_api, run.thread_id, priority=300), 400, "invalid")
    assert (
        error["message"]
        == "priority: priority must be an integer from 0 (high) to 255 (low), got 300"
    )
    error = assert_error(send(operator_api, run.thread_id, "   "), 400, "invalid")
    assert error["message"] == "messages[0].content is empty"
    path = RUN_INPUTS.format(run_id=run.pk)
    assert_error(operator_api.post(path, body(priority=-1), format="json"), 400, "invalid")
    thread = Thread.objects.create()
    error = assert_error(send(operator_api, thread.pk), 400, "invalid")
    assert "agent_id" in error["details"]
    assert not PendingInput.objects.exists()  # done_run started its run without input


# --- pending input: list, edit, retract --------------------------------------------------------


def test_edit_and_retract_a_pending_input_then_409(operator_api):
    run = busy_thread()
    queued = send(operator_api, run.thread_id, "first draft").json()
    path = INPUT.format(input_id=queued["id"])
    edited = conforms(
        operator_api.patch(path, {**body("second draft"), "priority": 9}, format="json"),
        "PATCH",
        INPUT,
    )
    assert edited.status_code == 200
    assert (edited.json()["text"], edited.json()["priority"]) == ("second draft", 9)
    only_priority = operator_api.patch(path, {"priority": 1}, format="json").json()
    assert (only_priority["text"], only_priority["priority"]) == ("second draft", 1)
    error = assert_error(operator_api.patch(path, {}, format="json"), 400, "invalid")
    assert "messages, priority or both" in error["message"]
    assert_error(operator_api.patch(path, {"priority": 256}, format="json"), 400, "invalid")

    retracted = conforms(operator_api.delete(path), "DELETE", INPUT)
    assert retracted.status_code == 200 and retracted.json()["status"] == "retracted"
    assert retracted.json()["closed_at"] is not None
    error = assert_error(operator_api.delete(path), 409, "conflict")
    assert "retracted already" in error["message"]
    assert_error(operator_api.patch(path, {"priority": 2}, format="json"), 409, "conflict")
    drive(run)  # a retracted input is never delivered
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1
    assert PendingInput.objects.get(pk=queued["id"]).delivered_run_id is None
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"input.queue", "input.edit", "input.retract"} <= actions


def test_a_delivered_input_cannot_change(operator_api):
    run = done_run()
    started = send(operator_api, run.thread_id).json()
    path = INPUT.format(input_id=started["input_id"])
    error = assert_error(operator_api.delete(path), 409, "conflict")
    assert error["details"]["status"] == "delivered"
    assert_error(operator_api.patch(path, body("x"), format="json"), 409, "conflict")
    missing = INPUT.format(input_id="0190e7a0-0000-7000-8000-000000000000")
    for response in (
        operator_api.get(missing),
        operator_api.delete(missing),
        operator_api.patch(missing, {"priority": 1}, format="json"),
    ):
        assert_error(response, 404, "not_found")


def test_inputs_list_pages_by_seq(operator_api):
    run = busy_thread()
    for n in range(3):
        send(operator_api, run.thread_id, f"input {n}")
    path = THREAD_INPUTS.format(thread_id=run.thread_id)
    page = operator_api.get(path, {"limit": 2}).json()
    assert [i["text"] for i in page["items"]] == ["input 0", "input 1"] and page["has_more"]
    rest = operator_api.get(path, {"after_seq": page["next_after_seq"]}).json()
    assert [i["text"] for i in rest["items"]] == ["input 2"] and not rest["has_more"]
    assert len(operator_api.get(path, {"status": "all"}).json()["items"]) == 4
    assert_error(operator_api.get(path, {"status": "done"}), 400, "invalid")


# --- interrupt and priority --------------------------------------------------------------------


def test_interrupt_cancels_the_open_run_and_the_pending_inputs(operator_api):
    run = busy_thread()
    ids = [send(operator_api, run.thread_id, f"input {n}").json()["id"] for n in range(2)]
    path = INTERRUPT.format(thread_id=run.thread_id)
    response = conforms(operator_api.post(path), "POST", INTERRUPT)
    assert response.status_code == 200
    result = response.json()
    assert result["run"]["run_id"] == str(run.pk) and result["run"]["status"] == "done"
    assert sorted(result["cancelled_inputs"]) == sorted(ids)
    assert set(PendingInput.objects.filter(pk__in=ids).values_list("status", flat=True)) == {
        "cancelled"
    }
    assert Run.objects.filter(thread_id=run.thread_id).count() == 1  # nothing started
    idle = conforms(operator_api.post(path), "POST", INTERRUPT).json()
    assert idle == {"run": None, "cancelled_inputs": []}


def test_priority_of_a_queued_run_only(operator_api):
    run = busy_thread()
    path = PRIORITY.format(run_id=run.pk)
    response = conforms(operator_api.post(path, {"priority": 5}, format="json"), "POST", PRIORITY)
    assert response.status_code == 200 and response.json()["priority"] == 5
    assert Run.objects.get(pk=run.pk).priority == 5
    assert_error(operator_api.post(path, {"priority": 300}, format="json"), 400, "invalid")
    assert_error(operator_api.post(path, {}, format="json"), 400, "invalid")
    hold(run)
    error = assert_error(operator_api.post(path, {"priority": 1}, format="json"), 409, "conflict")
    assert "only a queued run" in error["message"]
    done = done_run()
    done_path = PRIORITY.format(run_id=done.pk)
    assert_error(operator_api.post(done_path, {"priority": 1}, format="json"), 409, "conflict")
    assert AuditEntry.objects.filter(action="run.priority").count() == 1


# --- permissions -----------------------------------------------------------------------------


def test_viewer_reads_inputs_but_may_not_send_edit_interrupt_or_prioritize(
    viewer_api, operator_api
):
    run = busy_thread()
    queued = send(operator_api, run.thread_id).json()
    thread_inputs = THREAD_INPUTS.format(thread_id=run.thread_id)
    assert viewer_api.get(thread_inputs).status_code == 200
    assert viewer_api.get(INPUT.format(input_id=queued["id"])).status_code == 200
    writes = [
        ("post", MESSAGES.format(thread_id=run.thread_id), body()),
        ("post", RUN_INPUTS.format(run_id=run.pk), body()),
        ("patch", INPUT.format(input_id=queued["id"]), {"priority": 1}),
        ("delete", INPUT.format(input_id=queued["id"]), None),
        ("post", INTERRUPT.format(thread_id=run.thread_id), None),
        ("post", PRIORITY.format(run_id=run.pk), {"priority": 1}),
    ]
    for method, path, data in writes:
        response = getattr(viewer_api, method)(path, data, format="json")
        error = assert_error(response, 403, "permission_denied")
        assert "runs." in error["message"], path
    assert PendingInput.objects.get(pk=queued["id"]).status == "pending"
    assert Run.objects.get(pk=run.pk).status == "created"


def test_anonymous_gets_401(anonymous_api):
    run = busy_thread()
    input_id = PendingInput.objects.get(thread_id=run.thread_id).pk
    for method, path in [
        ("get", THREAD_INPUTS.format(thread_id=run.thread_id)),
        ("post", MESSAGES.format(thread_id=run.thread_id)),
        ("post", RUN_INPUTS.format(run_id=run.pk)),
        ("get", INPUT.format(input_id=input_id)),
        ("patch", INPUT.format(input_id=input_id)),
        ("delete", INPUT.format(input_id=input_id)),
        ("post", INTERRUPT.format(thread_id=run.thread_id)),
        ("post", PRIORITY.format(run_id=run.pk)),
    ]:
        assert_error(getattr(anonymous_api, method)(path), 401, "not_authenticated")


# --- the schema ------------------------------------------------------------------------------


def test_the_schema_has_the_run_control_operations(client):
    schema = client.get("/api/v1/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    operations = {
        (path, method): operation["operationId"]
        for path, item in paths.items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "operationId" in operation
    }
    expected = {
        ("/api/v1/threads/{thread_id}/messages", "post"): "threads_messages_create",
        ("/api/v1/runs/{run_id}/inputs", "post"): "runs_inputs_create",
        ("/api/v1/threads/{thread_id}/inputs", "get"): "threads_inputs_list",
        ("/api/v1/inputs/{input_id}", "get"): "inputs_retrieve",
        ("/api/v1/inputs/{input_id}", "patch"): "inputs_update",
        ("/api/v1/inputs/{input_id}", "delete"): "inputs_retract",
        ("/api/v1/threads/{thread_id}/interrupt", "post"): "threads_interrupt",
        ("/api/v1/runs/{run_id}/priority", "post"): "runs_priority",
    }
    for key, operation_id in expected.items():
        assert operations.get(key) == operation_id, key
    create = paths["/api/v1/threads/{thread_id}/messages"]["post"]
    assert {"200", "201", "202", "400", "404", "409"} <= set(create["responses"])
    assert "resume_open_run" in create["description"]
    assert {"404", "409"} <= set(paths["/api/v1/inputs/{input_id}"]["delete"]["responses"])
    assert "409" in paths["/api/v1/runs/{run_id}/priority"]["post"]["responses"]
    request = schema["components"]["schemas"]["ThreadMessageCreateRequest"]["properties"]
    assert request["priority"]["maximum"] == 255 and request["priority"]["minimum"] == 0
    record = schema["components"]["schemas"]["RunRecord"]["properties"]
    assert {"priority", "run_mode", "schedule_id", "pending_inputs"} <= set(record)
