"""Sending notifications beside the runs (docs/notifications.md, "Sending beside the
runs"): the task's own queue, one drainer per destination, the circuit breaker per
destination, the whole-attempt deadline, and the embedded senders' doorbell."""

from __future__ import annotations

import datetime as dt
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from runs.metrics import database_gauges
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
)
from runs.operations.services import notifications as notify
from runs.operations.services.notify_drain import notifications_drain
from runs.operations.services.notify_send import post_json
from tests.factories import user_with_role
from tests.runs.notify_helpers import (
    Receiver,
    channel,
    notify_configured_fixture,  # noqa: F401 (an autouse fixture)
    receiver_fixture,  # noqa: F401 (the `receiver` fixture)
)

pytestmark = pytest.mark.django_db


def queue(target: NotificationChannel, count: int) -> list[NotificationDelivery]:
    now = timezone.now() - dt.timedelta(seconds=1)
    rows = [
        NotificationDelivery(
            channel=target,
            event="run.failed",
            subject=f"run:{target.pk}-{n}",
            payload={"event": "run.failed", "n": n},
            created_at=now,
            next_attempt_at=now + dt.timedelta(microseconds=n),
        )
        for n in range(count)
    ]
    return NotificationDelivery.objects.bulk_create(rows)


def statuses(target: NotificationChannel) -> dict[str, int]:
    found: dict[str, int] = {}
    for status in NotificationDelivery.objects.filter(channel=target).values_list(
        "status", flat=True
    ):
        found[status] = found.get(status, 0) + 1
    return found


def circuit_of(target: NotificationChannel) -> NotificationCircuit:
    return NotificationCircuit.objects.get(destination=f"channel:{target.pk}")


def test_the_drain_task_has_its_own_queue():
    assert django_settings.CELERY_TASK_ROUTES[notify.DRAIN_TASK] == {"queue": "notifications"}
    route = notify.current_app.amqp.router.route({}, notify.DRAIN_TASK)
    assert route["queue"].name == "notifications"
    assert notify.current_app.conf.task_default_queue == "celery"  # the runs' queue


def test_after_failures_in_a_row_the_circuit_opens_and_the_rest_wait_unattempted(
    receiver, settings
):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 3
    settings.AWAKEN_NOTIFY_CIRCUIT_SECONDS = 60.0
    receiver.status = 503
    failing = channel(receiver.url, name="failing")
    queue(failing, 8)
    assert notifications_drain() == {"delivered": 0, "retrying": 3, "failed": 0, "lost": 0}
    assert len(receiver.requests) == 3
    circuit = circuit_of(failing)
    assert circuit.failures == 3 and circuit.is_open() and circuit.busy_until is None
    assert circuit.last_error.startswith("HTTP 503")
    rows = NotificationDelivery.objects.filter(channel=failing)
    assert statuses(failing) == {"pending": 8}
    assert sorted(rows.values_list("attempts", flat=True)) == [0] * 5 + [1] * 3
    # while it is open nothing is sent to it, however due its deliveries are
    rows.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    assert notifications_drain()["retrying"] == 0
    assert len(receiver.requests) == 3


def test_after_the_cool_down_one_failure_opens_it_again_and_a_success_closes_it(receiver, settings):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 2
    receiver.status = 500
    target = channel(receiver.url)
    queue(target, 5)
    notifications_drain()
    assert len(receiver.requests) == 2 and circuit_of(target).is_open()
    cooled = NotificationCircuit.objects.filter(destination=f"channel:{target.pk}")
    cooled.update(open_until=timezone.now() - dt.timedelta(seconds=1))
    NotificationDelivery.objects.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    notifications_drain()  # half open: one try, which fails
    assert len(receiver.requests) == 3 and circuit_of(target).is_open()
    cooled.update(open_until=timezone.now() - dt.timedelta(seconds=1))
    NotificationDelivery.objects.update(next_attempt_at=timezone.now() - dt.timedelta(seconds=1))
    receiver.status = 200
    assert notifications_drain()["delivered"] == 5
    circuit = circuit_of(target)
    assert (circuit.failures, circuit.open_until) == (0, None)
    assert circuit.last_success_at is not None
    assert statuses(target) == {"delivered": 5}


def test_a_failure_of_our_own_configuration_does_not_open_the_circuit(settings):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 1
    disabled = channel("https://hooks.example.com/x", enabled=False)
    queue(disabled, 3)
    assert notifications_drain()["failed"] == 3  # "the channel is disabled", at once
    assert not circuit_of(disabled).is_open()


def test_another_destination_is_not_held_up_by_one_that_fails(receiver, settings):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 2
    down = Receiver(status=502)
    try:
        failing = channel(down.url, name="failing")
        healthy = channel(receiver.url, name="healthy")
        queue(failing, 20)  # the oldest
        queue(healthy, 3)
        counts = notifications_drain()
    finally:
        down.close()
    assert (counts["delivered"], counts["retrying"]) == (3, 2)
    assert statuses(healthy) == {"delivered": 3}


def test_a_destination_another_drainer_holds_is_left_to_it(receiver):
    held = channel(receiver.url, name="held")
    free = channel(receiver.url, name="free")
    queue(held, 2)
    queue(free, 1)
    NotificationCircuit.objects.create(
        destination=f"channel:{held.pk}", busy_until=timezone.now() + dt.timedelta(seconds=60)
    )
    assert notifications_drain()["delivered"] == 1
    assert statuses(held) == {"pending": 2} and statuses(free) == {"delivered": 1}
    # its holder died: the lease lapses and the next drain takes the destination
    NotificationCircuit.objects.filter(destination=f"channel:{held.pk}").update(
        busy_until=timezone.now() - dt.timedelta(seconds=1)
    )
    assert notifications_drain()["delivered"] == 2


@pytest.fixture
def trickler() -> Iterator[int]:
    """A receiver that answers one byte of its status line every 0.2 s, for ever: each
    read gets data well within the socket's timeout."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    def drip(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def test_an_attempt_ends_at_its_deadline_however_the_receiver_trickles(trickler, settings):
    settings.AWAKEN_NOTIFY_TIMEOUT = 1.0
    started = time.monotonic()
    outcome = post_json(f"http://127.0.0.1:{trickler}/hook", b"{}", {})
    took = time.monotonic() - started
    assert not outcome.ok and outcome.error == "timed out after 1s"
    assert took < 2.0, took


def test_the_embedded_senders_doorbell_takes_the_kick(monkeypatch: Any):
    sent: list[str] = []

    class NoQueue:
        def delay(self) -> None:
            sent.append("queued")

    monkeypatch.setitem(notify.current_app.tasks, notify.DRAIN_TASK, NoQueue())
    bell = threading.Event()
    monkeypatch.setattr(notify.doorbell, "local", bell)
    notify.kick_drain()
    assert bell.is_set() and sent == []  # rung here, nothing sent to the queue
    monkeypatch.setattr(notify.doorbell, "local", None)
    notify.kick_drain()
    assert sent == ["queued"]


def test_the_channels_admin_shows_a_paused_channel_and_why(client, receiver, settings):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 2
    receiver.status = 503
    paused = channel(receiver.url, name="paused hook")
    channel("https://hooks.example.com/x", name="quiet hook")
    queue(paused, 3)
    notifications_drain()
    admin = user_with_role("admin", "ada")
    admin.is_staff = True
    admin.save(update_fields=["is_staff"])
    client.force_login(admin)
    page = client.get(reverse("admin:operations_notificationchannel_changelist")).content.decode()
    assert "paused until" in page and "after 2 failures in a row: HTTP 503" in page
    assert page.count(">ok<") == 1  # the quiet one
    detail = client.get(reverse("admin:operations_notificationchannel_change", args=[paused.pk]))
    assert "paused until" in detail.content.decode()


def test_the_paused_destinations_are_a_metric(receiver, settings):
    settings.AWAKEN_NOTIFY_CIRCUIT_FAILURES = 1
    receiver.status = 500
    queue(channel(receiver.url), 2)
    notifications_drain()
    gauges = {m.name: m for m in database_gauges._read()}
    (sample,) = gauges["awaken_notification_circuits_open"].samples
    assert sample.value == 1
