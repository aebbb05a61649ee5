"""The A2A request handler: the SDK's transports (JSON-RPC, HTTP+JSON) call it with
parsed requests; it answers from the runs in the database, so any daphne process can
serve any task, and a task survives restarts of the process that started it.

Waiting (a blocking message/send, a stream, a subscription) follows the run's
broadcast group through the process's hub (runs/fanout.py), the same wake-up the SSE
stream and the websockets use, and reads the run again on each wake-up and at least
every RECHECK_SECONDS (a lost broadcast, no channel layer).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any, TypeVar

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings

from agents.models import Agent
from runs import fanout
from runs.a2a_server.actions import Caller, message_send, task_cancel
from runs.a2a_server.tasks import TaskView, agent_run, agent_tasks, task_of
from runs.realtime import run_group
from runs.sql import release_connection

RECHECK_SECONDS = 2.0
CANCEL_WAIT_SECONDS = 10.0
T = TypeVar("T")


def _db(function: Callable[..., T]) -> Callable[..., Any]:
    """`function` on the request's database thread, the connection given back after."""

    def call(*args: Any, **kwargs: Any) -> T:
        try:
            return function(*args, **kwargs)
        finally:
            release_connection()

    return sync_to_async(call)


def _task(agent: Agent, task_id: str | uuid.UUID, history_length: int | None) -> TaskView:
    run = agent_run(agent, str(task_id))
    if run is None:
        raise TaskNotFoundError(f"task {task_id} not found")
    return task_of(run, history_length=history_length)


class RunWatch:
    """Wake-ups for one run: its broadcasts, else a timer."""

    def __init__(self, run_id: uuid.UUID) -> None:
        self.run_id = run_id
        self.inbox: fanout.Inbox | None = None

    async def __aenter__(self) -> RunWatch:
        layer = get_channel_layer()
        if layer is not None:
            inbox = fanout.Inbox(fanout.hub_for(layer), run_group(self.run_id))
            if await inbox.open():
                self.inbox = inbox
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.inbox is not None:
            self.inbox.close()

    async def wait(self, seconds: float) -> None:
        seconds = max(0.0, min(seconds, RECHECK_SECONDS))
        if self.inbox is None:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.inbox.get(), seconds)


def _history_length(params: GetTaskRequest | SendMessageRequest) -> int | None:
    holder: Any = params.configuration if isinstance(params, SendMessageRequest) else params
    return int(holder.history_length) if holder.HasField("history_length") else None


class RunsRequestHandler(RequestHandler):
    """Tasks are runs of the agent the request's URL names (`context.state`)."""

    @staticmethod
    def _who(context: ServerCallContext) -> tuple[Agent, Caller]:
        return context.state["agent"], context.state["caller"]

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        agent, caller = self._who(context)
        caller.require("runs.view_run", "reading a task")
        view = await _db(_task)(agent, params.id, _history_length(params))
        return view.task

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        agent, caller = self._who(context)
        caller.require("runs.view_run", "listing tasks")
        return await _db(agent_tasks)(agent, params)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        agent, caller = self._who(context)
        run_id = await _db(task_cancel)(agent, params.id, caller)
        view = await self._settle(agent, run_id, CANCEL_WAIT_SECONDS, None, terminal_only=True)
        return view.task

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        agent, caller = self._who(context)
        run_id = await _db(message_send)(agent, params.message, caller)
        history = _history_length(params)
        wait = 0.0 if params.configuration.return_immediately else settings.AWAKEN_A2A_WAIT_SECONDS
        view = await self._settle(agent, run_id, wait, history)
        return view.task

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        agent, caller = self._who(context)
        run_id = await _db(message_send)(agent, params.message, caller)
        async for event in self._follow(agent, run_id, _history_length(params)):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        agent, caller = self._who(context)
        caller.require("runs.view_run", "following a task")
        view = await _db(_task)(agent, params.id, 0)
        if view.terminal:
            raise UnsupportedOperationError(
                f"task {params.id} has ended; read it with tasks/get instead"
            )
        async for event in self._follow(agent, uuid.UUID(view.task.id), None):
            yield event

    async def _settle(
        self,
        agent: Agent,
        run_id: uuid.UUID,
        seconds: float,
        history: int | None,
        *,
        terminal_only: bool = False,
    ) -> TaskView:
        """The task once it settles (ended, or waiting for input), or as it stands when
        `seconds` have passed."""
        deadline = time.monotonic() + seconds
        read = _db(_task)
        async with RunWatch(run_id) as watch:
            while True:
                view = await read(agent, run_id, history)
                done = view.terminal if terminal_only else view.settled
                left = deadline - time.monotonic()
                if done or left <= 0:
                    return view
                await watch.wait(left)

    async def _follow(
        self, agent: Agent, run_id: uuid.UUID, history: int | None
    ) -> AsyncGenerator[Event]:
        """The task, then a status update each time its state or status message changes,
        and the answer as an artifact before the final status; the stream ends when the
        task settles or after AWAKEN_A2A_STREAM_SECONDS (the client subscribes again)."""
        deadline = time.monotonic() + settings.AWAKEN_A2A_STREAM_SECONDS
        read = _db(_task)
        async with RunWatch(run_id) as watch:
            view = await read(agent, run_id, history)
            yield view.task
            mark = view.mark()
            while not view.settled and time.monotonic() < deadline:
                await watch.wait(deadline - time.monotonic())
                view = await read(agent, run_id, 0)
                if view.mark() == mark:
                    continue
                mark = view.mark()
                task = view.task
                for artifact in task.artifacts:
                    yield TaskArtifactUpdateEvent(
                        task_id=task.id,
                        context_id=task.context_id,
                        artifact=artifact,
                        last_chunk=True,
                    )
                yield TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=task.status
                )

    # --- not offered --------------------------------------------------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        # the card does not declare capabilities.extendedAgentCard: the spec's answer is
        # UnsupportedOperationError (ExtendedAgentCardNotConfigured is for agents that do)
        raise UnsupportedOperationError(
            "this agent offers no extended agent card: its public card is the whole card"
        )
