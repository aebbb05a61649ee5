"""Django admin for configuration; one module per part (all changes audited)."""

from agents.admin import agents, endpoints, mcp, providers

__all__ = ["agents", "endpoints", "mcp", "providers"]
