from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.models import Agent
from common.audit import Actor
from common.errors import ServiceError
from runs.cli import describe_outcome, follow_run
from runs.embedded import start_embedded_worker
from runs.models import Thread
from runs.services.submission import Submission
from runs.services.submission_flow import submission_accept


class Command(BaseCommand):
    help = "Start a run of AGENT with MESSAGE and print its events until it finishes or waits."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent id (slug)")
        parser.add_argument("message", help="the user's message")
        parser.add_argument("--thread", help="continue this thread instead of starting one")
        parser.add_argument("--timeout", type=float, default=600.0)

    def handle(
        self,
        *args: Any,
        agent: str,
        message: str,
        thread: str | None,
        timeout: float,
        **options: Any,
    ) -> None:
        target = Agent.objects.filter(slug=agent).first()
        if target is None:
            known = (
                ", ".join(Agent.objects.values_list("slug", flat=True)) or "none (run seed_demo)"
            )
            raise CommandError(f"unknown agent {agent!r}; known: {known}")
        thread_obj = None
        if thread:
            thread_obj = Thread.objects.filter(pk=thread).first()
            if thread_obj is None:
                raise CommandError(f"unknown thread {thread!r}")
        if settings.AWAKEN_EMBEDDED_WORKER:
            start_embedded_worker()
        try:
            command = Submission.build_start(
                agent=target,
                messages=message,
                thread=thread_obj,
                actor=Actor(label="cli", source="cli"),
            )
            run = submission_accept(command).run
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        assert run is not None  # START never leaves input waiting
        self.stdout.write(f"run {run.pk} on thread {run.thread_id}\n")
        run = follow_run(run.pk, self.stdout, timeout=timeout)
        describe_outcome(run, self.stdout)
