"""The SSE stream on a real daphne is woken by the channel layer (Redis), not by polling:
an event committed by another process reaches the client long before the stream would
look at the database again by itself (RECHECK_SECONDS)."""

from __future__ import annotations

import json
import time

import httpx
from django.contrib.auth.models import User

from common.api.tokens import token_create
from common.audit import Actor
from runs.api import stream
from runs.models import Run
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.processes import free_port


def test_an_event_committed_elsewhere_reaches_an_sse_client_pushed(processes):
    port = free_port()
    processes("daphne", port=port)  # no worker: only this test writes the run's events
    user = User.objects.create_superuser("follower", password="pw")
    _, raw = token_create(user=user, name="sse", actor=Actor(label="test", source="cli"))
    run = run_start(agent=scripted_agent([{"text": "never runs"}]), messages="hello")
    url = f"http://127.0.0.1:{port}/api/v1/runs/{run.pk}/events/stream"
    headers = {"Authorization": f"Bearer {raw}", "Host": "127.0.0.1"}

    events: list[dict] = []
    cancelled_at = 0.0
    with (
        httpx.Client(timeout=30) as client,
        client.stream("GET", url, params={"follow": "true"}, headers=headers) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            events.append(json.loads(line.removeprefix("data: ")))
            if len(events) == 1:
                assert events[0]["event_type"] == "run_start"  # committed with the submission
                cancelled_at = time.monotonic()
                run_cancel(run=Run.objects.get(pk=run.pk))  # commits and broadcasts
            if events[-1]["event_type"] == "run_finish":
                break
    delay = time.monotonic() - cancelled_at
    # pushed: milliseconds; the stream would look at the database itself only after 15 s
    assert delay < 1.0 < stream.RECHECK_SECONDS, f"the event took {delay:.2f}s"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[-1]["termination"]["type"] == "cancelled"
