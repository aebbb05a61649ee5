"""Rules from decisions (agents/services/rules_from_decisions.py): patterns proposed from a
call (escaped in the pattern syntax, each matching exactly that call), the preview of the
draft with the rule, and saving it into the draft (validated, audited, versions untouched)."""

from __future__ import annotations

from typing import Any

import pytest

from agents.errors import AgentConfigInvalid
from agents.models import Agent, AgentVersion
from agents.services.rules_from_decisions import (
    AUDIT_ACTION,
    MAX_VALUE_CHARS,
    argument_pattern,
    rule_add_to_draft,
    rule_preview,
    rule_proposal,
    tool_name_pattern,
)
from common.audit import Actor
from common.errors import InvalidInput
from common.models import AuditEntry
from runs.runtime.permissions import Behavior, PermissionPolicy, PermissionRule, ToolPattern
from tests.factories import APPROVAL, AgentFactory

pytestmark = pytest.mark.django_db

ACTOR = Actor(label="admin-test", source="ui")


def agent(permission: dict[str, Any] = APPROVAL, **kwargs: Any) -> Agent:
    return AgentFactory(permission=permission, **kwargs)


def matches(pattern: str, tool: str, arguments: dict[str, Any]) -> bool:
    return ToolPattern.parse(pattern).matches(tool, arguments, None, every=True)


# -- patterns ------------------------------------------------------------------------------


def test_write_note_proposes_the_title_first_then_the_body_then_any_call():
    proposal = rule_proposal(agent(), "write_note", {"body": "b", "title": "lunch"}, "allow")
    assert [o.pattern for o in proposal.options] == [
        'write_note(title ~ "lunch")',
        'write_note(body ~ "b")',
        "write_note",
    ]
    assert proposal.pattern == 'write_note(title ~ "lunch")'
    assert proposal.options[-1].label == "any call of write_note"
    assert proposal.rule() == {"tool": 'write_note(title ~ "lunch")', "behavior": "allow"}
    assert proposal.behavior is Behavior.ALLOW and proposal.skipped == {}


@pytest.mark.parametrize(
    "value",
    [
        "lunch",
        "with spaces and (parens), [brackets] & ~tilde",
        'say "hi"',
        "back\\slash",
        "ends with a backslash\\",
        '\\"',
        "glob * and ? chars",
        "line one\nline two\ttab",
        "ünïcödé — “quotes” 🎉",
        "\u2028separator\x7f",
        "",
        "<script>alert(1)</script>",
    ],
)
def test_a_string_argument_pattern_matches_exactly_that_value(value):
    pattern = argument_pattern("write_note", "title", value)
    assert pattern is not None
    assert "\n" not in pattern and "\t" not in pattern
    PermissionRule.from_json({"tool": pattern, "behavior": "allow"})  # parses
    assert matches(pattern, "write_note", {"title": value})
    assert not matches(pattern, "write_note", {"title": value + "x"})
    assert not matches(pattern, "write_note", {"title": "x" + value})
    assert not matches(pattern, "write_note", {"body": value})
    assert not matches(pattern, "other_tool", {"title": value})


def test_plain_values_are_globs_and_special_ones_anchored_regexes():
    assert argument_pattern("write_note", "title", "a b") == 'write_note(title ~ "a b")'
    assert argument_pattern("write_note", "title", 'a"b*') == (
        'write_note(title =~ "\\Aa\\x22b\\*\\Z")'
    )
    assert argument_pattern("Bash", "command", "rm -rf /") == 'Bash(command ~ "rm -rf /")'


@pytest.mark.parametrize(("value", "other"), [(3, 4), (2.5, 2.6), (True, False), (0, 1), (-7, 7)])
def test_numbers_and_booleans_match_as_their_text(value, other):
    pattern = argument_pattern("calculator", "n", value)
    assert pattern is not None
    assert matches(pattern, "calculator", {"n": value})
    assert not matches(pattern, "calculator", {"n": other})


def test_lists_objects_nulls_long_texts_and_odd_names_get_no_pattern():
    arguments = {
        "to": ["a@example.com"],
        "meta": {"k": "v"},
        "cc": None,
        "body": "x" * (MAX_VALUE_CHARS + 1),
        "file-name": "a",
        "a.b": "dotted",
        "subject": "hello",
    }
    proposal = rule_proposal(agent(), "send_email", arguments, "deny")
    assert [o.pattern for o in proposal.options] == ['send_email(subject ~ "hello")', "send_email"]
    assert set(proposal.skipped) == {"to", "meta", "cc", "body", "file-name", "a.b"}
    assert "longer than" in proposal.skipped["body"]


def test_no_arguments_or_odd_tool_names_still_give_any_call_of_the_tool():
    assert [o.pattern for o in rule_proposal(agent(), "clock", None, "ask").options] == ["clock"]
    assert tool_name_pattern("mcp__gh__issues") == "mcp__gh__issues"
    odd = tool_name_pattern("we*ird?[x]")
    assert matches(odd, "we*ird?[x]", {}) and not matches(odd, "weXirdY[x]", {})
    spaced = tool_name_pattern("has space(1)")
    assert spaced.startswith("/") and matches(spaced, "has space(1)", {})
    assert argument_pattern("has space(1)", "a", "v") is None


def test_an_unknown_behavior_is_refused():
    with pytest.raises(InvalidInput, match="allow, ask or deny"):
        rule_proposal(agent(), "write_note", {}, "sometimes")


# -- preview -------------------------------------------------------------------------------


def test_preview_says_the_new_allow_rule_decides_where_the_draft_asked():
    draft = agent()
    arguments = {"title": "lunch", "body": "b"}
    rule = {"tool": 'write_note(title ~ "lunch")', "behavior": "allow"}
    preview = rule_preview(draft, rule, "write_note", arguments)
    assert preview.current.outcome == "asks"
    assert preview.after is not None and preview.after.outcome == "runs"
    assert preview.position == 2 and preview.decides and not preview.already
    assert preview.verdict.startswith("The new rule decides this call. Runs")
    assert [c.matched for c in preview.after.explanation.checks] == [True, True]
    # another title still asks: the rule matches only this call
    other = rule_preview(draft, rule, "write_note", {"title": "dinner", "body": "b"})
    assert other.after.outcome == "asks" and not other.decides
    assert other.verdict.startswith("The new rule does not match this call.")


def test_preview_says_when_a_matching_rule_is_outranked():
    draft = agent(
        {"default_behavior": "ask", "rules": [{"tool": "write_note", "behavior": "deny"}]}
    )
    preview = rule_preview(
        draft, {"tool": "write_note", "behavior": "allow"}, "write_note", {"title": "x"}
    )
    assert preview.after.outcome == "blocked" and not preview.decides
    assert "matches but does not decide" in preview.verdict
    assert "deny wins" in preview.verdict


def test_preview_of_an_invalid_pattern_says_what_to_fix():
    preview = rule_preview(agent(), {"tool": "write_note(", "behavior": "allow"}, "write_note", {})
    assert preview.after is None and preview.error
    assert preview.verdict.startswith("Not a valid rule:")
    assert preview.current.outcome == "asks"


def test_preview_of_a_rule_the_draft_has_shows_it_once():
    preview = rule_preview(agent(), {"tool": " write_note ", "behavior": "ask"}, "write_note", {})
    assert preview.already and preview.position == 1 and preview.decides
    assert len(preview.after.explanation.checks) == 1


# -- saving into the draft -----------------------------------------------------------------


def test_adding_to_the_draft_validates_audits_and_leaves_versions_alone():
    draft = agent()
    published = AgentVersion.objects.get(agent=draft)
    spec_before = dict(published.spec)
    rule = {"tool": 'write_note(title ~ "lunch")', "behavior": "allow"}
    saved = rule_add_to_draft(draft, rule, ACTOR, ticket_id="t-1")
    assert saved.added and saved.position == 2 and saved.status.state == "changed"
    draft.refresh_from_db()
    assert draft.permission == {
        "default_behavior": "allow",
        "rules": [{"tool": "write_note", "behavior": "ask"}, rule],
    }
    PermissionPolicy.from_json(draft.permission)
    published.refresh_from_db()
    assert published.spec == spec_before
    assert AgentVersion.objects.filter(agent=draft).count() == 1
    entry = AuditEntry.objects.get(action=AUDIT_ACTION)
    assert entry.target_id == str(draft.pk) and entry.actor_label == "admin-test"
    assert entry.before == APPROVAL and entry.after == draft.permission
    assert "t-1" in entry.comment and "write_note" in entry.comment

    again = rule_add_to_draft(draft, rule, ACTOR)
    assert not again.added and again.position == 2
    assert AuditEntry.objects.filter(action=AUDIT_ACTION).count() == 1


def test_an_empty_permission_becomes_ask_by_default_plus_the_rule():
    draft = agent({})
    rule_add_to_draft(draft, {"tool": "calculator", "behavior": "allow"}, ACTOR)
    draft.refresh_from_db()
    assert draft.permission == {
        "default_behavior": "ask",
        "rules": [{"tool": "calculator", "behavior": "allow"}],
    }


@pytest.mark.parametrize(
    "rule",
    [
        {"tool": "write_note(", "behavior": "allow"},
        {"tool": 'write_note(title =~ "(")', "behavior": "allow"},
        {"tool": "", "behavior": "allow"},
        {"tool": "write_note", "behavior": "maybe"},
        {"tool": "x" * 501, "behavior": "allow"},
        "write_note",
    ],
)
def test_an_invalid_rule_is_refused_and_nothing_changes(rule):
    draft = agent()
    with pytest.raises(InvalidInput):
        rule_add_to_draft(draft, rule, ACTOR)
    draft.refresh_from_db()
    assert draft.permission == APPROVAL
    assert not AuditEntry.objects.filter(action=AUDIT_ACTION).exists()


def test_a_draft_whose_rules_are_already_broken_is_not_saved_over():
    draft = agent()
    Agent.objects.filter(pk=draft.pk).update(
        permission={"default_behavior": "allow", "rules": [{"tool": "bad(", "behavior": "ask"}]}
    )
    with pytest.raises(AgentConfigInvalid, match="Rule 1"):
        rule_add_to_draft(draft, {"tool": "calculator", "behavior": "allow"}, ACTOR)
