from .base import (
    AgentResolver,
    BackendCapabilities,
    BackendControl,
    BackendDelegatePolicy,
    BackendDelegateRunRequest,
    BackendParentContext,
    BackendRootRunRequest,
    BackendRunOutput,
    BackendRunResult,
    ExecutionBackendError,
    validate_delegate_request,
    validate_root_request,
)
from .delegate import DelegateTool, delegate_tool_name
from .local import LocalBackend, map_termination

__all__ = [
    "AgentResolver",
    "BackendCapabilities",
    "BackendControl",
    "BackendDelegatePolicy",
    "BackendDelegateRunRequest",
    "BackendParentContext",
    "BackendRootRunRequest",
    "BackendRunOutput",
    "BackendRunResult",
    "DelegateTool",
    "ExecutionBackendError",
    "LocalBackend",
    "delegate_tool_name",
    "map_termination",
    "validate_delegate_request",
    "validate_root_request",
]
