"""The agent form picks tools from the registry: a checkbox per tool with its description
(escaped), the saved order kept, and tools no longer in the registry shown and refused
until unticked."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agents.models import Agent
from agents.tools import registry
from common.models import AuditEntry
from runs.runtime.types import ToolDescriptor, ToolResult
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def change_url(agent: Agent) -> str:
    return reverse("admin:agents_agent_change", args=[agent.pk])


def form_data(agent: Agent, tools: list[str]) -> dict[str, Any]:
    return {
        "slug": agent.slug,
        "name": agent.name,
        "description": "",
        "model": agent.model_id,
        "endpoint": "",
        "system_prompt": "Be brief.",
        "tools": tools,
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_deadline_seconds": "",
        "ticket_default_action": "reject",
        "ticket_default_response": "",
        "ticket_warning_seconds": "",
    }


def checked(page: str) -> list[str]:
    """The tool checkboxes that are ticked, in page order."""
    found = []
    for tag in re.findall(r"<input[^>]*name=\"tools\"[^>]*>", page):
        if " checked" in tag:
            found.append(re.search(r'value="([^"]*)"', tag).group(1))  # type: ignore[union-attr]
    return found


def test_every_registry_tool_is_offered_with_its_description(root_client):
    agent = AgentFactory(slug="picker", tools=["write_note", "calculator"])
    page = root_client.get(change_url(agent)).content.decode()
    assert 'type="checkbox" name="tools"' in page
    for tool in registry:
        descriptor = tool.descriptor
        assert f'value="{descriptor.name}"' in page
        assert f'<span class="tool-name">{descriptor.name}</span>' in page
    ask_human = registry.get("ask_human").descriptor.description
    assert f'<span class="tool-description">{ask_human}</span>' in page
    assert sorted(checked(page)) == ["calculator", "write_note"]
    assert '<textarea name="tools"' not in page  # no raw JSON any more


class _Loud:
    """A registered tool whose description holds markup."""

    @property
    def descriptor(self) -> ToolDescriptor:
        return ToolDescriptor(
            name="loud_tool",
            description='<script>alert("x")</script> & <b>bold</b>',
            parameters={"type": "object", "properties": {}},
        )

    def execute(self, arguments: dict[str, Any], ctx: Any) -> ToolResult:
        return ToolResult.success("loud_tool", "ok")


def test_descriptions_are_escaped(root_client, monkeypatch):
    monkeypatch.setitem(registry._tools, "loud_tool", _Loud())
    agent = AgentFactory(slug="picker")
    page = root_client.get(change_url(agent)).content.decode()
    assert '<script>alert("x")</script>' not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in page


def test_the_picked_tools_are_saved_keeping_the_saved_order_first(root_client):
    agent = AgentFactory(slug="picker", tools=["write_note", "calculator"])
    response = root_client.post(
        change_url(agent), form_data(agent, ["ask_human", "calculator", "write_note"])
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.tools == ["write_note", "calculator", "ask_human"]
    entry = AuditEntry.objects.get(action="agent.update")
    assert entry.before["tools"] == ["write_note", "calculator"]
    assert entry.after["tools"] == ["write_note", "calculator", "ask_human"]


def test_unticking_every_tool_saves_none(root_client):
    agent = AgentFactory(slug="picker", tools=["calculator"])
    data = form_data(agent, [])
    del data["tools"]  # no box ticked: the browser sends nothing
    response = root_client.post(change_url(agent), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.tools == []


def test_a_tool_gone_from_the_registry_is_shown_and_refused_until_unticked(root_client):
    agent = AgentFactory(slug="legacy", tools=["calculator", "fax_send"])
    page = root_client.get(change_url(agent)).content.decode()
    assert checked(page).count("fax_send") == 1
    assert "not in the tool registry: untick it to save the agent" in page

    kept = root_client.post(change_url(agent), form_data(agent, ["calculator", "fax_send"]))
    assert kept.status_code == 200
    errors = kept.context["adminform"].form.errors
    assert "Unknown tools: fax_send. Remove them or pick from:" in " ".join(errors["tools"])
    agent.refresh_from_db()
    assert agent.tools == ["calculator", "fax_send"]

    unticked = root_client.post(change_url(agent), form_data(agent, ["calculator"]))
    assert unticked.status_code == 302
    agent.refresh_from_db()
    assert agent.tools == ["calculator"]


def test_the_add_form_offers_the_tools_and_saves_the_pick(root_client):
    template = AgentFactory(slug="template")
    data = form_data(template, ["current_time", "calculator"])
    data.update(slug="fresh", name="Fresh")
    page = root_client.get(reverse("admin:agents_agent_add")).content.decode()
    assert checked(page) == [] and 'value="current_time"' in page
    response = root_client.post(reverse("admin:agents_agent_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Agent.objects.get(slug="fresh").tools == ["current_time", "calculator"]
