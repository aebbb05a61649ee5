"""Several daphne processes behind one address: `manage.py serve --processes 2` binds the
socket once and hands it to two daphne processes, which both accept on it. Each process
is one member of a run's group (runs/fanout.py), so an event a worker commits reaches
the websocket clients of both, and the group is empty again once they all left."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

import redis
import websockets
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from runs.models import Run, RunEvent, Ticket
from runs.realtime import run_group
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from tests.factories import APPROVAL, call, scripted_agent
from tests.processes import Proc, free_port, wait_for

MAX_CLIENTS = 40  # connections opened until both processes hold some


def socket_owner(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Which process holds the server side of the connection from `client_port`: the
    accepted socket's inode (/proc/net/tcp) among each process's open files."""
    owners = {}
    for pid in pids:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                owners[link[len("socket:[") : -1]] = pid
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].rsplit(":", 1)[1], 16)
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        if (local_port, remote_port) == (server_port, client_port):
            return owners.get(fields[9])
    return None


class Watchers:
    """Websocket clients on one run, in a thread with its own event loop (the test's
    thread keeps Django's database connection): connects until both daphne processes
    serve some, then records every event frame until each client saw `run_finish`."""

    def __init__(self, url: str, headers: dict[str, str], pids: list[int], port: int) -> None:
        self.url, self.headers, self.pids, self.port = url, headers, pids, port
        self.connected = threading.Event()
        self.owners: list[int | None] = []
        self.seqs: list[list[int]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            asyncio.run(self._watch())
        except BaseException as exc:
            self.error = exc
            self.connected.set()

    async def _watch(self) -> None:
        sockets: list[Any] = []
        try:
            while len(sockets) < MAX_CLIENTS and not set(self.pids) <= set(self.owners):
                socket = await websockets.connect(self.url, additional_headers=self.headers)
                sockets.append(socket)
                ready = json.loads(await asyncio.wait_for(socket.recv(), 10))
                assert ready["type"] == "ready", ready
                self.owners.append(socket_owner(self.pids, self.port, socket.local_address[1]))
            self.connected.set()
            self.seqs = await asyncio.gather(*(self._collect(socket) for socket in sockets))
        finally:
            for socket in sockets:
                await socket.close()

    @staticmethod
    async def _collect(socket: Any) -> list[int]:
        seqs: list[int] = []
        while True:
            message = json.loads(await asyncio.wait_for(socket.recv(), 30))
            if message["type"] == "event":
                events = [message["event"]]
            elif message["type"] == "events":
                events = [item["event"] for item in message["events"]]
            else:
                continue
            for event in events:
                seqs.append(event["seq"])
                if event["event_type"] == "run_finish":
                    return seqs


def test_two_daphne_processes_share_one_socket_and_both_deliver_a_workers_events(
    processes, service_env, tmp_path
):
    port = free_port()
    command = [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)]
    serve = Proc("serve", [*command, "--processes", "2", "--no-worker"], service_env, tmp_path)
    try:
        wait_for(
            lambda: serve.log().count("Listening on TCP address") >= 2 or not serve.alive(),
            40,
            "two daphne processes listening",
        )
        assert serve.alive(), serve.log_tail()
        found = re.search(r"with 2 daphne processes \((\d+), (\d+)\)", serve.log())
        assert found, serve.log_tail()
        pids = [int(found.group(1)), int(found.group(2))]
        assert f"127.0.0.1:{port}" in serve.log()  # both adopted the one socket

        processes("worker")
        user = User.objects.create_superuser("watcher", password="pw")
        client = Client()
        client.force_login(user)
        agent = scripted_agent(
            [
                {"text": "", "tool_calls": [call("write_note", {"title": "t", "body": "b"})]},
                {"text": "noted"},
            ],
            permission=APPROVAL,
        )
        run = run_start(agent=agent, messages="note it")
        wait_for(lambda: Run.objects.get(pk=run.pk).status == "waiting", 30, "the ticket")
        after = Run.objects.get(pk=run.pk).last_event_seq

        watchers = Watchers(
            f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/?after_seq={after}",
            {
                "Cookie": f"sessionid={client.cookies['sessionid'].value}",
                "Origin": f"http://127.0.0.1:{port}",
            },
            pids,
            port,
        )
        assert watchers.connected.wait(60), "the clients did not connect"
        assert watchers.error is None, watchers.error
        assert set(watchers.owners) == set(pids), watchers.owners  # clients on both

        # the worker commits the rest of the run: every client, on either process, sees it
        decision_submit(ticket=Ticket.objects.get(run=run), action="approve")
        watchers.thread.join(60)
        assert not watchers.thread.is_alive() and watchers.error is None, watchers.error
        final = Run.objects.get(pk=run.pk)
        assert final.status == "done"
        expected = list(range(after + 1, final.last_event_seq + 1))
        assert RunEvent.objects.filter(run=run, seq__gt=after).count() == len(expected)
        assert watchers.seqs and all(seqs == expected for seqs in watchers.seqs), watchers.seqs

        # each process left the run's group when its last client closed
        layer_redis = redis.Redis.from_url(settings.REDIS_URL)
        key = f"asgi:group:{run_group(run.pk)}"
        wait_for(lambda: layer_redis.zcard(key) == 0, 10, "the processes to leave the group")
        assert serve.alive() and "Traceback" not in serve.log(), serve.log_tail()
    finally:
        serve.stop()
