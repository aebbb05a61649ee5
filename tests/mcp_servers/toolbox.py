"""An MCP server built with the `mcp` SDK for the tests: run it over stdio
(`python tests/mcp_servers/toolbox.py stdio`) or streamable HTTP
(`python tests/mcp_servers/toolbox.py http PORT`). `TOOLBOX_VARIANT=v2` serves a changed
tool list (`echo` removed, `shout` added), as a server upgraded under a published agent."""

from __future__ import annotations

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

VARIANT = os.environ.get("TOOLBOX_VARIANT", "v1")
server = MCPServer("toolbox")

# a 1x1 transparent PNG
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


if VARIANT == "v1":

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"


if VARIANT == "v2":

    @server.tool(description="Echo the text back in capitals.")
    def shout(text: str) -> str:
        return text.upper()


@server.tool(description="Add two integers; answers structured content.")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@server.tool(description="Fail the way tools fail: an error result.")
def broken(reason: str = "it broke") -> str:
    raise ValueError(reason)


@server.tool(description="Return a small image and a caption.")
def picture() -> list:
    from mcp.types import ImageContent, TextContent

    return [
        TextContent(type="text", text="a pixel"),
        ImageContent(type="image", data=base64.b64encode(PIXEL).decode(), mime_type="image/png"),
    ]


@server.tool(description="Sleep, reporting progress every tenth of the time.")
async def slow(seconds: float, ctx: Context) -> str:
    for step in range(10):
        await ctx.report_progress(step, 10, f"step {step}")
        await asyncio.sleep(seconds / 10)
    return f"slept {seconds}"


@server.tool(description="A large text result.")
def big(chars: int) -> str:
    return "x" * chars


@server.tool(description="Report progress without end (a hostile server).")
async def flood(ctx: Context) -> str:
    step = 0
    while True:
        step += 1
        await ctx.report_progress(step, None, "still going")
        await asyncio.sleep(0.001)


@server.tool(description="The process id of the server (to tell restarts apart).")
def pid() -> str:
    return str(os.getpid())


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.settings.log_level = "WARNING"
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
