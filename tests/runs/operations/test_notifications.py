"""Notifications: routing by event, agent and tool; the outbox written with the event
(deduplicated, cheap on the hot path); the drain (delivery, backoff, leases, giving up);
redelivery; signed webhooks, Slack bodies and email; the SSRF guard at send time;
secrets encrypted at rest. Pages and roles: test_notification_pages.py."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from common.audit import Actor
from common.errors import IllegalTransition
from common.models import AuditEntry
from runs.operations.models.notifications import (
    NotificationDelivery,
    NotificationEvent,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.services import notifications as notify
from runs.operations.services import notify_drain
from runs.operations.services.notifications import (
    Route,
    delivery_redeliver,
    notify_ticket,
    subscription_add,
)
from runs.operations.services.notify_drain import notifications_drain
from runs.services.execution import run_advance, runs_sweep
from runs.services.leases import run_claim
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, note_call, scripted_agent, user_with_role, waiting_run
from tests.runs.helpers import drive, expire_lease
from tests.runs.notify_helpers import (
    SECRET,
    channel,
    due_now,
    notify_configured_fixture,  # noqa: F401 (an autouse fixture)
    queued_webhook,
    receiver_fixture,  # noqa: F401 (the `receiver` fixture)
    rule,
    ticket_of,
    verify,
)

pytestmark = pytest.mark.django_db


Status = NotificationDelivery.Status


# --- routing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "event", "agent", "tool", "matched"),
    [
        (Route(1, None, frozenset(), None, ""), "run.failed", 7, None, True),
        (Route(1, None, frozenset({"ticket.opened"}), None, ""), "run.failed", 7, None, False),
        (Route(1, None, frozenset({"ticket.opened"}), None, ""), "ticket.opened", 7, "x", True),
        (Route(1, None, frozenset(), 8, ""), "ticket.opened", 7, "x", False),
        (Route(1, None, frozenset(), 7, ""), "ticket.opened", 7, "x", True),
        (Route(1, None, frozenset(), None, "send_*"), "ticket.opened", 7, "send_mail", True),
        (Route(1, None, frozenset(), None, "send_*"), "ticket.opened", 7, "write_note", False),
        (Route(1, None, frozenset(), None, "send_*"), "run.failed", 7, None, False),
    ],
)
def test_a_route_matches_by_event_agent_and_tool(route, event, agent, tool, matched):
    assert route.matches(event, agent, tool) is matched


def test_an_opened_ticket_is_queued_for_the_matching_rules_only():
    hook = channel("https://hooks.example.com/x")
    other_agent = scripted_agent([{"text": "x"}])
    rule(hook, events=["ticket.opened"], tool="write_*")
    rule(channel("https://b.example.com/", name="wrong tool"), tool="send_*")
    rule(channel("https://c.example.com/", name="wrong event"), events=["run.failed"])
    rule(channel("https://d.example.com/", name="wrong agent"), agent=other_agent)
    rule(channel("https://e.example.com/", name="disabled", enabled=False))
    rule(channel("https://f.example.com/", name="rule disabled"), enabled=False)
    run = waiting_run("lunch")
    (delivery,) = NotificationDelivery.objects.all()
    ticket = ticket_of(run)
    assert (delivery.channel_id, delivery.event) == (hook.pk, "ticket.opened")
    assert delivery.subject == f"ticket:{ticket.pk}"
    payload = delivery.payload
    assert payload["id"] == str(delivery.pk)
    assert payload["ticket"]["tool"] == "write_note"
    assert payload["ticket"]["arguments"] == {"title": "lunch", "body": "b"}
    assert payload["run"]["id"] == str(run.pk)
    assert payload["run"]["status"] == "waiting"
    assert payload["run"]["agent"]["id"] == run.agent.slug
    assert payload["url"].endswith(f"/runs/{run.pk}/")


def test_one_event_is_queued_once_per_destination():
    hook = channel("https://hooks.example.com/x")
    rule(hook, events=["ticket.opened"])
    rule(hook, tool="write_note")  # a second rule to the same channel
    run = waiting_run()
    assert NotificationDelivery.objects.count() == 1
    ticket = ticket_of(run)
    assert notify_ticket(ticket, NotificationEvent.TICKET_OPENED) == 1  # offered again
    assert NotificationDelivery.objects.count() == 1  # … and ignored
    notify_ticket(ticket, NotificationEvent.TICKET_DEADLINE_NEAR)  # another event
    assert NotificationDelivery.objects.count() == 2


def test_subscriptions_queue_for_their_user():
    operator = user_with_role("operator", "olga")
    subscription_add(
        user=operator,
        events=["ticket.opened"],
        agent=None,
        tool="",
        actor=Actor(user=operator, source="ui"),
    )
    run = waiting_run()
    (delivery,) = NotificationDelivery.objects.all()
    assert (delivery.user_id, delivery.channel_id) == (operator.pk, None)
    assert delivery.subject == f"ticket:{ticket_of(run).pk}"
    assert AuditEntry.objects.filter(action="notificationsubscription.create").count() == 1


def test_a_failing_run_is_notified_once():
    hook = channel("https://hooks.example.com/x")
    rule(hook, events=["run.failed"])
    run = drive(run_start(agent=scripted_agent([{"error": "provider says no"}]), messages="x"))
    (delivery,) = NotificationDelivery.objects.all()
    assert (delivery.event, delivery.subject) == ("run.failed", f"run:{run.pk}")
    assert delivery.payload["run"]["error"] == "provider says no"
    assert delivery.payload["run"]["status_reason"] == "error"


def test_a_crashing_segment_is_run_failed_and_a_poison_run_is_given_up(settings, monkeypatch):
    rule(channel("https://hooks.example.com/x"))
    settings.AWAKEN_MAX_ATTEMPTS = 1
    poison = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    for _ in range(2):
        assert run_claim(run_id=poison.pk, worker="dies") is not None
        expire_lease(poison)
        runs_sweep()
    given_up = NotificationDelivery.objects.get(subject=f"run:{poison.pk}")
    assert given_up.event == "run.given_up"
    assert "gave up after" in given_up.payload["run"]["error"]

    crashing = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")

    def boom(self: Any) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr("runs.services.execution.Segment.execute", boom)
    run_advance(run_id=crashing.pk, worker="w")
    failed = NotificationDelivery.objects.get(subject=f"run:{crashing.pk}")
    assert failed.event == "run.failed"
    assert "kaput" in failed.payload["run"]["error"]


# --- the hot path -------------------------------------------------------------------------


def notification_queries(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if "notification" in q["sql"]]


def test_without_routes_a_ticket_costs_one_query_then_none(settings):
    settings.AWAKEN_NOTIFY_ROUTES_CACHE_SECONDS = 60
    run = waiting_run()  # routes looked up (none) and remembered
    ticket = ticket_of(run)
    notify.no_routes.forget()
    with CaptureQueriesContext(connection) as cold:
        assert notify_ticket(ticket, NotificationEvent.TICKET_OPENED) == 0
    assert len(cold.captured_queries) == 1
    with CaptureQueriesContext(connection) as warm:
        assert notify_ticket(ticket, NotificationEvent.TICKET_OPENED) == 0
    assert warm.captured_queries == []
    NotificationRule.objects.create(channel=channel("https://h.example.com/"))
    assert not notify.no_routes.known()  # saving a rule forgets the empty answer


def test_an_empty_answer_read_before_a_change_is_not_remembered():
    read_at = notify.no_routes.generation  # the route query starts: nothing yet
    rule(channel("https://hooks.example.com/x"))  # a rule is saved meanwhile
    notify.no_routes.remember(60, read_at)  # the query's stale empty answer
    assert not notify.no_routes.known()
    assert len(notify.routes()) == 1


def test_a_checkpoint_that_opens_no_ticket_asks_nothing_about_notifications():
    rule(channel("https://hooks.example.com/x"), events=["ticket.opened"])
    run = run_start(agent=scripted_agent([{"text": "hello"}]), messages="hi")
    with CaptureQueriesContext(connection) as queries:
        drive(run)
    assert notification_queries(queries) == []


def test_a_ticket_with_routes_costs_the_route_query_and_the_insert():
    rule(channel("https://hooks.example.com/x"), events=["ticket.opened"])
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call()]}, {"text": "done"}], permission=APPROVAL
    )
    run = run_start(agent=agent, messages="hi")
    with CaptureQueriesContext(connection) as queries:
        drive(run)
    assert len(notification_queries(queries)) == 2  # routes (one query), one bulk insert


# --- the drain ----------------------------------------------------------------------------


def test_a_delivery_is_signed_and_delivered(receiver):
    delivery = queued_webhook(receiver.url)
    assert notifications_drain() == {"delivered": 1, "retrying": 0, "failed": 0, "lost": 0}
    ((headers, body),) = receiver.requests
    assert headers["X-Awaken-Event"] == "ticket.opened"
    assert headers["X-Awaken-Delivery"] == str(delivery.pk)
    assert headers["Content-Type"] == "application/json"
    assert verify(SECRET, headers["X-Awaken-Signature"], body)
    assert not verify("another secret", headers["X-Awaken-Signature"], body)
    assert not verify(SECRET, headers["X-Awaken-Signature"], body + b" ")
    assert json.loads(body) == delivery.payload
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("delivered", 1, 200)
    assert delivery.delivered_at is not None
    assert notifications_drain()["delivered"] == 0  # nothing is sent twice


def test_a_failed_attempt_backs_off_exponentially_then_gives_up(receiver, settings):
    settings.AWAKEN_NOTIFY_MAX_ATTEMPTS = 3
    receiver.status = 503
    delivery = queued_webhook(receiver.url)
    for attempt, delay in [(1, 10.0), (2, 20.0)]:
        before = timezone.now()
        assert notifications_drain()["retrying"] == 1
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts) == ("pending", attempt)
        assert delivery.response_code == 503
        assert delivery.last_error.startswith("HTTP 503")
        wait = (delivery.next_attempt_at - before).total_seconds()
        assert delay / 2 - 1 <= wait <= delay + 1  # jitter: half to all of the delay
        assert notifications_drain()["retrying"] == 0  # not due yet
        due_now(delivery)
    assert notifications_drain()["failed"] == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert len(receiver.requests) == 3


def test_the_backoff_is_capped(settings):
    settings.AWAKEN_NOTIFY_RETRY_MAX_SECONDS = 60.0
    assert all(30.0 <= notify_drain.retry_delay(attempts) <= 60.0 for attempts in (4, 10, 40))


def test_a_refused_connection_is_retried_and_a_lapsed_lease_is_taken_again(receiver):
    url = receiver.url
    receiver.close()  # nothing listens there any more
    delivery = queued_webhook(url)
    assert notifications_drain()["retrying"] == 1
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.response_code is None
    assert "Connection refused" in delivery.last_error or "Errno" in delivery.last_error
    # a drainer took it and died: `sending` until its lease lapses
    NotificationDelivery.objects.filter(pk=delivery.pk).update(
        status=Status.SENDING, next_attempt_at=timezone.now() + dt.timedelta(seconds=60)
    )
    assert notifications_drain()["retrying"] == 0  # leased: not due
    due_now(delivery)
    assert notifications_drain()["retrying"] == 1  # the lease lapsed: due again
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("pending", 2)


def test_a_drainer_that_lost_its_lease_writes_nothing(receiver, monkeypatch):
    delivery = queued_webhook(receiver.url)
    original = notify_drain.send_delivery

    def slow_send(row: NotificationDelivery) -> Any:
        # meanwhile the lease lapsed and another drainer took the row
        NotificationDelivery.objects.filter(pk=row.pk).update(attempts=row.attempts + 1)
        return original(row)

    monkeypatch.setattr(notify_drain, "send_delivery", slow_send)
    assert notifications_drain()["lost"] == 1
    delivery.refresh_from_db()
    assert delivery.status == "sending"  # the other drainer's to finish


def test_redeliver_queues_a_failed_delivery_again_and_is_audited(receiver, settings):
    settings.AWAKEN_NOTIFY_MAX_ATTEMPTS = 1
    receiver.status = 500
    delivery = queued_webhook(receiver.url)
    assert notifications_drain()["failed"] == 1
    delivery.refresh_from_db()
    receiver.status = 200
    admin = user_with_role("admin", "ada")
    delivery_redeliver(delivery, Actor(user=admin, source="admin"))
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 0, "")
    entry = AuditEntry.objects.get(action="notification.redeliver")
    assert entry.target_id == str(delivery.pk) and entry.actor == admin
    with pytest.raises(IllegalTransition):
        delivery_redeliver(delivery, Actor(user=admin, source="admin"))  # still queued
    assert notifications_drain()["delivered"] == 1
    assert [h["X-Awaken-Delivery"] for h, _ in receiver.requests] == [str(delivery.pk)] * 2


# --- formats ------------------------------------------------------------------------------


def test_a_slack_channel_gets_text_and_blocks_unsigned(receiver):
    NotificationRule.objects.create(channel=channel(receiver.url, kind="slack", name="slack"))
    waiting_run()
    delivery = NotificationDelivery.objects.get()
    delivery.payload["ticket"]["message"] = "approve <b>lunch</b> & more"  # a tool's question
    delivery.save()
    assert notifications_drain()["delivered"] == 1
    ((headers, body),) = receiver.requests
    assert "X-Awaken-Signature" not in headers
    data = json.loads(body)
    assert set(data) == {"text", "blocks"}
    assert data["text"].startswith("Ticket opened: write_note")
    section = data["blocks"][0]["text"]["text"]
    assert "approve &lt;b&gt;lunch&lt;/b&gt; &amp; more" in section
    assert "<b>" not in section


def test_an_email_channel_and_a_subscriber_get_email():
    rule(channel(kind="email", name="ops mail", email_to="ops@example.com, lead@example.com"))
    olga = user_with_role("operator", "olga")
    olga.email = "olga@example.com"
    olga.save()
    NotificationSubscription.objects.create(user=olga, events=["ticket.opened"])
    run = waiting_run()
    assert notifications_drain()["delivered"] == 2
    assert sorted(tuple(m.to) for m in mail.outbox) == [
        ("olga@example.com",),
        ("ops@example.com", "lead@example.com"),
    ]
    assert all(m.subject.startswith("[Awaken Ops] Ticket opened: write_note") for m in mail.outbox)
    assert all(f"/runs/{run.pk}/" in m.body for m in mail.outbox)


def test_a_subscriber_without_email_fails_with_a_clear_error():
    vic = user_with_role("viewer", "vic")
    NotificationSubscription.objects.create(user=vic)
    waiting_run()
    assert notifications_drain()["failed"] == 1
    delivery = NotificationDelivery.objects.get()
    assert delivery.last_error.startswith("user vic has no email address")
    assert mail.outbox == []


def test_a_delivery_queued_while_its_destination_was_deleted_fails_for_good(receiver):
    # the race an admin's delete can lose to a checkpoint: the row names a channel (or a
    # user) that is gone by the time it is sent; no database constraint failed the
    # checkpoint that queued it
    delivery = queued_webhook(receiver.url)
    NotificationDelivery.objects.create(
        user_id=delivery.channel_id + 10_000,
        event=delivery.event,
        subject=delivery.subject,
        payload=delivery.payload,
    )
    NotificationDelivery.objects.filter(pk=delivery.pk).update(
        channel_id=delivery.channel_id + 10_000
    )
    assert notifications_drain()["failed"] == 2
    errors = set(NotificationDelivery.objects.values_list("last_error", flat=True))
    assert errors == {"the channel was deleted", "the subscriber's account was deleted"}
    assert receiver.requests == []


# --- the SSRF guard and secrets -----------------------------------------------------------


def test_a_private_address_is_refused_at_send_time(settings, receiver):
    delivery = queued_webhook(receiver.url)
    settings.AWAKEN_NOTIFY_ALLOW_PRIVATE = False
    assert notifications_drain()["failed"] == 1  # not retried: it will not become public
    delivery.refresh_from_db()
    assert "non-public" in delivery.last_error and "127.0.0.1" in delivery.last_error
    assert receiver.requests == []


def test_secrets_are_encrypted_in_the_row():
    hook = channel("https://hooks.example.com/path?token=t0ps3cret")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT url_encrypted, signing_secret_encrypted, url_display "
            "FROM runs_notificationchannel WHERE id = %s",
            [hook.pk],
        )
        url, secret, display = cursor.fetchone()
    assert "t0ps3cret" not in url and "hooks.example.com" not in url
    assert SECRET not in secret
    assert display == "https://hooks.example.com"
