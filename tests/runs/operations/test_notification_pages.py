"""Notification pages and roles: admins configure channels (write-only secrets, the SSRF
guard) and rules and redeliver from the log; viewers and operators read them; every user
with view_run manages their own subscriptions on the Notifications page."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from common.models import AuditEntry
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationRule,
    NotificationSubscription,
)
from runs.operations.services.notify_drain import notifications_drain
from runs.operations.services.notify_send import channel_secret
from tests.factories import scripted_agent, user_with_role
from tests.runs.notify_helpers import (
    channel,
    notify_configured_fixture,  # noqa: F401 (an autouse fixture)
    queued_webhook,
    receiver_fixture,  # noqa: F401 (the `receiver` fixture)
    rule,
)

pytestmark = pytest.mark.django_db


def staff_client(client: Any, role: str, name: str) -> Any:
    user = user_with_role(role, name)
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    client.force_login(user)
    return client


def channel_form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "ops hook",
        "kind": "webhook",
        "enabled": "on",
        "email_to": "",
        "url": "https://hooks.example.com/in?token=t0ps3cret",
        "signing_secret": "",
        **fields,
    }


def test_an_admin_adds_a_webhook_channel_and_sees_its_generated_secret_once(client, settings):
    settings.AWAKEN_NOTIFY_ALLOW_PRIVATE = True
    admin = staff_client(client, "admin", "ada")
    url = "http://127.0.0.1:9/in?token=t0ps3cret"
    response = admin.post(
        reverse("admin:operations_notificationchannel_add"), channel_form(url=url)
    )
    assert response.status_code == 200, response.content
    assert "no-store" in response["Cache-Control"]
    hook = NotificationChannel.objects.get()
    secret = channel_secret(hook)
    assert secret.startswith("whsec_") and secret in response.content.decode()
    assert hook.url_display == "http://127.0.0.1:9"
    entry = AuditEntry.objects.get(action="notificationchannel.create")
    assert "t0ps3cret" not in json.dumps(entry.after) and secret not in json.dumps(entry.after)
    assert entry.after["url_stored"] is True and entry.after["signing_secret_stored"] is True
    page = admin.get(reverse("admin:operations_notificationchannel_change", args=[hook.pk]))
    assert secret not in page.content.decode() and "t0ps3cret" not in page.content.decode()


def test_the_admin_refuses_a_private_webhook_address(client, settings):
    settings.AWAKEN_NOTIFY_ALLOW_PRIVATE = False
    admin = staff_client(client, "admin", "ada")
    response = admin.post(
        reverse("admin:operations_notificationchannel_add"),
        channel_form(url="http://127.0.0.1:9/in"),
    )
    assert response.status_code == 200
    assert "non-public" in response.content.decode()
    assert "AWAKEN_NOTIFY_ALLOW_PRIVATE" in response.content.decode()
    assert not NotificationChannel.objects.exists()


def test_an_admin_routes_events_with_a_rule(client):
    admin = staff_client(client, "admin", "ada")
    hook = channel("https://hooks.example.com/x")
    data = {"channel": hook.pk, "events": ["run.failed"], "tool": "send_*", "enabled": "on"}
    response = admin.post(reverse("admin:operations_notificationrule_add"), data)
    assert response.status_code == 200 and "ticket events only" in response.content.decode()
    data["events"] = ["ticket.opened", "ticket.deadline_near"]
    assert admin.post(reverse("admin:operations_notificationrule_add"), data).status_code == 302
    assert NotificationRule.objects.get().events == ["ticket.opened", "ticket.deadline_near"]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_read_channels_and_rules_but_do_not_configure(client, role):
    hook = channel("https://hooks.example.com/x")
    staff = staff_client(client, role, role)
    assert staff.get(reverse("admin:operations_notificationchannel_changelist")).status_code == 200
    assert staff.get(reverse("admin:operations_notificationrule_changelist")).status_code == 200
    change = reverse("admin:operations_notificationchannel_change", args=[hook.pk])
    assert staff.get(change).status_code == 200
    assert staff.post(change, channel_form()).status_code == 403
    add = reverse("admin:operations_notificationchannel_add")
    assert staff.post(add, channel_form(name="mine")).status_code == 403
    rules = reverse("admin:operations_notificationrule_add")
    assert staff.post(rules, {"channel": hook.pk, "enabled": "on"}).status_code == 403
    assert staff.get(reverse("admin:operations_notificationdelivery_changelist")).status_code == 403
    assert NotificationChannel.objects.count() == 1 and not NotificationRule.objects.exists()


def test_an_admin_redelivers_from_the_delivery_log(client, receiver, settings):
    settings.AWAKEN_NOTIFY_MAX_ATTEMPTS = 1
    receiver.status = 500
    delivery = queued_webhook(receiver.url)
    notifications_drain()
    admin = staff_client(client, "admin", "ada")
    log = reverse("admin:operations_notificationdelivery_changelist")
    page = admin.get(log)
    assert page.status_code == 200 and "HTTP 500" in page.content.decode()
    assert str(delivery.pk) in admin.get(log, {"q": str(delivery.pk)}).content.decode()
    assert admin.get(log, {"q": "not-a-uuid"}).status_code == 200
    response = admin.post(log, {"action": "redeliver", "_selected_action": [str(delivery.pk)]})
    assert response.status_code == 302
    delivery.refresh_from_db()
    assert delivery.status == "pending"
    assert AuditEntry.objects.filter(action="notification.redeliver").count() == 1


def test_an_operator_subscribes_and_unsubscribes_themselves(client):
    olga = user_with_role("operator", "olga")
    client.force_login(olga)
    agent = scripted_agent([{"text": "x"}])
    url = reverse("runs:notifications")
    assert client.get(url).status_code == 200
    response = client.post(
        url, {"events": ["ticket.opened"], "agent": agent.slug, "tool": "write_*"}
    )
    assert response.status_code == 302
    subscription = NotificationSubscription.objects.get()
    assert (subscription.user, subscription.agent, subscription.tool) == (olga, agent, "write_*")
    assert subscription.events == ["ticket.opened"]
    refused = client.post(url, {"events": ["run.failed"], "tool": "write_*"})
    assert refused.status_code == 400 and "ticket events only" in refused.content.decode()
    page = client.get(url).content.decode()
    assert "write_*" in page and "no email address" in page
    other = NotificationSubscription.objects.create(user=user_with_role("operator", "otto"))
    delete = reverse("runs:notification-unsubscribe", args=[other.pk])
    assert client.post(delete).status_code == 404  # another user's
    own = reverse("runs:notification-unsubscribe", args=[subscription.pk])
    assert client.post(own).status_code == 302
    assert list(NotificationSubscription.objects.all()) == [other]


def test_a_viewer_reads_the_page_with_the_team_routing(client):
    rule(channel("https://hooks.example.com/x", name="team hook"), events=["run.failed"])
    client.force_login(user_with_role("viewer", "vic"))
    page = client.get(reverse("runs:notifications"))
    assert page.status_code == 200
    assert "team hook" in page.content.decode() and "run.failed" in page.content.decode()
    assert "hooks.example.com" not in page.content.decode()


def test_a_user_who_may_not_view_runs_gets_no_notifications_page(client):
    client.force_login(User.objects.create_user("nobody", password="x"))
    assert client.get(reverse("runs:notifications")).status_code == 403
    assert client.post(reverse("runs:notifications"), {"events": []}).status_code == 403
    assert not NotificationSubscription.objects.exists()


def test_slack_and_email_channels_have_no_secret_and_email_needs_addresses(client):
    admin = staff_client(client, "admin", "ada")
    add = reverse("admin:operations_notificationchannel_add")
    slack = admin.post(
        add, channel_form(name="slack", kind="slack", url="http://127.0.0.1:9/services/T0/B0")
    )
    assert slack.status_code == 302  # nothing to show once
    assert NotificationChannel.objects.get(name="slack").signing_secret_encrypted == ""
    refused = admin.post(
        add, channel_form(name="mail", kind="email", url="", email_to="ops@example.com, nope")
    )
    assert refused.status_code == 200 and "&#x27;nope&#x27; is not an email address" in (
        refused.content.decode()
    )
    signed = admin.post(
        add,
        channel_form(
            name="mail", kind="email", url="", email_to="ops@example.com", generate_secret="on"
        ),
    )
    assert "Only webhook channels sign" in signed.content.decode()
    ok = admin.post(
        add,
        channel_form(name="mail", kind="email", url="", email_to=" ops@example.com ,a@example.com"),
    )
    assert ok.status_code == 302
    mail_channel = NotificationChannel.objects.get(name="mail")
    assert mail_channel.email_to == "ops@example.com, a@example.com"
    assert mail_channel.url_encrypted == "" and mail_channel.url_display == ""
