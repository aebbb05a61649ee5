"""The a2a-sdk side of the A2A backend (config, validation and the backend itself: `a2a`):
the remote run's lifecycle (upstream's `execute_remote_root_lifecycle`), the
remote task cancel and the agent card fetch, through the official a2a-sdk client. `a2a`
imports this module the first time a backend talks to its endpoint.

One activation sends the user messages that are new since the last exchange (or the
operator's answer to the remote agent's question) to the remote task, waits for it to
settle (subscribe, falling back to polling) while honouring the run's cancellation token
and the endpoint's timeout, maps the task state onto the run, and writes one checkpoint.
The remote task and context ids live in run state `__runtime_remote_backend`, so a later
activation continues the same remote task. A remote `input-required` / `auth-required`
becomes a synthetic suspended call (`a2a_input` / `a2a_auth`, answered with `respond`), so
the wait shows up as a ticket like any other.

The sdk is asyncio-only and the worker is not: the exchange runs on a private event loop
thread while the worker thread polls the cancellation token (which may read the database),
so cancel and timeout are noticed within a poll interval. Every connection goes through
the SSRF guard at connect time (the vetted address is pinned; redirects are not followed).

The transport is negotiated from the agent card, fetched at the start of each activation:
the first interface the card lists (its agent's preference) whose binding this client
speaks (JSON-RPC or HTTP+JSON), at that interface's URL. A health check does the same and
then makes one cheap call over the chosen interface, so an endpoint is only called healthy
when runs can actually talk to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Part,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.types import Message as A2AMessage
from a2a.types import Role as A2ARole
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from .. import events as ev
from ..events import Event
from ..loop import LIFECYCLE_KEY
from ..materialize import materialize_message_log
from ..netguard import AddressRefusedError, vetted_addresses
from ..ports import CancellationToken, Checkpoint
from ..types import (
    BackendRunStatus,
    Message,
    PersistedState,
    Role,
    RunLifecycleState,
    RunRecord,
    RunStatus,
    RunWaitingState,
    TerminationReason,
    ToolCallResumeMode,
    ToolCallState,
    ToolCallStatus,
    new_id,
    now_ms,
    waiting_reason_from_status_reason,
    waiting_tickets_from_states,
)
from .a2a import (
    A2A_VERSION,
    AUTH_TOOL,
    BACKEND_OUTPUT_STATE_KEY,
    BINDINGS,
    INPUT_TOOL,
    INTERRUPTED_LABELS,
    REMOTE_STATE_KEY,
    SYNTHETIC_TOOLS,
    TERMINAL_LABELS,
    A2ABackend,
    A2AConfig,
    describe_error,
    error_text,
    remote_target,
)
from .base import BackendRootRunRequest, BackendRunOutput, BackendRunResult, ExecutionBackendError

logger = logging.getLogger(__name__)

_ABORT_SECONDS = 5.0
_MESSAGE_IDS = uuid.UUID("5b0f3c2e-8d0a-4f55-9a53-6a3f0d6c1e27")  # namespace of our messageIds

STATE_LABELS = {
    TaskState.TASK_STATE_SUBMITTED: "submitted",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_AUTH_REQUIRED: "auth-required",
}
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
INTERRUPTED_STATES = frozenset(
    {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
)
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES


def state_label(state: int) -> str:
    return STATE_LABELS.get(state, "unknown")  # type: ignore[call-overload]


# --- transport: the SSRF guard at connect time --------------------------------------------------


class _GuardedNetwork(httpcore.AsyncNetworkBackend):
    """Resolves each host itself, refuses non-public addresses (unless allowed) and connects
    to the vetted address: the name is never resolved again (no DNS rebinding), TLS still
    verifies the certificate against the host name."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        addresses = await loop.run_in_executor(
            None,
            functools.partial(vetted_addresses, host, port, allow_private=self.allow_private),
        )
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefusedError("unix sockets are not allowed for remote endpoints")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, allow_private: bool) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            max_keepalive_connections=5,
            network_backend=_GuardedNetwork(allow_private),
        )


def _http_client(config: A2AConfig) -> httpx.AsyncClient:
    headers = {"A2A-Version": A2A_VERSION}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    limit = max(config.timeout_ms / 1000, 0.1)
    return httpx.AsyncClient(
        transport=_GuardedTransport(config.allow_private),
        headers=headers,
        timeout=httpx.Timeout(min(limit, 60.0), connect=min(limit, 10.0)),
        follow_redirects=False,
        trust_env=False,
    )


# --- the transport: negotiated from the agent card ------------------------------------------------


def _interface_url(config: A2AConfig, url: str) -> str | None:
    """An interface's absolute http(s) URL, or None when it has none. A relative URL is read
    against the endpoint's base URL (the spec wants absolute ones; some cards are sloppy)."""
    url = url.strip()
    if not url:
        return None
    absolute = urljoin(f"{config.base_url}/", url)
    parts = urlsplit(absolute)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return absolute


def _offered(card: AgentCard) -> str:
    shown = [
        f"{offer.protocol_binding or 'no binding'} at {offer.url or 'no URL'}"
        for offer in card.supported_interfaces
    ]
    return "; ".join(shown) or "no interfaces"


def _major_minor(version: str) -> list[str]:
    """Major and minor of a protocol version: 1, 1.0 and 1.0.0 are alike (patch versions do
    not matter to negotiation)."""
    return [*version.strip().split("."), "0"][:2]


def _is_current_version(version: str) -> bool:
    return _major_minor(version) == _major_minor(A2A_VERSION)


def choose_interface(card: AgentCard, config: A2AConfig) -> AgentInterface:
    """The interface runs talk to. The card lists its interfaces in its agent's order of
    preference (a protocol 0.3 card's preferredTransport first, then its
    additionalInterfaces), so the first one in a binding this client speaks wins; among
    several of that binding, protocol 1.0 is preferred, as the SDK's client factory does.
    The endpoint's target becomes the interface's tenant."""
    usable: list[AgentInterface] = []
    for offer in card.supported_interfaces:
        if offer.protocol_binding not in BINDINGS:
            continue
        url = _interface_url(config, offer.url)
        if url is None:
            continue
        chosen = AgentInterface()
        chosen.CopyFrom(offer)
        chosen.url = url
        if config.target:
            chosen.tenant = config.target
        usable.append(chosen)
    if not usable:
        raise ExecutionBackendError(
            "remote_error",
            f"A2A endpoint {config.base_url}: the agent card offers no transport this client "
            f"speaks (it offers {_offered(card)}; this client speaks {', '.join(BINDINGS)} "
            "at an http(s) URL)",
        )
    binding = usable[0].protocol_binding
    same = [offer for offer in usable if offer.protocol_binding == binding]
    return next((o for o in same if _is_current_version(o.protocol_version)), same[0])


def describe_interface(interface: AgentInterface) -> str:
    return f"{interface.protocol_binding} at {interface.url}"


def _not_served(exc: BaseException) -> bool:
    """Whether a failure means nothing at the URL speaks the binding (404 / 405)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, httpx.HTTPStatusError):
            return current.response.status_code in (404, 405)
        current = current.__cause__ or current.__context__
    return False


# --- the async side: one exchange with the remote agent -------------------------------------------


def exchange_message_id(run_id: str, position: int, texts: list[str]) -> str:
    """The A2A messageId of what a run sends at a transcript position. A segment that
    died after sending but before recording the remote task sends the message again on
    recovery; under the same id, so a remote that deduplicates by messageId (the
    protocol's handle for that) sees one message."""
    return str(uuid.uuid5(_MESSAGE_IDS, json.dumps([run_id, position, texts])))


@dataclass
class _Progress:
    """What the worker thread needs to know about an exchange in flight (to abort it)."""

    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    sent: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Reply:
    task: Task | None = None
    message: A2AMessage | None = None


class _Remote:
    """The a2a-sdk clients of one endpoint, used on the private loop."""

    def __init__(self, config: A2AConfig) -> None:
        self.config = config
        self.interface: AgentInterface | None = None
        self.remote_card: AgentCard | None = None
        self._http: httpx.AsyncClient | None = None
        self._sender: Any = None
        self._subscriber: Any = None
        self._subscribe_works = True

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = _http_client(self.config)
        return self._http

    async def _open(self) -> None:
        """Fetch the agent card and build the clients for the interface it leads to."""
        if self._sender is not None:
            return
        card = await self.card()
        interface = choose_interface(card, self.config)
        # The factory is handed a card with only the chosen interface, so that sending,
        # subscribing and the health check all use the same one (and its resolved URL and
        # tenant); the factory still picks the SDK transport for its binding and version.
        pinned = AgentCard()
        pinned.CopyFrom(card)
        del pinned.supported_interfaces[:]
        pinned.supported_interfaces.append(interface)
        clients = []
        for streaming in (False, True):
            settings = ClientConfig(
                streaming=streaming,
                httpx_client=self._client(),
                supported_protocol_bindings=list(BINDINGS),
            )
            clients.append(ClientFactory(settings).create(pinned))
        self.remote_card, self.interface = card, interface
        self._sender, self._subscriber = clients

    async def close(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def follow(self, progress: _Progress) -> _Reply:
        """Wait for a task an earlier (crashed) segment already sent, without sending."""
        await self._open()
        assert progress.task_id is not None
        progress.sent.set()
        task = await self._sender.get_task(self._get(progress.task_id))
        return await self._settle(task, progress)

    async def exchange(self, texts: list[str], progress: _Progress, message_id: str) -> _Reply:
        await self._open()
        message = A2AMessage(
            role=A2ARole.ROLE_USER,
            message_id=message_id,
            parts=[Part(text=text) for text in texts],
        )
        if progress.task_id:
            message.task_id = progress.task_id
        if progress.context_id:
            message.context_id = progress.context_id
        configuration = SendMessageConfiguration(return_immediately=self.config.return_immediately)
        if self.config.history_length is not None:
            configuration.history_length = self.config.history_length
        request = SendMessageRequest(message=message, configuration=configuration)
        response = None
        try:
            async for item in self._sender.send_message(request):
                response = item
        finally:
            progress.sent.set()
        if response is None:
            raise ExecutionBackendError("remote_error", "the remote agent sent no response")
        if response.HasField("message"):
            progress.context_id = response.message.context_id or progress.context_id
            progress.state = "completed"
            return _Reply(message=response.message)
        return await self._settle(response.task, progress)

    async def _settle(self, task: Task, progress: _Progress) -> _Reply:
        progress.task_id, progress.context_id = task.id, task.context_id
        progress.state = state_label(task.status.state)
        while task.status.state not in SETTLED_STATES:
            task = await self._next(task)
            progress.state = state_label(task.status.state)
        return _Reply(task=task)

    def _get(self, task_id: str) -> GetTaskRequest:
        request = GetTaskRequest(id=task_id)
        if self.config.history_length is not None:
            request.history_length = self.config.history_length
        return request

    async def _next(self, task: Task) -> Task:
        """Wait for the task to move: subscribe to it, else poll it."""
        if self._subscribe_works:
            settled = False
            try:
                stream = self._subscriber.subscribe(SubscribeToTaskRequest(id=task.id))
                async with contextlib.aclosing(stream):
                    async for item in stream:
                        if _stream_state(item) in SETTLED_STATES:
                            settled = True
                            break
            except Exception as exc:  # not supported, already settled, stream broke: poll
                logger.debug("A2A subscribe to task %s failed (%s); polling", task.id, exc)
                settled = False
            if not settled:
                self._subscribe_works = False
            return await self._sender.get_task(self._get(task.id))
        await asyncio.sleep(self.config.poll_interval_ms / 1000)
        return await self._sender.get_task(self._get(task.id))

    async def cancel(self, task_id: str) -> Task:
        await self._open()
        return await self._sender.cancel_task(CancelTaskRequest(id=task_id))

    async def card(self) -> AgentCard:
        resolver = A2ACardResolver(self._client(), self.config.base_url)
        return await resolver.get_agent_card()

    async def probe(self) -> None:
        """One cheap call over the chosen interface: GetTask of a task that cannot exist.
        A remote that speaks the binding there answers TaskNotFound; anything else (a 404
        from a server speaking another binding, a refused token, a refused address) means
        runs would fail too. GetTask is also what runs use to follow a task."""
        await self._open()
        assert self.interface is not None
        try:
            await self._sender.get_task(GetTaskRequest(id=f"health-check-{uuid.uuid4()}"))
        except TaskNotFoundError:
            return
        except Exception as exc:  # reported below, with the interface it concerns
            problem = exc
        else:
            return
        # raised outside the except block: describe_error would otherwise dig the cause
        # out of the exception's context and drop the interface from the message
        offered = describe_interface(self.interface)
        binding = self.interface.protocol_binding
        if _not_served(problem):
            reason = f"nothing there answers {binding} ({error_text(problem)})"
        else:
            reason = f"calling it failed: {error_text(problem)}"
        raise ExecutionBackendError(
            "remote_error",
            f"A2A endpoint {self.config.base_url}: the agent card offers {offered}, but {reason}",
        )


def _stream_state(item: Any) -> int | None:
    if item.HasField("task"):
        return int(item.task.status.state)
    if item.HasField("status_update"):
        return int(item.status_update.status.state)
    return None


class _LoopThread:
    """A private asyncio loop on a daemon thread (the worker thread stays synchronous)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="a2a-loop")
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        future = self.submit(coro)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.run(self.loop.shutdown_asyncgens(), timeout=2)
        with contextlib.suppress(Exception):
            self.run(self.loop.shutdown_default_executor(), timeout=2)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()


@dataclass
class _Outcome:
    status: BackendRunStatus
    termination: TerminationReason
    response: str | None = None
    output: BackendRunOutput = field(default_factory=BackendRunOutput)
    steps: int = 0
    waiting_tool: str | None = None


def cancel_task(config: A2AConfig, task_id: str) -> None:
    """Cancel a remote task (a run cancelled while nobody executed it)."""
    loop = _LoopThread()
    remote = _Remote(config)
    try:
        loop.run(remote.cancel(task_id), timeout=_ABORT_SECONDS)
    finally:
        try:
            loop.run(remote.close(), timeout=_ABORT_SECONDS)
        finally:
            loop.close()


def fetch_agent_card(config: A2AConfig) -> dict[str, Any]:
    """The remote agent card (`/.well-known/agent-card.json`) as JSON."""
    loop = _LoopThread()
    remote = _Remote(config)
    limit = min(config.timeout_ms / 1000, 30.0) + 1
    try:
        card = loop.run(remote.card(), timeout=limit)
    finally:
        try:
            loop.run(remote.close(), timeout=_ABORT_SECONDS)
        finally:
            loop.close()
    return dict(MessageToDict(card))


def check_endpoint(config: A2AConfig) -> dict[str, Any]:
    """Fetch the agent card, choose the transport and probe it (see `A2ABackend.check`)."""
    loop = _LoopThread()
    remote = _Remote(config)
    # two requests (the card, the probe), each bounded by the HTTP client's timeout
    limit = 2 * min(config.timeout_ms / 1000, 30.0) + 1
    try:
        loop.run(remote.probe(), timeout=limit)
    finally:
        try:
            loop.run(remote.close(), timeout=_ABORT_SECONDS)
        finally:
            loop.close()
    assert remote.remote_card is not None and remote.interface is not None
    interface = remote.interface
    return {
        "card": dict(MessageToDict(remote.remote_card)),
        "transport": {
            "binding": interface.protocol_binding,
            "url": interface.url,
            "protocol_version": interface.protocol_version,
        },
    }


def _text_of_parts(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.HasField("text"))


def _task_response(task: Task) -> str | None:
    """The text a completed task answers with: its artifacts, else its status message,
    else the last agent message of its history."""
    texts = [_text_of_parts(artifact.parts) for artifact in task.artifacts]
    text = "\n".join(t for t in texts if t)
    if text:
        return text
    return _status_text(task)


def _status_text(task: Task, *, from_history: bool = True) -> str | None:
    """The status message's text, else (if allowed) the last agent message of the history."""
    if task.status.HasField("message"):
        text = _text_of_parts(task.status.message.parts)
        if text:
            return text
    if not from_history:
        return None
    for message in reversed(task.history):
        if message.role == A2ARole.ROLE_AGENT:
            text = _text_of_parts(message.parts)
            if text:
                return text
    return None


def _artifacts(task: Task) -> list[dict[str, Any]]:
    found = []
    for artifact in task.artifacts:
        data = MessageToDict(artifact)
        item: dict[str, Any] = {"content": data.get("parts", [])}
        if artifact.artifact_id:
            item["id"] = artifact.artifact_id
        if artifact.name:
            item["name"] = artifact.name
        found.append(item)
    return found


def _outcome_of(reply: _Reply) -> _Outcome:
    if reply.message is not None:
        text = _text_of_parts(reply.message.parts) or None
        return _Outcome(
            BackendRunStatus.completed(),
            TerminationReason.natural_end(),
            text,
            BackendRunOutput(text=text),
            steps=1,
        )
    task = reply.task
    assert task is not None
    state = task.status.state
    if state == TaskState.TASK_STATE_COMPLETED:
        text = _task_response(task)
        return _Outcome(
            BackendRunStatus.completed(),
            TerminationReason.natural_end(),
            text,
            BackendRunOutput(text=text, artifacts=_artifacts(task)),
            steps=1,
        )
    if state == TaskState.TASK_STATE_CANCELED:
        return _Outcome(BackendRunStatus.cancelled(), TerminationReason.cancelled(), steps=1)
    if state in (TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED):
        message = _status_text(task, from_history=False) or f"remote task {state_label(state)}"
        return _Outcome(BackendRunStatus.failed(message), TerminationReason.error(message), steps=1)
    question = _status_text(task)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        return _Outcome(
            BackendRunStatus.waiting_input(question),
            TerminationReason.suspended(),
            question,
            BackendRunOutput(text=question),
            steps=1,
            waiting_tool=INPUT_TOOL,
        )
    return _Outcome(
        BackendRunStatus.waiting_auth(question),
        TerminationReason.suspended(),
        question,
        BackendRunOutput(text=question),
        steps=1,
        waiting_tool=AUTH_TOOL,
    )


def _payload_text(payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict) and isinstance(payload.get("text"), str):
        return str(payload["text"])
    return json.dumps(payload, ensure_ascii=False, default=str)


class RemoteRootLifecycle:
    """One activation of a remote run (upstream's `execute_remote_root_lifecycle`)."""

    def __init__(self, backend: A2ABackend, request: BackendRootRunRequest) -> None:
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
            outcome = _Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
        elif not texts and not self._awaited_task():
            message = "nothing to send to the remote agent: no new user message"
            outcome = _Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
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
                answers.append(_payload_text(payload))
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

    def _exchange(self, config: A2AConfig, texts: list[str], answers: list[str]) -> _Outcome:
        """Send `texts` (the operator's `answers` first, recorded as user messages) and wait
        for the remote task to settle, the run to be cancelled or the timeout."""
        progress = _Progress()
        awaited = self._awaited_task()
        if awaited or self.target.get("last_state") in INTERRUPTED_LABELS:
            progress.task_id = self.target.get("task_id") or None
            progress.state = self.target.get("last_state")
        progress.context_id = self.target.get("context_id") or None
        recorded = bool(awaited)
        deadline = time.monotonic() + config.timeout_ms / 1000
        loop = _LoopThread()
        remote = _Remote(config)
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
            while stop is None:
                concurrent.futures.wait([future], timeout=0.05)
                if future.done():
                    break
                if not recorded and progress.task_id:
                    self._record_sent(progress)
                    recorded = True
                if self.cancel.is_cancelled():
                    stop = "cancelled"
                    break
                if time.monotonic() >= deadline:
                    stop = "timeout"
                    break
            if stop is not None:
                self._abort(config, loop, remote, future, progress, stop)
                self._remember(progress, progress.state)
                if stop == "cancelled":
                    return _Outcome(BackendRunStatus.cancelled(), TerminationReason.cancelled())
                return _Outcome(
                    BackendRunStatus.timeout(),
                    TerminationReason.stopped(
                        "timeout", f"remote task did not settle within {config.timeout_ms} ms"
                    ),
                )
            error = future.exception()
            if error is not None:
                message = describe_error(config, error)
                logger.warning("run %s: %s", self.identity.run_id, message)
                self.backend.report_health(False, message)
                self._remember(progress, progress.state)
                return _Outcome(BackendRunStatus.failed(message), TerminationReason.error(message))
            reply: _Reply = future.result()
            self.backend.report_health(True)
            self._remember(progress, progress.state)
            return _outcome_of(reply)
        finally:
            try:
                loop.run(remote.close(), timeout=_ABORT_SECONDS)
            except Exception:
                logger.debug("closing the A2A client failed", exc_info=True)
            loop.close()

    def _abort(
        self,
        config: A2AConfig,
        loop: _LoopThread,
        remote: _Remote,
        future: concurrent.futures.Future[Any],
        progress: _Progress,
        why: str,
    ) -> None:
        """Stop waiting and cancel the remote task (failures are only logged)."""
        progress.sent.wait(timeout=1.0)  # a send in flight is about to tell us the task id
        future.cancel()
        task_id = progress.task_id
        if not task_id or progress.state in TERMINAL_LABELS:
            return
        try:
            task = loop.run(remote.cancel(task_id), timeout=_ABORT_SECONDS)
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

    def _record_sent(self, progress: _Progress) -> None:
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

    def _remember(self, progress: _Progress, state: str | None) -> None:
        if not progress.task_id and not progress.context_id:
            return
        self.target = {
            "task_id": progress.task_id,
            "context_id": progress.context_id,
            "last_state": state or "unknown",
            "updated_at_ms": now_ms(),
        }

    # --- checkpoint and finish -----------------------------------------------------------------

    def _finish(self, outcome: _Outcome, response: str) -> BackendRunResult:
        termination = outcome.termination
        status = outcome.status.durable_run_status(termination)
        status_reason = outcome.status.durable_status_reason(termination)
        previous_steps = self.previous.steps if self.previous else 0
        steps = previous_steps + outcome.steps
        done = status is RunStatus.DONE

        waiting_calls: dict[str, ToolCallState] = {}
        if status is RunStatus.WAITING and outcome.waiting_tool is not None:
            task_id = str(self.target.get("task_id") or "task")[:100]
            call_id = f"{outcome.waiting_tool}_{steps}_{task_id}"
            call = ToolCallState(
                call_id=call_id,
                tool_name=outcome.waiting_tool,
                arguments={
                    "question": response,
                    "task_id": self.target.get("task_id"),
                    "state": self.target.get("last_state"),
                },
                status=ToolCallStatus.SUSPENDED,
                updated_at=now_ms(),
                resume_mode=ToolCallResumeMode.USE_DECISION_AS_TOOL_RESULT,
                suspension_id=call_id,
                suspension_reason=f"a2a:{status_reason}",
            )
            waiting_calls[call_id] = call
            self.changed_calls.append(call)

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
        state = PersistedState(self.revision + 1, dict(self.extensions))

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

        store = self.request.store
        if store is not None:
            input_, output = materialize_message_log(
                self.messages,
                self.previous,
                self.identity.run_id,
                self.identity.thread_id,
                steps,
                self.input_message_count,
                start_index=self.committed_count,
            )
            now = int(time.time())
            previous = self.previous
            error_payload = (
                {"message": termination.value}
                if termination.type == TerminationReason.ERROR
                else None
            )
            record = RunRecord(
                run_id=self.identity.run_id,
                thread_id=self.identity.thread_id,
                agent_id=self.identity.agent_id,
                parent_run_id=self.identity.parent_run_id,
                request=previous.request if previous else None,
                input=input_,
                output=output,
                status=status,
                status_reason=status_reason,
                termination_reason=termination if done else None,
                final_output=(response or None) if done else None,
                error_payload=error_payload if done else None,
                dispatch_id=self.identity.dispatch_id,
                session_id=self.identity.session_id,
                transport_request_id=self.identity.transport_request_id,
                waiting=(
                    RunWaitingState(
                        reason=waiting_reason_from_status_reason(status_reason),
                        ticket_ids=[c.ticket_id for c in waiting_calls.values()],
                        tickets=waiting_tickets_from_states(waiting_calls),
                        since_dispatch_id=self.identity.dispatch_id,
                        message=status_reason,
                    )
                    if status is RunStatus.WAITING
                    else None
                ),
                created_at=(previous.created_at if previous and previous.created_at else now),
                started_at=(previous.started_at if previous else None) or now,
                finished_at=now if done else None,
                updated_at=now,
                steps=steps,
                input_tokens=previous.input_tokens if previous else 0,
                output_tokens=previous.output_tokens if previous else 0,
                state=state,
            )
            store.checkpoint(
                Checkpoint(
                    thread_id=self.identity.thread_id,
                    record=record,
                    new_messages=self.messages[self.committed_count :],
                    expected_message_count=self.committed_count,
                    tool_calls=self.changed_calls,
                    events=ev.coalesce_deltas(self.events),
                    step_index=steps - 1 if steps else None,
                )
            )
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
