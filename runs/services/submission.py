"""The submission command: what every way in (REST, pages, CLI, A2A, schedules, forks,
replays and the delivery of queued input) hands over to start a run or to send a thread
input, validated once when it is built (`Submission.build*`). Its entry,
`submission_accept` (runs.services.submission_flow), locks the thread, finds its open run
and starts, continues or queues exactly once; `submission_accept_within` does the same in
the caller's transaction, and `submission_start` (runs.services.submission_start) starts
the run for a caller that holds the thread's lock already (queued input's delivery).
No other module creates a run (tests/runs/test_submission_callers.py).

The priority rule lives here too (`priority_check`): the API's serializers, the pages'
forms, the CLI and `run_set_priority` call it, so a bad priority reads the same everywhere.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.models import Agent, AgentVersion
from common.audit import SYSTEM, Actor
from common.errors import IllegalTransition, InvalidInput
from runs.models import DEFAULT_PRIORITY, PRIORITY_MAX, PRIORITY_MIN, PendingInput, Run, Thread
from runs.runtime import types as rt
from runs.services.creation import normalize_input_messages

Mode = PendingInput.Mode
MODES = tuple(Mode.values)
# The run API's `POST /runs`: a new run, or new input continuing the thread's waiting run;
# refused while the thread's open run works (input modes queue, steer or interrupt it).
START = "start"
# A new run and nothing else (schedules, forks, replays): on a new thread, or on a thread
# without an open run; a thread whose open run is still there refuses it (ThreadBusy).
NEW_RUN = "new_run"
RUN_MODES = ("foreground", "scheduled", "fork", "replay")
KEY_CHARS = Run._meta.get_field("idempotency_key").max_length or 200
PRIORITY_TEXT = f"from {PRIORITY_MIN} (high) to {PRIORITY_MAX} (low)"
PRIORITY_RANGE = f"{PRIORITY_MIN} (high) … {PRIORITY_MAX} (low)"  # for help texts


def priority_error(value: Any) -> str | None:
    """Why `value` is no priority (an int from PRIORITY_MIN to PRIORITY_MAX), or None."""
    if isinstance(value, int) and PRIORITY_MIN <= value <= PRIORITY_MAX:
        return None
    return f"priority must be an integer {PRIORITY_TEXT}, got {value!r}"


def priority_check(value: Any) -> int:
    """`value` as a priority, else InvalidInput (a field error on `priority`)."""
    error = priority_error(value)
    if error is not None:
        raise InvalidInput(error, {"priority": [str(value)]})
    return int(value)


def priority_parse(raw: Any) -> int:
    """A form's or command line's priority: blank is the default, digits are checked."""
    text = str(raw if raw is not None else "").strip()
    if not text:
        return DEFAULT_PRIORITY
    try:
        value: Any = int(text)
    except ValueError:
        value = text
    return priority_check(value)


MODE_ERROR = f"mode must be one of {', '.join(MODES)}, got {{input!r}}"  # str.format


def mode_check(mode: Any) -> str:
    if mode not in MODES:  # START is the run API's own: Submission.build_start
        raise InvalidInput(MODE_ERROR.format(input=mode), {"mode": [str(mode)]})
    return str(mode)


def idempotency_key_check(key: Any) -> str:
    if not isinstance(key, str) or len(key) > KEY_CHARS:
        raise InvalidInput(
            f"idempotency_key must be text of at most {KEY_CHARS} characters",
            {"idempotency_key": [str(key)[:KEY_CHARS]]},
        )
    return key


class ThreadBusy(IllegalTransition):
    """A NEW_RUN submission's thread (a schedule's one thread) still has its open run."""


def history_check(history: Any) -> tuple[rt.Message, ...]:
    """Messages copied from a stored conversation (a fork's prefix, a replayed run's input):
    any role, as stored, so the input normalizer (user text only) does not apply; they were
    checked when they were first written. Refused: anything that is not a message with
    content blocks, and an empty copy."""
    if not isinstance(history, (list, tuple)) or not history:
        raise InvalidInput("history must be a non-empty list of messages")
    for index, message in enumerate(history):
        blocks = getattr(message, "content", None)
        if not isinstance(message, rt.Message) or not isinstance(message.role, rt.Role):
            raise InvalidInput(f"history[{index}] is not a message")
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            raise InvalidInput(f"history[{index}].content must be a list of blocks")
    return tuple(history)


def run_mode_check(run_mode: Any) -> str:
    if run_mode not in RUN_MODES:
        raise InvalidInput(f"run_mode must be one of {', '.join(RUN_MODES)}, got {run_mode!r}")
    return str(run_mode)


@dataclass(frozen=True)
class Origin:
    """Where a NEW_RUN submission comes from, beyond its messages: the run's `run_mode`,
    the agent `version` it pins (None: the latest published), the new thread's
    `title_prefix` and `resource_id`, `team_guard` (False: the caller checked the freeze
    already, or is not guarded: replays, queued input) and `provenance`, the run's fields
    that say where it comes from (`schedule`, `forked_from`, `fork_step`, `fork_edit`).
    `thread_id`: the new thread's id when the client names it (AG-UI's threadId)."""

    run_mode: str = "foreground"
    version: AgentVersion | None = None
    title_prefix: str = ""
    resource_id: str = ""
    team_guard: bool = True
    provenance: tuple[tuple[str, Any], ...] = ()
    thread_id: uuid.UUID | None = None


PROVENANCE_FIELDS = ("schedule", "forked_from", "fork_step", "fork_edit")
OPERATOR = Origin()


@dataclass(frozen=True)
class Submission:
    """Input for a thread, or the first of a new one. `mode`: START (the run API's) or an
    input mode; `run`: the run it is addressed to (`POST /runs/{id}/inputs`, A2A's
    taskId), whose thread it goes to; `agent`: None takes the thread's (an input mode),
    or its lookup, made in the submission's transaction (the run API's)."""

    agent: Agent | Callable[[], Agent] | None
    messages: tuple[rt.Message, ...]
    thread: Thread | None = None
    run: Run | None = None
    mode: str = Mode.QUEUE
    priority: int = DEFAULT_PRIORITY
    idempotency_key: str = ""
    actor: Actor = SYSTEM
    history: tuple[rt.Message, ...] = ()
    origin: Origin = OPERATOR

    @classmethod
    def build(
        cls,
        *,
        agent: Agent | None,
        messages: Any,
        thread: Thread | None = None,
        run: Run | None = None,
        mode: Any = Mode.QUEUE,
        priority: Any = DEFAULT_PRIORITY,
        idempotency_key: Any = "",
        actor: Actor = SYSTEM,
    ) -> Submission:
        """An input in one of the input modes, its fields checked in this order: mode,
        priority, messages (a string or [{role, content}], normalized), idempotency key."""
        mode = mode_check(mode)
        return cls._checked(agent, messages, thread, run, mode, priority, idempotency_key, actor)

    @classmethod
    def build_start(
        cls,
        *,
        agent: Agent | Callable[[], Agent],
        messages: Any,
        thread: Thread | None = None,
        priority: Any = DEFAULT_PRIORITY,
        idempotency_key: Any = "",
        actor: Actor = SYSTEM,
    ) -> Submission:
        """The run API's command (mode START): `agent` is required, or its lookup."""
        if agent is None:
            raise InvalidInput("agent_id is required", {"agent_id": ["This field is required."]})
        return cls._checked(agent, messages, thread, None, START, priority, idempotency_key, actor)

    @classmethod
    def _checked(
        cls,
        agent: Agent | Callable[[], Agent] | None,
        messages: Any,
        thread: Thread | None,
        run: Run | None,
        mode: str,
        priority: Any,
        idempotency_key: Any,
        actor: Actor,
    ) -> Submission:
        priority = priority_check(priority)
        normalized = tuple(normalize_input_messages(messages))
        key = idempotency_key_check(idempotency_key or "")
        return cls(agent, normalized, thread, run, mode, priority, key, actor)

    @classmethod
    def build_new_run(
        cls,
        *,
        agent: Agent,
        messages: Any = None,
        history: Any = None,
        thread: Thread | None = None,
        priority: Any = DEFAULT_PRIORITY,
        actor: Actor = SYSTEM,
        origin: Origin = OPERATOR,
        **provenance: Any,
    ) -> Submission:
        """A NEW_RUN command: `messages` (user input, normalized as any sender's) or
        `history` (`history_check`), on `thread` or a new one; `provenance` as in Origin."""
        if (messages is None) == (history is None):
            raise InvalidInput("a new run starts with either messages or a history")
        unknown = sorted(set(provenance) - set(PROVENANCE_FIELDS))
        if unknown:
            raise InvalidInput(f"unknown provenance fields: {', '.join(unknown)}")
        origin = dataclasses.replace(
            origin,
            run_mode=run_mode_check(origin.run_mode),
            provenance=tuple(sorted(provenance.items())),
        )
        if history is None:
            cmd = cls._checked(agent, messages, thread, None, NEW_RUN, priority, "", actor)
            return dataclasses.replace(cmd, origin=origin)
        checked = history_check(history)
        priority = priority_check(priority)
        return cls(agent, (), thread, None, NEW_RUN, priority, "", actor, checked, origin)

    @classmethod
    def build_delivery(cls, input_: PendingInput, messages: list[rt.Message]) -> Submission:
        """The command that starts a thread's next run from its queued `input_`: its
        `messages` as they were accepted (built and checked then), its agent, priority and
        sender; not guarded by a freeze (accepted before it)."""
        actor = Actor(user=input_.actor, label=input_.actor_label, source="input")
        return cls(
            input_.agent,
            tuple(messages),
            priority=input_.priority,
            mode=NEW_RUN,
            actor=actor,
            origin=Origin(team_guard=False),
        )

    @property
    def message_list(self) -> list[rt.Message]:
        """What the run starts with: the copied history, then the new messages."""
        return [*self.history, *self.messages]

    @property
    def provenance(self) -> dict[str, Any]:
        return dict(self.origin.provenance)
