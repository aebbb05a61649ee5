"""Remote agents over A2A (Agent2Agent protocol 1.0; the JSON-RPC or the HTTP+JSON binding,
whichever the remote agent card offers first).

Modules by concern:

- `config`: the endpoint config, its validation, the protocol constants and where a run
  keeps its remote state;
- `errors`: secret-free explanations of transport and protocol failures;
- `backend`: the backend a run executes on;
- `transport`: connections through the SSRF guard and the transport negotiated from the
  agent card;
- `mapping`: A2A tasks and messages <-> this runtime's types;
- `client`: the a2a-sdk client of one endpoint, on a private asyncio loop thread;
- `lifecycle`: one activation of a remote root run.

Validating an endpoint, building the backend of a pinned version and reading a run's remote
state need no SDK: `config`, `errors` and `backend` do not import a2a-sdk, so the web
process and a worker that never runs a remote agent never load it (nor httpx, pydantic and
protobuf). `transport`, `mapping`, `client` and `lifecycle` do; the backend loads them the
first time it talks to its endpoint; import their names from those modules.
"""

from __future__ import annotations

from .backend import A2ABackend, HealthCallback
from .config import (
    A2A_VERSION,
    AUTH_TOOL,
    BACKEND,
    BACKEND_OUTPUT_STATE_KEY,
    BINDINGS,
    INPUT_TOOL,
    INTERRUPTED_LABELS,
    JSONRPC_BINDING,
    OPTIONS,
    REMOTE_STATE_KEY,
    REST_BINDING,
    SYNTHETIC_TOOLS,
    TERMINAL_LABELS,
    A2AConfig,
    A2AConfigError,
    remote_target,
    validate,
)
from .errors import describe_error, error_text

__all__ = [
    "A2A_VERSION",
    "AUTH_TOOL",
    "BACKEND",
    "BACKEND_OUTPUT_STATE_KEY",
    "BINDINGS",
    "INPUT_TOOL",
    "INTERRUPTED_LABELS",
    "JSONRPC_BINDING",
    "OPTIONS",
    "REMOTE_STATE_KEY",
    "REST_BINDING",
    "SYNTHETIC_TOOLS",
    "TERMINAL_LABELS",
    "A2ABackend",
    "A2AConfig",
    "A2AConfigError",
    "HealthCallback",
    "describe_error",
    "error_text",
    "remote_target",
    "validate",
]
