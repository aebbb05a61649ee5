from .a2a import A2ABackend, A2AConfig, A2AConfigError
from .a2a import validate as a2a_validate
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
from .delegate import (
    DELEGATE_PARAMETERS,
    DELEGATE_TOOL_PREFIX,
    DelegateTool,
    delegate_result_payload,
    delegate_tool_name,
)
from .local import LocalBackend, map_termination

__all__ = [
    "DELEGATE_PARAMETERS",
    "DELEGATE_TOOL_PREFIX",
    "A2ABackend",
    "A2AConfig",
    "A2AConfigError",
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
    "a2a_validate",
    "delegate_result_payload",
    "delegate_tool_name",
    "map_termination",
    "validate_delegate_request",
    "validate_root_request",
]
