"""Forking a run at a step boundary: a new run on a new thread that starts from a copy
of the original's conversation up to that boundary, optionally with one message edited,
pinned to a chosen agent version (docs/forks.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.db import transaction

from agents.models import AgentVersion
from agents.selectors import agent_version_current
from agents.services.agents import agent_draft_snapshot
from common import limits
from common.audit import Actor, audit_record
from common.errors import InvalidInput
from common.jsonsafe import unstorable_in
from common.teams import ensure_writable
from runs.message_rows import message_from_row
from runs.models import Message, Run
from runs.replays.selectors.forks import editable_messages, fork_cuts, fork_prefix
from runs.runtime import types as rt
from runs.services.submission import Origin, Submission
from runs.services.submission_flow import submission_accept_within

FORK_VERSIONS = ("original", "latest", "draft")


def _check_step(run: Run, step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= run.steps:
        raise InvalidInput(
            f"step must be a step boundary of this run, 0 (before its first step) to "
            f"{run.steps} (after its last), got {step!r}",
            {"step": [f"0 … {run.steps}"]},
        )
    return step


def _pinned_version(run: Run, version: Any) -> AgentVersion:
    """The version a fork pins: the original's, the latest published one, or a snapshot
    of the agent's draft (refused when the draft does not validate)."""
    if version == "original":
        return run.agent_version
    if version == "latest":
        return agent_version_current(agent=run.agent)
    if version == "draft":
        return agent_draft_snapshot(agent=run.agent)
    raise InvalidInput(
        f"version must be one of {', '.join(FORK_VERSIONS)}, got {version!r}",
        {"version": list(FORK_VERSIONS)},
    )


def _checked_edit(prefix: list[Message], edit: Any, step: int) -> tuple[Message, str] | None:
    """The message `edit` ({seq, text}) changes and its new text; None for no edit."""
    if edit is None:
        return None
    if not isinstance(edit, dict) or set(edit) != {"seq", "text"}:
        raise InvalidInput("edit must be an object {seq, text}", {"edit": ["{seq, text}"]})
    seq, text = edit["seq"], edit["text"]
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise InvalidInput(f"edit.seq must be an integer, got {seq!r}", {"edit.seq": [str(seq)]})
    target = next((m for m in prefix if m.seq == seq), None)
    if target is None:
        raise InvalidInput(
            f"message #{seq} is not part of the conversation at step {step} "
            f"(messages #1 … #{len(prefix)})",
            {"edit.seq": [str(seq)]},
        )
    if target not in editable_messages(prefix):
        last_user = next((m.seq for m in reversed(prefix) if m.role == Message.Role.USER), None)
        which = f"the last user message (#{last_user})" if last_user else "no user message"
        raise InvalidInput(
            f"message #{seq} is a {target.role} message: only the last user message or a "
            f"tool result can be edited (here {which}, or a tool message)",
            {"edit.seq": [str(seq)]},
        )
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("edit.text must be a non-empty string", {"edit.text": ["empty"]})
    limits.check_chars(text, limits.message_chars(), "edit.text", "edit.text")
    unstorable = unstorable_in(text)
    if unstorable:
        raise InvalidInput(f"edit.text contains {unstorable}")
    return target, text


def _copies(prefix: list[Message], edited: tuple[Message, str] | None) -> list[rt.Message]:
    """The prefix as new messages (new ids; no producer: they are the fork's input)."""
    result = []
    for row in prefix:
        message = dataclasses.replace(
            message_from_row(row), id=rt.new_id(), run_id=None, step_index=None
        )
        if edited is not None and row.seq == edited[0].seq:
            message.content = [{"type": "text", "text": edited[1]}]
        result.append(message)
    return result


@transaction.atomic
def run_fork(
    *, run: Run, step: int, version: str = "original", edit: Any = None, actor: Actor
) -> Run:
    """A new run of `run`'s agent on a new thread whose messages are copies (new ids, seq
    1..k) of `run`'s thread up to step boundary `step` (0 … run.steps; where a boundary
    cuts: `runs.replays.selectors.forks`), `edit` ({seq, text}) changing the last user message
    or a tool result of the copy. Pinned to `version`: original (the run's version),
    latest (published) or draft (a snapshot of the agent's draft). The new run records
    `forked_from`, `fork_step`, `fork_edit` ({seq, role, before, after} or None) and
    run_mode "fork"; its input range is the whole copy. The original run, its thread
    and its messages are not changed. Bad input is InvalidInput and creates nothing."""
    run = Run.objects.select_related("agent", "agent_version", "thread").get(pk=run.pk)
    ensure_writable(run.agent.team_id)
    step = _check_step(run, step)
    if version not in FORK_VERSIONS:
        _pinned_version(run, version)  # raises, before reading anything else
    prefix = fork_prefix(run, fork_cuts(run)[step])
    if not prefix:
        raise InvalidInput(f"there is no conversation to fork at step {step}")
    edited = _checked_edit(prefix, edit, step)
    pinned = _pinned_version(run, version)
    fork_edit = (
        {"seq": edited[0].seq, "role": edited[0].role, "before": edited[0].text, "after": edited[1]}
        if edited
        else None
    )
    copies = _copies(prefix, edited)
    # the copy is history (any role), not new input: the command checks it by its own rule
    command = Submission.build_new_run(
        agent=run.agent,
        history=copies,
        priority=run.priority,
        actor=actor,
        origin=Origin(
            run_mode="fork",
            version=pinned,
            resource_id=run.thread.resource_id,
            team_guard=False,  # checked above, before anything was read
        ),
        forked_from=run,
        fork_step=step,
        fork_edit=fork_edit,
    )
    fork = submission_accept_within(command).run
    assert fork is not None  # NEW_RUN always starts one
    _audit_fork(run, fork, actor, step, version, pinned, len(copies), fork_edit)
    return fork


def _audit_fork(
    run: Run,
    fork: Run,
    actor: Actor,
    step: int,
    version: str,
    pinned: AgentVersion,
    copied: int,
    fork_edit: dict[str, Any] | None,
) -> None:
    """The `run.fork` audit entry: from which run and version, at which step, to which
    pinned version, with how many copied messages and which edit."""
    audit_record(
        actor=actor,
        action="run.fork",
        target_type="run",
        target_id=run.pk,
        run=fork,
        before={"run": str(run.pk), "agent_version": run.agent_version.number},
        after={
            "run": str(fork.pk),
            "step": step,
            "version": version,
            "agent_version": pinned.number,
            "draft": pinned.draft,
            "messages": copied,
            "edit": fork_edit,
        },
    )
