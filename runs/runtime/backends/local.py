"""In-process backend running the standard loop."""

from __future__ import annotations

from ..loop import AgentLoop, AgentRunResult, RunIdentity
from ..types import BackendRunStatus, RunStatus, TerminationReason, new_id
from .base import (
    BackendCapabilities,
    BackendDelegateRunRequest,
    BackendRootRunRequest,
    BackendRunOutput,
    BackendRunResult,
    ExecutionBackendError,
    validate_delegate_request,
    validate_root_request,
)


def map_termination(termination: TerminationReason) -> BackendRunStatus:
    match termination.type:
        case TerminationReason.NATURAL_END | TerminationReason.BEHAVIOR_REQUESTED:
            return BackendRunStatus.completed()
        case TerminationReason.CANCELLED:
            return BackendRunStatus.cancelled()
        case TerminationReason.STOPPED:
            return BackendRunStatus.failed(f"stopped: {termination.value.code}")
        case TerminationReason.BLOCKED:
            return BackendRunStatus.failed(f"blocked: {termination.value}")
        case TerminationReason.SUSPENDED:
            return BackendRunStatus.suspended()
        case _:
            return BackendRunStatus.failed(str(termination.value))


def _backend_result(agent_id: str, result: AgentRunResult) -> BackendRunResult:
    status = map_termination(result.termination)
    if result.status is RunStatus.WAITING and not status.is_waiting:
        status = BackendRunStatus.suspended(result.status_reason)  # awaiting_tasks
    return BackendRunResult(
        agent_id=agent_id,
        status=status,
        termination=result.termination,
        response=result.response or None,
        output=BackendRunOutput(text=result.response or None),
        steps=result.steps,
        run_id=result.run_id,
    )


class LocalBackend:
    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities.full()

    def execute_root(self, request: BackendRootRunRequest) -> BackendRunResult:
        validate_root_request(self.capabilities(), request)
        agent = request.resolver.resolve(request.agent_id)
        loop = AgentLoop(
            agent=agent,
            identity=request.identity,
            messages=request.messages,
            sink=request.sink,
            store=request.store,
            cancel=request.control.cancellation_token,
            previous=request.previous,
            tool_calls=request.tool_calls,
            decisions=request.decisions,
            background_results=request.background_results,
            background=True,
            gate=request.control.step_gate,
        )
        return _backend_result(request.agent_id, loop.run())

    def execute_delegate(self, request: BackendDelegateRunRequest) -> BackendRunResult:
        validate_delegate_request(self.capabilities(), request)
        try:
            agent = request.resolver.resolve(request.agent_id)
        except Exception as exc:
            raise ExecutionBackendError(
                "agent_not_found", f"failed to resolve agent '{request.agent_id}': {exc}"
            ) from exc
        identity = request.identity
        if identity is None:
            sub_run_id = new_id()
            identity = RunIdentity(
                thread_id=sub_run_id,
                run_id=sub_run_id,
                agent_id=request.agent_id,
                parent_run_id=request.parent.parent_run_id,
                parent_thread_id=request.parent.parent_thread_id,
                parent_tool_call_id=request.parent.parent_tool_call_id,
                origin="subagent",
            )
        previous = request.store.load_run(identity.run_id) if request.store is not None else None
        loop = AgentLoop(
            agent=agent,
            identity=identity,
            messages=request.messages,
            sink=request.sink,
            store=request.store,
            cancel=request.control.cancellation_token,
            previous=previous,
        )
        return _backend_result(request.agent_id, loop.run())
