"""Configuration changes made in the Django admin are audited."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from runs.models import AuditEntry
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


def test_changing_and_deleting_an_agent_in_the_admin_is_audited(client):
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    agent = AgentFactory(slug="helper", tools=["calculator"])
    url = reverse("admin:agents_agent_change", args=[agent.pk])
    form = {
        "slug": "helper",
        "name": "Helper",
        "description": "",
        "model": agent.model_id,
        "system_prompt": "Be brief.",
        "tools": '["calculator", "current_time"]',
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_default_action": "reject",
        "versions-TOTAL_FORMS": 0,
        "versions-INITIAL_FORMS": 0,
    }
    response = client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(action="agent.update")
    assert (entry.actor_label, entry.source) == ("root", "admin")
    assert entry.before["max_rounds"] == 16 and entry.after["max_rounds"] == 8
    assert entry.after["tools"] == ["calculator", "current_time"]
    client.post(reverse("admin:agents_agent_delete", args=[agent.pk]), {"post": "yes"})
    assert AuditEntry.objects.filter(action="agent.delete", target_id=str(agent.pk)).exists()


def test_an_invalid_agent_config_is_refused_with_a_message_and_not_audited(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    agent = AgentFactory(slug="helper")
    response = client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]),
        {
            "slug": "helper",
            "name": "Helper",
            "model": agent.model_id,
            "tools": '["no_such_tool"]',
            "permission": '{"rules": [{"tool": "Bash(", "behavior": "allow"}]}',
            "max_rounds": 8,
            "stop_conditions": "[]",
            "ticket_default_action": "reject",
            "versions-TOTAL_FORMS": 0,
            "versions-INITIAL_FORMS": 0,
        },
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "Unknown tools: no_such_tool" in page
    assert not AuditEntry.objects.exists()
