"""Shared by the notification tests: the settings they run with, a webhook receiver on
loopback, channels and rules made directly, and the receiver's signature check.

Two fixtures, for a test module to import by their function names (pytest registers
fixtures found in the module's namespace): `notify_configured_fixture` (autouse: every
test of a module that imports it runs with `notify_settings`) and `receiver_fixture`
(the `receiver` argument). They are named apart from the argument so that importing one
does not shadow a test's parameter."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.utils import timezone

from runs.models import Run, Ticket
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
)
from runs.operations.services import notifications as notify
from runs.operations.services.notify_send import channel_set_secret, channel_set_url
from tests.factories import waiting_run

SECRET = "whsec_test-secret-0123456789"


def notify_settings(settings: Any) -> None:
    """Fast, local notifications for a test; the routes cache starts unknowing (rows of
    earlier tests were rolled back without signals). Call `notify.no_routes.forget()`
    again when the test ends."""
    settings.AWAKEN_NOTIFY_ALLOW_PRIVATE = True
    settings.AWAKEN_NOTIFY_RETRY_BASE_SECONDS = 10.0
    settings.AWAKEN_NOTIFY_RETRY_MAX_SECONDS = 100.0
    settings.AWAKEN_NOTIFY_MAX_ATTEMPTS = 5
    settings.AWAKEN_NOTIFY_TIMEOUT = 5.0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    notify.no_routes.forget()


@pytest.fixture(autouse=True, name="notify_configured")
def notify_configured_fixture(settings: Any) -> Iterator[None]:
    notify_settings(settings)
    yield
    notify.no_routes.forget()


class Receiver:
    """A webhook receiver on loopback that records what it gets and answers `status`."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers.items()), body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if receiver.status >= 300 else b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/awaken?token=t0ps3cret"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(name="receiver")
def receiver_fixture() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def channel(
    url: str = "", *, kind: str = "webhook", name: str = "hook", **fields: Any
) -> NotificationChannel:
    row = NotificationChannel(name=name, kind=kind, **fields)
    if url:
        channel_set_url(row, url)
    if kind == "webhook":
        channel_set_secret(row, SECRET)
    row.save()
    return row


def rule(target: NotificationChannel, **fields: Any) -> NotificationRule:
    return NotificationRule.objects.create(channel=target, **fields)


def verify(secret: str, header: str, body: bytes, tolerance: float = 300) -> bool:
    """What a receiver does (docs/notifications.md)."""
    parts = dict(item.split("=", 1) for item in header.split(","))
    timestamp = int(parts["t"])
    signed = f"{timestamp}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts["v1"]) and abs(time.time() - timestamp) < tolerance


def due_now(delivery: NotificationDelivery) -> None:
    NotificationDelivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() - dt.timedelta(seconds=1)
    )


def ticket_of(run: Run) -> Ticket:
    return Ticket.objects.get(run=run)


def queued_webhook(url: str, **rule_fields: Any) -> NotificationDelivery:
    rule(channel(url), **rule_fields)
    waiting_run()
    return NotificationDelivery.objects.get()
