"""AgentEvent constructors (docs/run-model.md, "Events"): a JSON dict with `event_type`.

Events are plain dicts so that what the loop emits is byte-for-byte what is stored,
broadcast and served; these helpers keep the field names in one place.
"""

from __future__ import annotations

from typing import Any

from .types import TerminationReason, TokenUsage, ToolResult

Event = dict[str, Any]

TERMINAL_EVENT_TYPES = frozenset({"run_finish", "error"})
# The `error` code that closes an activation whose worker stopped before it ended: the run
# itself goes on from its last checkpoint in a new activation.
ACTIVATION_INTERRUPTED = "activation_interrupted"
# Token-level events that may be sent live without being persisted one by one.
DELTA_EVENT_TYPES = frozenset({"text_delta", "reasoning_delta", "tool_call_delta"})


def run_start(thread_id: str, run_id: str, parent_run_id: str | None, identity: dict) -> Event:
    event: Event = {"event_type": "run_start", "thread_id": thread_id, "run_id": run_id}
    if parent_run_id:
        event["parent_run_id"] = parent_run_id
    event["identity"] = identity
    return event


def run_finish(
    thread_id: str,
    run_id: str,
    termination: TerminationReason,
    result: dict[str, Any] | None,
    identity: dict | None = None,
) -> Event:
    event: Event = {"event_type": "run_finish", "thread_id": thread_id, "run_id": run_id}
    if identity is not None:
        event["identity"] = identity
    if result is not None:
        event["result"] = result
    event["termination"] = termination.to_json()
    return event


def step_start(message_id: str) -> Event:
    return {"event_type": "step_start", "message_id": message_id}


def step_end() -> Event:
    return {"event_type": "step_end"}


def text_delta(delta: str) -> Event:
    return {"event_type": "text_delta", "delta": delta}


def reasoning_delta(delta: str) -> Event:
    return {"event_type": "reasoning_delta", "delta": delta}


def tool_call_start(call_id: str, name: str) -> Event:
    return {"event_type": "tool_call_start", "id": call_id, "name": name}


def tool_call_delta(call_id: str, args_delta: str) -> Event:
    return {"event_type": "tool_call_delta", "id": call_id, "args_delta": args_delta}


def tool_call_ready(call_id: str, name: str, arguments: Any) -> Event:
    return {"event_type": "tool_call_ready", "id": call_id, "name": name, "arguments": arguments}


def tool_call_done(call_id: str, message_id: str, result: ToolResult, outcome: str) -> Event:
    return {
        "event_type": "tool_call_done",
        "id": call_id,
        "message_id": message_id,
        "result": result.to_json(),
        "outcome": outcome,
    }


def tool_call_resumed(target_id: str, result: Any) -> Event:
    return {"event_type": "tool_call_resumed", "target_id": target_id, "result": result}


def inference_complete(model: str, usage: TokenUsage | None, duration_ms: int) -> Event:
    event: Event = {"event_type": "inference_complete", "model": model}
    if usage is not None:
        event["usage"] = usage.to_json()
    event["duration_ms"] = duration_ms
    return event


def state_snapshot(snapshot: dict[str, Any]) -> Event:
    return {"event_type": "state_snapshot", "snapshot": snapshot}


def activity_snapshot(
    message_id: str, activity_type: str, content: Any, replace: bool | None = None
) -> Event:
    event: Event = {
        "event_type": "activity_snapshot",
        "message_id": message_id,
        "activity_type": activity_type,
        "content": content,
    }
    if replace is not None:
        event["replace"] = replace
    return event


def error(message: str, code: str | None = None) -> Event:
    event: Event = {"event_type": "error", "message": message}
    if code is not None:
        event["code"] = code
    return event


def input_delivered(
    input_id: str, mode: str, boundary: str, message_ids: list[str], messages: list[Any]
) -> Event:
    """Input sent to the thread reached the run: at a step boundary (`next_step`, steer),
    as the start of a new run (`new_run`) or to continue a waiting one (`resume_input`)."""
    return {
        "event_type": "input_delivered",
        "input_id": input_id,
        "mode": mode,
        "boundary": boundary,
        "message_ids": message_ids,
        "messages": messages,
    }


def background_task_started(task_id: str, call_id: str, kind: str, label: str) -> Event:
    return {
        "event_type": "background_task_started",
        "task_id": task_id,
        "call_id": call_id,
        "kind": kind,
        "label": label,
    }


def background_task_delivered(task_id: str, status: str, message_id: str) -> Event:
    """Finished background work handed to the run: its result is the message `message_id`."""
    return {
        "event_type": "background_task_delivered",
        "task_id": task_id,
        "status": status,
        "message_id": message_id,
    }


def activation_interrupted(message: str) -> Event:
    return error(message, ACTIVATION_INTERRUPTED)


def ends_run_stream(event: Event) -> bool:
    """Whether a client reading the run's events for its outcome stops after `event`: a
    terminal event, but not an interrupted activation's, which the run outlives."""
    return event["event_type"] in TERMINAL_EVENT_TYPES and event.get("code") != (
        ACTIVATION_INTERRUPTED
    )


def coalesce_deltas(events: list[Event]) -> list[Event]:
    """Merge runs of consecutive text/reasoning deltas into one event each.

    The persisted log keeps the same text in far fewer rows; concatenating the deltas of
    the merged events gives exactly what the live stream showed.
    """
    merged: list[Event] = []
    for event in events:
        kind = event["event_type"]
        if (
            merged
            and kind in ("text_delta", "reasoning_delta")
            and merged[-1]["event_type"] == kind
        ):
            merged[-1] = {**merged[-1], "delta": merged[-1]["delta"] + event["delta"]}
        elif (
            merged
            and kind == "tool_call_delta"
            and merged[-1]["event_type"] == kind
            and merged[-1]["id"] == event["id"]
        ):
            merged[-1] = {
                **merged[-1],
                "args_delta": merged[-1]["args_delta"] + event["args_delta"],
            }
        else:
            merged.append(event)
    return merged
