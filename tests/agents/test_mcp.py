"""MCP tool servers against real MCP servers built with the `mcp` SDK
(tests/mcp_servers/toolbox.py, over streamable HTTP and stdio): the check lists the tools,
runs call them end to end (results, tool errors, timeouts, progress, a removed tool, a
server restarted), an `ask` rule opens a ticket whose edit form follows the tool's
schema, and the guards: the stdio allow-list and the private-address refusal."""

from __future__ import annotations

import http.server
import io
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from mcp import types as mcp_types

from agents.models_mcp import McpServer
from agents.services.agents import agent_draft_status, agent_validate
from agents.services.mcp import mcp_check, mcp_probe, mcp_server_config_errors, tool_entries
from common.audit import SYSTEM
from common.models import AuditEntry
from runs.models import Run, Ticket
from runs.services.execution import run_advance
from runs.services.runs import run_cancel
from runs.services.submission_flow import run_start
from runs.services.tickets import decision_submit
from runs.ticket_forms import edit_fields
from tests.factories import AgentFactory, ModelFactory, call
from tests.mcp_servers import ToolboxServer, stdio_argv
from tests.runs.helpers import drive, events

ADD = "mcp__toolbox__add"


@pytest.fixture(scope="module")
def toolbox() -> Iterator[ToolboxServer]:
    server = ToolboxServer().start()
    yield server
    server.stop()


@pytest.fixture
def allow_private(settings: Any) -> None:
    settings.AWAKEN_MCP_ALLOW_PRIVATE = True


@pytest.fixture
def stdio_allowed(settings: Any) -> None:
    settings.AWAKEN_MCP_STDIO_COMMANDS = {"toolbox": stdio_argv()}


def http_server(
    url: str, *, slug: str = "toolbox", timeout: float = 10, **kwargs: Any
) -> McpServer:
    server = McpServer.objects.create(
        slug=slug, name=slug, url=url, timeout_seconds=timeout, **kwargs
    )
    result = mcp_probe(server)
    assert result.ok, result.error
    server.refresh_from_db()
    return server


def agent_calling(script: list[dict[str, Any]], tools: list[str], **kwargs: Any) -> Any:
    return AgentFactory(model=ModelFactory(script=script), tools=tools, **kwargs)


def tool_done(run: Run) -> list[dict[str, Any]]:
    return [event["result"] for event in events(run, "tool_call_done")]


# -- the check --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_check_lists_the_tools_with_their_schemas_and_records_health(toolbox, allow_private):
    server = McpServer.objects.create(slug="toolbox", name="Toolbox", url=toolbox.url)
    result = mcp_check(server=server, actor=SYSTEM)
    assert result.ok, result.error
    server.refresh_from_db()
    assert server.health == "healthy" and server.tools_checked_at is not None
    tools = {entry["name"]: entry for entry in server.tools}
    assert {ADD, "mcp__toolbox__echo", "mcp__toolbox__slow"} <= set(tools)
    assert tools[ADD]["tool"] == "add"
    assert tools[ADD]["input_schema"]["properties"]["a"]["type"] == "integer"
    assert set(tools[ADD]["input_schema"]["required"]) == {"a", "b"}
    entry = AuditEntry.objects.get(action="mcpserver.check")
    assert ADD in entry.after["tools"]


@pytest.mark.django_db
def test_stdio_check_lists_the_tools_of_an_allowed_command(stdio_allowed):
    server = McpServer.objects.create(
        slug="toolbox", name="Toolbox", transport="stdio", command="toolbox"
    )
    result = mcp_probe(server)
    assert result.ok, result.error
    assert ADD in [entry["name"] for entry in result.tools]


@pytest.mark.django_db
def test_stdio_refuses_a_command_not_on_the_allow_list(stdio_allowed):
    server = McpServer(slug="shell", name="Shell", transport="stdio", command="bash")
    errors = mcp_server_config_errors(server)
    assert "not an allowed command" in errors["command"] and "toolbox" in errors["command"]
    server.save()
    result = mcp_probe(server)
    assert not result.ok and "not an allowed command" in result.error
    server.refresh_from_db()
    assert server.health == "failing"


@pytest.mark.django_db
def test_private_addresses_are_refused_unless_allowed(toolbox, settings):
    settings.AWAKEN_MCP_ALLOW_PRIVATE = False
    server = McpServer(slug="toolbox", name="Toolbox", url=toolbox.url)
    errors = mcp_server_config_errors(server)
    assert "non-public" in errors["url"] and "AWAKEN_MCP_ALLOW_PRIVATE" in errors["url"]
    server.save()
    assert "non-public" in mcp_probe(server).error
    settings.AWAKEN_MCP_ALLOW_PRIVATE = ["127.0.0.1"]
    assert mcp_server_config_errors(server) == {}


@pytest.mark.django_db
def test_a_server_answering_html_fails_its_check_clearly(allow_private):
    class Html(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body>Welcome to nginx</body></html>")

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            return None

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Html)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        server = McpServer.objects.create(
            slug="html",
            name="html",
            url=f"http://127.0.0.1:{httpd.server_port}/mcp",
            timeout_seconds=5,
        )
        result = mcp_probe(server)
    finally:
        httpd.shutdown()
    assert not result.ok and result.error
    server.refresh_from_db()
    assert server.health == "failing"


def test_tools_that_cannot_be_offered_are_skipped_with_the_reason(settings):
    settings.AWAKEN_MCP_MAX_SCHEMA_BYTES = 100_000
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(10_000)}}
    listed = [
        mcp_types.Tool(name="wide", input_schema=wide),
        mcp_types.Tool(name="ok.tool", input_schema={"type": "object"}),
        mcp_types.Tool(name="x" * 80, input_schema={"type": "object"}),
    ]
    entries, skipped = tool_entries("srv", listed)
    assert [entry["name"] for entry in entries] == ["mcp__srv__ok_tool"]
    assert entries[0]["tool"] == "ok.tool"
    assert any("wide" in reason and "bytes" in reason for reason in skipped)
    assert any("longer than 64" in reason for reason in skipped)


# -- agents and runs ------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_agent_may_pick_only_tools_a_check_listed(toolbox, allow_private):
    http_server(toolbox.url)
    agent = AgentFactory(tools=[ADD, "mcp__toolbox__nope"], published=False)
    errors = agent_validate(agent)
    assert "mcp__toolbox__nope" in errors["tools"] and ADD not in errors["tools"]


@pytest.mark.django_db
def test_a_run_calls_an_mcp_tool_end_to_end(toolbox, allow_private):
    http_server(toolbox.url)
    agent = agent_calling(
        [{"tool_calls": [call(ADD, {"a": 2, "b": 40})]}, {"text": "got {last_tool_result}"}],
        [ADD],
    )
    version = agent.versions.get()
    assert version.spec["mcp_tools"][ADD]["input_schema"]["required"] == ["a", "b"]
    run = drive(run_start(agent=agent, messages="add"))
    assert run.status == "done", run.status_reason
    [result] = tool_done(run)
    assert result["status"] == "success"
    assert result["data"]["structured_content"] == {"sum": 42}
    assert events(run, "run_finish")[0]["result"]["response"].startswith("got ")
    assert "42" in events(run, "run_finish")[0]["result"]["response"]


@pytest.mark.django_db
def test_a_stdio_tool_call_end_to_end(stdio_allowed):
    server = McpServer.objects.create(
        slug="toolbox", name="Toolbox", transport="stdio", command="toolbox"
    )
    assert mcp_probe(server).ok
    agent = agent_calling(
        [
            {"tool_calls": [call("mcp__toolbox__echo", {"text": "hi"})]},
            {"text": "{last_tool_result}"},
        ],
        ["mcp__toolbox__echo"],
    )
    run = drive(run_start(agent=agent, messages="echo"))
    assert events(run, "run_finish")[0]["result"]["response"] == "echo: hi"


@pytest.mark.django_db
def test_tool_errors_images_and_large_results(toolbox, allow_private, settings):
    settings.AWAKEN_MCP_MAX_RESULT_CHARS = 1000
    http_server(toolbox.url)
    names = ["mcp__toolbox__broken", "mcp__toolbox__picture", "mcp__toolbox__big"]
    agent = agent_calling(
        [
            {
                "tool_calls": [
                    call(names[0], {"reason": "disk full"}),
                    call(names[1], {}),
                    call(names[2], {"chars": 50_000}),
                ]
            },
            {"text": "done"},
        ],
        names,
    )
    run = drive(run_start(agent=agent, messages="go"))
    assert run.status == "done"
    broken, picture, big = tool_done(run)
    assert broken["status"] == "error" and "broken" in broken["message"]
    assert picture["status"] == "success"
    assert "a pixel" in picture["message"] and "[image image/png" in picture["message"]
    assert "not shown" in picture["message"]
    assert big["status"] == "success" and len(big["message"]) < 1100
    assert "49000 more characters not shown" in big["message"]


@pytest.mark.django_db
def test_a_call_that_times_out_is_a_clear_tool_error(toolbox, allow_private):
    http_server(toolbox.url, timeout=1)
    agent = agent_calling(
        [{"tool_calls": [call("mcp__toolbox__slow", {"seconds": 3})]}, {"text": "ok"}],
        ["mcp__toolbox__slow"],
    )
    started = time.monotonic()
    run = drive(run_start(agent=agent, messages="slow"))
    assert time.monotonic() - started < 3
    [result] = tool_done(run)
    assert result["status"] == "error"
    assert "did not answer within 1s" in result["message"] and "toolbox" in result["message"]
    assert run.status == "done"


@pytest.mark.django_db
def test_progress_notifications_become_activity_events(toolbox, allow_private):
    http_server(toolbox.url)
    agent = agent_calling(
        [{"tool_calls": [call("mcp__toolbox__slow", {"seconds": 1.2})]}, {"text": "ok"}],
        ["mcp__toolbox__slow"],
    )
    run = drive(run_start(agent=agent, messages="slow"))
    progress = events(run, "activity_snapshot")
    assert progress and all(e["activity_type"] == "tool-call-progress" for e in progress)
    first = progress[0]["content"]
    assert first["tool_name"] == "mcp__toolbox__slow" and first["total"] == 10
    assert len(progress) <= 4  # throttled: one every half second at most


@pytest.mark.django_db
def test_the_next_call_reconnects_after_the_server_restarts(allow_private):
    server = ToolboxServer().start()
    try:
        http_server(server.url)
        agent = agent_calling(
            [{"tool_calls": [call("mcp__toolbox__pid", {})]}, {"text": "{last_tool_result}"}],
            ["mcp__toolbox__pid"],
        )
        first = drive(run_start(agent=agent, messages="pid"))
        server.restart()
        second = drive(run_start(agent=agent, messages="pid"))
        pids = [events(run, "run_finish")[0]["result"]["response"] for run in (first, second)]
        assert all(pid.isdigit() for pid in pids) and pids[0] != pids[1]
        server.stop()
        third = drive(run_start(agent=agent, messages="pid"))
        [result] = tool_done(third)
        assert result["status"] == "error" and "could not open an MCP session" in result["message"]
        row = McpServer.objects.get(slug="toolbox")
        assert row.health == "failing" and "could not open" in row.health_error
    finally:
        server.stop()


@pytest.mark.django_db
def test_a_pinned_version_keeps_its_view_and_a_removed_tool_fails_clearly(allow_private):
    server = ToolboxServer().start()
    try:
        row = http_server(server.url)
        echo = "mcp__toolbox__echo"
        agent = agent_calling(
            [{"tool_calls": [call(echo, {"text": "hi"})]}, {"text": "ok"}], [echo]
        )
        server.restart(variant="v2")  # echo removed, shout added
        result = mcp_probe(row)
        assert result.changes["removed"] == [echo]
        assert result.changes["added"] == ["mcp__toolbox__shout"]
        row.refresh_from_db()
        assert row.tools_changes["removed"] == [echo]
        assert echo in agent_validate(agent)["tools"]  # the draft must drop it to publish again
        assert agent_draft_status(agent).state == "changed"  # its frozen echo is gone
        run = drive(run_start(agent=agent, messages="echo"))
        [done] = tool_done(run)
        assert done["status"] == "error"
        assert "no longer has the tool 'echo'" in done["message"]
    finally:
        server.stop()


@pytest.mark.django_db
def test_an_ask_rule_opens_a_ticket_whose_form_follows_the_schema(toolbox, allow_private):
    http_server(toolbox.url)
    echo = "mcp__toolbox__echo"
    agent = agent_calling(
        [{"tool_calls": [call(echo, {"text": "draft"})]}, {"text": "{last_tool_result}"}],
        [echo],
        permission={
            "default_behavior": "allow",
            "rules": [{"tool": "mcp__toolbox__*", "behavior": "ask"}],
        },
    )
    run = drive(run_start(agent=agent, messages="echo"))
    assert run.status == "waiting"
    ticket = Ticket.objects.get(run=run)
    fields = {field.name: field for field in edit_fields(ticket)}
    assert fields["text"].kind == "string" and fields["text"].required
    assert fields["text"].value == "draft"
    with pytest.raises(Exception, match="schema"):
        decision_submit(ticket=ticket, action="edit", arguments={"text": 5})
    decision_submit(ticket=ticket, action="edit", arguments={"text": "edited"})
    run = drive(run)
    assert events(run, "run_finish")[-1]["result"]["response"] == "echo: edited"


@pytest.mark.django_db(transaction=True)
def test_cancelling_the_run_cancels_the_call_within_a_second(toolbox, allow_private):
    http_server(toolbox.url)
    agent = agent_calling(
        [{"tool_calls": [call("mcp__toolbox__slow", {"seconds": 8})]}, {"text": "ok"}],
        ["mcp__toolbox__slow"],
    )
    run = run_start(agent=agent, messages="slow")
    worker = threading.Thread(
        target=lambda: (run_advance(run_id=run.pk, worker="w1"), connection.close())
    )
    worker.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not Run.objects.get(pk=run.pk).lease_owner:
        time.sleep(0.05)
    time.sleep(1.0)  # the call is under way
    asked = time.monotonic()
    run_cancel(run=run)
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert time.monotonic() - asked < 1.5
    run.refresh_from_db()
    assert (run.status, run.status_reason) == ("done", "cancelled")


@pytest.mark.django_db
def test_the_dashboard_shows_a_failing_server_beside_the_runs_it_blocks(
    allow_private, admin_client
):
    from django.urls import reverse

    from agents.services.health import mcp_server_health_record

    server = ToolboxServer().start()
    try:
        row = http_server(server.url, slug="flaky")
        agent = agent_calling(
            [{"tool_calls": [call("mcp__flaky__echo", {"text": "x"})]}, {"text": "ok"}],
            ["mcp__flaky__echo"],
            permission={"default_behavior": "ask", "rules": []},
        )
        drive(run_start(agent=agent, messages="echo"))  # waits on its ticket
    finally:
        server.stop()
    mcp_server_health_record(server_id=row.pk, ok=False, error="<b>gone</b>")
    page = admin_client.get(reverse("runs:dashboard")).content.decode()
    assert 'data-health="mcp:flaky"' in page
    section = page.split('data-health="mcp:flaky"', 1)[1].split("</tr>", 1)[0]
    assert "health-failing" in section and "&lt;b&gt;gone&lt;/b&gt;" in section
    assert "<td>1</td>" in section  # one run waiting


@pytest.mark.django_db
def test_the_demo_toolsmith_uses_the_repository_mcp_server():
    from django.core.management import call_command

    from agents.models import Agent

    call_command("seed_demo", stdout=io.StringIO())
    toolsmith = Agent.objects.get(slug="toolsmith")
    run = drive(run_start(agent=toolsmith, messages="count the words: one two three"))
    [result] = tool_done(run)
    assert result["status"] == "success"
    assert result["data"]["structured_content"] == {"words": 3, "characters": 13}
    run = drive(run_start(agent=toolsmith, messages="reverse this: abc"))
    assert run.status == "waiting"
    assert Ticket.objects.get(run=run).tool_name == "mcp__demo__reverse_text"


# -- hostile servers ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_50_mb_result_is_refused_clearly_and_the_next_call_works(
    transport, toolbox, allow_private, stdio_allowed
):
    if transport == "http":
        http_server(toolbox.url, slug="huge")
    else:
        server = McpServer.objects.create(
            slug="huge", name="huge", transport="stdio", command="toolbox"
        )
        assert mcp_probe(server).ok
    agent = agent_calling(
        [
            {"tool_calls": [call("mcp__huge__big", {"chars": 50_000_000})]},
            {"tool_calls": [call("mcp__huge__pid", {})]},
            {"text": "ok"},
        ],
        ["mcp__huge__big", "mcp__huge__pid"],
    )
    run = drive(run_start(agent=agent, messages="big"))
    big, pid = tool_done(run)
    assert big["status"] == "error" and "more than 8 MB" in big["message"]
    assert pid["status"] == "success" and pid["message"].isdigit()
    assert run.status == "done"


@pytest.mark.django_db
def test_a_never_ending_progress_stream_times_out_with_few_events(toolbox, allow_private):
    http_server(toolbox.url, slug="flood", timeout=2)
    agent = agent_calling(
        [{"tool_calls": [call("mcp__flood__flood", {})]}, {"text": "ok"}], ["mcp__flood__flood"]
    )
    run = drive(run_start(agent=agent, messages="flood"))
    [result] = tool_done(run)
    assert result["status"] == "error" and "did not answer within 2s" in result["message"]
    assert 1 <= len(events(run, "activity_snapshot")) <= 5
    assert run.status == "done"


@pytest.mark.django_db
def test_the_server_killed_mid_call_fails_the_step_clearly_and_the_run_goes_on(allow_private):
    server = ToolboxServer().start()
    try:
        http_server(server.url, slug="doomed")
        agent = agent_calling(
            [{"tool_calls": [call("mcp__doomed__slow", {"seconds": 5})]}, {"text": "went on"}],
            ["mcp__doomed__slow"],
        )
        threading.Timer(1.0, server.stop).start()
        run = drive(run_start(agent=agent, messages="slow"))
    finally:
        server.stop()
    [result] = tool_done(run)
    assert result["status"] == "error"
    assert "MCP server 'doomed'" in result["message"] and "was lost" in result["message"]
    assert run.status == "done"
    assert events(run, "run_finish")[0]["result"]["response"] == "went on"


def test_a_replay_answers_mcp_calls_from_the_recorded_results():
    """The replay wrapper answers tools marked `replay_recorded` from the original run
    (runs.replays.services.replay_tools): an MCP call's effect on the server is unknown."""
    from agents.mcp.tool import McpTool

    assert McpTool.replay_recorded is True
    assert not callable(getattr(McpTool, "dry_run", None))
