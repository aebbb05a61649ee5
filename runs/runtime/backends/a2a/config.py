"""The A2A endpoint config (upstream's RemoteEndpoint), its validation, the protocol
constants and where a run keeps its remote state. No a2a-sdk here (see the package)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ...types import PersistedState

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
    _check_backend(endpoint.get("backend", BACKEND))
    legacy = [key for key in ("bearer_token", "agent_id", "poll_interval_ms") if key in endpoint]
    canonical = [key for key in ("auth", "target", "options") if endpoint.get(key) is not None]
    if legacy and canonical:
        raise A2AConfigError(
            f"legacy endpoint fields ({', '.join(legacy)}) cannot be mixed with "
            f"canonical fields ({', '.join(canonical)})"
        )
    base_url = _base_url(endpoint.get("base_url"))
    token, target, options = _legacy_fields(endpoint) if legacy else _canonical_fields(endpoint)
    target = _target(target)
    timeout_ms = _timeout_ms(endpoint.get("timeout_ms", 300_000))
    poll, history, immediately = _options(options)
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


def _check_backend(backend: Any) -> None:
    if not isinstance(backend, str) or not backend.strip():
        raise A2AConfigError("remote endpoint backend must not be blank")
    if backend.strip() != BACKEND:
        raise A2AConfigError(f"the A2A backend factory cannot build backend '{backend}'")


def _base_url(base_url: Any) -> str:
    """The endpoint's base URL without trailing slashes: http(s), a host, no credentials,
    no query or fragment."""
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
    return base_url


def _legacy_fields(endpoint: Mapping[str, Any]) -> tuple[str | None, Any, Mapping[str, Any]]:
    """(token, target, options) of a legacy endpoint (`bearer_token`, `agent_id`,
    `poll_interval_ms`)."""
    raw_token = endpoint.get("bearer_token")
    if raw_token is not None and (not isinstance(raw_token, str) or not raw_token.strip()):
        raise A2AConfigError("A2A bearer auth requires a non-empty token")
    token = raw_token.strip() if raw_token else None
    target = endpoint.get("agent_id")
    options: dict[str, Any] = {}
    if "poll_interval_ms" in endpoint:
        options["poll_interval_ms"] = endpoint["poll_interval_ms"]
    return token, target, options


def _canonical_fields(endpoint: Mapping[str, Any]) -> tuple[str | None, Any, Mapping[str, Any]]:
    """(token, target, options) of a canonical endpoint (`auth`, `target`, `options`)."""
    token = _bearer_token(endpoint.get("auth"))
    target = endpoint.get("target")
    options = endpoint.get("options") or {}
    if not isinstance(options, Mapping):
        raise A2AConfigError("A2A endpoint options must be an object")
    return token, target, options


def _bearer_token(auth: Any) -> str | None:
    if auth is None:
        return None
    if not isinstance(auth, Mapping):
        raise A2AConfigError('A2A endpoint auth must be an object {"type": "bearer", …}')
    kind = auth.get("type")
    if kind != "bearer":
        raise A2AConfigError(f"A2A endpoint auth type {kind!r} is not supported (only 'bearer')")
    raw_token = auth.get("token")
    if not isinstance(raw_token, str) or not raw_token.strip():
        raise A2AConfigError("A2A bearer auth requires a non-empty 'token'")
    return raw_token.strip()


def _target(target: Any) -> str | None:
    """The endpoint's target (the agent on a multi-agent server): one URL path segment."""
    if target is None:
        return None
    if not isinstance(target, str) or not target.strip():
        raise A2AConfigError("A2A endpoint target must be a non-empty string when set")
    target = target.strip()
    if "/" in target or any(c in target for c in "?#%\\ ") or target in (".", ".."):
        raise A2AConfigError(
            f"A2A endpoint target must be a single URL path segment, got '{target}'"
        )
    return target


def _timeout_ms(timeout_ms: Any) -> int:
    if (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, int)
        or not 0 < timeout_ms <= _U64
    ):
        raise A2AConfigError(
            f"A2A endpoint timeout_ms must be a positive integer, got {timeout_ms!r}"
        )
    return timeout_ms


def _options(options: Mapping[str, Any]) -> tuple[int, int | None, bool]:
    """(poll_interval_ms, history_length, return_immediately) from the endpoint's options."""
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
    return poll, history, immediately


def remote_target(state: PersistedState | None, key: str) -> dict[str, Any]:
    if state is None:
        return {}
    remote = state.extensions.get(REMOTE_STATE_KEY) or {}
    target = (remote.get("targets") or {}).get(key) or {}
    return dict(target) if isinstance(target, dict) else {}
