"""The MCP servers' admin: a URL or an allowed command (never a typed command line), a
write-only token and headers (encrypted, never shown or audited), the Check button and
action listing the tools, and the agent form's tool picker offering them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from agents.models_mcp import McpServer
from agents.services.mcp import mcp_connection
from common.models import AuditEntry
from tests.agents.test_tool_picker import checked, form_data
from tests.factories import AgentFactory, bearer, team, team_member, token_for, user_with_role
from tests.mcp_servers import ToolboxServer

pytestmark = pytest.mark.django_db
TOKEN = "mcp-tok-8d1e5c0b9a7f-secret"


@pytest.fixture(scope="module")
def toolbox() -> Iterator[ToolboxServer]:
    server = ToolboxServer().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def allow_private(settings: Any) -> None:
    settings.AWAKEN_MCP_ALLOW_PRIVATE = True
    settings.AWAKEN_MCP_STDIO_COMMANDS = {"demo": ["python3", "server.py"]}


def form(**overrides: Any) -> dict[str, Any]:
    data = {
        "slug": "toolbox",
        "name": "Toolbox",
        "team": "",
        "transport": "http",
        "url": "http://127.0.0.1:9/mcp",
        "command": "",
        "timeout_seconds": 10,
        "token": "",
        "headers": "",
    }
    data.update(overrides)
    return data


def test_secrets_are_write_only_encrypted_and_kept_out_of_the_audit(root_client):
    headers = '{"X-Api-Key": "hdr-secret-77"}'
    add = reverse("admin:agents_mcpserver_add")
    response = root_client.post(add, form(token=TOKEN, headers=headers))
    assert response.status_code == 302, response.content.decode()[:2000]
    server = McpServer.objects.get(slug="toolbox")
    assert server.token() == TOKEN and TOKEN not in server.token_encrypted
    assert server.stored_headers() == {"X-Api-Key": "hdr-secret-77"}
    connection = dict(mcp_connection(server).headers)
    assert connection["Authorization"] == f"Bearer {TOKEN}"
    change = reverse("admin:agents_mcpserver_change", args=[server.pk])
    page = root_client.get(change).content.decode()
    assert TOKEN not in page and "hdr-secret-77" not in page
    assert "a token is stored (hidden)" in page
    response = root_client.post(change, form(name="Renamed"))  # blank keeps them
    assert response.status_code == 302
    server.refresh_from_db()
    assert (server.name, server.token(), server.has_headers) == ("Renamed", TOKEN, True)
    response = root_client.post(change, form(clear_token="on", clear_headers="on"))
    server.refresh_from_db()
    assert not server.has_token and not server.has_headers
    for entry in AuditEntry.objects.filter(target_type="mcpserver"):
        text = str(entry.before) + str(entry.after)
        assert TOKEN not in text and "hdr-secret" not in text
        assert "token_encrypted" not in text


def test_the_form_refuses_commands_off_the_list_and_private_urls(root_client, settings):
    add = reverse("admin:agents_mcpserver_add")
    page = root_client.post(add, form(transport="stdio", command="bash")).content.decode()
    assert "Select a valid choice" in page
    settings.AWAKEN_MCP_ALLOW_PRIVATE = False
    page = root_client.post(add, form()).content.decode()
    assert "non-public" in page and "AWAKEN_MCP_ALLOW_PRIVATE" in page
    page = root_client.post(add, form(headers='{"Bad Header": "x"}')).content.decode()
    assert "is not a valid header" in page
    assert not McpServer.objects.exists()
    response = root_client.post(add, form(transport="stdio", command="demo", url=""))
    assert response.status_code == 302
    assert McpServer.objects.get().command == "demo"


def test_check_lists_the_tools_and_the_picker_offers_them(root_client, toolbox):
    server = McpServer.objects.create(slug="toolbox", name="Toolbox", url=toolbox.url)
    check = reverse("admin:agents_mcpserver_check", args=[server.pk])
    page = root_client.post(check, follow=True).content.decode()
    assert "Toolbox: healthy" in page and "mcp__toolbox__add" in page
    assert "<code>mcp__toolbox__add</code>" in page  # the tools table on the change page
    changelist = reverse("admin:agents_mcpserver_changelist")
    root_client.post(changelist, {"action": "check_servers", "_selected_action": [server.pk]})
    assert AuditEntry.objects.filter(action="mcpserver.check").count() == 2
    agent = AgentFactory(slug="picker", tools=["calculator"])
    change = reverse("admin:agents_agent_change", args=[agent.pk])
    page = root_client.get(change).content.decode()
    assert 'value="mcp__toolbox__add"' in page and "MCP server toolbox" in page
    data = form_data(agent, ["calculator", "mcp__toolbox__add"])
    data["team"] = agent.team_id
    response = root_client.post(change, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.tools == ["calculator", "mcp__toolbox__add"]
    assert checked(root_client.get(change).content.decode()) == ["calculator", "mcp__toolbox__add"]


# -- the API ------------------------------------------------------------------------------------


def test_the_api_lists_and_checks_servers_without_secrets_and_scoped_to_teams(toolbox):
    shared = McpServer(slug="toolbox", name="Toolbox", url=toolbox.url)
    shared.set_token(TOKEN)
    shared.save()
    McpServer.objects.create(slug="theirs", name="theirs", url=toolbox.url, team=team("b"))
    viewer = bearer(token_for(user_with_role("viewer", "vic")))
    admin = bearer(token_for(user_with_role("admin", "ada")))
    a_admin = bearer(token_for(team_member("admin", "a", username="a-admin")))
    listing = viewer.get("/api/v1/mcp-servers")
    assert listing.status_code == 200
    assert [item["id"] for item in listing.json()["items"]] == ["theirs", "toolbox"]
    assert TOKEN not in listing.content.decode()
    assert listing.json()["items"][1]["has_token"] is True
    assert viewer.post("/api/v1/mcp-servers/toolbox/check").status_code == 403
    checked = admin.post("/api/v1/mcp-servers/toolbox/check")
    assert checked.status_code == 200, checked.content
    body = checked.json()
    assert body["ok"] is True and body["server"]["health"] == "healthy"
    assert "mcp__toolbox__add" in [tool["name"] for tool in body["server"]["tools"]]
    assert TOKEN not in checked.content.decode()
    # a team's admin: another team's server is not found, a shared one is not theirs to check
    assert a_admin.get("/api/v1/mcp-servers/theirs").status_code == 404
    assert a_admin.post("/api/v1/mcp-servers/toolbox/check").status_code == 403
    detail = a_admin.get("/api/v1/mcp-servers/toolbox")
    assert detail.status_code == 200 and detail.json()["tools_checked_at"]
