"""The settings of MCP tool servers (docs/mcp.md), kept out of settings.py (at its size
cap), which takes them all."""

from __future__ import annotations

import sys
from pathlib import Path

from .env import env_argv_map, env_bool_or_networks, env_int

__all__ = [
    "AWAKEN_MCP_ALLOW_PRIVATE",
    "AWAKEN_MCP_MAX_RESULT_CHARS",
    "AWAKEN_MCP_MAX_SCHEMA_BYTES",
    "AWAKEN_MCP_STDIO_COMMANDS",
]

_DEMO_SERVER = Path(__file__).resolve().parent.parent / "agents" / "mcp" / "demo_server.py"

# HTTP servers on non-public addresses only as allowed here (false, true, or addresses
# and networks), checked when saved and at every connection.
AWAKEN_MCP_ALLOW_PRIVATE = env_bool_or_networks("AWAKEN_MCP_ALLOW_PRIVATE")
# stdio servers only as commands of this allow-list, a JSON object name -> argv; the
# admin picks a name (default: the demo server in the repository).
AWAKEN_MCP_STDIO_COMMANDS = env_argv_map(
    "AWAKEN_MCP_STDIO_COMMANDS", {"demo": [sys.executable, str(_DEMO_SERVER)]}
)
# What the model reads of one MCP result at most (characters), and the largest input
# schema (bytes of JSON) a tool may have to be offered to agents.
AWAKEN_MCP_MAX_RESULT_CHARS = env_int("AWAKEN_MCP_MAX_RESULT_CHARS", 100_000, minimum=1)
AWAKEN_MCP_MAX_SCHEMA_BYTES = env_int("AWAKEN_MCP_MAX_SCHEMA_BYTES", 100_000, minimum=100)
