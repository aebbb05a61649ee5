from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve the app with daphne; on the embedded default also run the worker and sweep."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-worker", action="store_true", help="Do not start the in-process worker."
        )

    def handle(self, *args: Any, host: str, port: int, no_worker: bool, **options: Any) -> None:
        from channels.routing import get_default_application
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server

        if settings.AWAKEN_EMBEDDED_WORKER and not no_worker:
            from runs.embedded import start_embedded_worker

            start_embedded_worker()
            self.stdout.write("embedded Celery worker and sweep running in this process")
        self.stdout.write(f"serving on http://{host}:{port}/ (admin at /admin/)")
        Server(
            application=get_default_application(),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            verbosity=1,
        ).run()
