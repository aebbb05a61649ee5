"""The embedded default sends notifications from threads of its own: a receiver that
hangs neither delays the in-process worker's runs nor another channel's notification,
which an event's doorbell sends at once (docs/notifications.md, "Sending beside the
runs")."""

from __future__ import annotations

import datetime as dt
import socket
import time

import pytest
from django.utils import timezone

from runs.models import Run
from runs.operations.models.notifications import NotificationDelivery
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.runs.notify_helpers import (
    Receiver,
    channel,
    notify_configured_fixture,  # noqa: F401 (an autouse fixture)
)


def wait(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow  # starts a Celery worker and the senders in this process
@pytest.mark.usefixtures("empty_broker")
@pytest.mark.django_db(transaction=True)
def test_a_hanging_receiver_holds_one_embedded_sender_and_no_run(settings):
    from runs.embedded import start_embedded_worker, stop_embedded_worker
    from runs.operations.services.notifications import kick_drain

    settings.AWAKEN_NOTIFY_TIMEOUT = 3.0
    hanging = socket.socket()
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(64)  # accepts (the kernel does), never answers
    healthy = Receiver()
    slow = channel(f"http://127.0.0.1:{hanging.getsockname()[1]}/hook", name="hanging")
    fine = channel(healthy.url, name="fine")
    agent = scripted_agent([{"text": "hello"}])

    def five_runs(label: str) -> float:
        started = time.monotonic()
        runs = [run_start(agent=agent, messages=f"{label} {n}") for n in range(5)]
        assert wait(
            lambda: Run.objects.filter(pk__in=[r.pk for r in runs], status="done").count() == 5,
            20,
        )
        return time.monotonic() - started

    start_embedded_worker()
    try:
        five_runs("warm-up")
        quiet = five_runs("quiet")
        past = timezone.now() - dt.timedelta(seconds=1)
        NotificationDelivery.objects.bulk_create(
            NotificationDelivery(
                channel=slow,
                event="run.failed",
                subject=f"run:hanging-{n}",
                payload={"n": n},
                next_attempt_at=past,
            )
            for n in range(10)
        )
        kick_drain()
        assert wait(
            lambda: NotificationDelivery.objects.filter(channel=slow, status="sending").exists(),
            5,
        ), "the first send to the hanging receiver"
        beside = five_runs("beside")
        # another channel's notification goes out at once, from the other sender
        NotificationDelivery.objects.create(
            channel=fine, event="run.failed", subject="run:fine", payload={"fine": True}
        )
        kick_drain()
        rung = time.monotonic()
        assert wait(lambda: len(healthy.requests) == 1, 2.5), "the healthy channel's send"
        delivered_after = time.monotonic() - rung
    finally:
        stop_embedded_worker()
        healthy.close()
        hanging.close()
    assert beside < quiet + 0.5, f"5 runs: {quiet:.2f}s quiet, {beside:.2f}s beside it"
    assert delivered_after < 1.5, delivered_after  # the doorbell, not the 2-second tick
