"""Size limits of what people send (common/limits.py): a message, a pending input's edit,
a fork's edited text, a ticket's answer, edited arguments and comment, a reason. Too much
is refused as a whole with an error naming the field, its length and the limit, on every
surface (API 400, the pages, the terminal), and nothing is written; the limit itself is
accepted."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from common.audit import Actor
from common.errors import InvalidInput
from runs.models import PendingInput, Run, Thread, Ticket
from runs.services.runs import run_cancel
from runs.services.submission_flow import input_submit, run_start
from runs.services.tickets import decision_submit
from tests.api.helpers import assert_error
from tests.factories import call, scripted_agent, waiting_run
from tests.runs.helpers import drive

pytestmark = pytest.mark.django_db

LIMIT = 60
ACTOR = Actor(label="olga", source="ui")


@pytest.fixture(autouse=True)
def small_limits(settings: Any) -> None:
    settings.AWAKEN_MAX_MESSAGE_CHARS = LIMIT
    settings.AWAKEN_MAX_ANSWER_CHARS = LIMIT
    settings.AWAKEN_MAX_COMMENT_CHARS = LIMIT


def test_the_defaults_are_documented_sizes(settings):
    from awaken_site import settings as defaults

    assert defaults.AWAKEN_MAX_MESSAGE_CHARS == 32_000
    assert defaults.AWAKEN_MAX_ANSWER_CHARS == 32_000
    assert defaults.AWAKEN_MAX_COMMENT_CHARS == 2_000


def test_a_message_at_the_limit_is_taken_one_more_character_is_refused():
    agent = scripted_agent([{"text": "ok"}])
    assert drive(run_start(agent=agent, messages="x" * LIMIT)).status == Run.Status.DONE
    threads = Thread.objects.count()
    with pytest.raises(InvalidInput) as refused:
        run_start(agent=agent, messages="x" * (LIMIT + 1))
    assert refused.value.message == (
        f"the message is {LIMIT + 1} characters long; at most {LIMIT} are allowed"
    )
    assert refused.value.details["field"] == "messages[0].content"
    with pytest.raises(InvalidInput, match=r"messages\[1\]\.content is 61 characters"):
        run_start(agent=agent, messages=[{"content": "hi"}, {"content": "y" * (LIMIT + 1)}])
    assert Thread.objects.count() == threads


def test_the_api_answers_400_naming_the_field(operator_api):
    scripted_agent([{"text": "ok"}], slug="greeter")
    body = {"agent_id": "greeter", "messages": [{"role": "user", "content": "z" * 61}]}
    error = assert_error(operator_api.post("/api/v1/runs", body, format="json"), 400, "invalid")
    assert "at most 60 are allowed" in error["message"]
    assert error["details"]["messages[0].content"] == [
        "Ensure this field has no more than 60 characters."
    ]
    assert not Run.objects.exists()


def test_input_for_a_thread_and_its_edit_are_limited(operator_api):
    run = waiting_run()
    url = f"/api/v1/threads/{run.thread_id}/messages"
    too_long = {"messages": [{"content": "q" * 61}]}
    assert_error(operator_api.post(url, too_long, format="json"), 400, "invalid")
    queued = operator_api.post(url, {"messages": [{"content": "fine"}]}, format="json")
    assert queued.status_code == 202
    edit = operator_api.patch(f"/api/v1/inputs/{queued.json()['id']}", too_long, format="json")
    assert_error(edit, 400, "invalid")
    assert PendingInput.objects.get(pk=queued.json()["id"]).text == "fine"


def test_the_thread_page_refuses_a_long_message_and_queues_nothing(operator_client):
    run = waiting_run()
    url = reverse("runs:thread-send", args=[run.thread_id])
    agent = run.agent.slug
    response = operator_client.post(url, {"agent": agent, "message": "w" * 61})
    assert response.status_code == 400
    assert "at most 60 are allowed" in response.content.decode()
    assert not PendingInput.objects.filter(thread=run.thread, status="pending").exists()


def test_the_terminal_prints_the_error(tmp_path):
    run = waiting_run()
    with pytest.raises(CommandError, match="the message is 61 characters long; at most 60"):
        call_command("send_input", str(run.thread_id), "t" * 61)
    assert not PendingInput.objects.filter(thread=run.thread, status="pending").exists()


def asking_run() -> Run:
    agent = scripted_agent(
        [
            {"text": "", "tool_calls": [call("ask_human", {"question": "Which city?"})]},
            {"text": "thanks"},
        ],
        tools=["ask_human"],
    )
    run = drive(run_start(agent=agent, messages="go"))
    assert run.status == Run.Status.WAITING
    return run


@pytest.mark.parametrize(
    ("decision", "field"),
    [
        ({"action": "respond", "payload": "a" * 61}, "payload"),
        ({"action": "respond", "payload": {"city": "b" * 60}}, "payload"),  # as JSON
        ({"action": "respond", "payload": "Paris", "comment": "c" * 61}, "comment"),
    ],
)
def test_an_answer_or_comment_too_long_is_refused_and_the_ticket_stays_open(
    decision, field, operator_api
):
    run = asking_run()
    ticket = Ticket.objects.get(run=run)
    response = operator_api.post(f"/api/v1/tickets/{ticket.pk}/decision", decision, format="json")
    error = assert_error(response, 400, "invalid")
    assert error["details"]["field"] == field and "at most 60" in error["message"]
    ticket.refresh_from_db()
    assert ticket.status == Ticket.Status.PENDING


def test_edited_arguments_too_long_are_refused():
    run = waiting_run()  # asks before write_note
    ticket = Ticket.objects.get(run=run)
    with pytest.raises(InvalidInput, match="the edited arguments \\(as JSON\\) is"):
        decision_submit(
            ticket=ticket,
            action="edit",
            arguments={"title": "t" * 60, "body": "b"},
            actor=ACTOR,
        )
    decision_submit(
        ticket=ticket, action="edit", arguments={"title": "t", "body": "b"}, actor=ACTOR
    )


def test_a_childs_answer_is_not_limited():
    """What the worker hands over (a child run's result) is no one's typing."""
    run = asking_run()
    ticket = Ticket.objects.get(run=run)
    decision_submit(ticket=ticket, action="respond", payload="p" * 500)  # the system actor
    assert Ticket.objects.get(pk=ticket.pk).status == Ticket.Status.DECIDED


def test_a_reason_too_long_is_refused():
    run = waiting_run()
    with pytest.raises(InvalidInput, match="the reason is 61 characters long") as refused:
        run_cancel(run=run, actor=ACTOR, reason="r" * 61)
    assert refused.value.details["field"] == "reason"
    assert Run.objects.get(pk=run.pk).status == Run.Status.WAITING


def test_a_forks_edited_text_is_limited():
    from runs.replays.services.forks import run_fork

    run = drive(run_start(agent=scripted_agent([{"text": "ok"}]), messages="hello"))
    with pytest.raises(InvalidInput, match=r"edit\.text is 61 characters long"):
        run_fork(run=run, step=0, edit={"seq": 1, "text": "e" * 61}, actor=ACTOR)
    assert run_fork(run=run, step=0, edit={"seq": 1, "text": "e" * 60}, actor=ACTOR)


def test_input_submit_from_another_surface_says_the_same():
    run = waiting_run()
    with pytest.raises(InvalidInput, match="at most 60 are allowed"):
        input_submit(agent=None, messages="m" * 61, thread=run.thread, actor=ACTOR)
