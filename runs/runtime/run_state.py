"""A run's in-process state (lifecycle, tool call states, stop statistics) and its persisted
form in the run state's extensions; applying decisions to it; how an activation ends it."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from . import events as ev
from .events import Event
from .identity import RunIdentity
from .stop import STATS_KEY, StopStats
from .types import (
    PersistedState,
    ResumeDecisionAction,
    RunLifecycleState,
    RunStatus,
    TerminationReason,
    ToolCallResume,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    now_ms,
)

logger = logging.getLogger(__name__)

LIFECYCLE_KEY = "__runtime.run_lifecycle"
TOOL_CALLS_KEY = "__runtime.tool_call_states"


class RuntimeState:
    """The run's in-process state and its persisted form."""

    def __init__(
        self,
        run_id: str,
        persisted: PersistedState | None = None,
        tool_calls: dict[str, ToolCallState] | None = None,
    ) -> None:
        persisted = persisted or PersistedState()
        self.revision = persisted.revision
        self.extensions = dict(persisted.extensions)
        lifecycle = self.extensions.get(LIFECYCLE_KEY) or {}
        self.lifecycle = RunLifecycleState(
            run_id=run_id,
            status=RunStatus(lifecycle.get("status", "running")),
            status_reason=lifecycle.get("status_reason"),
            updated_at=int(lifecycle.get("updated_at") or 0),
            step_count=int(lifecycle.get("step_count") or 0),
        )
        if tool_calls is None:
            raw = (self.extensions.get(TOOL_CALLS_KEY) or {}).get("calls") or {}
            tool_calls = {cid: ToolCallState.from_json(data) for cid, data in raw.items()}
        self.tool_calls: dict[str, ToolCallState] = dict(tool_calls)
        self.stop_stats = StopStats.from_json(self.extensions.get(STATS_KEY))

    def export(self) -> PersistedState:
        self.revision += 1
        self.extensions[LIFECYCLE_KEY] = self.lifecycle.to_json()
        self.extensions[TOOL_CALLS_KEY] = {
            "calls": {cid: call.to_json() for cid, call in sorted(self.tool_calls.items())}
        }
        self.extensions[STATS_KEY] = self.stop_stats.to_json()
        return PersistedState(self.revision, dict(self.extensions))

    def set_status(self, target: RunStatus, reason: str | None) -> None:
        if not self.lifecycle.apply(target, reason, clear_reason=reason is None):
            logger.error(
                "run %s: skipping illegal lifecycle transition %s -> %s",
                self.lifecycle.run_id,
                self.lifecycle.status,
                target,
            )

    def conclude(self, termination: TerminationReason) -> None:
        """The lifecycle a run has once an activation ends with `termination`."""
        if termination.type == TerminationReason.SUSPENDED:
            if self.lifecycle.status is not RunStatus.WAITING:
                self.set_status(RunStatus.WAITING, "suspended")
        elif self.lifecycle.status is RunStatus.WAITING and termination.type == (
            TerminationReason.NATURAL_END
        ):
            pass  # its steps ended, its background work did not: it waits (awaiting_tasks)
        elif self.lifecycle.status is not RunStatus.DONE:
            status, reason = termination.to_run_status()
            self.set_status(status, reason)

    def cancel_waiting_calls(self) -> None:
        """Calls still waiting for a decision (or for their replay) end with the run."""
        for call in list(self.tool_calls.values()):
            if call.status in (ToolCallStatus.SUSPENDED, ToolCallStatus.RESUMING):
                self.put_call(replace(call, status=ToolCallStatus.CANCELLED))

    def put_call(self, call: ToolCallState) -> None:
        current = self.tool_calls.get(call.call_id)
        if current is not None and not current.status.can_transition_to(call.status):
            logger.error(
                "skipping illegal tool call transition %s -> %s for %s",
                current.status,
                call.status,
                call.call_id,
            )
            return
        call.updated_at = now_ms()
        self.tool_calls[call.call_id] = call


def prepare_resume(
    state: RuntimeState,
    decisions: list[tuple[str, ToolCallResume]],
    mode_override: ToolCallResumeMode | None = None,
) -> None:
    """Apply decisions to suspended calls, found by call id or suspension id."""
    for target, decision in decisions:
        call = state.tool_calls.get(target) or next(
            (c for c in state.tool_calls.values() if c.suspension_id == target), None
        )
        if call is None:
            raise KeyError(f"tool call or suspension {target} not found")
        status = (
            ToolCallStatus.RESUMING
            if decision.action is ResumeDecisionAction.RESUME
            else ToolCallStatus.CANCELLED
        )
        state.put_call(
            ToolCallState(
                call_id=call.call_id,
                tool_name=call.tool_name,
                arguments=call.arguments,
                status=status,
                updated_at=now_ms(),
                resume_mode=mode_override or call.resume_mode,
                suspension_id=call.suspension_id,
                suspension_reason=call.suspension_reason,
                resume_input=decision,
            )
        )


def run_end_events(
    identity: RunIdentity, state: RuntimeState, termination: TerminationReason, response: str
) -> list[Event]:
    """How a run's activation ends: the lifecycle `termination` leaves in `state`, its
    `state_snapshot` (a new revision), then `run_finish` with the result and identity."""
    state.conclude(termination)
    lifecycle = state.lifecycle
    result: dict[str, Any] = {"response": response, "status": lifecycle.status.value}
    if lifecycle.status_reason is not None:
        result["status_reason"] = lifecycle.status_reason
    return [
        ev.state_snapshot(state.export().to_json()),
        ev.run_finish(identity.thread_id, identity.run_id, termination, result, identity.to_json()),
    ]


def end_without_activation(
    identity: RunIdentity, persisted: PersistedState | None, termination: TerminationReason
) -> tuple[PersistedState, list[Event]]:
    """A run ended while no activation runs it (cancelled before it started or while it
    waits): the state to persist and the events that end its log, as the loop's own end
    would leave them. Its calls still waiting for a decision end with it."""
    state = RuntimeState(identity.run_id, persisted)
    state.cancel_waiting_calls()
    events = run_end_events(identity, state, termination, "")
    return PersistedState(state.revision, dict(state.extensions)), events
