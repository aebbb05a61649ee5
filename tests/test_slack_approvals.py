"""Slack approvals (docs/approvals-slack-email.md), against a fake Slack Web API on loopback
(tests/fake_slack.py) and interaction requests signed as Slack signs them: the ticket's
message with its buttons and arguments; approve; reject with a reason through the modal;
forged, replayed and six-minute-old requests refused (401, nothing decided); an unlinked
Slack user told how to link, and linking from the notifications page; two operators at
once; a frozen team; and the message rewritten in each case a ticket closes (decided in
Slack, elsewhere, expired, cancelled)."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from common.audit import Actor
from common.models import AuditEntry
from runs.decisions.services.deadlines import tickets_expire
from runs.models import Decision, Ticket
from runs.operations.models.notifications import NotificationChannel, NotificationDelivery
from runs.operations.models.slack import SlackMessage, SlackUserLink
from runs.operations.services import notifications as notify
from runs.operations.services.notify_drain import notifications_drain
from runs.operations.services.notify_send import channel_set_secret
from runs.operations.services.notify_slack import channel_set_bot_token
from runs.services.runs import run_cancel
from runs.services.tickets import decision_submit
from tests.factories import team, user_with_role, waiting_run
from tests.fake_slack import FakeSlack, block_action, signed, view_submission
from tests.runs.notify_helpers import notify_settings, rule

pytestmark = pytest.mark.django_db

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
URL = "/integrations/slack/actions"


@pytest.fixture
def slack(settings: Any) -> Any:
    fake = FakeSlack()
    notify_settings(settings)
    settings.AWAKEN_SLACK_API_URL = fake.base_url
    settings.AWAKEN_PUBLIC_URL = "https://ops.example.com"
    yield fake
    fake.close()
    notify.no_routes.forget()


def slack_channel(name: str = "approvals") -> NotificationChannel:
    row = NotificationChannel(name=name, kind="slack_app", slack_channel="C1")
    channel_set_bot_token(row, "xoxb-test-token")
    channel_set_secret(row, SIGNING_SECRET)
    row.save()
    rule(row, events=["ticket.opened"])
    return row


def posted_ticket(slack: FakeSlack) -> Ticket:
    """A waiting ticket whose message the Slack app channel has posted."""
    slack_channel()
    run = waiting_run()
    assert notifications_drain()["delivered"] == 1
    return Ticket.objects.get(run=run)


def linked(role: str = "operator", name: str = "olga", slack_user: str = "U1") -> Any:
    user = user_with_role(role, name)
    SlackUserLink.objects.create(
        user=user, slack_team_id="T1", slack_user_id=slack_user, how="page"
    )
    return user


def press(
    payload: dict[str, Any],
    *,
    secret: str = SIGNING_SECRET,
    timestamp: int | None = None,
    client: Client | None = None,
) -> Any:
    body, headers = signed(secret, payload, timestamp)
    return (client or Client()).post(
        URL, body, content_type="application/x-www-form-urlencoded", **headers
    )


def last_update(slack: FakeSlack) -> dict[str, Any]:
    updates = slack.of("chat.update")
    assert updates, "the message was not updated"
    return updates[-1]


def texts(message: dict[str, Any]) -> str:
    return json.dumps(message.get("blocks")) + message.get("text", "")


def action_ids(message: dict[str, Any]) -> list[str]:
    return [
        element["action_id"]
        for block in message.get("blocks") or []
        if block["type"] == "actions"
        for element in block["elements"]
    ]


# --- the message ----------------------------------------------------------------------------


def test_a_ticket_is_posted_with_its_buttons_and_arguments(slack):
    ticket = posted_ticket(slack)
    (message,) = slack.of("chat.postMessage")
    assert message["channel"] == "C1"
    assert action_ids(message) == ["awaken_approve", "awaken_reject", "awaken_open"]
    assert '\\"title\\": \\"lunch\\"' in texts(message)  # the arguments, as JSON
    assert "write_note" in message["text"]
    stored = SlackMessage.objects.get()
    assert (stored.ticket_id, stored.slack_channel, stored.ts) == (
        ticket.pk,
        "C1",
        "1700000000.000001",
    )


def test_a_question_gets_answer_and_reject(slack):
    slack_channel()
    run = waiting_run(
        script=[
            {
                "text": "",
                "tool_calls": [{"name": "ask_human", "arguments": {"question": "colour?"}}],
            },
            {"text": "ok"},
        ],
        tools=["ask_human"],
        permission={"default_behavior": "allow"},
    )
    notifications_drain()
    (message,) = slack.of("chat.postMessage")
    assert action_ids(message) == ["awaken_answer", "awaken_reject", "awaken_open"]
    assert Ticket.objects.get(run=run).status == Ticket.Status.PENDING


# --- deciding ---------------------------------------------------------------------------------


def test_approve_from_slack_decides_as_the_linked_user_and_updates_the_message(slack):
    ticket = posted_ticket(slack)
    linked()
    response = press(block_action("awaken_approve", ticket.pk))
    assert response.status_code == 200
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.actor_label) == ("approve", "olga (Slack)")
    entry = AuditEntry.objects.get(action="ticket.approve")
    assert (entry.source, entry.actor_label) == ("slack", "olga (Slack)")
    assert slack.of("chat.postEphemeral") == []
    assert notifications_drain()["delivered"] == 1  # the ticket.closed update
    update = last_update(slack)
    assert (update["channel"], update["ts"]) == ("C1", "1700000000.000001")
    assert "Approved* by olga (Slack)" in texts(update)
    assert action_ids(update) == []  # no buttons left


def test_reject_asks_for_a_reason_in_a_modal_then_decides_with_it(slack):
    ticket = posted_ticket(slack)
    linked()
    assert press(block_action("awaken_reject", ticket.pk, trigger="trig-9")).status_code == 200
    (opened,) = slack.of("views.open")
    assert opened["trigger_id"] == "trig-9"
    assert opened["view"]["blocks"][0]["block_id"] == "reason"
    assert not Decision.objects.filter(ticket=ticket).exists()  # nothing yet
    submission = view_submission(opened["view"]["private_metadata"], "reason", "not today")
    response = press(submission)
    assert response.status_code == 200 and response.content == b""  # the modal closes
    decision = Decision.objects.get(ticket=ticket)
    assert (decision.action, decision.comment) == ("reject", "not today")
    notifications_drain()
    update = last_update(slack)
    assert "Rejected* by olga (Slack)" in texts(update) and "not today" in texts(update)


def test_a_team_that_requires_a_reason_gets_it_asked_in_the_modal(slack):
    ticket = posted_ticket(slack)
    linked()
    agent = ticket.run.agent
    agent.team = team("ops", reason_required=True)
    agent.save()
    press(block_action("awaken_reject", ticket.pk))
    (opened,) = slack.of("views.open")
    assert opened["view"]["blocks"][0]["optional"] is False
    response = press(view_submission(opened["view"]["private_metadata"], "reason", "  "))
    assert response.json()["response_action"] == "errors"
    assert "requires a reason" in response.json()["errors"]["reason"]
    assert not Decision.objects.filter(ticket=ticket).exists()


def test_the_same_interaction_twice_decides_once_and_says_nothing(slack):
    ticket = posted_ticket(slack)
    linked()
    payload = block_action("awaken_approve", ticket.pk, trigger="trig-same")
    assert press(payload).status_code == 200
    # Slack retries with a new timestamp (so a new signature), the same interaction
    assert press(payload, timestamp=int(time.time()) - 7).status_code == 200
    assert Decision.objects.filter(ticket=ticket).count() == 1
    assert slack.of("chat.postEphemeral") == []


# --- refused requests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "age"),
    [("not-the-signing-secret-0000000000", 0), (SIGNING_SECRET, 6 * 60)],
    ids=["forged", "six-minutes-old"],
)
def test_a_forged_or_old_request_is_refused_and_decides_nothing(slack, secret, age):
    ticket = posted_ticket(slack)
    linked()
    response = press(
        block_action("awaken_approve", ticket.pk), secret=secret, timestamp=int(time.time()) - age
    )
    assert response.status_code == 401
    assert not Decision.objects.filter(ticket=ticket).exists()


def test_a_replayed_request_is_refused_and_decides_nothing(slack):
    ticket = posted_ticket(slack)
    linked()
    body, headers = signed(SIGNING_SECRET, block_action("awaken_reject", ticket.pk))
    first = Client().post(URL, body, content_type="application/x-www-form-urlencoded", **headers)
    assert first.status_code == 200
    again = Client().post(URL, body, content_type="application/x-www-form-urlencoded", **headers)
    assert again.status_code == 401
    assert len(slack.of("views.open")) == 1


def test_an_unsigned_or_tampered_body_is_refused(slack):
    ticket = posted_ticket(slack)
    linked()
    body, headers = signed(SIGNING_SECRET, block_action("awaken_approve", ticket.pk))
    tampered = body.replace(b"awaken_approve", b"awaken_reject")
    assert (
        Client()
        .post(URL, tampered, content_type="application/x-www-form-urlencoded", **headers)
        .status_code
        == 401
    )
    assert (
        Client().post(URL, body, content_type="application/x-www-form-urlencoded").status_code
        == 401
    )
    assert not Decision.objects.filter(ticket=ticket).exists()


def test_an_unlinked_slack_user_is_told_how_to_link_and_nothing_is_decided(slack):
    ticket = posted_ticket(slack)
    user = user_with_role("operator", "olga")
    assert press(block_action("awaken_approve", ticket.pk, user="U9")).status_code == 200
    assert not Decision.objects.filter(ticket=ticket).exists()
    (told,) = slack.of("chat.postEphemeral")
    assert told["user"] == "U9" and told["channel"] == "C1"
    assert "not linked" in told["text"]
    link = told["text"].split("https://ops.example.com", 1)[1].split(" ", 1)[0]
    browser = Client()
    browser.force_login(user)
    page = browser.get(link)
    assert page.status_code == 200 and b"slack-link-confirm" in page.content
    assert not SlackUserLink.objects.exists()  # GET links nothing
    assert browser.post(link).status_code == 302
    assert SlackUserLink.objects.get().user == user
    assert AuditEntry.objects.filter(action="slack.link").exists()
    press(block_action("awaken_approve", ticket.pk, user="U9", trigger="trig-2"))
    assert Decision.objects.get(ticket=ticket).actor_label == "olga (Slack)"


def test_a_slack_user_with_a_verified_email_is_linked_when_the_setting_allows(slack, settings):
    ticket = posted_ticket(slack)
    user = user_with_role("operator", "olga")
    user.email = "olga@example.com"
    user.save()
    slack.users["U5"] = {
        "id": "U5",
        "is_email_confirmed": True,
        "profile": {"email": "Olga@example.com"},
    }
    press(block_action("awaken_approve", ticket.pk, user="U5"))
    assert not Decision.objects.filter(ticket=ticket).exists()  # the setting is off
    settings.AWAKEN_SLACK_LINK_BY_EMAIL = True
    press(block_action("awaken_approve", ticket.pk, user="U5", trigger="trig-3"))
    assert Decision.objects.get(ticket=ticket).actor == user
    assert SlackUserLink.objects.get().how == "email"


def test_a_viewer_cannot_decide_from_slack(slack):
    ticket = posted_ticket(slack)
    linked("viewer", "vic")
    press(block_action("awaken_approve", ticket.pk))
    assert not Decision.objects.filter(ticket=ticket).exists()
    (told,) = slack.of("chat.postEphemeral")
    assert "may not decide" in told["text"]


def test_a_frozen_team_is_refused_with_its_reason(slack):
    ticket = posted_ticket(slack)
    linked()
    agent = ticket.run.agent
    agent.team = team("ops", frozen=True, frozen_reason="incident 42")
    agent.save()
    press(block_action("awaken_approve", ticket.pk))
    assert not Decision.objects.filter(ticket=ticket).exists()
    (told,) = slack.of("chat.postEphemeral")
    assert "frozen" in told["text"] and "incident 42" in told["text"]
    assert slack.of("chat.update") == []  # still waiting: its buttons stay


def test_a_ticket_claimed_by_someone_else_is_refused(slack):
    from runs.decisions.services.claims import ticket_claim

    ticket = posted_ticket(slack)
    linked()
    other = user_with_role("operator", "oscar")
    ticket_claim(ticket, Actor(user=other, label="oscar"))
    press(block_action("awaken_approve", ticket.pk))
    assert not Decision.objects.filter(ticket=ticket).exists()
    assert "oscar is on this ticket" in slack.of("chat.postEphemeral")[0]["text"]


# --- two operators, decided elsewhere, expired ---------------------------------------------------


def test_the_second_operator_is_told_who_won(slack):
    ticket = posted_ticket(slack)
    linked("operator", "olga", "U1")
    linked("operator", "oscar", "U2")
    press(block_action("awaken_approve", ticket.pk, user="U1", trigger="t-olga"))
    press(block_action("awaken_approve", ticket.pk, user="U2", trigger="t-oscar"))
    assert Decision.objects.get(ticket=ticket).actor_label == "olga (Slack)"
    (told,) = slack.of("chat.postEphemeral")
    assert told["user"] == "U2" and "olga (Slack)" in told["text"]
    notifications_drain()
    assert "olga (Slack)" in texts(last_update(slack))


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="two requests at once: PostgreSQL's row locks"
)
def test_two_operators_pressing_at_once_make_one_decision(slack):
    ticket = posted_ticket(slack)
    linked("operator", "olga", "U1")
    linked("operator", "oscar", "U2")
    start = threading.Barrier(2)
    answers: list[int] = []

    def go(user: str) -> None:
        start.wait()
        answers.append(
            press(
                block_action("awaken_approve", ticket.pk, user=user, trigger=f"t-{user}")
            ).status_code
        )
        connection.close()

    threads = [threading.Thread(target=go, args=(user,)) for user in ("U1", "U2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [200, 200]
    decision = Decision.objects.get(ticket=ticket)
    (told,) = slack.of("chat.postEphemeral")
    loser = "U2" if decision.actor_label.startswith("olga") else "U1"
    assert told["user"] == loser and decision.actor_label in told["text"]


def test_a_decision_made_elsewhere_updates_the_message(slack):
    ticket = posted_ticket(slack)
    oscar = user_with_role("operator", "oscar")
    decision_submit(ticket=ticket, action="reject", comment="no", actor=Actor(user=oscar))
    assert NotificationDelivery.objects.filter(event="ticket.closed").count() == 1
    notifications_drain()
    assert "Rejected* by oscar" in texts(last_update(slack))


def test_an_expired_ticket_updates_the_message(slack):
    ticket = posted_ticket(slack)
    Ticket.objects.filter(pk=ticket.pk).update(
        deadline_at=timezone.now() - dt.timedelta(minutes=1), default_action="reject"
    )
    assert tickets_expire(now=timezone.now()) == 1
    notifications_drain()
    assert "Expired" in texts(last_update(slack))


def test_a_ticket_cancelled_with_its_run_updates_the_message(slack):
    ticket = posted_ticket(slack)
    run_cancel(run=ticket.run, actor=Actor(label="t", source="ui"), reason="")
    notifications_drain()
    assert "Cancelled" in texts(last_update(slack))


def test_a_ticket_closed_before_its_message_is_posted_is_posted_closed(slack):
    slack_channel()
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    decision_submit(
        ticket=ticket, action="approve", actor=Actor(user=user_with_role("operator", "oscar"))
    )
    notifications_drain()
    notifications_drain()
    (message,) = slack.of("chat.postMessage")
    assert action_ids(message) == [] and "Approved* by oscar" in texts(message)
    assert all(
        row.status == NotificationDelivery.Status.DELIVERED
        for row in NotificationDelivery.objects.all()
    )


def test_slacks_refusal_fails_the_delivery_for_good(slack):
    slack.fail["chat.postMessage"] = "channel_not_found"
    slack_channel()
    waiting_run()
    assert notifications_drain()["failed"] == 1
    row = NotificationDelivery.objects.get()
    assert "channel_not_found" in row.last_error


def test_no_slack_app_channel_costs_one_query_on_a_decision(slack, django_assert_max_num_queries):
    run = waiting_run()
    ticket = Ticket.objects.get(run=run)
    from runs.operations.services.notify_slack import tickets_closed_queue

    with django_assert_max_num_queries(1):
        assert tickets_closed_queue([ticket.pk], timezone.now()) == []


# --- the channel ---------------------------------------------------------------------------------


def test_a_slack_app_channel_is_made_on_the_routes_page_with_write_only_secrets(root_client):
    form = {
        "name": "ops-slack",
        "kind": "slack_app",
        "enabled": "on",
        "bot_token": "xoxb-secret-token",
        "signing_secret": SIGNING_SECRET,
        "slack_channel": " C42 ",
    }
    incomplete = root_client.post("/notifications/channels/new", {**form, "bot_token": ""})
    assert incomplete.status_code == 400 and b"Enter the bot token" in incomplete.content
    assert root_client.post("/notifications/channels/new", form).status_code == 302
    row = NotificationChannel.objects.get(name="ops-slack")
    assert row.slack_channel == "C42" and row.url_encrypted == ""
    assert "xoxb-secret-token" not in row.bot_token_encrypted  # encrypted at rest
    page = root_client.get(f"/notifications/channels/{row.pk}/edit")
    assert b"A bot token is stored" in page.content and b"xoxb-secret-token" not in page.content
    kept = {**form, "bot_token": "", "signing_secret": ""}  # blank: kept
    assert root_client.post(f"/notifications/channels/{row.pk}/edit", kept).status_code == 302
    row.refresh_from_db()
    from agents.secrets import decrypt

    assert decrypt(row.bot_token_encrypted) == "xoxb-secret-token"
    assert decrypt(row.signing_secret_encrypted) == SIGNING_SECRET
    entry = AuditEntry.objects.filter(target_type="notificationchannel").first()
    assert entry is not None and "xoxb" not in json.dumps([entry.before, entry.after])


def test_the_admin_offers_the_slack_app_fields(root_client):
    page = root_client.get("/admin/operations/notificationchannel/add/")
    assert page.status_code == 200
    assert b'name="bot_token"' in page.content and b'name="slack_channel"' in page.content
