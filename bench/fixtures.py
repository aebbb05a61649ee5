"""Fixtures in the bench database, made the way the application makes them: a scripted
agent, a thread with a long committed history, a user message appended like run_start does,
and a run claimed with the application's own claim.

Like the rest of bench/, nothing here imports Django at module level: call these only after
`BenchEnv.start()`."""

from __future__ import annotations

import os
import uuid
from typing import Any

from bench.common import BenchError


def create_agent(script: list[dict[str, Any]], tools: list[str]) -> Any:
    """A scripted agent (deterministic, offline) with every tool auto-allowed."""
    from agents.models import Agent, Model, ModelProvider
    from agents.services.agents import agent_publish
    from common.audit import Actor

    provider, _ = ModelProvider.objects.get_or_create(
        slug="bench-scripted",
        defaults={"name": "Bench scripted", "kind": ModelProvider.Kind.SCRIPTED},
    )
    suffix = uuid.uuid4().hex[:8]
    model = Model.objects.create(slug=f"bench-model-{suffix}", provider=provider, script=script)
    agent = Agent.objects.create(
        slug=f"bench-agent-{suffix}",
        name=f"bench {suffix}",
        model=model,
        system_prompt="You are a benchmark agent.",
        tools=tools,
        permission={"default_behavior": "allow", "rules": []},
    )
    agent_publish(agent=agent, actor=Actor(label="bench", source="cli"))  # runs pin a version
    return agent


def create_thread(n_messages: int) -> Any:
    """A thread whose log already holds `n_messages` committed messages, bulk-created in
    the shape of past tool-using runs: user, assistant(tool call), tool, assistant."""
    from runs.message_rows import message_to_row
    from runs.models import Message, Thread
    from runs.runtime import types as rt

    thread = Thread.objects.create(title=f"bench {n_messages} messages")
    rows = []
    for index in range(n_messages):
        turn, position = divmod(index, 4)
        if position == 0:
            message = rt.Message.user(f"question {turn}: what is 6*7?")
        elif position == 1:
            call = rt.ToolCall(f"call_hist_{turn}", "calculator", {"expression": "6*7"})
            message = rt.Message.assistant("", tool_calls=[call])
        elif position == 2:
            message = rt.Message.tool(f"call_hist_{turn}", '{"result": 42}')
        else:
            message = rt.Message.assistant("The answer is 42.")
        rows.append(message_to_row(thread.pk, index + 1, message))
    Message.objects.bulk_create(rows, batch_size=2000)
    Thread.objects.filter(pk=thread.pk).update(message_count=n_messages)
    thread.refresh_from_db()
    return thread


def append_user_message(thread: Any, text: str) -> str:
    """Append one user message to the thread's log, as run_start does; returns its id."""
    from django.db import transaction
    from django.utils import timezone

    from runs.message_rows import message_to_row
    from runs.models import Message, Thread
    from runs.runtime import types as rt

    message = rt.Message.user(text)
    with transaction.atomic():
        locked = Thread.objects.select_for_update().get(pk=thread.pk)
        seq = locked.message_count + 1
        Message.objects.bulk_create([message_to_row(thread.pk, seq, message)])
        Thread.objects.filter(pk=thread.pk).update(message_count=seq, updated_at=timezone.now())
    return str(message.id)


def create_claimed_run(agent: Any, thread: Any, trigger_id: str) -> tuple[Any, int]:
    """A run created like run_start does (without enqueueing it) and claimed by a fake
    worker with the application's own claim; returns (run, attempt)."""
    from agents.selectors import agent_version_current
    from runs.models import Run, Thread
    from runs.runtime import types as rt
    from runs.services.leases import run_claim

    count = Thread.objects.values_list("message_count", flat=True).get(pk=thread.pk)
    run = Run.objects.create(
        thread_id=thread.pk,
        agent=agent,
        agent_version=agent_version_current(agent=agent),
        status=Run.Status.CREATED,
        due=True,
        request=rt.RunRequestSnapshot(
            origin="User", input_message_ids=[trigger_id], input_message_count=1
        ).to_json(),
        input=rt.RunMessageInput(
            thread_id=str(thread.pk),
            range=rt.MessageSeqRange.new(1, count),
            trigger_message_ids=[trigger_id],
        ).to_json(),
    )
    claimed = run_claim(run_id=run.pk, worker=f"bench-fake-worker:{os.getpid()}")
    if claimed is None:
        raise BenchError(f"could not claim run {run.pk}")
    return Run.objects.select_related("agent").get(pk=run.pk), claimed.attempt
