"""E-mail approvals (docs/approvals-slack-email.md): a ticket's e-mail carries signed,
single-use, expiring links per action; opening one (a mail scanner's GET) decides nothing;
a signed-in operator confirms and the decision is recorded as from e-mail; a link used
twice, expired, altered or someone else's is refused clearly; a viewer's link cannot
decide."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import pytest
from django.core import mail
from django.test import Client

from common.audit import Actor
from common.models import AuditEntry
from runs.models import Decision, Ticket
from runs.operations.models.notifications import NotificationSubscription
from runs.operations.services import notifications as notify
from runs.operations.services.email_links import approval_url
from runs.operations.services.notify_drain import notifications_drain
from runs.services.tickets import decision_submit
from tests.factories import team, team_member, user_with_role, waiting_run
from tests.runs.notify_helpers import channel, notify_settings, rule

pytestmark = pytest.mark.django_db

SITE = "https://ops.example.com"


@pytest.fixture(autouse=True)
def _mail(settings: Any) -> Any:
    notify_settings(settings)
    settings.AWAKEN_PUBLIC_URL = SITE
    yield
    notify.no_routes.forget()


def mailed_links(user: Any) -> dict[str, str]:
    """Subscribe `user`, open a ticket, send the e-mail; its links by label (as paths)."""
    user.email = f"{user.username}@example.com"
    user.save()
    NotificationSubscription.objects.create(user=user, events=["ticket.opened"])
    waiting_run()
    assert notifications_drain()["delivered"] == 1
    (message,) = mail.outbox
    found = dict(re.findall(r"^  (\w+): " + re.escape(SITE) + r"(\S+)$", message.body, re.M))
    assert set(found) == {"Approve", "Reject"}, message.body
    return found


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def ticket() -> Ticket:
    return Ticket.objects.get()


def test_the_email_carries_a_link_per_action():
    links = mailed_links(user_with_role("operator", "olga"))
    assert links["Approve"] != links["Reject"]
    assert all(path.startswith("/approvals/email/") for path in links.values())


def test_a_channels_email_carries_links_too():
    rule(
        channel(kind="email", name="ops-mail", email_to="ops@example.com"), events=["ticket.opened"]
    )
    waiting_run()
    notifications_drain()
    (message,) = mail.outbox
    assert "Approve: " + SITE + "/approvals/email/" in message.body


def test_a_scanner_opening_the_link_decides_nothing():
    links = mailed_links(user_with_role("operator", "olga"))
    for path in links.values():  # a mail scanner, signed out: sent to sign in
        response = Client().get(path)
        assert response.status_code == 302 and "/login/" in response["Location"]
        assert Client().head(path).status_code in (302, 405)
    olga = signed_in(user_with_role("operator", "oscar"))  # not the recipient: refused
    assert olga.get(links["Approve"]).status_code == 403
    assert ticket().status == Ticket.Status.PENDING
    assert not Decision.objects.exists()


def test_the_recipient_confirms_and_the_decision_is_recorded_as_from_email():
    olga = user_with_role("operator", "olga")
    links = mailed_links(olga)
    client = signed_in(olga)
    page = client.get(links["Approve"])
    assert page.status_code == 200 and b"Opening this page decided nothing" in page.content
    assert ticket().status == Ticket.Status.PENDING
    done = client.post(links["Approve"])
    assert done.status_code == 200 and b"link-done" in done.content
    decision = Decision.objects.get()
    assert (decision.action, decision.actor, decision.actor_label) == (
        "approve",
        olga,
        "olga (e-mail)",
    )
    entry = AuditEntry.objects.get(action="ticket.approve")
    assert entry.source == "email"


def test_reject_by_link_takes_the_reason_and_a_required_one_is_asked_for():
    olga = user_with_role("operator", "olga")
    links = mailed_links(olga)
    agent = ticket().run.agent
    agent.team = team("ops", reason_required=True)
    agent.save()
    client = signed_in(olga)
    refused = client.post(links["Reject"], {"comment": ""})
    assert refused.status_code == 400 and b"requires a reason" in refused.content
    assert not Decision.objects.exists()
    assert client.post(links["Reject"], {"comment": "too costly"}).status_code == 200
    assert Decision.objects.get().comment == "too costly"


def test_a_link_used_twice_is_refused():
    olga = user_with_role("operator", "olga")
    links = mailed_links(olga)
    client = signed_in(olga)
    assert client.post(links["Approve"]).status_code == 200
    again = client.post(links["Approve"])
    assert again.status_code == 409 and b"This link was used already" in again.content
    other = client.get(links["Reject"])  # the other action's link: the ticket is closed
    assert other.status_code == 409 and b"This ticket is closed" in other.content
    assert Decision.objects.count() == 1


def test_an_expired_link_is_refused(monkeypatch, settings):
    olga = user_with_role("operator", "olga")
    mailed_links(olga)
    settings.AWAKEN_EMAIL_APPROVAL_SECONDS = 3600
    old = time.time() - 3601
    monkeypatch.setattr("django.core.signing.time.time", lambda: old)
    path = approval_url(ticket().pk, "approve", olga.pk).removeprefix(SITE)
    monkeypatch.undo()
    response = signed_in(olga).post(path)
    assert response.status_code == 400 and b"This link has expired" in response.content
    assert not Decision.objects.exists()


def test_an_altered_link_is_refused():
    olga = user_with_role("operator", "olga")
    links = mailed_links(olga)
    path = links["Approve"]
    token = path.removeprefix("/approvals/email/")
    rest = token.split(".", 1)[1]
    other = str(uuid.uuid4())
    altered = [
        "/approvals/email/" + token[:-3] + ("aaa" if not token.endswith("aaa") else "bbb"),
        "/approvals/email/" + token.replace(".approve.", ".reject."),
        "/approvals/email/" + f"{other}.{rest}",
        "/approvals/email/" + token.split(":", 1)[0],  # no signature
    ]
    client = signed_in(olga)
    responses = [client.get(path) for path in altered] + [client.post(path) for path in altered]
    for response in responses:
        assert response.status_code == 404 and b"This link is not valid" in response.content
    assert not Decision.objects.exists()


def test_a_viewers_link_cannot_decide():
    vic = user_with_role("viewer", "vic")
    links = mailed_links(vic)
    client = signed_in(vic)
    page = client.get(links["Approve"])
    assert page.status_code == 200 and b"confirm-refused" in page.content
    assert b"<form" not in page.content.split(b"ticket-confirm", 1)[1]
    assert client.post(links["Approve"]).status_code == 403
    assert not Decision.objects.exists()


def test_another_teams_ticket_answers_as_an_altered_link():
    olga = team_member("operator", "alpha", "olga")
    mailed_links(user_with_role("operator", "oscar"))
    agent = ticket().run.agent
    agent.team = team("beta")
    agent.save()
    path = approval_url(ticket().pk, "approve").removeprefix(SITE)
    for response in (signed_in(olga).get(path), signed_in(olga).post(path)):
        assert response.status_code == 404 and b"This link is not valid" in response.content
    assert not Decision.objects.exists()


def test_a_link_to_a_ticket_decided_elsewhere_says_who_decided():
    olga = user_with_role("operator", "olga")
    links = mailed_links(olga)
    decision_submit(
        ticket=ticket(), action="reject", comment="no", actor=Actor(user=olga, label="oscar")
    )
    response = signed_in(olga).post(links["Approve"])
    assert response.status_code == 409 and b"oscar decided it (reject)" in response.content


def test_a_closed_tickets_email_has_no_links():
    olga = user_with_role("operator", "olga")
    olga.email = "olga@example.com"
    olga.save()
    NotificationSubscription.objects.create(user=olga, events=["ticket.opened"])
    run = waiting_run()
    decision_submit(ticket=Ticket.objects.get(run=run), action="approve")
    notifications_drain()
    (message,) = mail.outbox
    assert "/approvals/email/" not in message.body
