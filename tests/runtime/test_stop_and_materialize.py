"""Stop policy configuration and checks, and output materialization with incremental
checkpoints (docs/run-model.md, "Stop policies" and "Input and output ranges")."""

from __future__ import annotations

import copy
import time

import pytest

from runs.runtime.loop import AgentLoop, RunIdentity
from runs.runtime.materialize import materialize_message_log
from runs.runtime.permissions import PermissionPolicy
from runs.runtime.stop import DEFAULT_MAX_ROUNDS, StopConfigError, StopPolicies, StopStats
from runs.runtime.testing import (
    EchoTool,
    InMemoryStore,
    RecordingSink,
    ScriptedLlm,
    agent,
    text_turn,
    tool_turn,
)
from runs.runtime.types import (
    Message,
    MessageSeqRange,
    ResumeDecisionAction,
    RunMessageInput,
    RunMessageOutput,
    RunRecord,
    RunRequestSnapshot,
    ToolCallResume,
)

# --- StopPolicies.from_spec ----------------------------------------------------------------------


def test_stop_policy_defaults() -> None:
    policies = StopPolicies.from_spec(None, None)
    assert DEFAULT_MAX_ROUNDS == 16
    assert policies == StopPolicies(
        max_rounds=16, timeout_seconds=0, token_budget=0, consecutive_errors=0
    )


def test_spec_max_rounds_is_used() -> None:
    assert StopPolicies.from_spec(3, []).max_rounds == 3


def test_stop_conditions_are_read() -> None:
    policies = StopPolicies.from_spec(
        16,
        [
            {"type": "max_rounds", "rounds": 4},
            {"type": "timeout", "seconds": 2.5},
            {"type": "token_budget", "max_total": 1000},
            {"type": "consecutive_errors", "max": 3},
        ],
    )
    assert policies == StopPolicies(
        max_rounds=4, timeout_seconds=2.5, token_budget=1000, consecutive_errors=3
    )


@pytest.mark.parametrize(
    ("conditions", "fragment"),
    [
        (["max_rounds"], "needs a 'type'"),
        ([{"rounds": 3}], "needs a 'type'"),
        ([{"type": "bogus"}], "unknown stop condition 'bogus'"),
        ([{"type": "max_rounds"}], "stop condition 'max_rounds' is missing or has a bad value"),
        ([{"type": "timeout", "seconds": "soon"}], "stop condition 'timeout'"),
        ([{"type": "token_budget", "max_total": None}], "stop condition 'token_budget'"),
        ([{"type": "consecutive_errors", "limit": 2}], "stop condition 'consecutive_errors'"),
        ([{"type": "token_budget", "max_total": -1}], "token_budget must not be negative"),
        ([{"type": "timeout", "seconds": -5}], "timeout_seconds must not be negative"),
    ],
)
def test_invalid_stop_conditions_raise(conditions: list, fragment: str) -> None:
    with pytest.raises(StopConfigError) as info:
        StopPolicies.from_spec(16, conditions)
    assert fragment in str(info.value)


def test_unknown_stop_condition_error_lists_the_known_ones() -> None:
    with pytest.raises(StopConfigError) as info:
        StopPolicies.from_spec(16, [{"type": "bogus"}])
    for known in ("max_rounds", "timeout", "token_budget", "consecutive_errors"):
        assert known in str(info.value)


def test_negative_max_rounds_is_rejected() -> None:
    with pytest.raises(StopConfigError, match="max_rounds must not be negative"):
        StopPolicies.from_spec(-1, None)


def test_stop_config_error_is_a_value_error() -> None:
    assert issubclass(StopConfigError, ValueError)


# --- StopPolicies.check --------------------------------------------------------------------------


def stats(inferences: int = 0, errors: int = 0, elapsed: float = 0.0) -> StopStats:
    return StopStats(
        inferences=inferences, consecutive_errors=errors, started_at=time.time() - elapsed
    )


def test_max_rounds_fires_only_above_the_limit() -> None:
    policies = StopPolicies(max_rounds=2)
    assert policies.check(stats(inferences=2), 0, 0) is None
    code, detail = policies.check(stats(inferences=3), 0, 0) or ("", "")
    assert code == "max_rounds"
    assert "2" in detail


def test_timeout_fires_when_elapsed_exceeds_the_limit() -> None:
    policies = StopPolicies(max_rounds=0, timeout_seconds=5)
    assert policies.check(stats(elapsed=1), 0, 0) is None
    fired = policies.check(stats(elapsed=10), 0, 0)
    assert fired is not None
    assert fired[0] == "timeout"


def test_token_budget_fires_only_above_the_limit() -> None:
    policies = StopPolicies(max_rounds=0, token_budget=100)
    assert policies.check(stats(), 60, 40) is None
    fired = policies.check(stats(), 60, 41)
    assert fired is not None
    assert fired[0] == "token_budget"


def test_consecutive_errors_fires_at_the_limit() -> None:
    policies = StopPolicies(max_rounds=0, consecutive_errors=2)
    assert policies.check(stats(errors=1), 0, 0) is None
    fired = policies.check(stats(errors=2), 0, 0)
    assert fired is not None
    assert fired[0] == "consecutive_errors"


def test_a_limit_of_zero_disables_a_policy() -> None:
    policies = StopPolicies(max_rounds=0, timeout_seconds=0, token_budget=0, consecutive_errors=0)
    assert (
        policies.check(stats(inferences=10_000, errors=10_000, elapsed=10_000), 10**9, 10**9)
        is None
    )


def test_stop_stats_json_round_trip() -> None:
    original = StopStats(inferences=3, consecutive_errors=1, started_at=1234.5)
    assert StopStats.from_json(original.to_json()) == original
    assert StopStats.from_json(None).inferences == 0


# --- materialize_message_log ---------------------------------------------------------------------


def assistant(text: str, message_id: str) -> Message:
    message = Message.assistant(text)
    message.id = message_id
    return message


def tool(call_id: str, message_id: str) -> Message:
    message = Message.tool(call_id, "result")
    message.id = message_id
    return message


def user(text: str, message_id: str) -> Message:
    message = Message.user(text)
    message.id = message_id
    return message


def test_first_checkpoint_derives_input_from_initial_messages() -> None:
    messages = [user("hi", "u1"), assistant("a", "a1"), tool("c1", "t1")]
    input_, output = materialize_message_log(messages, None, "r1", "th", 1, 1)

    assert input_ == RunMessageInput(thread_id="th", range=MessageSeqRange(1, 1))
    assert output == RunMessageOutput(
        thread_id="th", range=MessageSeqRange(2, 3), message_ids=["a1", "t1"]
    )
    assert [(m.run_id, m.step_index) for m in messages] == [(None, None), ("r1", 0), ("r1", 0)]


def test_user_messages_after_the_input_are_not_output() -> None:
    messages = [user("hi", "u1"), assistant("a", "a1"), user("more", "u2"), assistant("b", "a2")]
    _, output = materialize_message_log(messages, None, "r1", "th", 2, 1)

    assert output is not None
    assert output.message_ids == ["a1", "a2"]
    assert output.range == MessageSeqRange(2, 4)  # 0.5 ranges may contain gaps
    assert messages[2].run_id is None


def test_step_index_is_none_before_any_step() -> None:
    messages = [user("hi", "u1"), assistant("a", "a1")]
    materialize_message_log(messages, None, "r1", "th", 0, 1)
    assert (messages[1].run_id, messages[1].step_index) == ("r1", None)


def test_existing_stamps_are_never_overwritten() -> None:
    foreign = assistant("other", "a0")
    foreign.run_id, foreign.step_index = "r0", 5
    messages = [user("hi", "u1"), foreign]
    materialize_message_log(messages, None, "r1", "th", 1, 1)
    assert (foreign.run_id, foreign.step_index) == ("r0", 5)


def test_no_input_and_no_stamps_start_output_at_the_first_message() -> None:
    messages = [assistant("a", "a1"), tool("c1", "t1")]
    input_, output = materialize_message_log(messages, None, "r1", "th", 1, 0)

    assert input_ is None
    assert output is not None
    assert output.range == MessageSeqRange(1, 2)


def test_without_input_output_starts_at_the_first_message_of_this_run() -> None:
    first = assistant("mine", "a1")
    first.run_id = "r1"
    messages = [user("hi", "u1"), assistant("older", "a0"), first, tool("c1", "t1")]
    messages[1].run_id = "r0"
    input_, output = materialize_message_log(messages, None, "r1", "th", 2, 0)

    assert input_ is None
    assert output is not None
    assert output.message_ids == ["a1", "t1"]
    assert output.range == MessageSeqRange(3, 4)


def test_legacy_request_gives_the_input_range() -> None:
    previous = RunRecord(
        "r1",
        "th",
        "a",
        request=RunRequestSnapshot(input_message_ids=["u2"], input_message_count=2),
    )
    messages = [user("old", "u0"), user("hi", "u1"), user("again", "u2")]
    input_, _ = materialize_message_log(messages, previous, "r1", "th", 0, 0)

    assert input_ is not None
    assert input_.range == MessageSeqRange(2, 3)
    assert input_.trigger_message_ids == ["u2"]


def test_previous_output_is_kept_when_nothing_new_was_produced() -> None:
    previous_output = RunMessageOutput(
        thread_id="th", range=MessageSeqRange(2, 2), message_ids=["a1"]
    )
    previous = RunRecord(
        "r1",
        "th",
        "a",
        input=RunMessageInput(thread_id="th", range=MessageSeqRange(1, 1)),
        output=previous_output,
    )
    messages = [user("hi", "u1")]
    _, output = materialize_message_log(messages, previous, "r1", "th", 1, 1, start_index=1)

    assert output == previous_output


def test_incremental_materialize_equals_full_recomputation() -> None:
    messages = [user("hi", "u1"), assistant("a", "a1"), tool("c1", "t1")]
    input1, output1 = materialize_message_log(messages, None, "r1", "th", 1, 1, start_index=1)
    record = RunRecord("r1", "th", "a", input=input1, output=output1)

    messages += [user("note", "u2"), tool("c2", "t2"), assistant("b", "a2")]
    full_messages = copy.deepcopy(messages)
    inc_input, inc_output = materialize_message_log(
        messages, record, "r1", "th", 2, 1, start_index=3
    )
    full_input, full_output = materialize_message_log(full_messages, record, "r1", "th", 2, 1)

    assert (inc_input, inc_output) == (full_input, full_output)
    assert [(m.run_id, m.step_index) for m in messages] == [
        (m.run_id, m.step_index) for m in full_messages
    ]
    assert inc_output == RunMessageOutput(
        thread_id="th", range=MessageSeqRange(2, 6), message_ids=["a1", "t1", "t2", "a2"]
    )
    # and from scratch, knowing only the input, the output is the same
    scratch = RunRecord("r1", "th", "a", input=input1)
    _, scratch_output = materialize_message_log(copy.deepcopy(messages), scratch, "r1", "th", 2, 1)
    assert scratch_output == inc_output


def test_loop_checkpoints_equal_a_full_recomputation_of_the_final_log() -> None:
    """The loop materializes incrementally (start_index) at every checkpoint; recomputing the
    whole log at the end must give the same output and leave every stamp untouched."""
    store = InMemoryStore()
    store.append_messages("t1", [Message.user("hello")])
    store.runs["r1"] = RunRecord(run_id="r1", thread_id="t1", agent_id="a")
    resolved = agent(
        "a",
        ScriptedLlm(
            [
                tool_turn("echo", {"message": "a"}, "call-1", text="first"),
                tool_turn("echo", {"message": "b"}, "call-2"),
                text_turn("done"),
            ]
        ),
    ).with_tool(EchoTool())
    resolved.permission = PermissionPolicy.from_json(
        {"default_behavior": "allow", "rules": [{"tool": 'echo(message ~ "b")', "behavior": "ask"}]}
    )

    def activation(**kwargs: object) -> None:
        AgentLoop(
            agent=resolved,
            identity=RunIdentity("t1", "r1", "a"),
            messages=store.load_messages("t1"),
            sink=RecordingSink(),
            store=store,
            previous=store.load_run("r1"),
            **kwargs,  # type: ignore[arg-type]
        ).run()

    activation()
    decision = ToolCallResume("d1", ResumeDecisionAction.RESUME, {"approved": True})
    activation(
        tool_calls=copy.deepcopy(store.tool_calls["r1"]), decisions=[("perm_call-2", decision)]
    )

    record = store.runs["r1"]
    assert record.status_reason == "natural"
    log = copy.deepcopy(store.messages["t1"])
    stamps = [(m.run_id, m.step_index) for m in log]
    scratch = RunRecord("r1", "t1", "a", input=record.input)
    input_, output = materialize_message_log(log, scratch, "r1", "t1", record.steps, 1)

    assert input_ == record.input
    assert output == record.output
    assert [(m.run_id, m.step_index) for m in log] == stamps
    assert output is not None
    assert output.message_ids == [m.id for m in log[1:]]
