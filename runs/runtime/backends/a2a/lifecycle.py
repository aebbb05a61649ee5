"""One activation of a remote root run (upstream's `execute_remote_root_lifecycle`).

It sends the user messages that are new since the last exchange (or the operator's answer
to the remote agent's question) to the remote task, waits for it to settle while honouring
the run's cancellation token and the endpoint's timeout, maps the task state onto the run,
and writes one checkpoint. The remote task and context ids live in run state
`__runtime_remote_backend`, so a later activation continues the same remote task. A remote
`input-required` / `auth-required` becomes a synthetic suspended call (`a2a_input` /
`a2a_auth`, answered with `respond`), so the wait shows up as a ticket like any other.

The exchange runs on the client's private loop thread while the worker thread polls the
cancellation token (which may read the database), so cancel and timeout are noticed within
a poll interval.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from typing import Any, Protocol

from ... import events as ev
from ...checkpoint import ActivationLog, RunProgress, activation_checkpoint, error_payload_of
from ...events import Event
from ...ports import CancellationToken, Checkpoint
from ...run_state import LIFECYCLE_KEY
from ...types import (
    BackendRunStatus,
    Message,
    PersistedState,
    Role,
    RunLifecycleState,
    RunRecord,
    RunStatus,
    TerminationReason,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    new_id,
    now_ms,
    waiting_tickets_from_states,
)
from ..base import BackendRootRunRequest, BackendRunResult
from .client import ABORT_SECONDS, LoopThread, Progress, RemoteClient
from .config import (
    BACKEND_OUTPUT_STATE_KEY,
    INTERRUPTED_LABELS,
    REMOTE_STATE_KEY,
    SYNTHETIC_TOOLS,
    TERMINAL_LABELS,
    A2AConfig,
    remote_target,
)
from .errors import describe_error
from .mapping import (
    Outcome,
    Reply,
    exchange_message_id,
    outcome_of,
    payload_text,
    state_label,
    stopped_outcome,
)

logger = logging.getLogger(__name__)


class RemoteBackend(Protocol):
    """What an activation needs of its backend (an `A2ABackend`)."""

    @property
    def config(self) -> A2AConfig | None: ...

    @property
    def model(self) -> str: ...

    @property
    def unavailable(self) -> str | None: ...

    def report_health(self, ok: bool, error: str = "") -> None: ...


class RemoteRootLifecycle:
    """One activation of a remote run (upstream's `execute_remote_root_lifecycle`)."""

    def __init__(self, backend: RemoteBackend, request: BackendRootRunRequest) -> None:
        self.backend = backend
        self.request = request
        self.identity = request.identity
        self.previous: RunRecord | None = request.previous
        self.messages: list[Message] = list(request.messages)
        self.committed_count = len(self.messages)
        self.input_message_count = len(self.messages)
        self.events: list[Event] = []
        self.changed_calls: list[ToolCallState] = []
        self.cancel = request.control.cancellation_token or CancellationToken()
        state = self.previous.state if self.previous else None
        self.extensions: dict[str, Any] = dict(state.extensions) if state else {}
        self.revision = state.revision if state else 0
        self.state_key = backend.config.state_key if backend.config else ""
        self.target = remote_target(state, self.state_key) if backend.config else {}

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self.request.sink.emit(event)

    # --- the activation ------------------------------------------------------------------------

    def run(self) -> BackendRunResult:
        self.emit(
            ev.run_start(
                self.identity.thread_id,
                self.identity.run_id,
                self.identity.parent_run_id,
                self.identity.to_json(),
            )
        )
        answers = self._replay_decided_calls()
        self.emit(ev.step_start(new_id()))
        started = time.monotonic()
        texts = self._outgoing(answers)
        config = self.backend.config
        if config is None:
            message = self.backend.unavailable or "the remote endpoint is unavailable"
            outcome = Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
        elif not texts and not self._awaited_task():
            message = "nothing to send to the remote agent: no new user message"
            outcome = Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
        else:
            outcome = self._exchange(config, texts, answers)
        response = outcome.response or ""
        if outcome.output.text is None and response:
            outcome.output.text = response
        if response:
            self.emit(ev.text_delta(response))
            self.messages.append(Message.assistant(response))
        if outcome.termination.type in (
            TerminationReason.NATURAL_END,
            TerminationReason.BEHAVIOR_REQUESTED,
        ):
            self.emit(
                ev.inference_complete(
                    self.backend.model, None, int((time.monotonic() - started) * 1000)
                )
            )
        return self._finish(outcome, response)

    def _replay_decided_calls(self) -> list[str]:
        """Decided `a2a_input`/`a2a_auth` tickets: report them (tool_call_resumed) and
        return the operator's answers to send; a rejection is sent only when no new user
        message superseded it."""
        answers: list[str] = []
        for call_id, call in sorted((self.request.tool_calls or {}).items()):
            if call.tool_name not in SYNTHETIC_TOOLS or call.resume_input is None:
                continue
            if call.status not in (ToolCallStatus.RESUMING, ToolCallStatus.CANCELLED):
                continue
            payload = call.resume_input.result
            self.emit(ev.tool_call_resumed(call_id, payload))
            if call.status is ToolCallStatus.RESUMING:
                answers.append(payload_text(payload))
                status = ToolCallStatus.SUCCEEDED
            else:
                if not self._new_user_messages():
                    reason = payload.get("message") if isinstance(payload, dict) else None
                    answers.append(
                        f"The operator declined to answer. {reason}"
                        if reason
                        else "The operator declined to answer."
                    )
                status = ToolCallStatus.CANCELLED
            self.changed_calls.append(
                ToolCallState(
                    call_id=call_id,
                    tool_name=call.tool_name,
                    arguments=call.arguments,
                    status=status,
                    updated_at=now_ms(),
                    resume_mode=call.resume_mode,
                    suspension_id=call.suspension_id,
                    suspension_reason=call.suspension_reason,
                )
            )
        return answers

    def _new_user_messages(self) -> list[Message]:
        """User messages new since the last exchange: after the recorded transcript length
        when continuing, else this run's trigger messages (else the trailing user turn)."""
        seen = self.target.get("message_count")
        if isinstance(seen, int) and not isinstance(seen, bool):
            return [m for m in self.messages[seen:] if m.role is Role.USER and m.text()]
        triggers: list[str] = []
        if self.previous is not None and self.previous.input is not None:
            triggers = list(self.previous.input.trigger_message_ids)
        if not triggers and self.previous is not None and self.previous.request is not None:
            triggers = list(self.previous.request.input_message_ids)
        if triggers:
            wanted = set(triggers)
            return [m for m in self.messages if m.id in wanted and m.role is Role.USER]
        trailing: list[Message] = []
        for message in reversed(self.messages):
            if message.role is not Role.USER:
                break
            trailing.insert(0, message)
        return [m for m in trailing if m.text()]

    def _outgoing(self, answers: list[str]) -> list[str]:
        return answers + [m.text() for m in self._new_user_messages()]

    def _exchange(self, config: A2AConfig, texts: list[str], answers: list[str]) -> Outcome:
        """Send `texts` (the operator's `answers` first, recorded as user messages) and wait
        for the remote task to settle, the run to be cancelled or the timeout."""
        progress = Progress()
        awaited = self._awaited_task()
        if awaited or self.target.get("last_state") in INTERRUPTED_LABELS:
            progress.task_id = self.target.get("task_id") or None
            progress.state = self.target.get("last_state")
        progress.context_id = self.target.get("context_id") or None
        deadline = time.monotonic() + config.timeout_ms / 1000
        loop = LoopThread()
        remote = RemoteClient(config)
        try:
            stop: str | None = None
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            if self.cancel.is_cancelled():  # cancelled before anything was sent
                progress.sent.set()
                future.cancel()
                stop = "cancelled"
            else:
                message_id = exchange_message_id(self.identity.run_id, len(self.messages), texts)
                self.messages.extend(Message.user(answer) for answer in answers)
                sending = (
                    remote.follow(progress)
                    if awaited
                    else remote.exchange(texts, progress, message_id)
                )
                future = loop.submit(sending)
            if stop is None:
                stop = self._await_settled(future, progress, bool(awaited), deadline)
            if stop is not None:
                self._abort(config, loop, remote, future, progress, stop)
                self._remember(progress, progress.state)
                return stopped_outcome(stop, config.timeout_ms)
            error = future.exception()
            if error is not None:
                message = describe_error(config, error)
                logger.warning("run %s: %s", self.identity.run_id, message)
                self.backend.report_health(False, message)
                self._remember(progress, progress.state)
                return Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
            reply: Reply = future.result()
            self.backend.report_health(True)
            self._remember(progress, progress.state)
            return outcome_of(reply)
        finally:
            try:
                loop.run(remote.close(), timeout=ABORT_SECONDS)
            except Exception:
                logger.debug("closing the A2A client failed", exc_info=True)
            loop.close()

    def _await_settled(
        self,
        future: concurrent.futures.Future[Any],
        progress: Progress,
        recorded: bool,
        deadline: float,
    ) -> str | None:
        """Wait for the exchange to settle (None), the run to be cancelled ("cancelled") or
        the deadline ("timeout"); records the sent message once the remote task has an id."""
        while True:
            concurrent.futures.wait([future], timeout=0.05)
            if future.done():
                return None
            if not recorded and progress.task_id:
                self._record_sent(progress)
                recorded = True
            if self.cancel.is_cancelled():
                return "cancelled"
            if time.monotonic() >= deadline:
                return "timeout"

    def _abort(
        self,
        config: A2AConfig,
        loop: LoopThread,
        remote: RemoteClient,
        future: concurrent.futures.Future[Any],
        progress: Progress,
        why: str,
    ) -> None:
        """Stop waiting and cancel the remote task (failures are only logged)."""
        progress.sent.wait(timeout=1.0)  # a send in flight is about to tell us the task id
        future.cancel()
        task_id = progress.task_id
        if not task_id or progress.state in TERMINAL_LABELS:
            return
        try:
            task = loop.run(remote.cancel(task_id), timeout=ABORT_SECONDS)
            progress.state = state_label(task.status.state)
        except Exception as exc:
            logger.warning(
                "run %s: cancelling remote task %s after %s failed: %s",
                self.identity.run_id,
                task_id,
                why,
                describe_error(config, exc),
            )

    def _awaited_task(self) -> str | None:
        """The task an earlier segment sent and recorded but did not see settle (its worker
        died): this segment waits for it instead of sending the input again."""
        task_id = self.target.get("task_id")
        if self.target.get("awaiting") and task_id:
            return str(task_id)
        return None

    def _record_sent(self, progress: Progress) -> None:
        """Commit the remote task id as soon as it is known, so that a worker killed while
        the task runs is replaced by one that waits for the same task (no second send)."""
        store, previous = self.request.store, self.previous
        if store is None or previous is None:
            return
        target = {
            **self.target,
            "task_id": progress.task_id,
            "context_id": progress.context_id,
            "last_state": progress.state or "submitted",
            "updated_at_ms": now_ms(),
            "awaiting": True,
        }
        remote = dict(self.extensions.get(REMOTE_STATE_KEY) or {})
        targets = {**(remote.get("targets") or {}), self.state_key: target}
        extensions = {**self.extensions, REMOTE_STATE_KEY: {"version": 1, "targets": targets}}
        self.revision += 1
        state = PersistedState(self.revision, extensions)
        store.checkpoint(
            Checkpoint(
                thread_id=self.identity.thread_id,
                record=dataclasses.replace(previous, state=state, updated_at=int(time.time())),
                new_messages=[],
                expected_message_count=self.committed_count,
                tool_calls=[],
                events=[],
            )
        )

    def _remember(self, progress: Progress, state: str | None) -> None:
        if not progress.task_id and not progress.context_id:
            return
        self.target = {
            "task_id": progress.task_id,
            "context_id": progress.context_id,
            "last_state": state or "unknown",
            "updated_at_ms": now_ms(),
        }

    # --- checkpoint and finish -----------------------------------------------------------------

    def _finish(self, outcome: Outcome, response: str) -> BackendRunResult:
        """End the activation: the waiting ticket (if the remote asks), the run state, the
        end events and one checkpoint."""
        termination = outcome.termination
        status = outcome.status.durable_run_status(termination)
        status_reason = outcome.status.durable_status_reason(termination)
        previous_steps = self.previous.steps if self.previous else 0
        steps = previous_steps + outcome.steps
        waiting_calls: dict[str, ToolCallState] = {}
        if status is RunStatus.WAITING and outcome.waiting_tool is not None:
            call = self._waiting_call(outcome.waiting_tool, status_reason, steps, response)
            waiting_calls[call.call_id] = call
            self.changed_calls.append(call)
        state = self._final_state(outcome, status, status_reason, steps)
        self._emit_end(outcome, status_reason, response)
        store = self.request.store
        if store is not None:
            previous = self.previous
            progress = RunProgress(
                status=status,
                status_reason=status_reason,
                steps=steps,
                state=state,
                created_at=previous.created_at if previous else 0,
                started_at=previous.started_at if previous else None,
                input_tokens=previous.input_tokens if previous else 0,
                output_tokens=previous.output_tokens if previous else 0,
                waiting_tickets=waiting_tickets_from_states(waiting_calls),
                waiting_since=self.identity.dispatch_id,
                termination=termination,
                final_output=response or None,
                error_payload=error_payload_of(termination),
            )
            log = ActivationLog(
                self.identity,
                self.messages,
                self.previous,
                self.input_message_count,
                self.committed_count,
            )
            store.checkpoint(activation_checkpoint(log, progress, self.changed_calls, self.events))
        return BackendRunResult(
            agent_id=self.request.agent_id,
            status=outcome.status,
            termination=termination,
            status_reason=status_reason,
            response=response or None,
            output=outcome.output,
            steps=steps,
            run_id=self.identity.run_id,
            state=state,
        )

    def _waiting_call(
        self, tool: str, status_reason: str | None, steps: int, question: str
    ) -> ToolCallState:
        """The synthetic suspended call (`a2a_input` / `a2a_auth`) the remote's question
        becomes: its ticket is how the operator answers."""
        task_id = str(self.target.get("task_id") or "task")[:100]
        call_id = f"{tool}_{steps}_{task_id}"
        return ToolCallState(
            call_id=call_id,
            tool_name=tool,
            arguments={
                "question": question,
                "task_id": self.target.get("task_id"),
                "state": self.target.get("last_state"),
            },
            status=ToolCallStatus.SUSPENDED,
            updated_at=now_ms(),
            resume_mode=ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
            suspension_id=call_id,
            suspension_reason=f"a2a:{status_reason}",
        )

    def _final_state(
        self, outcome: Outcome, status: RunStatus, status_reason: str | None, steps: int
    ) -> PersistedState:
        """The run state the activation leaves: the remote target, the backend output and
        the lifecycle, in a new revision."""
        if self.target:
            self.target["message_count"] = len(self.messages)
            remote = dict(self.extensions.get(REMOTE_STATE_KEY) or {})
            targets = dict(remote.get("targets") or {})
            targets[self.state_key] = self.target
            self.extensions[REMOTE_STATE_KEY] = {"version": 1, "targets": targets}
        if not outcome.output.is_empty():
            self.extensions[BACKEND_OUTPUT_STATE_KEY] = outcome.output.to_json()
        self.extensions[LIFECYCLE_KEY] = RunLifecycleState(
            run_id=self.identity.run_id,
            status=status,
            status_reason=status_reason,
            updated_at=now_ms(),
            step_count=steps,
        ).to_json()
        return PersistedState(self.revision + 1, dict(self.extensions))

    def _emit_end(self, outcome: Outcome, status_reason: str | None, response: str) -> None:
        """`step_end`, then `run_finish` with the result and the run's identity."""
        termination = outcome.termination
        result: dict[str, Any] = {
            "response": response,
            "status": outcome.status.result_status_label(termination),
        }
        if not outcome.output.is_empty():
            result["output"] = outcome.output.to_json()
        if status_reason is not None:
            result["status_reason"] = status_reason
        self.emit(ev.step_end())
        self.emit(
            ev.run_finish(
                self.identity.thread_id,
                self.identity.run_id,
                termination,
                result,
                self.identity.to_json(),
            )
        )
