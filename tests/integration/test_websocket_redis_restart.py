"""A websocket on daphne keeps receiving after Redis restarts. The restarted Redis has no
groups and lost what was queued; the process's hub (runs/fanout.py) notices the broken
connection, joins the run's group again and has its sockets read the log, so an event
committed around the restart still arrives, once."""

from __future__ import annotations

import json
import time

from django.contrib.auth.models import User
from django.test import Client
from websockets.sync.client import connect

from runs.models import Run
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from tests.factories import scripted_agent
from tests.integration.conftest import redis_restart
from tests.processes import free_port


def test_a_run_websocket_receives_events_committed_after_redis_restarted(processes):
    port = free_port()
    daphne = processes("daphne", port=port)  # no worker: only this test writes the run
    user = User.objects.create_superuser("watcher", password="pw")
    client = Client()
    client.force_login(user)
    run = run_start(agent=scripted_agent([{"text": "never runs"}]), messages="hello")
    after = Run.objects.get(pk=run.pk).last_event_seq
    url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after_seq={after}"
    headers = {
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
        "Origin": f"http://127.0.0.1:{port}",
    }
    with connect(url, additional_headers=headers) as socket:
        assert json.loads(socket.recv(timeout=10))["type"] == "ready"
        redis_restart()
        run_cancel(run=Run.objects.get(pk=run.pk))  # commits run_finish (seq after + 2)
        seqs: list[int] = []
        deadline = time.monotonic() + 30
        while not seqs or seqs[-1] < after + 2:
            message = json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message["type"] == "event":
                seqs.append(message["event"]["seq"])
            elif message["type"] == "events":
                seqs += [item["event"]["seq"] for item in message["events"]]
    assert seqs == [after + 1, after + 2], seqs
    assert Run.objects.get(pk=run.pk).last_event_seq == after + 2
    assert "receive failed" in daphne.log()  # it did lose its connection
