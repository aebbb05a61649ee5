"""The run model's enums and their mappings (docs/run-model.md)."""

from __future__ import annotations

import pytest

from runs.runtime.backends import map_termination
from runs.runtime.types import (
    BackendRunStatus,
    BackendRunStatusKind,
    MessageSeqRange,
    RunRecord,
    RunStatus,
    StoppedReason,
    TerminationReason,
    ToolCallStatus,
    WaitingReason,
    waiting_reason_from_status_reason,
    waiting_state_from_lifecycle,
)

C, R, W, D = RunStatus.CREATED, RunStatus.RUNNING, RunStatus.WAITING, RunStatus.DONE

# The run status transitions, row by row: (from, to, allowed).
RUN_TRANSITIONS = [
    (C, C, True), (C, R, True), (C, W, False), (C, D, True),
    (R, C, False), (R, R, True), (R, W, True), (R, D, True),
    (W, C, False), (W, R, True), (W, W, True), (W, D, True),
    (D, C, False), (D, R, False), (D, W, False), (D, D, True),
]  # fmt: skip


@pytest.mark.parametrize(("source", "target", "allowed"), RUN_TRANSITIONS)
def test_run_status_transition_table(source: RunStatus, target: RunStatus, allowed: bool) -> None:
    assert source.can_transition_to(target) is allowed


def test_run_status_transition_table_covers_every_cell() -> None:
    assert {(s, t) for s, t, _ in RUN_TRANSITIONS} == {(s, t) for s in RunStatus for t in RunStatus}


def test_only_done_is_terminal() -> None:
    assert [status for status in RunStatus if status.is_terminal] == [RunStatus.DONE]


def test_run_status_json_is_lower_snake_case() -> None:
    assert [status.value for status in RunStatus] == ["created", "running", "waiting", "done"]


# --- TerminationReason ---------------------------------------------------------------------------

TERMINATIONS = [
    (TerminationReason.natural_end(), {"type": "natural_end"}, (D, "natural")),
    (TerminationReason.behavior_requested(), {"type": "behavior_requested"}, (D, "behavior_requested")),
    (
        TerminationReason.stopped("max_rounds", "exceeded 16 rounds"),
        {"type": "stopped", "value": {"code": "max_rounds", "detail": "exceeded 16 rounds"}},
        (D, "stopped:max_rounds"),
    ),
    (
        TerminationReason.stopped("timeout"),
        {"type": "stopped", "value": {"code": "timeout"}},
        (D, "stopped:timeout"),
    ),
    (TerminationReason.cancelled(), {"type": "cancelled"}, (D, "cancelled")),
    (
        TerminationReason.blocked("Tool 'rm' denied by permission rules"),
        {"type": "blocked", "value": "Tool 'rm' denied by permission rules"},
        (D, "blocked:Tool 'rm' denied by permission rules"),
    ),
    (TerminationReason.suspended(), {"type": "suspended"}, (W, None)),
    (TerminationReason.error("boom"), {"type": "error", "value": "boom"}, (D, "error")),
]  # fmt: skip


@pytest.mark.parametrize(("termination", "as_json", "run_status"), TERMINATIONS)
def test_termination_reason_to_run_status(
    termination: TerminationReason, as_json: dict, run_status: tuple
) -> None:
    assert termination.to_run_status() == run_status


@pytest.mark.parametrize(("termination", "as_json", "run_status"), TERMINATIONS)
def test_termination_reason_json_round_trip(
    termination: TerminationReason, as_json: dict, run_status: tuple
) -> None:
    assert termination.to_json() == as_json
    assert TerminationReason.from_json(as_json) == termination
    assert TerminationReason.from_json(termination.to_json()) == termination


def test_termination_error_message_goes_to_value_not_status_reason() -> None:
    termination = TerminationReason.error("provider exploded")
    assert termination.to_run_status() == (RunStatus.DONE, "error")
    assert termination.to_json()["value"] == "provider exploded"


def test_stopped_termination_keeps_detail_through_json() -> None:
    parsed = TerminationReason.from_json(
        {"type": "stopped", "value": {"code": "token_budget", "detail": "used 120 of 100 tokens"}}
    )
    assert parsed.value == StoppedReason("token_budget", "used 120 of 100 tokens")


def test_plugin_requested_is_accepted_as_behavior_requested() -> None:
    parsed = TerminationReason.from_json({"type": "plugin_requested"})
    assert parsed == TerminationReason.behavior_requested()
    assert parsed.to_json() == {"type": "behavior_requested"}


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        ("natural", TerminationReason.natural_end()),
        ("behavior_requested", TerminationReason.behavior_requested()),
        ("cancelled", TerminationReason.cancelled()),
        ("blocked:x", TerminationReason.blocked("x")),
        ("blocked:Tool 'rm' denied", TerminationReason.blocked("Tool 'rm' denied")),
        ("stopped:x", TerminationReason.stopped("x")),
        ("stopped:max_rounds", TerminationReason.stopped("max_rounds")),
        ("error:x", TerminationReason.error("x")),
        ("error", TerminationReason.error("error")),
        ("unknown", TerminationReason.error("unknown")),
        ("timeout", TerminationReason.error("timeout")),
        ("", TerminationReason.error("")),
    ],
)
def test_from_done_reason(reason: str, expected: TerminationReason) -> None:
    assert TerminationReason.from_done_reason(reason) == expected


def test_from_done_reason_loses_stopped_detail() -> None:
    assert TerminationReason.from_done_reason("stopped:max_rounds").value.detail is None


@pytest.mark.parametrize("termination", [t for t, _, _ in TERMINATIONS if t.type != "suspended"])
def test_done_reason_round_trips_through_to_run_status(termination: TerminationReason) -> None:
    _, reason = termination.to_run_status()
    parsed = TerminationReason.from_done_reason(reason)
    if termination.type == "error":
        assert parsed == TerminationReason.error("error")  # the message is not embedded
    elif termination.type == "stopped":
        assert parsed == TerminationReason.stopped(termination.value.code)
    else:
        assert parsed == termination


# --- WaitingReason -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status_reason", "expected"),
    [
        ("suspended", WaitingReason.TOOL_PERMISSION),
        ("auth_required", WaitingReason.TOOL_PERMISSION),
        ("awaiting_tasks", WaitingReason.BACKGROUND_TASKS),
        ("input_required", WaitingReason.USER_INPUT),
        ("user_input_required", WaitingReason.USER_INPUT),
        ("rate_limit", WaitingReason.RATE_LIMIT),
        ("manual_pause", WaitingReason.MANUAL_PAUSE),
        ("something_else", WaitingReason.EXTERNAL_EVENT),
        ("", WaitingReason.EXTERNAL_EVENT),
        (None, WaitingReason.EXTERNAL_EVENT),
    ],
)
def test_waiting_reason_from_status_reason(
    status_reason: str | None, expected: WaitingReason
) -> None:
    assert waiting_reason_from_status_reason(status_reason) is expected


def test_waiting_reason_json_is_snake_case() -> None:
    assert {reason.value for reason in WaitingReason} == {
        "tool_permission",
        "user_input",
        "background_tasks",
        "external_event",
        "rate_limit",
        "manual_pause",
        "budget",  # our addition (docs/budgets.md)
    }


@pytest.mark.parametrize("status", [C, R, D])
def test_waiting_state_only_exists_while_waiting(status: RunStatus) -> None:
    assert waiting_state_from_lifecycle(status, "suspended", None, []) is None


def test_waiting_state_keeps_raw_status_reason_as_message() -> None:
    waiting = waiting_state_from_lifecycle(W, "input_required", "session-1", [])
    assert waiting is not None
    assert waiting.reason is WaitingReason.USER_INPUT
    assert waiting.message == "input_required"
    assert waiting.ticket_ids == []
    assert waiting.since_dispatch_id == "session-1"


@pytest.mark.parametrize("status", list(RunStatus))
def test_run_record_waiting_reason_only_when_waiting(status: RunStatus) -> None:
    record = RunRecord("r", "t", "a", status=status, status_reason="awaiting_tasks")
    expected = WaitingReason.BACKGROUND_TASKS if status is W else None
    assert record.waiting_reason() is expected


# --- BackendRunStatus ----------------------------------------------------------------------------

ANY_TERMINATION = TerminationReason.error("should not win")

BACKEND_STATUSES = [
    # status, str(), durable status, durable reason, result label (termination irrelevant)
    (BackendRunStatus.waiting_input(), "waiting_input", W, "input_required", "waiting_input"),
    (BackendRunStatus.waiting_input("need details"), "waiting_input: need details", W, "input_required", "waiting_input"),
    (BackendRunStatus.waiting_auth(), "waiting_auth", W, "auth_required", "waiting_auth"),
    (BackendRunStatus.waiting_auth("login"), "waiting_auth: login", W, "auth_required", "waiting_auth"),
    (BackendRunStatus.suspended(), "suspended", W, "suspended", "suspended"),
    (BackendRunStatus.suspended("ticket"), "suspended: ticket", W, "suspended", "suspended"),
    (BackendRunStatus.failed("remote 500"), "failed: remote 500", D, "error", "failed"),
    (BackendRunStatus.cancelled(), "cancelled", D, "cancelled", "cancelled"),
    (BackendRunStatus.timeout(), "timeout", D, "timeout", "timeout"),
]  # fmt: skip


@pytest.mark.parametrize(("status", "text", "run_status", "reason", "label"), BACKEND_STATUSES)
def test_backend_status_durable_mapping(
    status: BackendRunStatus, text: str, run_status: RunStatus, reason: str, label: str
) -> None:
    for termination in (ANY_TERMINATION, TerminationReason.natural_end()):
        assert status.durable_run_status(termination) is run_status
        assert status.durable_status_reason(termination) == reason
        assert status.result_status_label(termination) == label


@pytest.mark.parametrize(("status", "text", "run_status", "reason", "label"), BACKEND_STATUSES)
def test_backend_status_display(
    status: BackendRunStatus, text: str, run_status: RunStatus, reason: str, label: str
) -> None:
    assert str(status) == text
    assert status.is_waiting is (run_status is W)


@pytest.mark.parametrize(
    ("termination", "run_status", "reason", "label"),
    [
        (TerminationReason.natural_end(), D, "natural", "done"),
        (TerminationReason.behavior_requested(), D, "behavior_requested", "done"),
        (TerminationReason.suspended(), W, None, "waiting"),
        (TerminationReason.error("x"), D, "error", "done"),
        (TerminationReason.stopped("max_rounds"), D, "stopped:max_rounds", "done"),
    ],
)
def test_completed_backend_status_follows_termination(
    termination: TerminationReason, run_status: RunStatus, reason: str | None, label: str
) -> None:
    status = BackendRunStatus.completed()
    assert str(status) == "completed"
    assert not status.is_waiting
    assert status.durable_run_status(termination) is run_status
    assert status.durable_status_reason(termination) == reason
    assert status.result_status_label(termination) == label


def test_backend_status_covers_every_kind() -> None:
    kinds = {status.kind for status, *_ in BACKEND_STATUSES} | {BackendRunStatusKind.COMPLETED}
    assert kinds == set(BackendRunStatusKind)


# --- map_termination (backends/local.py) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("termination", "expected"),
    [
        (TerminationReason.natural_end(), BackendRunStatus.completed()),
        (TerminationReason.behavior_requested(), BackendRunStatus.completed()),
        (TerminationReason.cancelled(), BackendRunStatus.cancelled()),
        (TerminationReason.suspended(), BackendRunStatus.suspended()),
        (
            TerminationReason.error("provider exploded"),
            BackendRunStatus.failed("provider exploded"),
        ),
        (
            TerminationReason.blocked("Tool 'rm' denied by permission rules"),
            BackendRunStatus.failed("blocked: Tool 'rm' denied by permission rules"),
        ),
    ],
)
def test_map_termination(termination: TerminationReason, expected: BackendRunStatus) -> None:
    assert map_termination(termination) == expected


def test_map_termination_stopped_is_failed_naming_the_code() -> None:
    status = map_termination(TerminationReason.stopped("max_rounds", "exceeded 2 rounds"))
    assert status.kind is BackendRunStatusKind.FAILED
    assert status.message is not None
    assert status.message.startswith("stopped: ")
    assert "max_rounds" in status.message


# --- ToolCallStatus ------------------------------------------------------------------------------

N, RU, S, RE = (
    ToolCallStatus.NEW,
    ToolCallStatus.RUNNING,
    ToolCallStatus.SUSPENDED,
    ToolCallStatus.RESUMING,
)
OK, FA, CA = ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED, ToolCallStatus.CANCELLED

TOOL_ALLOWED = {
    N: set(ToolCallStatus),
    RU: {RU, S, OK, FA, CA},
    S: {S, RE, CA},
    RE: {RE, RU, S, OK, FA, CA},
    OK: {OK},
    FA: {FA},
    CA: {CA},
}


@pytest.mark.parametrize("source", list(ToolCallStatus))
@pytest.mark.parametrize("target", list(ToolCallStatus))
def test_tool_call_status_transitions(source: ToolCallStatus, target: ToolCallStatus) -> None:
    assert source.can_transition_to(target) is (target in TOOL_ALLOWED[source])


def test_tool_call_terminal_statuses() -> None:
    assert {status for status in ToolCallStatus if status.is_terminal} == {OK, FA, CA}
    assert [status.value for status in ToolCallStatus] == [
        "new",
        "running",
        "suspended",
        "resuming",
        "succeeded",
        "failed",
        "cancelled",
    ]


# --- MessageSeqRange -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("from_seq", "to_seq", "valid"),
    [(1, 1, True), (2, 5, True), (0, 3, False), (3, 2, False), (-1, 2, False), (0, 0, False)],
)
def test_message_seq_range_needs_positive_non_empty_bounds(
    from_seq: int, to_seq: int, valid: bool
) -> None:
    created = MessageSeqRange.new(from_seq, to_seq)
    assert (created is not None) is valid
    if created is not None:
        assert len(created) == to_seq - from_seq + 1
        assert MessageSeqRange.from_json(created.to_json()) == created
