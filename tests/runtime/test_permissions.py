"""Permission rules: pattern forms, precedence and defaults (docs/run-model.md)."""

from __future__ import annotations

from typing import Any

import pytest

from runs.runtime.loop import AgentLoop, RunIdentity
from runs.runtime.permissions import (
    Behavior,
    PatternError,
    PermissionPolicy,
    ToolPattern,
    primary_argument,
)
from runs.runtime.testing import EchoTool, RecordingSink, ScriptedLlm, agent, text_turn
from runs.runtime.types import Message


def matches(pattern: str, tool: str, arguments: Any = None, primary: str | None = None) -> bool:
    return ToolPattern.parse(pattern).matches(tool, arguments or {}, primary)


def decide(
    rules: list[tuple[str, str]], tool: str, arguments: Any = None, **config: Any
) -> Behavior:
    policy = PermissionPolicy.from_json(
        {
            "rules": [{"tool": pattern, "behavior": behavior} for pattern, behavior in rules],
            **config,
        }
    )
    return policy.evaluate(tool, arguments or {}, config.get("primary")).behavior


# --- pattern forms -------------------------------------------------------------------------------


def test_exact_name_matches_only_that_tool() -> None:
    assert matches("read_file", "read_file")
    assert not matches("read_file", "read_files")
    assert not matches("read_file", "file_read")


def test_exact_name_ignores_arguments() -> None:
    assert matches("read_file", "read_file", {"path": "/etc/passwd"})


@pytest.mark.parametrize(
    ("pattern", "tool", "expected"),
    [
        ("file_*", "file_read", True),
        ("file_*", "file_", True),
        ("file_*", "read_file", False),
        ("mcp__github__*", "mcp__github__create_issue", True),
        ("mcp__github__*", "mcp__gitlab__merge", False),
        ("*", "anything", True),
        ("echo?", "echo1", True),
        ("echo?", "echo", False),
    ],
)
def test_glob_on_tool_name(pattern: str, tool: str, expected: bool) -> None:
    assert matches(pattern, tool) is expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("npm install", True),
        ("npm run build", True),
        ("npm install ./packages/a/b", True),
        ("npm", False),
        ("git status", False),
        ("pnpm install", False),
    ],
)
def test_primary_argument_glob(command: str, expected: bool) -> None:
    assert matches("Bash(npm *)", "Bash", {"command": command}, primary="command") is expected


def test_primary_argument_glob_needs_the_tool_name_to_match() -> None:
    assert not matches("Bash(npm *)", "Shell", {"command": "npm install"}, primary="command")


def test_primary_argument_glob_without_a_primary_argument_does_not_match() -> None:
    assert not matches("Bash(npm *)", "Bash", {"command": "npm install"}, primary=None)
    assert not matches("Bash(npm *)", "Bash", {"other": "npm install"}, primary="command")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/main.py", True),
        ("src/a/b/c.py", True),
        ("src/", True),
        ("tests/test_x.py", False),
        ("lib/src/main.py", False),
    ],
)
def test_named_field_glob_double_star_crosses_slashes(path: str, expected: bool) -> None:
    assert matches('Edit(file_path ~ "src/**")', "Edit", {"file_path": path}) is expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [("src/main.py", True), ("src/a/main.py", False), ("src/.env", True)],
)
def test_named_field_glob_single_star_stays_in_one_directory(path: str, expected: bool) -> None:
    assert matches('Edit(file_path ~ "src/*")', "Edit", {"file_path": path}) is expected


def test_named_field_glob_with_missing_field_does_not_match() -> None:
    assert not matches('Edit(file_path ~ "src/**")', "Edit", {"path": "src/main.py"})


def test_named_field_glob_reads_dotted_paths() -> None:
    pattern = 'Deploy(target.env ~ "prod*")'
    assert matches(pattern, "Deploy", {"target": {"env": "production"}})
    assert not matches(pattern, "Deploy", {"target": {"env": "staging"}})


@pytest.mark.parametrize(
    ("command", "expected"),
    [("rm -rf /", True), ("RM file", True), ("sudo rm x", True), ("ls -la", False)],
)
def test_named_field_regex_searches_the_value(command: str, expected: bool) -> None:
    assert matches('Bash(command =~ "(?i)rm")', "Bash", {"command": command}) is expected


def test_named_field_regex_is_case_sensitive_without_flag() -> None:
    assert not matches('Bash(command =~ "rm")', "Bash", {"command": "RM file"})


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("mcp__gh__create_issue", True),
        ("mcp__gl__merge", True),
        ("mcp__slack__post", False),
        ("xmcp__gh__a", False),
    ],
)
def test_regex_on_tool_name(tool: str, expected: bool) -> None:
    assert matches("/mcp__(gh|gl)__.*/", tool) is expected


# --- precedence ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rules",
    [
        [("echo", "deny"), ("echo", "allow"), ("echo", "ask")],
        [("echo", "ask"), ("echo", "allow"), ("echo", "deny")],
        [("echo", "allow"), ("echo", "deny"), ("echo", "ask")],
    ],
)
def test_deny_beats_allow_and_ask_in_any_order(rules: list[tuple[str, str]]) -> None:
    assert decide(rules, "echo") is Behavior.DENY


@pytest.mark.parametrize(
    "rules",
    [[("echo", "ask"), ("echo", "allow")], [("echo", "allow"), ("echo", "ask")]],
)
def test_allow_beats_ask_in_any_order(rules: list[tuple[str, str]]) -> None:
    assert decide(rules, "echo") is Behavior.ALLOW


def test_less_specific_deny_still_beats_exact_allow() -> None:
    assert decide([("echo", "allow"), ("*", "deny")], "echo") is Behavior.DENY


def test_argument_rule_only_applies_when_arguments_match() -> None:
    rules = [("Bash", "allow"), ('Bash(command =~ "rm")', "deny")]
    assert decide(rules, "Bash", {"command": "ls"}) is Behavior.ALLOW
    assert decide(rules, "Bash", {"command": "rm -rf /"}) is Behavior.DENY


def test_evaluation_reports_the_winning_rule() -> None:
    policy = PermissionPolicy.from_json(
        {"rules": [{"tool": "echo", "behavior": "allow"}, {"tool": "ech*", "behavior": "deny"}]}
    )
    decision = policy.evaluate("echo", {})
    assert decision.behavior is Behavior.DENY
    assert decision.rule is not None
    assert decision.rule.pattern.source == "ech*"


# --- defaults ------------------------------------------------------------------------------------


def test_default_behavior_is_ask() -> None:
    assert PermissionPolicy().default_behavior is Behavior.ASK
    assert PermissionPolicy.from_json(None).default_behavior is Behavior.ASK
    assert PermissionPolicy.from_json({}).default_behavior is Behavior.ASK
    assert decide([], "echo") is Behavior.ASK


def test_unmatched_call_gets_the_default_and_no_rule() -> None:
    policy = PermissionPolicy.from_json({"rules": [{"tool": "other", "behavior": "deny"}]})
    decision = policy.evaluate("echo", {})
    assert decision.behavior is Behavior.ASK
    assert decision.rule is None


@pytest.mark.parametrize("default", ["allow", "ask", "deny"])
def test_default_behavior_is_configurable(default: str) -> None:
    assert decide([("other", "allow")], "echo", default_behavior=default) is Behavior(default)


def test_rules_win_over_default() -> None:
    assert decide([("echo", "ask")], "echo", default_behavior="allow") is Behavior.ASK
    assert decide([("echo", "allow")], "echo", default_behavior="deny") is Behavior.ALLOW


def test_policy_json_round_trip() -> None:
    config = {
        "default_behavior": "deny",
        "rules": [
            {"tool": "read_file", "behavior": "allow", "scope": "project"},
            {"tool": 'Bash(command =~ "(?i)rm")', "behavior": "deny", "scope": "session"},
        ],
    }
    assert PermissionPolicy.from_json(config).to_json() == config


def test_rule_scope_defaults_to_project() -> None:
    policy = PermissionPolicy.from_json({"rules": [{"tool": "echo", "behavior": "allow"}]})
    assert policy.rules[0].scope == "project"


# --- invalid configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "empty pattern"),
        ("   ", "empty pattern"),
        ("/mcp__(gh/", "invalid regex"),
        ('Bash(command =~ "(unclosed")', "invalid regex"),
        ("Bash()", "empty argument pattern"),
        ("Bash(npm *", "invalid tool name"),
        ("bad name", "invalid tool name"),
        ("(npm *)", "invalid tool name"),
    ],
)
def test_invalid_pattern_raises_pattern_error(pattern: str, fragment: str) -> None:
    with pytest.raises(PatternError) as info:
        ToolPattern.parse(pattern)
    assert fragment in str(info.value)


def test_invalid_pattern_in_a_rule_names_the_pattern() -> None:
    with pytest.raises(PatternError) as info:
        PermissionPolicy.from_json({"rules": [{"tool": "/[/", "behavior": "deny"}]})
    assert "'/[/'" in str(info.value)


@pytest.mark.parametrize("behavior", ["maybe", "", None, "ALLOW"])
def test_invalid_rule_behavior_raises_pattern_error(behavior: Any) -> None:
    with pytest.raises(PatternError, match="behavior must be allow, ask or deny"):
        PermissionPolicy.from_json({"rules": [{"tool": "echo", "behavior": behavior}]})


def test_invalid_default_behavior_raises_pattern_error() -> None:
    with pytest.raises(PatternError, match="default_behavior must be allow, ask or deny"):
        PermissionPolicy.from_json({"default_behavior": "sometimes"})


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"rules": "echo"}, "'rules' must be a list"),
        ({"rules": ["echo"]}, "each rule must be an object"),
        ({"rules": [{"behavior": "deny"}]}, "missing its 'tool' pattern"),
        (["echo"], "permission config must be an object"),
    ],
)
def test_malformed_config_raises_pattern_error(config: Any, fragment: str) -> None:
    with pytest.raises(PatternError) as info:
        PermissionPolicy.from_json(config)
    assert fragment in str(info.value)


def test_pattern_error_is_a_value_error() -> None:
    assert issubclass(PatternError, ValueError)


# --- unconditionally denied tools ----------------------------------------------------------------


def test_unconditionally_denied_only_for_exact_name_deny_rules() -> None:
    policy = PermissionPolicy.from_json(
        {
            "rules": [
                {"tool": "rm", "behavior": "deny"},
                {"tool": "file_*", "behavior": "deny"},
                {"tool": 'Bash(command =~ "rm")', "behavior": "deny"},
                {"tool": "/mcp__.*/", "behavior": "deny"},
                {"tool": "echo", "behavior": "ask"},
            ]
        }
    )
    assert policy.unconditionally_denied("rm")
    assert not policy.unconditionally_denied("file_read")
    assert not policy.unconditionally_denied("Bash")
    assert not policy.unconditionally_denied("mcp__gh__x")
    assert not policy.unconditionally_denied("echo")
    assert not policy.unconditionally_denied("other")


def test_unconditionally_denied_tools_are_not_offered_to_the_model() -> None:
    llm = ScriptedLlm([text_turn("hi")])
    resolved = agent("a", llm).with_tool(EchoTool("echo")).with_tool(EchoTool("rm"))
    resolved.with_tool(EchoTool("file_read"))
    resolved.permission = PermissionPolicy.from_json(
        {"rules": [{"tool": "rm", "behavior": "deny"}, {"tool": "file_*", "behavior": "deny"}]}
    )
    AgentLoop(
        agent=resolved,
        identity=RunIdentity("t1", "r1", "a"),
        messages=[Message.user("hello")],
        sink=RecordingSink(),
    ).run()
    assert [tool.name for tool in llm.requests[0].tools] == ["echo", "file_read"]


# --- primary argument ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (None, None),
        ({}, None),
        ({"type": "object", "properties": {}}, None),
        ({"type": "object", "properties": {"command": {}, "cwd": {}}}, "command"),
        (
            {"type": "object", "properties": {"cwd": {}, "command": {}}, "required": ["command"]},
            "command",
        ),
        (
            {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["b", "a"]},
            "b",
        ),
    ],
)
def test_primary_argument(parameters: dict | None, expected: str | None) -> None:
    assert primary_argument(parameters) == expected


def test_a_pattern_on_a_list_argument_tests_its_elements_conservatively() -> None:
    policy = PermissionPolicy.from_json(
        {
            "default_behavior": "ask",
            "rules": [
                {"tool": 'send_email(to ~ "*@example.com")', "behavior": "allow"},
                {"tool": 'send_email(to ~ "ceo@*")', "behavior": "deny"},
            ],
        }
    )

    def behavior(to: list[str]) -> str:
        return policy.evaluate("send_email", {"to": to}).behavior.value

    assert behavior(["ops@example.com", "dev@example.com"]) == "allow"  # every element
    assert behavior(["ops@example.com", "someone@elsewhere.org"]) == "ask"  # not every
    assert behavior(["ops@example.com", "ceo@example.com"]) == "deny"  # any element
    assert behavior([]) == "ask"  # an empty list matches no argument pattern
