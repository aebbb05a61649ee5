"""The permission rules editor (rows, validation, audited save) and its preview: which rule
decides a call, why, and what happens, against the draft and the published version."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from agents.models import Agent
from agents.services.agents import agent_spec
from agents.services.permissions import permission_preview
from common.models import AuditEntry
from runs.runtime.permissions import Behavior, PermissionPolicy, explain
from tests.factories import AgentFactory, user_with_role

RULES = {
    "default_behavior": "ask",
    "rules": [
        {"tool": "calculator", "behavior": "allow"},
        {"tool": "write_*", "behavior": "ask"},
        {"tool": "write_note", "behavior": "allow"},
        {"tool": 'Bash(command =~ "(?i)rm ")', "behavior": "deny"},
        {"tool": "Bash(npm *)", "behavior": "allow"},
        {"tool": 'Edit(file_path ~ "src/**")', "behavior": "allow"},
        {"tool": 'Edit(file_path ~ "src/secrets/*")', "behavior": "deny"},
        {"tool": "/mcp__(gh|gl)__.*/", "behavior": "ask"},
    ],
}


def policy(data: dict[str, Any] = RULES) -> PermissionPolicy:
    return PermissionPolicy.from_json(data)


# -- explain (pure) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "primary", "behavior", "position"),
    [
        ("calculator", {"expression": "1+1"}, "expression", "allow", 1),
        ("write_file", {}, None, "ask", 2),
        ("write_note", {}, None, "allow", 3),  # allow beats the ask glob
        ("Bash", {"command": "npm install"}, "command", "allow", 5),
        ("Bash", {"command": "npm test && RM -rf /"}, "command", "deny", 4),  # deny wins
        ("Bash", {"command": "ls"}, "command", "ask", None),  # default
        ("Edit", {"file_path": "src/a/b.py"}, None, "allow", 6),
        ("Edit", {"file_path": "src/secrets/key"}, None, "deny", 7),
        ("Edit", {"file_path": "lib/x.py"}, None, "ask", None),
        ("Edit", {}, None, "ask", None),
        ("mcp__gh__issues", {}, None, "ask", 8),
        ("mcp__bb__issues", {}, None, "ask", None),
    ],
)
def test_explain_names_the_deciding_rule_and_agrees_with_evaluate(
    tool, arguments, primary, behavior, position
):
    rules = policy()
    result = explain(rules, tool, arguments, primary)
    assert result.decision == rules.evaluate(tool, arguments, primary)
    assert (result.decision.behavior.value, result.position) == (behavior, position)
    assert len(result.checks) == len(RULES["rules"])
    assert [c.position for c in result.checks if c.matched] == [
        i + 1
        for i, rule in enumerate(rules.rules)
        if rule.pattern.matches(tool, arguments, primary)
    ]


def test_explain_says_why_deny_beats_allow():
    result = explain(policy(), "Bash", {"command": "npm run rm x"}, "command")
    assert result.decision.behavior is Behavior.DENY
    assert result.reason.startswith("2 rules match; deny beats allow beats ask, so deny wins")
    assert "rule 4" in result.reason


def test_explain_says_the_more_specific_rule_wins_and_ties_go_to_the_earlier_rule():
    data = {
        "rules": [
            {"tool": "Edit", "behavior": "allow"},
            {"tool": 'Edit(file_path ~ "src/**")', "behavior": "allow"},
            {"tool": "Ed*", "behavior": "allow"},
        ]
    }
    result = explain(policy(data), "Edit", {"file_path": "src/a"})
    assert result.position == 2
    assert "most specific wins (specificity 6: an exact tool name + a glob on argument" in (
        result.reason
    )
    tie = explain(
        policy({"rules": [{"tool": "w*", "behavior": "ask"}, {"tool": "wr*", "behavior": "ask"}]}),
        "write",
        {},
    )
    assert tie.position == 1 and "on a tie the earlier rule wins" in tie.reason


def test_explain_falls_back_to_the_default_behavior_and_explains_each_miss():
    result = explain(policy(), "Edit", {"file_path": "lib/x.py"})
    assert result.decision.rule is None and result.position is None
    assert result.reason == "No rule matches 'Edit': the default behavior (ask) applies."
    details = {c.position: c.detail for c in result.checks}
    assert details[1] == "tool name 'Edit' does not match"
    assert details[6] == "argument 'file_path' does not match"
    missing = explain(policy(), "Edit", {})
    assert {c.position: c.detail for c in missing.checks}[6] == "argument 'file_path' is missing"


# -- permission_preview (what a run would do) ----------------------------------------------


@pytest.mark.django_db
def test_preview_outcomes_for_allow_ask_deny_and_default():
    agent = AgentFactory(
        slug="p",
        tools=["calculator", "write_note", "http_get"],
        permission={
            "default_behavior": "deny",
            "rules": [
                {"tool": "calculator", "behavior": "allow"},
                {"tool": "write_note", "behavior": "ask"},
                {"tool": 'http_get(url ~ "https://internal.example/**")', "behavior": "deny"},
                {"tool": "http_get", "behavior": "allow"},
            ],
        },
        ticket_deadline_seconds=60,
    )
    spec = agent_spec(agent)
    allow = permission_preview(spec, "calculator", {"expression": "2*3"}, source="draft")
    assert (allow.outcome, allow.explanation.position) == ("runs", 1)
    ask = permission_preview(spec, "write_note", {"title": "t"}, source="draft")
    assert ask.outcome == "asks" and "perm_<call id>" in ask.summary
    assert "Undecided after 60 s, the system applies 'reject'" in ask.summary
    deny = permission_preview(
        spec, "http_get", {"url": "https://internal.example/a/b"}, source="draft"
    )
    assert (deny.outcome, deny.explanation.position) == ("blocked", 3)
    assert "denied by permission rules" in deny.summary and "run ends blocked" in deny.summary
    public = permission_preview(spec, "http_get", {"url": "https://example.com"}, source="d")
    assert (public.outcome, public.explanation.position) == ("runs", 4)
    default = permission_preview(spec, "current_time", {}, source="draft")
    assert default.outcome == "blocked" and default.explanation.position is None
    assert "not among this configuration's tools" in default.notes[0]


@pytest.mark.django_db
def test_preview_uses_the_tools_primary_argument_for_bare_argument_patterns():
    agent = AgentFactory(
        slug="p",
        tools=["http_get"],
        permission={"rules": [{"tool": "http_get(https://ok.example/*)", "behavior": "allow"}]},
    )
    spec = agent_spec(agent)
    hit = permission_preview(spec, "http_get", {"url": "https://ok.example/x"}, source="draft")
    miss = permission_preview(spec, "http_get", {"url": "https://no.example/x"}, source="draft")
    assert (hit.outcome, miss.outcome) == ("runs", "asks")


# -- the editor page -----------------------------------------------------------------------


def editor(agent: Agent) -> str:
    return reverse("admin:agents_agent_permissions", args=[agent.pk])


def rows_post(rows: list[dict[str, Any]], default: str = "ask", initial: int = 0) -> dict:
    data: dict[str, Any] = {
        "rules-TOTAL_FORMS": len(rows),
        "rules-INITIAL_FORMS": initial,
        "rules-MIN_NUM_FORMS": 0,
        "rules-MAX_NUM_FORMS": 1000,
        "default_behavior": default,
    }
    for index, row in enumerate(rows):
        for key, value in row.items():
            data[f"rules-{index}-{key}"] = value
    return data


@pytest.mark.django_db
def test_the_editor_shows_the_draft_rules_as_rows(root_client):
    agent = AgentFactory(slug="ed", permission=RULES)
    page = root_client.get(editor(agent)).content.decode()
    assert 'value="write_*"' in page and 'value="Bash(command =~ &quot;(?i)rm &quot;)"' in page
    assert page.count('name="rules-') >= len(RULES["rules"]) * 4
    assert "deny beats allow beats ask" in page


@pytest.mark.django_db
def test_saving_rows_adds_removes_and_reorders_into_the_draft_and_is_audited(root_client):
    agent = AgentFactory(
        slug="ed",
        permission={
            "default_behavior": "allow",
            "rules": [
                {"tool": "calculator", "behavior": "allow"},
                {"tool": "write_note", "behavior": "ask", "scope": "session"},
                {"tool": "http_get", "behavior": "deny"},
            ],
        },
    )
    data = rows_post(
        [
            {"tool": "calculator", "behavior": "allow", "ORDER": 3},
            {"tool": "write_note", "behavior": "ask", "scope": "session", "ORDER": 1},
            {"tool": "http_get", "behavior": "deny", "ORDER": 2, "DELETE": "on"},
            {"tool": 'Edit(file_path ~ "src/**")', "behavior": "deny", "ORDER": 2},
            {"tool": "", "behavior": "", "ORDER": ""},  # a blank extra row
        ],
        default="deny",
        initial=3,
    )
    response = root_client.post(editor(agent), data)
    assert response.status_code == 302, response.content.decode()[-3000:]
    agent.refresh_from_db()
    assert agent.permission == {
        "default_behavior": "deny",
        "rules": [
            {"tool": "write_note", "behavior": "ask", "scope": "session"},
            {"tool": 'Edit(file_path ~ "src/**")', "behavior": "deny"},
            {"tool": "calculator", "behavior": "allow"},
        ],
    }
    entry = AuditEntry.objects.get(action="agent.permission_update")
    assert entry.before["default_behavior"] == "allow" and entry.after == agent.permission
    assert agent.versions.count() == 1  # saved into the draft only
    assert agent.versions.get().spec["permission"]["default_behavior"] == "allow"


@pytest.mark.django_db
def test_a_bad_pattern_gets_a_message_on_its_row_and_nothing_is_saved(root_client):
    agent = AgentFactory(slug="ed")
    before = dict(agent.permission)
    data = rows_post(
        [
            {"tool": "calculator", "behavior": "allow", "ORDER": 1},
            {"tool": 'Bash(command =~ "(")', "behavior": "deny", "ORDER": 2},
            {"tool": "write_note", "behavior": "", "ORDER": 3},
        ]
    )
    response = root_client.post(editor(agent), data)
    assert response.status_code == 200
    formset = response.context["formset"]
    assert formset.forms[0].errors == {}
    assert "invalid regex" in formset.forms[1].errors["tool"][0]
    assert "fix the pattern" in formset.forms[1].errors["tool"][0]
    assert "behavior" in formset.forms[2].errors
    page = response.content.decode()
    assert "invalid regex" in page and "nothing was saved" in page
    agent.refresh_from_db()
    assert agent.permission == before
    assert not AuditEntry.objects.exists()


@pytest.mark.django_db
def test_viewers_see_the_editor_but_cannot_save(client):
    agent = AgentFactory(slug="ed")
    viewer = user_with_role("viewer")
    viewer.is_staff = True
    viewer.save()
    client.force_login(viewer)
    page = client.get(editor(agent)).content.decode()
    assert "Save rules into the draft" not in page
    data = rows_post([{"tool": "x", "behavior": "deny", "ORDER": 1}])
    assert client.post(editor(agent), data).status_code == 403
    assert Agent.objects.get(pk=agent.pk).permission == agent.permission


@pytest.mark.django_db
def test_the_preview_compares_the_draft_with_the_published_version(root_client):
    agent = AgentFactory(slug="ed", permission={"default_behavior": "allow", "rules": []})
    Agent.objects.filter(pk=agent.pk).update(
        permission={
            "default_behavior": "allow",
            "rules": [{"tool": "http_get(http://10.*)", "behavior": "deny"}],
        }
    )
    response = root_client.get(
        editor(agent), {"tool": "http_get", "arguments": '{"url": "http://10.0.0.1/<x>"}'}
    )
    page = response.content.decode()
    draft, published = response.context["previews"]
    assert (draft.source, draft.outcome, draft.explanation.position) == ("draft", "blocked", 1)
    assert (published.source, published.outcome, published.explanation.position) == (
        "v1",
        "runs",
        None,
    )
    assert 'id="preview-draft"' in page and 'id="preview-v1"' in page
    assert "Only rule 1 (http_get(http://10.*) → deny) matches." in page
    assert "No rule matches &#x27;http_get&#x27;: the default behavior (allow) applies." in page
    assert "&lt;x&gt;" in page and "<x>" not in page


@pytest.mark.django_db
def test_the_preview_refuses_arguments_that_are_not_a_json_object(root_client):
    agent = AgentFactory(slug="ed")
    for raw in ("{oops", "[1, 2]"):
        response = root_client.get(editor(agent), {"tool": "calculator", "arguments": raw})
        assert response.context["previews"] == []
        assert "Arguments must be a JSON object" in response.content.decode()


@pytest.mark.django_db
def test_the_preview_escapes_what_it_echoes(root_client):
    agent = AgentFactory(slug="ed")
    page = root_client.get(editor(agent), {"tool": "<script>x</script>", "arguments": "{}"})
    text = page.content.decode()
    assert "<script>x</script>" not in text and "&lt;script&gt;x&lt;/script&gt;" in text
