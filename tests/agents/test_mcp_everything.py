"""Against an MCP server nobody here wrote: the reference `@modelcontextprotocol/server-
everything` (npm), over stdio and streamable HTTP. Skipped when node, npm or the registry
is not available."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.models_mcp import McpServer
from agents.services.mcp import mcp_probe
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, ModelFactory, call
from tests.mcp_servers import EverythingServer, everything_script
from tests.runs.helpers import drive, events

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(scope="module")
def script() -> str:
    found = everything_script()
    if found is None:
        pytest.skip("node/npm or the npm registry is not available")
    return found


@pytest.fixture(scope="module")
def http_everything(script: str) -> Iterator[EverythingServer]:
    server = EverythingServer(script).start()
    yield server
    server.stop()


def _run(calls: list[dict[str, Any]]) -> Any:
    names = sorted({c["name"] for c in calls})
    agent = AgentFactory(
        model=ModelFactory(script=[{"tool_calls": calls}, {"text": "done"}]), tools=names
    )
    return drive(run_start(agent=agent, messages="go"))


def test_stdio_tools_end_to_end(script, settings):
    settings.AWAKEN_MCP_STDIO_COMMANDS = {"everything": ["node", script, "stdio"]}
    server = McpServer.objects.create(
        slug="everything", name="everything", transport="stdio", command="everything"
    )
    result = mcp_probe(server)
    assert result.ok, result.error
    names = {entry["name"] for entry in result.tools}
    assert {"mcp__everything__echo", "mcp__everything__get-sum"} <= names
    run = _run(
        [
            call("mcp__everything__get-sum", {"a": 2, "b": 40}),
            call("mcp__everything__get-tiny-image", {}),
            call("mcp__everything__trigger-long-running-operation", {"duration": 2, "steps": 4}),
        ],
    )
    assert run.status == "done"
    total, image, slow = [e["result"] for e in events(run, "tool_call_done")]
    assert total["status"] == "success" and "42" in total["message"]
    assert image["status"] == "success" and "[image image/png" in image["message"]
    assert slow["status"] == "success"
    progress = events(run, "activity_snapshot")
    assert progress and progress[0]["content"]["total"] == 4


def test_streamable_http_tools_end_to_end(http_everything, settings):
    settings.AWAKEN_MCP_ALLOW_PRIVATE = ["127.0.0.1"]
    server = McpServer.objects.create(slug="everything", name="everything", url=http_everything.url)
    result = mcp_probe(server)
    assert result.ok, result.error
    run = _run([call("mcp__everything__echo", {"message": "over http"})])
    [done] = [e["result"] for e in events(run, "tool_call_done")]
    assert done["status"] == "success" and done["message"] == "Echo: over http"
