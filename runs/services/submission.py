"""The submission command: what every way in (REST, pages, CLI, A2A) hands over to start
a run or to send a thread input, validated once when it is built. Its one entry,
`submission_accept` (runs.services.submission_flow), locks the thread, finds its open run
and starts, continues or queues exactly once.

The priority rule lives here too (`priority_check`): the API's serializers, the pages'
forms, the CLI and `run_set_priority` call it, so a bad priority reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.models import Agent
from common.audit import SYSTEM, Actor
from common.errors import InvalidInput
from runs.models import DEFAULT_PRIORITY, PRIORITY_MAX, PRIORITY_MIN, PendingInput, Run, Thread
from runs.runtime import types as rt
from runs.services.creation import normalize_input_messages

Mode = PendingInput.Mode
MODES = tuple(Mode.values)
# The run API's `POST /runs`: a new run, or new input continuing the thread's waiting run;
# refused while the thread's open run works (input modes queue, steer or interrupt it).
START = "start"
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

    @property
    def message_list(self) -> list[rt.Message]:
        return list(self.messages)
