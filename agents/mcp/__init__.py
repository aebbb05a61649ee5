"""MCP tool servers (docs/mcp.md): the client side of the Model Context Protocol.

- `client`: sessions to MCP servers, one per server configuration per process, awaited on
  the process's event loop (runs.runtime.aio), reconnected after a failure; `list_tools`
  and `call_tool`. No Django.
- `results`: an MCP tool result as the runtime's ToolResult (text, structured content,
  what is not shown), within size limits.
- `tool`: `McpTool`, the runtime Tool a run calls (`mcp__<server>__<tool>`), built from
  the schema its published agent version froze.
"""
