"""A webhook receiver that hangs longer than the send timeout does not slow runs down
(docs/notifications.md, "Sending beside the runs"): with a real run worker, the
notifications worker and beat against PostgreSQL and Redis, the time from a run's submit
to its first step on a worker stays within 100 ms of a quiet baseline while dozens of
deliveries to the hanging receiver are due, and the receiver's circuit opens."""

from __future__ import annotations

import socket
import statistics
import threading
import time
from typing import Any

from django.utils import timezone

from runs.models import Run, RunEvent
from runs.operations.models.notifications import (
    NotificationChannel,
    NotificationCircuit,
    NotificationDelivery,
)
from runs.operations.services.notify_send import channel_set_secret, channel_set_url
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.processes import wait_for

RUNS_PER_PHASE = 15
DELIVERIES = 40
SEND_TIMEOUT = "2"
TOLERANCE_SECONDS = 0.1


class HangingReceiver:
    """Accepts connections, reads the request and never answers (until stopped)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self._held.append(conn)  # never answered: the sender times out

    def stop(self) -> None:
        self._stop.set()
        for conn in self._held:
            conn.close()
        self.sock.close()


def start_latency(run: Run) -> float:
    """Seconds from the run's submit to the commit of its first step on a worker."""
    first = RunEvent.objects.filter(run=run, seq__gt=1).order_by("seq").values("created_at").first()
    assert first is not None, f"run {run.pk} has no step"
    return (first["created_at"] - run.created_at).total_seconds()


def latencies(agent: Any, label: str, count: int = RUNS_PER_PHASE) -> list[float]:
    """Runs submitted one after another (each once the previous finished)."""
    found = []
    for n in range(count):
        run = run_start(agent=agent, messages=f"{label} {n}")
        wait_for(
            lambda run=run: Run.objects.filter(pk=run.pk, status="done").exists(),
            60,
            f"{label} run {n} to finish",
            interval=0.01,
        )
        found.append(start_latency(run))
        time.sleep(0.2)
    return found


def test_a_hanging_webhook_receiver_leaves_run_start_latency_alone(processes, service_env):
    service_env.update(
        AWAKEN_NOTIFY_ALLOW_PRIVATE="true",
        AWAKEN_NOTIFY_TIMEOUT=SEND_TIMEOUT,
        AWAKEN_NOTIFY_CIRCUIT_FAILURES="5",
        AWAKEN_NOTIFY_CIRCUIT_SECONDS="600",
    )
    receiver = HangingReceiver()
    hook = NotificationChannel(name="hanging", kind="webhook")
    channel_set_url(hook, f"http://127.0.0.1:{receiver.port}/hook")
    channel_set_secret(hook, "whsec_isolation-0123456789")
    hook.save()
    agent = scripted_agent([{"text": "hello"}])
    processes("worker", concurrency=2)
    processes("notify")
    processes("beat")
    try:
        latencies(agent, "warm-up", 4)  # the children's first runs load the code
        quiet = latencies(agent, "quiet")

        now = timezone.now()
        NotificationDelivery.objects.bulk_create(
            NotificationDelivery(
                channel=hook,
                event="run.failed",
                subject=f"run:hanging-{n}",
                payload={"event": "run.failed", "n": n},
                created_at=now,
                next_attempt_at=now,
            )
            for n in range(DELIVERIES)
        )
        wait_for(lambda: receiver.accepted >= 1, 10, "the first send to hang")
        hanging = latencies(agent, "hanging")
        # the breaker opens after its failures in a row; the rest wait, unattempted
        key = f"channel:{hook.pk}"
        wait_for(
            lambda: NotificationCircuit.objects.filter(
                destination=key, open_until__gt=timezone.now()
            ).exists(),
            30,
            "the receiver's circuit to open",
        )
    finally:
        receiver.stop()

    quiet_p50, hanging_p50 = statistics.median(quiet), statistics.median(hanging)
    print(
        f"run start p50: quiet {quiet_p50 * 1000:.1f} ms, hanging receiver "
        f"{hanging_p50 * 1000:.1f} ms (max {max(quiet) * 1000:.1f} / {max(hanging) * 1000:.1f} ms)"
    )
    assert hanging_p50 - quiet_p50 < TOLERANCE_SECONDS, (
        f"run start p50 {hanging_p50 * 1000:.0f} ms with a hanging receiver, "
        f"{quiet_p50 * 1000:.0f} ms quiet; max {max(hanging) * 1000:.0f} ms"
    )
    circuit = NotificationCircuit.objects.get(destination=key)
    assert circuit.failures >= 5 and circuit.is_open()
    assert "timed out" in circuit.last_error
    deliveries = NotificationDelivery.objects.filter(channel=hook)
    assert deliveries.filter(status="pending").count() >= DELIVERIES - 5 - 1
    assert not deliveries.filter(status__in=["delivered", "failed"]).exists()
