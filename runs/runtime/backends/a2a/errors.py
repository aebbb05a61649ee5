"""Secret-free, one-line explanations of A2A transport and protocol failures."""

from __future__ import annotations

from ...netguard import AddressRefusedError
from ..base import ExecutionBackendError
from .config import A2AConfig


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
