from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.routing import get_default_application
from daphne.endpoints import build_endpoint_description_strings
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.embedded import start_embedded_worker
from runs.watcher import CommitWatcher

RESTART_PAUSE_SECONDS = 1.0  # a child that keeps dying is restarted at most this often
STOP_GRACE_SECONDS = 10.0


class Command(BaseCommand):
    help = (
        "Serve the app with daphne; on the embedded default also run the worker and sweep. "
        "With --processes N (distributed mode) N daphne processes share one listening socket."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-worker", action="store_true", help="Do not start the in-process worker."
        )
        parser.add_argument(
            "--processes",
            type=int,
            default=1,
            help="daphne processes accepting on the same socket (needs REDIS_URL; IPv4).",
        )

    def handle(
        self,
        *args: Any,
        host: str,
        port: int,
        no_worker: bool,
        processes: int,
        verbosity: int,
        **options: Any,
    ) -> None:
        if processes < 1:
            raise CommandError("--processes must be at least 1")
        if processes > 1:
            if not settings.REDIS_URL:
                # the in-memory channel layer does not reach the other processes' sockets
                raise CommandError("--processes > 1 needs the distributed mode: set REDIS_URL")
            if settings.AWAKEN_EMBEDDED_WORKER and not no_worker:
                raise CommandError(
                    "--processes > 1 runs no embedded worker: run `celery worker` and pass "
                    "--no-worker (or set AWAKEN_EMBEDDED_WORKER=false)"
                )
            self._serve_many(host, port, processes, verbosity)
            return
        if settings.AWAKEN_EMBEDDED_WORKER and not no_worker:
            start_embedded_worker()
            self.stdout.write("embedded Celery worker and sweep running in this process")
        ready: Callable[[], None] | None = None
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            # that layer reaches this process's pages only: what terminal commands (other
            # processes) commit is read from the database and broadcast here
            watcher = CommitWatcher()
            self.stdout.write("open pages also follow what terminal commands commit")

            def ready() -> None:  # daphne's loop is the current one, about to run
                watcher.start(asyncio.get_event_loop())

        self.stdout.write(f"serving on http://{host}:{port}/ (admin at /admin/)")
        # Imported here: daphne.server installs Twisted's asyncio reactor on import, which
        # only the process that serves may do (not `--processes N`'s parent, not tests).
        from daphne.server import Server  # noqa: PLC0415

        Server(
            application=get_default_application(),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            verbosity=1,
            ready_callable=ready,
        ).run()

    def _serve_many(self, host: str, port: int, processes: int, verbosity: int) -> None:
        """Bind the socket here and hand it to N `daphne --fd` children: the kernel
        spreads the connections over them. This process only supervises: it restarts
        a child that exits and stops them all on SIGTERM or SIGINT."""
        listener = socket.create_server((host, port), backlog=2048)
        listener.set_inheritable(True)
        fd = listener.fileno()
        command = [
            sys.executable,
            "-m",
            "daphne",
            "--fd",
            str(fd),
            "--verbosity",
            str(verbosity),
            "awaken_site.asgi:application",
        ]

        def start() -> subprocess.Popen[bytes]:
            return subprocess.Popen(command, pass_fds=(fd,), cwd=settings.BASE_DIR)

        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        children = [start() for _ in range(processes)]
        self.stdout.write(
            f"serving on http://{host}:{port}/ with {processes} daphne processes "
            f"({', '.join(str(child.pid) for child in children)})",
        )
        self.stdout.flush()
        try:
            while not stopping:
                time.sleep(RESTART_PAUSE_SECONDS)
                for index, child in enumerate(children):
                    if child.poll() is not None and not stopping:
                        self.stderr.write(
                            f"daphne {child.pid} exited with {child.returncode}; restarting"
                        )
                        children[index] = start()
        finally:
            for child in children:
                if child.poll() is None:
                    child.terminate()
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for child in children:
                try:
                    child.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            listener.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
