"""Starting the run a submission (runs.services.submission) asks for: the one place a run
is created from a command. `submission_accept` (runs.services.submission_flow) calls it
once it holds the thread and knows its open run; the delivery of queued input calls it
inside the checkpoint that ended the thread's run, holding the thread's lock already
(`submission_start` takes no lock of its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.models import Agent
from runs.models import Run, Thread
from runs.services.creation import new_thread_for, run_create
from runs.services.submission import Submission

SubmissionEvents = Callable[[Run, list[str]], list[dict[str, Any]]]


def submission_new_thread(cmd: Submission, agent: Agent) -> Thread:
    """The unsaved thread a command starts (inserted with its run), in the agent's team,
    titled after its first user message (and the origin's title prefix)."""
    thread = new_thread_for(cmd.message_list, agent.team_id)
    if cmd.origin.title_prefix:
        thread.title = f"{cmd.origin.title_prefix}{thread.title}"[:300]
    if cmd.origin.resource_id:
        thread.resource_id = cmd.origin.resource_id
    if cmd.origin.thread_id is not None:
        thread.id = cmd.origin.thread_id
    return thread


def submission_start(
    cmd: Submission,
    thread: Thread,
    agent: Agent,
    *,
    new_thread: bool = False,
    events: SubmissionEvents | None = None,
) -> Run:
    """The command's new run on `thread`: locked by the caller, who found it without an
    open run, or `new_thread` (not inserted yet). `events`: what its log adds after its
    `run_start` (the delivery of an input), in the same transaction."""
    return run_create(
        thread,
        agent,
        cmd.message_list,
        cmd.actor,
        new_thread=new_thread,
        idempotency_key=cmd.idempotency_key,
        priority=cmd.priority,
        run_mode=cmd.origin.run_mode,
        submission_events=events,
        version=cmd.origin.version,
        **cmd.provenance,
    )
