"""MCP tool servers with real processes (PostgreSQL, Redis, a `celery worker`, see
conftest.py) against real MCP servers (tests/mcp_servers/toolbox.py over streamable HTTP
and stdio): runs call MCP tools end to end on the worker, which keeps its sessions and
reconnects after the server restarts; a run cancelled during a slow tool stops its call
within a second."""

from __future__ import annotations

import json
import time

from agents.models_mcp import McpServer
from agents.services.mcp import mcp_probe
from runs.models import Run, RunEvent
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from tests.factories import AgentFactory, ModelFactory, call
from tests.mcp_servers import ToolboxServer, stdio_argv
from tests.processes import wait_for
from tests.runs.helpers import events


def _servers(settings, service_env, http: ToolboxServer) -> None:
    commands = {"toolbox": stdio_argv()}
    settings.AWAKEN_MCP_ALLOW_PRIVATE = True
    settings.AWAKEN_MCP_STDIO_COMMANDS = commands
    service_env["AWAKEN_MCP_ALLOW_PRIVATE"] = "true"
    service_env["AWAKEN_MCP_STDIO_COMMANDS"] = json.dumps(commands)
    for row in (
        McpServer(slug="web", name="web", url=http.url),
        McpServer(slug="local", name="local", transport="stdio", command="toolbox"),
    ):
        row.save()
        assert mcp_probe(row).ok


def _agent(script, tools):
    return AgentFactory(model=ModelFactory(script=script), tools=tools)


def _finished(run: Run) -> Run:
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "done", 60, "the run to finish")
    run.refresh_from_db()
    return run


def test_a_worker_calls_mcp_tools_over_http_and_stdio_and_reconnects(
    processes, service_env, settings
):
    http = ToolboxServer().start()
    try:
        _servers(settings, service_env, http)
        worker = processes("worker", "w1")
        agent = _agent(
            [
                {
                    "tool_calls": [
                        call("mcp__web__add", {"a": 1, "b": 2}),
                        call("mcp__local__echo", {"text": "stdio"}),
                        call("mcp__web__pid", {}),
                    ]
                },
                {"text": "{last_tool_result}"},
            ],
            ["mcp__web__add", "mcp__local__echo", "mcp__web__pid"],
        )
        first = _finished(run_start(agent=agent, messages="go"))
        added, echoed, _ = [e["result"] for e in events(first, "tool_call_done")]
        assert added["data"]["structured_content"] == {"sum": 3}, worker.log_tail()
        assert echoed["message"] == "echo: stdio"
        http.restart()
        second = _finished(run_start(agent=agent, messages="again"))
        results = [e["result"] for e in events(second, "tool_call_done")]
        assert all(r["status"] == "success" for r in results), (results, worker.log_tail())
        pids = [events(run, "run_finish")[-1]["result"]["response"] for run in (first, second)]
        assert pids[0] != pids[1] and all(p.isdigit() for p in pids)
    finally:
        http.stop()


def test_cancelling_a_run_during_a_slow_mcp_tool_stops_within_a_second(
    processes, service_env, settings
):
    http = ToolboxServer().start()
    try:
        _servers(settings, service_env, http)
        processes("worker", "w1")
        agent = _agent(
            [{"tool_calls": [call("mcp__web__slow", {"seconds": 20})]}, {"text": "ok"}],
            ["mcp__web__slow"],
        )
        run = run_start(agent=agent, messages="slow")
        wait_for(
            lambda: (
                RunEvent.objects.filter(run=run, event_type="tool_call_ready").exists()
                or Run.objects.get(pk=run.pk).status != "created"
            ),
            30,
            "the call to start",
        )
        time.sleep(2.0)  # inside the slow tool
        asked = time.monotonic()
        run_cancel(run=run)
        wait_for(lambda: Run.objects.get(pk=run.pk).status == "done", 10, "the run to end")
        assert time.monotonic() - asked < 1.5
        run.refresh_from_db()
        assert run.status_reason == "cancelled"
    finally:
        http.stop()
