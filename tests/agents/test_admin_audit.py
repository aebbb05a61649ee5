"""Configuration changes made in the Django admin are audited."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse

from agents.models import Model
from common.models import AuditEntry
from tests.factories import AgentFactory, ProviderFactory

pytestmark = pytest.mark.django_db


def test_changing_and_deleting_an_agent_in_the_admin_is_audited(root_client):
    agent = AgentFactory(slug="helper", tools=["calculator"])
    url = reverse("admin:agents_agent_change", args=[agent.pk])
    form = {
        "slug": "helper",
        "name": "Helper",
        "description": "",
        "model": agent.model_id,
        "system_prompt": "Be brief.",
        "tools": ["calculator", "current_time"],
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_default_action": "reject",
        "versions-TOTAL_FORMS": 0,
        "versions-INITIAL_FORMS": 0,
    }
    response = root_client.post(url, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(action="agent.update")
    assert (entry.actor_label, entry.source) == ("root", "admin")
    assert entry.before["max_rounds"] == 16 and entry.after["max_rounds"] == 8
    assert entry.after["tools"] == ["calculator", "current_time"]
    root_client.post(reverse("admin:agents_agent_delete", args=[agent.pk]), {"post": "yes"})
    assert AuditEntry.objects.filter(action="agent.delete", target_id=str(agent.pk)).exists()


def test_an_invalid_agent_config_is_refused_with_a_message_and_not_audited(root_client):
    agent = AgentFactory(slug="helper")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]),
        {
            "slug": "helper",
            "name": "Helper",
            "model": agent.model_id,
            "tools": ["no_such_tool"],
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


def _model_form(provider, **fields):
    return {
        "slug": "priced",
        "provider": provider.pk,
        "upstream_model": "gpt-x",
        "context_window": "",
        "input_price_per_million_usd": "1.25",
        "output_price_per_million_usd": "10",
        "script": "[]",
        **fields,
    }


def test_adding_and_editing_a_priced_model_in_the_admin_is_audited(root_client):
    # prices are Decimals: the audit row's JSON must take them (and the save must stand)
    provider = ProviderFactory()
    response = root_client.post(reverse("admin:agents_model_add"), _model_form(provider))
    assert response.status_code == 302, response.content.decode()[:2000]
    model = Model.objects.get(slug="priced")
    assert model.input_price_per_million_usd == Decimal("1.25")
    created = AuditEntry.objects.get(action="model.create")
    assert Decimal(created.after["input_price_per_million_usd"]) == Decimal("1.25")

    url = reverse("admin:agents_model_change", args=[model.pk])
    response = root_client.post(url, _model_form(provider, input_price_per_million_usd="2.5"))
    assert response.status_code == 302, response.content.decode()[:2000]
    model.refresh_from_db()
    assert model.input_price_per_million_usd == Decimal("2.5")
    updated = AuditEntry.objects.get(action="model.update")
    assert Decimal(updated.before["input_price_per_million_usd"]) == Decimal("1.25")
    assert Decimal(updated.after["input_price_per_million_usd"]) == Decimal("2.5")
    assert Decimal(updated.after["output_price_per_million_usd"]) == Decimal("10")


def test_editing_an_agent_with_delegates_in_the_admin_is_audited(root_client):
    helper = AgentFactory(slug="helper", tools=["calculator"])
    boss = AgentFactory(slug="boss", tools=["calculator"])
    boss.delegates.add(helper)
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[boss.pk]),
        {
            "slug": "boss",
            "name": "Boss",
            "description": "",
            "model": boss.model_id,
            "system_prompt": "Delegate.",
            "tools": ["calculator"],
            "permission": '{"default_behavior": "allow", "rules": []}',
            "delegates": [helper.pk],
            "max_rounds": 8,
            "stop_conditions": "[]",
            "ticket_default_action": "reject",
            "versions-TOTAL_FORMS": 0,
            "versions-INITIAL_FORMS": 0,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditEntry.objects.get(action="agent.update")
    assert entry.before["delegates"] == [helper.pk] and entry.after["delegates"] == [helper.pk]


def test_an_admin_save_keeps_a_long_request_id_cut_to_its_column(root_client):
    # a client's X-Request-ID longer than the audit column failed the save on PostgreSQL
    provider = ProviderFactory()
    response = root_client.post(
        reverse("admin:agents_model_add"),
        _model_form(provider, input_price_per_million_usd="", output_price_per_million_usd=""),
        HTTP_X_REQUEST_ID="r" * 200,
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Model.objects.filter(slug="priced").exists()
    assert AuditEntry.objects.get(action="model.create").request_id == "r" * 64
