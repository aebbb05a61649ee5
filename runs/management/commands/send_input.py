"""Send a message to a thread in one of the input modes and say what became of it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents.models import Agent
from common.errors import ServiceError
from runs.cli import describe_outcome, follow_run
from runs.embedded import start_embedded_worker
from runs.management.run_control import cli_actor, find
from runs.models import DEFAULT_PRIORITY, Thread
from runs.services.submission import MODES, Submission
from runs.services.submission_flow import SubmissionOutcome, submission_accept


def describe(outcome: SubmissionOutcome) -> str:
    """One or two lines: the run it started or resumed, or where it waits."""
    input_, run = outcome.input, outcome.run
    assert input_ is not None  # an input mode records its input
    lines = []
    if outcome.interrupted is not None:
        stopped = outcome.interrupted.status == "done"
        verb = "cancelled" if stopped else "asked to stop (it ends at its next check)"
        lines.append(f"run {outcome.interrupted.pk} {verb}")
    if run is not None and outcome.created:
        lines.append(
            f"run {run.pk} started on thread {run.thread_id} with input #{input_.seq} "
            f"(priority {run.priority})"
        )
    elif run is not None:
        lines.append(f"run {run.pk} resumed with input #{input_.seq}")
        if outcome.superseded:
            lines.append(f"superseded tickets: {', '.join(outcome.superseded)}")
    elif input_.run_id:
        lines.append(
            f"input #{input_.seq} ({input_.pk}) waits for the next step of run {input_.run_id}"
        )
    else:
        lines.append(
            f"queued as input #{input_.seq} ({input_.pk}): it starts the thread's next run "
            "when the open one ends"
        )
    return "\n".join(lines) + "\n"


class Command(BaseCommand):
    help = (
        "Send MESSAGE to THREAD. With an open run, --mode says what happens: queue (the "
        "default: waits, then starts the next run), steer (into the open run at its next "
        "step), interrupt_then_queue (cancels the open run, then queues), resume_open_run "
        "(continues the open run while it waits). Without one it starts a run."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("thread", help="thread id")
        parser.add_argument("message", help="the user's message")
        parser.add_argument("--mode", default="queue", help=f"one of {', '.join(MODES)}")
        parser.add_argument(
            "--priority",
            type=int,
            default=DEFAULT_PRIORITY,
            help="priority of the run it starts: 0 (high) … 255 (low); default 128",
        )
        parser.add_argument(
            "--agent", help="agent id (slug); default: the agent of the thread's latest run"
        )
        parser.add_argument("--as", dest="actor", default="cli", help="who sends (audit)")
        parser.add_argument(
            "--follow", action="store_true", help="print the run's events if it started or resumed"
        )
        parser.add_argument("--timeout", type=float, default=600.0)

    def handle(self, *args: Any, **opts: Any) -> None:
        thread = find(Thread.objects.all(), opts["thread"], "thread")
        agent = None
        if opts["agent"]:
            agent = Agent.objects.filter(slug=opts["agent"]).first()
            if agent is None:
                raise CommandError(f"unknown agent {opts['agent']!r}")
        if opts["follow"] and settings.AWAKEN_EMBEDDED_WORKER:
            start_embedded_worker()
        try:
            command = Submission.build(
                agent=agent,
                messages=opts["message"],
                thread=thread,
                mode=opts["mode"],
                priority=opts["priority"],
                actor=cli_actor(opts["actor"]),
            )
            outcome = submission_accept(command)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(describe(outcome))
        run = outcome.run
        if opts["follow"] and run is not None:
            after = 0 if outcome.created else max(run.last_event_seq - 1, 0)
            run = follow_run(run.pk, self.stdout, after_seq=after, timeout=opts["timeout"])
            describe_outcome(run, self.stdout)
