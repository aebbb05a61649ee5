"""The demo's MCP server (stdio), built with the `mcp` SDK: `manage.py seed_demo`
configures it as the MCP server `demo` (allowed as the command `demo` of
AWAKEN_MCP_STDIO_COMMANDS) and gives the `toolsmith` agent its tools. A run that calls
one starts it as a subprocess of the worker, which keeps it for the next calls."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("awaken-demo", log_level="WARNING")


@server.tool(description="Count the words and characters of a text.")
def word_count(text: str) -> dict[str, int]:
    return {"words": len(text.split()), "characters": len(text)}


@server.tool(description="Reverse a text, character by character.")
def reverse_text(text: str) -> str:
    return text[::-1]


if __name__ == "__main__":
    server.run("stdio")
