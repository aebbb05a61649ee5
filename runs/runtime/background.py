"""Background work a run's tools start (upstream's background tasks and `awaiting_tasks`).

A tool calls `ctx.start_background(kind, arguments, label)`: the start is committed with
the step's checkpoint and a worker executes it later. The run goes on; if its steps end
while work is unfinished, it waits (`awaiting_tasks`) instead of finishing, and the next
activation (woken when the work finishes) receives each result as a message the model
reads before its next inference. The run state's `background_tasks` extension lists the
work and whether its result was delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import events as ev
from .events import Event
from .ports import BackgroundResult, BackgroundStart
from .run_state import RuntimeState
from .types import Message, new_id

BACKGROUND_KEY = "background_tasks"
AWAITING_TASKS = "awaiting_tasks"


class BackgroundWork:
    def __init__(self, state: RuntimeState, emit: Callable[[Event], None]) -> None:
        self.state = state
        self.emit = emit
        self._starts: list[BackgroundStart] = []
        self._delivered: list[str] = []

    @property
    def _tasks(self) -> dict[str, dict[str, Any]]:
        tasks = self.state.extensions.get(BACKGROUND_KEY)
        if not isinstance(tasks, dict):
            tasks = self.state.extensions[BACKGROUND_KEY] = {}
        return tasks

    def starter(self, call_id: str) -> Callable[[str, dict[str, Any], str], str]:
        def start(kind: str, arguments: dict[str, Any], label: str = "") -> str:
            task_id = new_id()
            self._starts.append(BackgroundStart(task_id, call_id, kind, label, dict(arguments)))
            self._tasks[task_id] = {
                "kind": kind,
                "label": label,
                "call_id": call_id,
                "status": "running",
            }
            self.emit(ev.background_task_started(task_id, call_id, kind, label))
            return task_id

        return start

    def pending(self) -> bool:
        """Work started by this run whose result it has not received yet."""
        return any(task.get("status") == "running" for task in self._tasks.values())

    def deliver(self, results: list[BackgroundResult]) -> list[Message]:
        """The results of finished work as messages for the log (the model reads them
        next), each recorded in the event log and the run state."""
        messages = []
        for result in results:
            message = Message.user(result.as_message_text())
            messages.append(message)
            self._tasks.setdefault(result.task_id, {"kind": result.kind, "label": result.label})
            self._tasks[result.task_id]["status"] = result.status
            self._delivered.append(result.task_id)
            self.emit(ev.background_task_delivered(result.task_id, result.status, message.id or ""))
        return messages

    def take(self) -> tuple[list[BackgroundStart], list[str]]:
        """What the next checkpoint commits: the starts and the deliveries since the last."""
        starts, delivered = self._starts, self._delivered
        self._starts, self._delivered = [], []
        return starts, delivered
