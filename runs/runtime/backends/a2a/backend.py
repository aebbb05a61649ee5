"""The A2A backend a run executes on. Talking to the endpoint (the remote run's lifecycle,
the remote task cancel, the agent card and the health check) loads the a2a-sdk side of
this package the first time a backend does it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...types import PersistedState
from ..base import (
    BackendCapabilities,
    BackendDelegateRunRequest,
    BackendRootRunRequest,
    BackendRunResult,
    ExecutionBackendError,
    validate_root_request,
)
from .config import TERMINAL_LABELS, A2AConfig, remote_target

logger = logging.getLogger(__name__)

HealthCallback = Callable[[bool, str], None]


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
        from .lifecycle import RemoteRootLifecycle  # noqa: PLC0415 (a2a-sdk, loaded on first use)

        return RemoteRootLifecycle(self, request).run()

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
        from .client import cancel_task  # noqa: PLC0415 (a2a-sdk, loaded on first use)

        cancel_task(self.config, str(task_id))
        return str(task_id)

    def agent_card(self) -> dict[str, Any]:
        """The remote agent card (`/.well-known/agent-card.json`) as JSON."""
        if self.config is None:
            raise ExecutionBackendError("execution_failed", self.unavailable or "no config")
        from .client import fetch_agent_card  # noqa: PLC0415 (a2a-sdk, loaded on first use)

        return fetch_agent_card(self.config)

    def check(self) -> dict[str, Any]:
        """Prove that runs can talk to the remote: fetch the agent card, choose the transport
        runs would use and make one cheap call over it. Returns `{"card": …, "transport":
        {"binding", "url", "protocol_version"}}`; raises saying what is wrong (no transport
        in common, or the chosen interface does not answer its binding)."""
        if self.config is None:
            raise ExecutionBackendError("execution_failed", self.unavailable or "no config")
        from .client import check_endpoint  # noqa: PLC0415 (a2a-sdk, loaded on first use)

        return check_endpoint(self.config)

    def report_health(self, ok: bool, error: str = "") -> None:
        """Hand a call's outcome to `on_health` (healthy when `ok`, else failing with `error`)."""
        if self.on_health is None:
            return
        try:
            self.on_health(ok, error)
        except Exception:  # health bookkeeping must never fail a run
            logger.warning("recording endpoint health failed", exc_info=True)
