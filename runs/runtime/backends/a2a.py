"""Remote agents over A2A (Agent2Agent protocol 1.0; the JSON-RPC or the HTTP+JSON binding,
whichever the remote agent card offers first): the endpoint config and its validation
and the backend a run executes on.

This module does not import a2a-sdk: validating an endpoint, building the backend of a
pinned version and reading a run's remote state need no SDK, so the web process and a
worker that never runs a remote agent never load it (nor httpx, pydantic and protobuf).
The exchange with the remote agent, the remote run's lifecycle (upstream's
`execute_remote_root_lifecycle`) and the agent card fetch live in `a2a_remote`, imported
the first time an A2A backend actually talks to its endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from ..netguard import AddressRefusedError
from ..types import PersistedState
from .base import (
    BackendCapabilities,
    BackendDelegateRunRequest,
    BackendRootRunRequest,
    BackendRunResult,
    ExecutionBackendError,
    validate_root_request,
)

logger = logging.getLogger(__name__)

BACKEND = "a2a"
REMOTE_STATE_KEY = "__runtime_remote_backend"
BACKEND_OUTPUT_STATE_KEY = "__runtime_backend_output"
INPUT_TOOL = "a2a_input"
AUTH_TOOL = "a2a_auth"
SYNTHETIC_TOOLS = frozenset({INPUT_TOOL, AUTH_TOOL})
A2A_VERSION = "1.0"
JSONRPC_BINDING = "JSONRPC"
REST_BINDING = "HTTP+JSON"
# The protocol bindings this client speaks. gRPC is left out on purpose: its channel would
# bypass the HTTP client that enforces the SSRF guard.
BINDINGS = (JSONRPC_BINDING, REST_BINDING)
OPTIONS = ("poll_interval_ms", "history_length", "return_immediately")
_U32 = 2**32 - 1
_U64 = 2**64 - 1
INTERRUPTED_LABELS = frozenset({"input-required", "auth-required"})
TERMINAL_LABELS = frozenset({"completed", "failed", "canceled", "rejected"})

# --- configuration (upstream's RemoteEndpoint) ----------------------------------------------------


class A2AConfigError(ValueError):
    """The endpoint cannot build an A2A backend (upstream `InvalidConfig`)."""


@dataclass(frozen=True)
class A2AConfig:
    base_url: str
    token: str | None = field(default=None, repr=False)
    target: str | None = None
    timeout_ms: int = 300_000
    poll_interval_ms: int = 2000
    history_length: int | None = None
    return_immediately: bool = True
    # Not part of upstream's endpoint: whether private/loopback addresses may be reached.
    allow_private: bool = False

    @property
    def state_key(self) -> str:
        """Which remote the continuation state belongs to (the effective endpoint URL)."""
        return f"{self.base_url}/{self.target}" if self.target else self.base_url


def _int_option(value: Any, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise A2AConfigError(f"A2A option '{name}' must be a non-negative integer, got {value!r}")
    return value


def validate(endpoint: Mapping[str, Any], *, allow_private: bool = False) -> A2AConfig:
    """Build the A2A config from a RemoteEndpoint mapping (`backend`, `base_url`, `auth`,
    `target`, `timeout_ms`, `options`; or the legacy `bearer_token`, `agent_id`,
    `poll_interval_ms`, which cannot be mixed with the canonical fields)."""
    if not isinstance(endpoint, Mapping):
        raise A2AConfigError("the remote endpoint must be an object")
    backend = endpoint.get("backend", BACKEND)
    if not isinstance(backend, str) or not backend.strip():
        raise A2AConfigError("remote endpoint backend must not be blank")
    if backend.strip() != BACKEND:
        raise A2AConfigError(f"the A2A backend factory cannot build backend '{backend}'")

    legacy = [key for key in ("bearer_token", "agent_id", "poll_interval_ms") if key in endpoint]
    canonical = [key for key in ("auth", "target", "options") if endpoint.get(key) is not None]
    if legacy and canonical:
        raise A2AConfigError(
            f"legacy endpoint fields ({', '.join(legacy)}) cannot be mixed with "
            f"canonical fields ({', '.join(canonical)})"
        )

    base_url = endpoint.get("base_url")
    if not isinstance(base_url, str) or not base_url.strip():
        raise A2AConfigError("A2A endpoint base_url must not be empty")
    base_url = base_url.strip().rstrip("/")
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise A2AConfigError(f"A2A endpoint base_url must be an http(s) URL, got '{base_url}'")
    if parts.username is not None or parts.password is not None:
        raise A2AConfigError("A2A endpoint base_url must not contain credentials")
    if parts.query or parts.fragment:
        raise A2AConfigError("A2A endpoint base_url must not have a query or fragment")

    token: str | None
    target: Any
    options: Any
    if legacy:
        raw_token = endpoint.get("bearer_token")
        if raw_token is not None and (not isinstance(raw_token, str) or not raw_token.strip()):
            raise A2AConfigError("A2A bearer auth requires a non-empty token")
        token = raw_token.strip() if raw_token else None
        target = endpoint.get("agent_id")
        options = {}
        if "poll_interval_ms" in endpoint:
            options["poll_interval_ms"] = endpoint["poll_interval_ms"]
    else:
        auth = endpoint.get("auth")
        token = None
        if auth is not None:
            if not isinstance(auth, Mapping):
                raise A2AConfigError('A2A endpoint auth must be an object {"type": "bearer", …}')
            kind = auth.get("type")
            if kind != "bearer":
                raise A2AConfigError(
                    f"A2A endpoint auth type {kind!r} is not supported (only 'bearer')"
                )
            raw_token = auth.get("token")
            if not isinstance(raw_token, str) or not raw_token.strip():
                raise A2AConfigError("A2A bearer auth requires a non-empty 'token'")
            token = raw_token.strip()
        target = endpoint.get("target")
        options = endpoint.get("options") or {}
        if not isinstance(options, Mapping):
            raise A2AConfigError("A2A endpoint options must be an object")

    if target is not None:
        if not isinstance(target, str) or not target.strip():
            raise A2AConfigError("A2A endpoint target must be a non-empty string when set")
        target = target.strip()
        if "/" in target or any(c in target for c in "?#%\\ ") or target in (".", ".."):
            raise A2AConfigError(
                f"A2A endpoint target must be a single URL path segment, got '{target}'"
            )

    timeout_ms = endpoint.get("timeout_ms", 300_000)
    if (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, int)
        or not 0 < timeout_ms <= _U64
    ):
        raise A2AConfigError(
            f"A2A endpoint timeout_ms must be a positive integer, got {timeout_ms!r}"
        )

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise A2AConfigError(
            f"unknown A2A option(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}"
        )
    poll = _int_option(options.get("poll_interval_ms", 2000), "poll_interval_ms", _U64)
    history = options.get("history_length")
    if history is not None:
        history = _int_option(history, "history_length", _U32)
    immediately = options.get("return_immediately", True)
    if not isinstance(immediately, bool):
        raise A2AConfigError(
            f"A2A option 'return_immediately' must be a boolean, got {immediately!r}"
        )
    return A2AConfig(
        base_url=base_url,
        token=token,
        target=target or None,
        timeout_ms=timeout_ms,
        poll_interval_ms=poll,
        history_length=history,
        return_immediately=immediately,
        allow_private=allow_private,
    )


def describe_error(config: A2AConfig, exc: BaseException) -> str:
    """A one-line, secret-free explanation of a transport or protocol failure."""
    if isinstance(exc, ExecutionBackendError) and not _refusal(exc):
        return exc.message
    return f"A2A endpoint {config.base_url}: {error_text(exc)}"


def error_text(exc: BaseException) -> str:
    """`describe_error` without the endpoint prefix (for messages that add context)."""
    refusal = _refusal(exc)
    if refusal is not None:
        return f"refused to connect: {refusal}"
    return (str(exc).strip().splitlines() or [""])[0].strip() or exc.__class__.__name__


def _refusal(exc: BaseException) -> AddressRefusedError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, AddressRefusedError):
            return current
        current = current.__cause__ or current.__context__
    return None


# --- the backend ----------------------------------------------------------------------------------


HealthCallback = Callable[[bool, str], None]


def _remote() -> ModuleType:
    """The a2a-sdk side of the backend, loaded the first time a backend talks to its remote."""
    # imported here, not at the top: a2a-sdk costs every process that never uses it
    # tens of MB and ~0.4 s (see this module's docstring)
    from . import a2a_remote

    return a2a_remote


class A2ABackend:
    """Runs an agent on a remote A2A endpoint (capabilities: BackendCapabilities.a2a())."""

    def __init__(
        self,
        config: A2AConfig | None,
        *,
        model: str = "",
        on_health: HealthCallback | None = None,
        unavailable: str | None = None,
    ) -> None:
        """`unavailable` (with no config): why the endpoint cannot be used; every activation
        then fails with that message, through the normal lifecycle (events, checkpoint)."""
        if config is None and not unavailable:
            raise ValueError("an A2A backend needs a config or the reason it has none")
        self.config = config
        self.model = model
        self.on_health = on_health
        self.unavailable = unavailable

    def capabilities(self) -> BackendCapabilities:
        return BackendCapabilities.a2a()

    def execute_root(self, request: BackendRootRunRequest) -> BackendRunResult:
        validate_root_request(self.capabilities(), request)
        result: BackendRunResult = _remote().RemoteRootLifecycle(self, request).run()
        return result

    def execute_delegate(self, request: BackendDelegateRunRequest) -> BackendRunResult:
        raise ExecutionBackendError(
            "execution_failed", "the A2A backend does not support delegated execution"
        )

    def abort(self, state: PersistedState | None) -> str | None:
        """Cancel the remote task a run left open (cancelled while nobody executed it).
        Returns the cancelled task id, or None when there was nothing to cancel."""
        if self.config is None:
            return None
        target = remote_target(state, self.config.state_key)
        task_id = target.get("task_id")
        if not task_id or target.get("last_state") in TERMINAL_LABELS:
            return None
        _remote().cancel_task(self.config, str(task_id))
        return str(task_id)

    def agent_card(self) -> dict[str, Any]:
        """The remote agent card (`/.well-known/agent-card.json`) as JSON."""
        if self.config is None:
            raise ExecutionBackendError("execution_failed", self.unavailable or "no config")
        card: dict[str, Any] = _remote().fetch_agent_card(self.config)
        return card

    def check(self) -> dict[str, Any]:
        """Prove that runs can talk to the remote: fetch the agent card, choose the transport
        runs would use and make one cheap call over it. Returns `{"card": …, "transport":
        {"binding", "url", "protocol_version"}}`; raises saying what is wrong (no transport
        in common, or the chosen interface does not answer its binding)."""
        if self.config is None:
            raise ExecutionBackendError("execution_failed", self.unavailable or "no config")
        result: dict[str, Any] = _remote().check_endpoint(self.config)
        return result

    def report_health(self, ok: bool, error: str = "") -> None:
        """Hand a call's outcome to `on_health` (healthy when `ok`, else failing with `error`)."""
        if self.on_health is None:
            return
        try:
            self.on_health(ok, error)
        except Exception:  # health bookkeeping must never fail a run
            logger.warning("recording endpoint health failed", exc_info=True)


def remote_target(state: PersistedState | None, key: str) -> dict[str, Any]:
    if state is None:
        return {}
    remote = state.extensions.get(REMOTE_STATE_KEY) or {}
    target = (remote.get("targets") or {}).get(key) or {}
    return dict(target) if isinstance(target, dict) else {}
