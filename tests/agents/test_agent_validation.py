"""Every invalid agent configuration is refused with a message saying what to fix: by the
service, by the admin's form and by the Validate page."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from agents.models import Agent, RemoteEndpoint
from agents.services.agents import agent_publish_errors, agent_validate, delegation_cycle
from common.models import AuditEntry
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db

NO_MODEL = "Choose a model (a local agent) or a remote endpoint (a remote agent)"
BOTH = "not both: clear one of them"
BAD_REGEX = 'Bash(command =~ "(")'


def endpoint(base_url: str = "https://agents.example.com/a2a") -> RemoteEndpoint:
    return RemoteEndpoint.objects.create(slug="remote", name="Remote", base_url=base_url)


def form_data(agent: Agent, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": agent.slug,
        "name": agent.name,
        "description": "",
        "model": agent.model_id or "",
        "endpoint": "",
        "system_prompt": "Be brief.",
        "tools": ["calculator"],
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_deadline_seconds": "",
        "ticket_default_action": "reject",
        "delegates": [],
    }
    data.update(changes)
    return data


def cycle_pair() -> tuple[Agent, Agent]:
    a = AgentFactory(slug="a")
    b = AgentFactory(slug="b")
    b.delegates.add(a)
    return a, b


# (case id, form changes, ORM changes for the Validate page, field, message fragment)
CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    ("no_model_no_endpoint", {"model": ""}, {"model": None}, "model", NO_MODEL),
    ("unknown_tool", {"tools": ["nope"]}, {"tools": ["nope"]}, "tools", "Unknown tools: nope"),
    (
        "bad_pattern",
        {"permission": '{"rules": [{"tool": "Bash(command =~ \\"(\\")", "behavior": "deny"}]}'},
        {"permission": {"rules": [{"tool": BAD_REGEX, "behavior": "deny"}]}},
        "permission",
        "invalid regex",
    ),
    (
        "bad_behavior",
        {"permission": '{"rules": [{"tool": "x", "behavior": "maybe"}]}'},
        {"permission": {"rules": [{"tool": "x", "behavior": "maybe"}]}},
        "permission",
        "behavior must be allow, ask or deny",
    ),
    (
        "bad_stop_condition",
        {"stop_conditions": '[{"type": "bogus"}]'},
        {"stop_conditions": [{"type": "bogus"}]},
        "stop_conditions",
        "unknown stop condition 'bogus'",
    ),
    (
        "negative_timeout",
        {"stop_conditions": '[{"type": "timeout", "seconds": -5}]'},
        {"stop_conditions": [{"type": "timeout", "seconds": -5}]},
        "stop_conditions",
        "must not be negative",
    ),
    (
        "deadline_zero",
        {"ticket_deadline_seconds": 0},
        {"ticket_deadline_seconds": 0},
        "ticket_deadline_seconds",
        "at least 1 second",
    ),
    (
        "too_many_rounds",
        {"max_rounds": 5000},
        {"max_rounds": 5000},
        "max_rounds",
        "between 1 and 1000 (0 disables the limit)",
    ),
]


@pytest.mark.parametrize(
    ("case", "form", "orm", "field", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_the_admin_form_refuses_each_invalid_config_with_its_message(
    root_client, case, form, orm, field, message
):
    agent = AgentFactory(slug="subject")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), form_data(agent, **form)
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors.get(field, [])), errors
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("case", "form", "orm", "field", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_the_validate_page_lists_each_invalid_config_with_its_message(
    root_client, case, form, orm, field, message
):
    agent = AgentFactory(slug="subject")
    Agent.objects.filter(pk=agent.pk).update(**orm)
    page = root_client.get(reverse("admin:agents_agent_validate", args=[agent.pk])).content.decode()
    assert "Valid — ready to publish" not in page
    assert f"<dt>{field}</dt>" in page
    assert message.replace("'", "&#x27;") in page


def test_a_valid_draft_is_reported_ready_to_publish(root_client):
    agent = AgentFactory(slug="good", published=False)
    page = root_client.get(reverse("admin:agents_agent_validate", args=[agent.pk])).content.decode()
    assert "Valid — ready to publish." in page and 'id="validation-errors"' not in page


def test_the_form_accepts_a_valid_config_and_saves_only_the_draft(root_client):
    agent = AgentFactory(slug="subject")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), form_data(agent)
    )
    assert response.status_code == 302
    assert Agent.objects.get(pk=agent.pk).system_prompt == "Be brief."
    assert agent.versions.count() == 1  # saving never publishes


def test_both_model_and_endpoint_are_refused(root_client):
    agent = AgentFactory(slug="subject")
    remote = endpoint()
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]),
        form_data(agent, endpoint=remote.pk),
    )
    assert BOTH in " ".join(response.context["adminform"].form.errors["endpoint"])
    Agent.objects.filter(pk=agent.pk).update(endpoint=remote)
    page = root_client.get(reverse("admin:agents_agent_validate", args=[agent.pk])).content.decode()
    assert BOTH in page


def test_a_remote_agent_needs_a_usable_endpoint():
    agent = AgentFactory(slug="far", published=False, model=None, endpoint=endpoint())
    assert agent_validate(agent) == {}
    broken = RemoteEndpoint.objects.create(slug="broken", name="Broken", base_url="")
    agent.endpoint = broken
    message = agent_validate(agent)["endpoint"]
    assert message.startswith("Endpoint 'broken' is not usable:")
    assert "Remote endpoints" in message


def test_a_delegation_cycle_is_refused_naming_the_cycle(root_client):
    a, b = cycle_pair()
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[a.pk]), form_data(a, delegates=[b.pk])
    )
    errors = " ".join(response.context["adminform"].form.errors["delegates"])
    assert "Delegation cycle a → b → a" in errors
    assert not a.delegates.exists()
    a.delegates.add(b)
    page = root_client.get(reverse("admin:agents_agent_validate", args=[a.pk])).content.decode()
    assert "Delegation cycle a → b → a" in page


def test_self_delegation_and_longer_cycles_are_named():
    a, b = cycle_pair()
    assert delegation_cycle(a, [a]) == ["a", "a"]
    c = AgentFactory(slug="c")
    c.delegates.add(b)
    assert delegation_cycle(a, [c]) == ["a", "c", "b", "a"]
    assert delegation_cycle(c, [b]) is None  # b → a, a delegates to nobody yet


def test_a_missing_delegate_is_refused(root_client):
    agent = AgentFactory(slug="subject")
    gone = AgentFactory(slug="gone")
    gone_pk = gone.pk
    gone.delete()
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]),
        form_data(agent, delegates=[gone_pk]),
    )
    assert f"{gone_pk} is not one of the available choices" in " ".join(
        response.context["adminform"].form.errors["delegates"]
    )
    ghost = Agent(pk=gone_pk, slug="gone")
    message = agent_validate(agent, delegates=[ghost])["delegates"]
    assert message == "Delegates no longer exist: gone; remove them from the list."


def test_an_unpublished_delegate_blocks_publishing_but_not_saving(root_client):
    helper = AgentFactory(slug="helper", published=False)
    boss = AgentFactory(slug="boss")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[boss.pk]),
        form_data(boss, delegates=[helper.pk]),
    )
    assert response.status_code == 302
    assert "publish them first" in agent_publish_errors(boss)["delegates"]
    page = root_client.get(reverse("admin:agents_agent_validate", args=[boss.pk])).content.decode()
    assert "Delegates with no published version: helper" in page


def test_the_add_form_validates_too(root_client):
    agent = AgentFactory(slug="template")
    data = form_data(agent, slug="brand-new", name="New", model="", tools=["nope"])
    response = root_client.post(reverse("admin:agents_agent_add"), data)
    errors = response.context["adminform"].form.errors
    assert NO_MODEL in " ".join(errors["model"]) and "Unknown tools: nope" in " ".join(
        errors["tools"]
    )
    assert not Agent.objects.filter(slug="brand-new").exists()
