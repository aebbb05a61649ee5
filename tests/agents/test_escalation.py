"""Escalation settings of agents and permission rules: validated with messages that say
what to fix, kept through parsing and publishing, edited in the admin, and explained by
the rules preview."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from agents.models import Agent
from agents.services.agents import (
    agent_draft_status,
    agent_publish,
    agent_restore,
    agent_spec,
    agent_validate,
)
from agents.services.permissions import (
    permission_message,
    permission_preview,
    permission_rule_errors,
    ticket_escalation,
)
from common.audit import SYSTEM
from runs.runtime.permissions import Escalation, PermissionPolicy, PermissionRule
from tests.factories import AgentFactory

ESCALATING_RULE: dict[str, Any] = {
    "tool": "send_email",
    "behavior": "ask",
    "deadline_seconds": 600,
    "default_action": "respond",
    "default_response": {"sent": False, "why": "nobody approved in time"},
    "warning_seconds": 120,
}


def too_deep() -> Any:
    value: Any = "x"
    for _ in range(150):
        value = [value]
    return value


# -- rules: parsing and validation ---------------------------------------------------------


def test_a_rules_escalation_survives_json_round_trips():
    policy = PermissionPolicy.from_json(
        {"default_behavior": "allow", "rules": [ESCALATING_RULE, {"tool": "x", "behavior": "ask"}]}
    )
    rule = policy.rules[0]
    assert rule.escalation == Escalation(
        600, "respond", {"sent": False, "why": "nobody approved in time"}, 120
    )
    assert policy.rules[1].escalation is None
    data = policy.to_json()
    assert data["rules"][0] == {**ESCALATING_RULE, "scope": "project"}
    assert data["rules"][1] == {"tool": "x", "behavior": "ask", "scope": "project"}
    assert PermissionPolicy.from_json(data) == policy


def test_a_deadline_alone_means_reject_without_warning():
    rule = PermissionRule.from_json({"tool": "x", "behavior": "ask", "deadline_seconds": 30})
    assert rule.escalation == Escalation(30, "reject", None, None)
    nulls = {"tool": "x", "behavior": "ask", "deadline_seconds": None, "warning_seconds": None}
    assert PermissionRule.from_json(nulls).escalation is None  # null keys count as absent


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            {"tool": "x", "behavior": "allow", "deadline_seconds": 60},
            "rule 'x': deadline_seconds, default_action, default_response and warning_seconds "
            "apply only to ask rules (this one is allow).",
        ),
        (
            {"tool": "x", "behavior": "ask", "deadline_seconds": 0},
            "rule 'x': deadline_seconds must be between 1 and 2592000 (30 days), got 0.",
        ),
        (
            {"tool": "x", "behavior": "ask", "deadline_seconds": "60"},
            "rule 'x': deadline_seconds must be a whole number of seconds, got '60'.",
        ),
        (
            {"tool": "x", "behavior": "ask", "deadline_seconds": 60, "default_action": "edit"},
            "rule 'x': default_action must be reject, approve or respond, got 'edit'.",
        ),
        (
            {"tool": "x", "behavior": "ask", "deadline_seconds": 60, "default_action": "respond"},
            "rule 'x': default_action respond needs a default_response (the answer the tool "
            "call gets).",
        ),
        (
            {"tool": "x", "behavior": "ask", "deadline_seconds": 60, "warning_seconds": 60},
            "rule 'x': warning_seconds (60) must be less than deadline_seconds (60): the "
            "warning goes out that long before the deadline.",
        ),
        (
            {"tool": "x", "behavior": "ask", "warning_seconds": 10},
            "rule 'x': default_action, default_response and warning_seconds need "
            "deadline_seconds (how long a ticket waits before the default action).",
        ),
        (
            {
                "tool": "x",
                "behavior": "ask",
                "deadline_seconds": 60,
                "default_action": "respond",
                "default_response": too_deep(),
            },
            "rule 'x': default_response is nested too deeply",
        ),
    ],
    ids=[
        "not_ask",
        "zero",
        "text",
        "bad_action",
        "respond_without_answer",
        "warning_not_before",
        "warning_without_deadline",
        "answer_too_deep",
    ],
)
def test_each_invalid_rule_escalation_is_reported_on_its_rule_in_plain_words(rule, message):
    general, errors = permission_rule_errors({"rules": [{"tool": "ok", "behavior": "allow"}, rule]})
    assert general is None and set(errors) == {1}
    assert errors[1].startswith(message)
    assert "patterns look like" not in errors[1]  # the pattern is fine: no pattern help
    assert permission_message({"rules": [rule]}).startswith(f"Rule 1: {message}")


def test_a_bad_pattern_still_gets_the_pattern_help():
    _, errors = permission_rule_errors(
        {"rules": [{"tool": "Bash(", "behavior": "ask", "deadline_seconds": 0}]}
    )
    assert "patterns look like" in errors[0]


# -- agents: validation, spec, publish, restore --------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"ticket_deadline_seconds": 60, "ticket_default_action": "respond"},
            "ticket_default_response",
            "The default action respond needs a default response",
        ),
        (
            {"ticket_deadline_seconds": 60, "ticket_default_action": "later"},
            "ticket_default_action",
            "must be reject, approve or respond",
        ),
        (
            {"ticket_deadline_seconds": 60, "ticket_warning_seconds": 60},
            "ticket_warning_seconds",
            "at least 1 and less than the deadline (60 s)",
        ),
        (
            {"ticket_warning_seconds": 30},
            "ticket_warning_seconds",
            "A warning needs a ticket deadline",
        ),
        (
            {"ticket_deadline_seconds": 31 * 24 * 3600},
            "ticket_deadline_seconds",
            "at most 2592000 (30 days)",
        ),
        (
            {"ticket_default_action": "respond", "ticket_default_response": too_deep()},
            "ticket_default_response",
            "The default response is nested too deeply",
        ),
        (
            {
                "permission": {
                    "default_behavior": "allow",
                    "rules": [{"tool": "x", "behavior": "ask", "deadline_seconds": -1}],
                }
            },
            "permission",
            "Rule 1: rule 'x': deadline_seconds must be between 1 and 2592000",
        ),
    ],
    ids=[
        "respond_no_answer",
        "bad_action",
        "warning_too_late",
        "warning_no_deadline",
        "deadline_too_long",
        "answer_too_deep",
        "rule",
    ],
)
def test_agent_validation_says_what_to_fix_in_the_escalation(changes, field, message):
    agent = AgentFactory(published=False)
    for name, value in changes.items():
        setattr(agent, name, value)
    errors = agent_validate(agent)
    assert message in errors.get(field, ""), errors


@pytest.mark.django_db
def test_a_valid_escalation_validates():
    agent = AgentFactory(
        published=False,
        ticket_deadline_seconds=600,
        ticket_default_action="respond",
        ticket_default_response="",  # an empty text is an answer too
        ticket_warning_seconds=599,
        permission={"default_behavior": "allow", "rules": [ESCALATING_RULE]},
    )
    assert agent_validate(agent) == {}


@pytest.mark.django_db
def test_publish_freezes_the_escalation_and_restore_brings_it_back():
    agent = AgentFactory(
        published=False,
        tools=["send_email"],
        ticket_deadline_seconds=900,
        ticket_default_action="respond",
        ticket_default_response={"answer": "later"},
        ticket_warning_seconds=300,
        permission={"default_behavior": "allow", "rules": [ESCALATING_RULE]},
    )
    version = agent_publish(agent=agent, actor=SYSTEM)
    spec = version.spec
    assert spec["ticket_default_response"] == {"answer": "later"}
    assert spec["ticket_warning_seconds"] == 300
    assert spec["permission"]["rules"] == [ESCALATING_RULE]  # stored as written
    rule = PermissionPolicy.from_json(spec["permission"]).rules[0]
    assert rule.escalation == PermissionRule.from_json(ESCALATING_RULE).escalation
    assert agent_draft_status(agent).state == "matches"

    Agent.objects.filter(pk=agent.pk).update(
        ticket_default_action="reject",
        ticket_default_response=None,
        ticket_warning_seconds=None,
        permission={"default_behavior": "allow", "rules": []},
    )
    restored = agent_restore(version=version, actor=SYSTEM)
    assert (restored.ticket_default_response, restored.ticket_warning_seconds) == (
        {"answer": "later"},
        300,
    )
    assert restored.permission["rules"] == [ESCALATING_RULE]
    assert agent_spec(restored) == spec


@pytest.mark.django_db
def test_a_version_published_before_these_settings_still_matches_its_draft():
    agent = AgentFactory()
    version = agent.versions.get()
    old = {
        key: value
        for key, value in version.spec.items()
        if key not in ("ticket_default_response", "ticket_warning_seconds")
    }
    type(version).objects.filter(pk=version.pk).update(spec=old)
    assert agent_draft_status(agent).state == "matches"


# -- which escalation a ticket gets ----------------------------------------------------------


SPEC: dict[str, Any] = {
    "tools": ["send_email", "write_note"],
    "delegates": [],
    "permission": {
        "default_behavior": "ask",
        "rules": [ESCALATING_RULE, {"tool": "write_note", "behavior": "ask"}],
    },
    "ticket_deadline_seconds": 3600,
    "ticket_default_action": "approve",
    "ticket_default_response": None,
    "ticket_warning_seconds": 60,
}
MAIL = {"to": ["a@example.com"], "subject": "s", "body": "b"}


def test_the_asking_rule_decides_a_permission_tickets_escalation():
    rule = PermissionRule.from_json(ESCALATING_RULE).escalation
    assert ticket_escalation(SPEC, "send_email", MAIL, permission_ticket=True) == rule
    agents = Escalation(3600, "approve", None, 60)
    assert ticket_escalation(SPEC, "write_note", {"title": "t"}, permission_ticket=True) == agents
    assert ticket_escalation(SPEC, "calculator", {}, permission_ticket=True) == agents
    # a ticket the tool itself opened (ask_human) is the agent's
    assert ticket_escalation(SPEC, "send_email", MAIL, permission_ticket=False) == agents
    no_deadline = {**SPEC, "ticket_deadline_seconds": None}
    assert ticket_escalation(no_deadline, "write_note", {}, permission_ticket=True) is None
    assert ticket_escalation(no_deadline, "send_email", MAIL, permission_ticket=True) == rule


def test_the_preview_tells_whose_escalation_applies():
    rule = permission_preview(SPEC, "send_email", MAIL, source="draft")
    assert rule.outcome == "asks"
    assert (
        "Undecided after 600 s, the system applies 'respond' with the answer "
        '{"sent": false, "why": "nobody approved in time"} (set by this rule). '
        "Operators are warned 120 s before."
    ) in rule.summary
    agents = permission_preview(SPEC, "write_note", {"title": "t"}, source="draft")
    assert "Undecided after 3600 s, the system applies 'approve' (set on the agent)." in (
        agents.summary
    )


# -- the admin: the agent form and the rules editor ----------------------------------------


def agent_form(agent: Agent, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": agent.slug,
        "name": agent.name,
        "description": "",
        "model": agent.model_id,
        "endpoint": "",
        "system_prompt": "Be brief.",
        "tools": ["calculator"],
        "permission": '{"default_behavior": "allow", "rules": []}',
        "max_rounds": 8,
        "stop_conditions": "[]",
        "ticket_deadline_seconds": "600",
        "ticket_default_action": "respond",
        "ticket_default_response": '"not now"',
        "ticket_warning_seconds": "60",
    }
    data.update(changes)
    return data


@pytest.mark.django_db
def test_the_agent_form_saves_the_warning_and_the_answer(root_client):
    agent = AgentFactory(slug="desk")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), agent_form(agent)
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert (agent.ticket_default_action, agent.ticket_default_response) == ("respond", "not now")
    assert agent.ticket_warning_seconds == 60
    page = root_client.get(reverse("admin:agents_agent_change", args=[agent.pk])).content.decode()
    assert 'name="ticket_warning_seconds"' in page and 'name="ticket_default_response"' in page
    assert "&quot;not now&quot;</textarea>" in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"ticket_default_response": ""},
            "ticket_default_response",
            "The default action respond needs a default response",
        ),
        (
            {"ticket_default_response": "not now"},
            "ticket_default_response",
            'Enter the answer as JSON: a quoted text like "not now"',
        ),
        (
            {"ticket_warning_seconds": "600"},
            "ticket_warning_seconds",
            "less than the deadline (600 s)",
        ),
        (
            {"ticket_deadline_seconds": ""},
            "ticket_warning_seconds",
            "A warning needs a ticket deadline",
        ),
    ],
    ids=["no_answer", "not_json", "warning_too_late", "no_deadline"],
)
def test_the_agent_form_refuses_a_bad_escalation_on_its_field(root_client, changes, field, message):
    agent = AgentFactory(slug="desk")
    response = root_client.post(
        reverse("admin:agents_agent_change", args=[agent.pk]), agent_form(agent, **changes)
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors.get(field, [])), errors
    agent.refresh_from_db()
    assert agent.ticket_warning_seconds is None  # nothing saved


def rules_post(rows: list[dict[str, str]]) -> dict[str, str]:
    data = {
        "rules-TOTAL_FORMS": str(len(rows)),
        "rules-INITIAL_FORMS": "0",
        "rules-MIN_NUM_FORMS": "0",
        "rules-MAX_NUM_FORMS": "1000",
        "default_behavior": "allow",
    }
    for index, row in enumerate(rows):
        data.update({f"rules-{index}-{key}": value for key, value in row.items()})
        data.setdefault(f"rules-{index}-ORDER", str(index + 1))
    return data


@pytest.mark.django_db
def test_the_rules_editor_saves_and_shows_a_rules_escalation(root_client):
    agent = AgentFactory(slug="mailer", tools=["send_email"])
    url = reverse("admin:agents_agent_permissions", args=[agent.pk])
    row = {
        "tool": "send_email",
        "behavior": "ask",
        "deadline_seconds": "600",
        "default_action": "respond",
        "default_response": '{"sent": false, "why": "nobody approved in time"}',
        "warning_seconds": "120",
    }
    response = root_client.post(url, rules_post([row, {"tool": "calculator", "behavior": "allow"}]))
    assert response.status_code == 302, response.content.decode()[:3000]
    agent.refresh_from_db()
    assert agent.permission["rules"] == [
        ESCALATING_RULE,
        {"tool": "calculator", "behavior": "allow"},
    ]
    page = root_client.get(url).content.decode()
    assert 'name="rules-0-deadline_seconds" value="600"' in page
    assert 'name="rules-0-warning_seconds" value="120"' in page
    assert "nobody approved in time" in page
    # saving the rows again unchanged keeps the escalation
    response = root_client.post(url, rules_post([row, {"tool": "calculator", "behavior": "allow"}]))
    agent.refresh_from_db()
    assert agent.permission["rules"][0] == ESCALATING_RULE


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {
                "tool": "send_email",
                "behavior": "ask",
                "deadline_seconds": "60",
                "default_action": "respond",
            },
            "default_action respond needs a default_response",
        ),
        (
            {"tool": "send_email", "behavior": "allow", "deadline_seconds": "60"},
            "apply only to ask rules (this one is allow)",
        ),
        (
            {
                "tool": "send_email",
                "behavior": "ask",
                "deadline_seconds": "60",
                "warning_seconds": "90",
            },
            "warning_seconds (90) must be less than deadline_seconds (60)",
        ),
    ],
    ids=["respond_without_answer", "not_ask", "warning_too_late"],
)
def test_the_rules_editor_refuses_a_bad_escalation_on_its_row(root_client, row, message):
    agent = AgentFactory(slug="mailer", tools=["send_email"])
    url = reverse("admin:agents_agent_permissions", args=[agent.pk])
    response = root_client.post(url, rules_post([row]))
    assert response.status_code == 200
    page = response.content.decode()
    assert "nothing was saved" in page
    assert message in page.replace("&#x27;", "'")
    agent.refresh_from_db()
    assert agent.permission == {"default_behavior": "allow", "rules": []}
