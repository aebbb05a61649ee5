"""Checkpoint cost per step at 10 and at 10,000 prior messages in the thread.

Two threads are bulk-created with 10 and 10,000 committed messages. A run on each is
claimed by a fake worker (the application's own `run_claim`), then
`OrmCheckpointStore(run_id, attempt).checkpoint(Checkpoint(...))` is timed as a real
step end writes it: one assistant message with a tool call, the tool's answer, the
changed tool-call state, five events and the updated run record. The calls alternate
between the two threads (A/B, order swapped every pair); `expected_message_count`
grows by 2 per call. A run is finished (untimed) and a new one claimed on the same thread
every 16 steps (the default max_rounds), so run records stay the size real ones have.

Figure: median µs per checkpoint on the 10,000-message thread; baseline: the same on the
10-message thread, interleaved in the same run. Goal: ratio <= 1.3 (a checkpoint's cost
must not grow with the thread). Also printed: the raw SQL floor for the same rows in one
transaction (psycopg, no ORM) and the time spent in the on-commit broadcast.
Run alone: .venv/bin/python bench/checkpoint_cost.py
Django and the application are imported inside functions: they need django.setup(), which
BenchEnv.start() runs first (see bench/common.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common, fixtures
from bench.common import BenchEnv, Figure, median, percentile

BENCHMARK = "checkpoint_cost"
SIZES = (10, 10_000)
CALLS = int(os.environ.get("BENCH_CHECKPOINT_CALLS", "200"))
WARMUP = 20
STEPS_PER_RUN = 16
GOAL_RATIO = 1.3


class Lane:
    """One thread and the run currently checkpointing on it."""

    def __init__(self, agent: Any, messages: int) -> None:
        self.agent = agent
        self.size = messages
        self.thread = fixtures.create_thread(messages)
        self.samples_ns: list[int] = []
        self.run: Any = None
        self._new_run()

    def _new_run(self) -> None:
        from runs.models import Run
        from runs.store import record_from_row

        if self.run is not None:  # finish the previous run outside the timed section
            Run.objects.filter(pk=self.run.pk).update(
                status=Run.Status.DONE, status_reason="natural", lease_owner="", due=False
            )
        trigger = fixtures.append_user_message(self.thread, "another question")
        self.run, self.attempt = fixtures.create_claimed_run(self.agent, self.thread, trigger)
        self.record = record_from_row(self.run)
        self.count = self.run.thread.message_count
        self.steps_in_run = 0

    def next_checkpoint(self) -> Any:
        """Build (untimed) the checkpoint of this run's next step, exactly as the loop
        would: stamped messages, the record with the grown output range, the events."""
        from runs.runtime import events as ev
        from runs.runtime import types as rt
        from runs.runtime.ports import Checkpoint

        record = self.record
        step = record.steps + 1
        run_id = record.run_id
        call_id = f"call_{uuid.uuid4().hex[:16]}"
        assistant = rt.Message.assistant(
            "", tool_calls=[rt.ToolCall(call_id, "calculator", {"expression": "6*7"})]
        )
        result = rt.ToolResult.success("calculator", {"result": 42})
        tool = rt.Message.tool(call_id, json.dumps(result.data))
        for message in (assistant, tool):
            message.mark_produced_by(run_id, step - 1)
        previous = record.output
        output_ids = [*(previous.message_ids if previous else []), assistant.id, tool.id]
        first = previous.range.from_seq if previous and previous.range else self.count + 1
        usage = rt.TokenUsage(prompt_tokens=40, completion_tokens=8, total_tokens=48)
        now = int(time.time())
        self.record = dataclasses.replace(
            record,
            status=rt.RunStatus.RUNNING,
            output=rt.RunMessageOutput(
                thread_id=record.thread_id,
                range=rt.MessageSeqRange.new(first, self.count + 2),
                message_ids=output_ids,
            ),
            steps=step,
            updated_at=now,
            input_tokens=record.input_tokens + usage.prompt_tokens,
            output_tokens=record.output_tokens + usage.completion_tokens,
            state=rt.PersistedState(revision=step, extensions={}),
        )
        events = [
            ev.step_start(str(assistant.id)),
            ev.inference_complete("bench-model", usage, 3),
            ev.tool_call_ready(call_id, "calculator", {"expression": "6*7"}),
            ev.tool_call_done(call_id, str(tool.id), result, "success"),
            ev.step_end(),
        ]
        state = rt.ToolCallState(
            call_id=call_id,
            tool_name="calculator",
            arguments={"expression": "6*7"},
            status=rt.ToolCallStatus.SUCCEEDED,
            updated_at=int(time.time() * 1000),
        )
        return Checkpoint(
            thread_id=record.thread_id,
            record=self.record,
            new_messages=[assistant, tool],
            expected_message_count=self.count,
            tool_calls=[state],
            events=events,
            step_index=step - 1,
        )

    def step(self, timed: bool) -> None:
        from django.conf import settings

        from runs.store import OrmCheckpointStore

        checkpoint = self.next_checkpoint()
        store = OrmCheckpointStore(self.run.pk, self.attempt, settings.AWAKEN_LEASE_SECONDS)
        started = time.perf_counter_ns()
        store.checkpoint(checkpoint)
        elapsed = time.perf_counter_ns() - started
        if timed:
            self.samples_ns.append(elapsed)
        self.count += 2
        self.steps_in_run += 1
        if self.steps_in_run >= STEPS_PER_RUN:
            self._new_run()


class RawFloor:
    """The same rows written with plain SQL in one transaction on its own connection:
    lock the run row, insert 2 message rows and 5 event rows, update the run."""

    def __init__(self, database_url: str) -> None:
        self.conn = psycopg.connect(database_url)
        with self.conn.transaction():
            self.conn.execute(
                "CREATE TABLE bench_raw_run (id int PRIMARY KEY, steps int NOT NULL,"
                " last_seq int NOT NULL, state jsonb, updated_at timestamptz)"
            )
            self.conn.execute(
                "CREATE TABLE bench_raw_row (run_id int NOT NULL, kind text NOT NULL,"
                " seq int NOT NULL, payload jsonb NOT NULL, PRIMARY KEY (run_id, kind, seq))"
            )
            self.conn.execute("INSERT INTO bench_raw_run VALUES (1, 0, 0, '{}', now())")
        self.steps = 0
        self.samples_ns: list[int] = []
        self.message = json.dumps({"role": "assistant", "content": [], "tool_calls": [{}]})
        self.event = json.dumps({"event_type": "tool_call_done", "result": {"data": 42}})

    def step(self, timed: bool) -> None:
        steps = self.steps + 1
        rows: list[Any] = [(1, "message", 2 * steps - 1 + i, self.message) for i in range(2)]
        rows += [(1, "event", 5 * (steps - 1) + i + 1, self.event) for i in range(5)]
        started = time.perf_counter_ns()
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.execute("SELECT steps FROM bench_raw_run WHERE id = 1 FOR UPDATE")
            cursor.executemany("INSERT INTO bench_raw_row VALUES (%s, %s, %s, %s)", rows)
            cursor.execute(
                "UPDATE bench_raw_run SET steps = %s, last_seq = %s, state = %s,"
                " updated_at = now() WHERE id = 1",
                (steps, 5 * steps, json.dumps({"revision": steps})),
            )
        elapsed = time.perf_counter_ns() - started
        self.steps = steps
        if timed:
            self.samples_ns.append(elapsed)

    def close(self) -> None:
        self.conn.close()


class BroadcastTimer:
    """Wraps the on-commit broadcast (instrumentation of this process only) to split the
    checkpoint time into the transaction and the channel-layer sends after it."""

    def __init__(self) -> None:
        self.samples_ns: list[int] = []
        self.active = False

    def __enter__(self) -> BroadcastTimer:
        from runs.services import events

        self._module = events
        self._original = events.broadcast_events

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter_ns()
            try:
                return self._original(*args, **kwargs)
            finally:
                if self.active:
                    self.samples_ns.append(time.perf_counter_ns() - started)

        events.broadcast_events = timed
        return self

    def __exit__(self, *exc: object) -> None:
        self._module.broadcast_events = self._original


def us(samples_ns: list[int]) -> list[float]:
    return [s / 1000 for s in samples_ns]


def interleave(env: BenchEnv, small: Lane, large: Lane) -> tuple[RawFloor, BroadcastTimer]:
    """The warm-up, then the timed checkpoints: the two lanes A/B interleaved, each step
    followed by the raw SQL floor writing the same rows."""
    raw = RawFloor(env.database_url)
    try:
        with BroadcastTimer() as broadcasts:
            for index in range(WARMUP + CALLS):
                timed = index >= WARMUP
                broadcasts.active = timed
                arms = (small, large, raw) if index % 2 == 0 else (large, small, raw)
                for arm in arms:
                    arm.step(timed)
    finally:
        raw.close()
    return raw, broadcasts


def run(env: BenchEnv) -> list[Figure]:
    common.print_header("2. Checkpoint cost per step: 10k-message thread vs 10-message thread")
    agent = fixtures.create_agent([], tools=["calculator"])
    started = time.monotonic()
    small, large = (Lane(agent, size) for size in SIZES)
    print(
        f"  threads of {SIZES[0]} and {SIZES[1]:,} messages built in "
        f"{time.monotonic() - started:.1f}s; {CALLS} timed checkpoints per thread "
        f"(+{WARMUP} warm-up), A/B interleaved, new run every {STEPS_PER_RUN} steps",
        flush=True,
    )
    raw, broadcasts = interleave(env, small, large)
    small_us, large_us, raw_us = us(small.samples_ns), us(large.samples_ns), us(raw.samples_ns)
    broadcast_us = us(broadcasts.samples_ns)
    for label, values in (
        (f"{SIZES[0]}-message thread", small_us),
        (f"{SIZES[1]:,}-message thread", large_us),
        ("raw SQL floor, same rows", raw_us),
    ):
        print(
            f"  {label:<26} median {median(values):7.0f} µs   p99 {percentile(values, 99):7.0f} µs"
            f"   ({len(values)} samples)",
            flush=True,
        )
    print(
        f"  of which on-commit broadcast (2 group_sends): median {median(broadcast_us):.0f} µs, "
        f"p99 {percentile(broadcast_us, 99):.0f} µs; ORM checkpoint / raw floor = "
        f"{median(small_us) / median(raw_us):.1f}x",
        flush=True,
    )
    print(
        f"  threads now hold {small.count:,} and {large.count:,} messages; "
        f"p99 ratio {percentile(large_us, 99) / percentile(small_us, 99):.2f}",
        flush=True,
    )
    ratio = median(large_us) / median(small_us)
    figures = [
        Figure(
            benchmark=BENCHMARK,
            name="checkpoint @10k msgs (median)",
            value=median(large_us),
            unit="µs",
            baseline_name="checkpoint @10 msgs",
            baseline=median(small_us),
            baseline_unit="µs",
            ratio=ratio,
            goal=f"ratio <= {GOAL_RATIO}",
            met=ratio <= GOAL_RATIO,
        )
    ]
    common.print_figures(figures)
    return figures


if __name__ == "__main__":
    common.standalone(run)
