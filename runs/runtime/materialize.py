"""Input/output ranges and produced-by stamping, as upstream's `materialize_message_log` does."""

from __future__ import annotations

from collections.abc import Sequence

from .types import (
    Message,
    MessageSeqRange,
    Role,
    RunMessageInput,
    RunMessageOutput,
    RunRecord,
)


def _is_run_output(message: Message) -> bool:
    return message.role in (Role.ASSISTANT, Role.TOOL)


def _infer_input_from_legacy_request(
    previous: RunRecord | None, thread_id: str, total_messages: int
) -> RunMessageInput | None:
    if previous is None or previous.request is None:
        return None
    request = previous.request
    count = max(request.input_message_count, len(request.input_message_ids))
    if count == 0:
        return None
    to_seq = total_messages
    from_seq = max(to_seq - count + 1, 1)
    return RunMessageInput(
        thread_id=thread_id,
        range=MessageSeqRange.new(from_seq, to_seq),
        trigger_message_ids=list(request.input_message_ids),
    )


def _infer_input_from_initial_messages(thread_id: str, count: int) -> RunMessageInput | None:
    if count == 0:
        return None
    return RunMessageInput(thread_id=thread_id, range=MessageSeqRange.new(1, count))


def materialize_message_log(
    messages: Sequence[Message],
    previous: RunRecord | None,
    run_id: str,
    thread_id: str,
    step_count: int,
    input_message_count: int,
    start_index: int = 0,
) -> tuple[RunMessageInput | None, RunMessageOutput | None]:
    """Stamp this run's output messages in place and compute its input/output.

    `start_index` skips messages already committed by earlier checkpoints of this run:
    they were stamped and counted then, and the previous output carries them, so a
    checkpoint's cost does not grow with the thread's length.
    """
    input_ = (
        (previous.input if previous else None)
        or _infer_input_from_legacy_request(previous, thread_id, len(messages))
        or _infer_input_from_initial_messages(thread_id, input_message_count)
    )
    output_start_seq: int
    if input_ is not None and input_.range is not None:
        output_start_seq = input_.range.to_seq + 1
    else:
        first = next(
            (i + 1 for i, m in enumerate(messages) if m.produced_by_run_id() == run_id), None
        )
        output_start_seq = first if first is not None else input_message_count + 1
    step_index = step_count - 1 if step_count > 0 else None

    previous_output = previous.output if previous else None
    output_ids = list(previous_output.message_ids) if previous_output else []
    from_seq = previous_output.range.from_seq if previous_output and previous_output.range else None
    to_seq = previous_output.range.to_seq if previous_output and previous_output.range else None
    has_new_output = False

    for index in range(start_index, len(messages)):
        message = messages[index]
        seq = index + 1
        existing = message.produced_by_run_id() == run_id
        new = seq >= output_start_seq and _is_run_output(message)
        if not existing and not new:
            continue
        if new:
            message.mark_produced_by(run_id, step_index)
            has_new_output = True
        from_seq = seq if from_seq is None else min(from_seq, seq)
        to_seq = seq if to_seq is None else max(to_seq, seq)
        if message.id is not None and message.id not in output_ids:
            output_ids.append(message.id)

    if from_seq is None or (not has_new_output and not output_ids):
        return input_, previous_output
    assert to_seq is not None
    return input_, RunMessageOutput(
        thread_id=thread_id, range=MessageSeqRange.new(from_seq, to_seq), message_ids=output_ids
    )
