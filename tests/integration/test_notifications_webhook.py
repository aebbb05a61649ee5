"""Notifications in the distributed mode: a webhook receiver that is down while tickets
open gets every notification, once, signed, after it comes back; the outbox rows show
the retries (`celery worker` and `celery beat` against PostgreSQL and Redis; conftest.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from runs.models import Ticket
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationDelivery,
    NotificationRule,
)
from runs.operations.services.notify_send import channel_set_secret, channel_set_url
from runs.services.submission_flow import run_start
from tests.factories import APPROVAL, note_call, scripted_agent
from tests.processes import free_port, wait_for
from tests.runs.notify_helpers import verify

SECRET = "whsec_integration-0123456789"
TICKETS = 20
DOWN_SECONDS = 30.0


class Receiver:
    """A webhook receiver on a port reserved up front; down (connection refused) until
    `start`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.received: list[tuple[dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver._lock:
                    receiver.received.append((dict(self.headers.items()), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def ids(self) -> list[str]:
        with self._lock:
            return [headers["X-Awaken-Delivery"] for headers, _ in self.received]


def test_a_receiver_that_was_down_gets_every_notification_exactly_once(processes, service_env):
    service_env.update(
        AWAKEN_NOTIFY_ALLOW_PRIVATE="true",
        AWAKEN_NOTIFY_RETRY_BASE_SECONDS="1",
        AWAKEN_NOTIFY_RETRY_MAX_SECONDS="8",
        AWAKEN_NOTIFY_MAX_ATTEMPTS="20",
        AWAKEN_NOTIFY_TIMEOUT="5",
        # every delivery is retried while the receiver is down: no circuit breaker here
        # (test_notifications_isolation.py has it open on a receiver that hangs)
        AWAKEN_NOTIFY_CIRCUIT_FAILURES="1000",
    )
    receiver = Receiver(free_port())
    hook = NotificationChannel(name="receiver", kind="webhook")
    channel_set_url(hook, f"http://127.0.0.1:{receiver.port}/hooks/awaken?token=abc")
    channel_set_secret(hook, SECRET)
    hook.save()
    NotificationRule.objects.create(channel=hook, events=["ticket.opened"])
    agent = scripted_agent(
        [{"text": "noting", "tool_calls": [note_call()]}, {"text": "noted"}],
        permission=APPROVAL,
    )
    processes("worker")
    processes("notify")
    processes("beat")
    down_until = time.monotonic() + DOWN_SECONDS
    runs = [run_start(agent=agent, messages=f"note {n}") for n in range(TICKETS)]
    try:
        wait_for(
            lambda: Ticket.objects.filter(run__in=runs, status="pending").count() == TICKETS,
            25,
            f"{TICKETS} tickets to open",
        )
        # while the receiver is down every notification is tried, and tried again
        wait_for(
            lambda: NotificationDelivery.objects.filter(attempts__gte=2).count() == TICKETS,
            max(down_until - time.monotonic(), 1),
            "retries while the receiver is down",
        )
        assert receiver.ids() == []
        assert not NotificationDelivery.objects.exclude(status__in=["pending", "sending"]).exists()
        time.sleep(max(down_until - time.monotonic(), 0))
        receiver.start()
        wait_for(lambda: len(receiver.ids()) >= TICKETS, 40, "every notification to arrive")
        wait_for(
            lambda: NotificationDelivery.objects.filter(status="delivered").count() == TICKETS,
            10,
            "every delivery to be marked delivered",
        )
        time.sleep(3)  # any duplicate would have come by now
    finally:
        receiver.stop()

    deliveries = list(NotificationDelivery.objects.all())
    assert len(deliveries) == TICKETS
    ids = receiver.ids()
    assert len(ids) == TICKETS and len(set(ids)) == TICKETS  # each once, no duplicate
    assert set(ids) == {str(d.pk) for d in deliveries}
    tickets = {f"ticket:{t.pk}" for t in Ticket.objects.filter(run__in=runs)}
    assert {d.subject for d in deliveries} == tickets
    for headers, body in receiver.received:
        assert headers["X-Awaken-Event"] == "ticket.opened"
        assert verify(SECRET, headers["X-Awaken-Signature"], body)
        assert json.loads(body)["id"] == headers["X-Awaken-Delivery"]
    for delivery in deliveries:
        assert delivery.attempts > 1  # the log shows the retries
        assert (delivery.status, delivery.response_code) == ("delivered", 204)
        assert delivery.delivered_at is not None
