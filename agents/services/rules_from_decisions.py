"""Rules from decisions: a tool call a person decided becomes a permission rule of the
agent's draft.

`rule_proposal` prefills patterns from the call (the exact tool plus one argument, the
pattern syntax constrains one argument per rule; and "any call of the tool"),
`rule_preview` says which rule of the draft with the rule added decides the call and why
(the rules editor's preview), `rule_add_to_draft` saves the rule into the draft, never
into a published version (validated, audited). Callers check the role
(`agents.change_agent`); the rule reaches runs when an admin publishes the draft.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents.errors import AgentConfigInvalid
from agents.models import Agent
from agents.tools import UnknownToolError, get_tool
from common.audit import Actor, audit_record
from common.errors import InvalidInput
from common.teams import ensure_writable
from runs.runtime.permissions import (
    Behavior,
    PatternError,
    PermissionRule,
    ToolPattern,
    primary_argument,
)

from .agents import DraftStatus, agent_draft_status, agent_spec
from .permissions import PATTERN_HELP, PermissionPreview, permission_message, permission_preview

AUDIT_ACTION = "agent.rule_from_decision"
# A string argument longer than this gets no pattern of its own (an exact long text makes a
# rule that never matches again); patterns stay within what the rules editor accepts.
MAX_VALUE_CHARS = 200
MAX_PATTERN_CHARS = 500

_FIELD = re.compile(r"[A-Za-z_]\w*")  # a top-level argument a pattern can name
_PLAIN_TOOL = re.compile(r"[\w.!\]-]+")  # a tool name that is its own exact pattern
_GLOB_TOOL = re.compile(r"[\w*?\[\]!.-]+")  # one whose glob characters need brackets
_NOT_IN_GLOB = frozenset('*?"\\')  # a glob value cannot say these literally


# -- patterns ------------------------------------------------------------------------------


def tool_name_pattern(tool_name: str) -> str:
    """The pattern matching exactly this tool: the name itself; glob characters bracketed;
    a regex when the name has characters a glob cannot hold."""
    if _PLAIN_TOOL.fullmatch(tool_name):
        return tool_name
    if _GLOB_TOOL.fullmatch(tool_name):
        return "".join(f"[{char}]" if char in "*?[" else char for char in tool_name)
    return f"/{re.escape(tool_name)}/"


def _regex_literal(text: str) -> str:
    """A regex matching exactly `text`, written without a double quote or a raw control
    character, so it fits between the quotes of a pattern as is."""
    out = []
    for char in text:
        if char.isalnum() or char in " _":
            out.append(char)
        elif char == '"':
            out.append(r"\x22")
        elif not char.isprintable():
            code = ord(char)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
        elif char.isascii():
            out.append("\\" + char)  # punctuation, the backslash too
        else:
            out.append(char)
    return r"\A" + "".join(out) + r"\Z"


def argument_pattern(tool_name: str, field: str, value: Any) -> str | None:
    """`tool(field ~ "value")` (a glob without wildcards: exactly the value), or
    `tool(field =~ "\\A…\\Z")` when the value holds a character a glob cannot say; None
    when no pattern can name this argument. Numbers and booleans match as their text."""
    tool = tool_name_pattern(tool_name)
    if tool.startswith("/") or not _FIELD.fullmatch(field):
        return None
    text = value if isinstance(value, str) else str(value)
    if any(char in _NOT_IN_GLOB or not char.isprintable() for char in text):
        pattern = f'{tool}({field} =~ "{_regex_literal(text)}")'
    else:
        pattern = f'{tool}({field} ~ "{text}")'
    return pattern if len(pattern) <= MAX_PATTERN_CHARS else None


def _matches(pattern: str, tool_name: str, arguments: dict[str, Any]) -> bool:
    try:
        parsed = ToolPattern.parse(pattern)
    except PatternError:
        return False
    return parsed.matches(tool_name, arguments, None, every=True)


# -- the proposal --------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternOption:
    pattern: str
    label: str  # what it matches, in words
    argument: str | None  # the argument it constrains; None: any call of the tool


@dataclass(frozen=True)
class RuleProposal:
    """Patterns for a rule about one call, the suggested one first; the last matches any
    call of the tool. `skipped`: argument -> why no pattern names it."""

    tool_name: str
    behavior: Behavior
    options: list[PatternOption]
    skipped: dict[str, str]

    @property
    def pattern(self) -> str:
        return self.options[0].pattern

    def rule(self, pattern: str | None = None) -> dict[str, str]:
        return {"tool": pattern or self.pattern, "behavior": self.behavior.value}


def parse_behavior(behavior: Any) -> Behavior:
    try:
        return Behavior(str(behavior))
    except ValueError as exc:
        raise InvalidInput(
            f"behavior must be allow, ask or deny, got {behavior!r}", {"behavior": behavior}
        ) from exc


def _primary(agent: Agent, tool_name: str) -> str | None:
    delegate = tool_name.removeprefix("agent_run_")
    if delegate != tool_name and agent.delegates.filter(slug=delegate).exists():
        return "prompt"
    try:
        return primary_argument(get_tool(tool_name).descriptor.parameters)
    except UnknownToolError:
        return None


def _skip_reason(field: str, value: Any) -> str | None:
    if not _FIELD.fullmatch(field):
        return "a pattern cannot name this argument"
    if value is None or isinstance(value, (list, dict)):
        return "not a single value (text, number or true/false)"
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return f"longer than {MAX_VALUE_CHARS} characters"
    return None


def rule_proposal(
    agent: Agent, tool_name: str, arguments: Any, behavior: Behavior | str
) -> RuleProposal:
    """Patterns for a rule `behavior` about this call: one per simple argument (the tool's
    primary argument first), then any call of the tool."""
    chosen = parse_behavior(behavior)
    arguments = arguments if isinstance(arguments, dict) else {}
    primary = _primary(agent, tool_name)
    fields = sorted(arguments, key=lambda name: name != primary)  # stable: primary first
    options: list[PatternOption] = []
    skipped: dict[str, str] = {}
    for field in fields:
        value = arguments[field]
        reason = _skip_reason(field, value)
        pattern = None if reason else argument_pattern(tool_name, field, value)
        if pattern is None or not _matches(pattern, tool_name, arguments):
            skipped[field] = reason or "the pattern syntax cannot say this value"
            continue
        shown = value if isinstance(value, str) else json.dumps(value)
        options.append(PatternOption(pattern, f"{tool_name} with {field} = “{shown}”", field))
    options.append(PatternOption(tool_name_pattern(tool_name), f"any call of {tool_name}", None))
    return RuleProposal(tool_name, chosen, options, skipped)


# -- preview and save ----------------------------------------------------------------------


def checked_rule(rule: Any) -> dict[str, str]:
    """The rule {"tool", "behavior"} as saved, or InvalidInput saying what to fix."""
    if not isinstance(rule, dict):
        raise InvalidInput('a rule is an object {"tool": pattern, "behavior": allow|ask|deny}')
    tool = rule.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise InvalidInput("the rule needs a tool pattern", {"tool": "required"})
    tool = tool.strip()
    if len(tool) > MAX_PATTERN_CHARS:
        raise InvalidInput(f"the pattern must be at most {MAX_PATTERN_CHARS} characters")
    behavior = parse_behavior(rule.get("behavior"))
    try:
        PermissionRule.from_json({"tool": tool, "behavior": behavior.value})
    except PatternError as exc:
        raise InvalidInput(f"{exc}; {PATTERN_HELP}", {"tool": str(exc)}) from exc
    return {"tool": tool, "behavior": behavior.value}


def with_rule(permission: Any, rule: dict[str, str]) -> tuple[dict[str, Any], int, bool]:
    """(the permission config with `rule` appended, the rule's 1-based position, whether
    the config had that rule already: then it is returned as it was)."""
    config = dict(permission) if isinstance(permission, dict) else {}
    rules = config.get("rules") or []
    rules = list(rules) if isinstance(rules, list) else []
    for position, existing in enumerate(rules, start=1):
        if (
            isinstance(existing, dict)
            and str(existing.get("tool", "")).strip() == rule["tool"]
            and existing.get("behavior") == rule["behavior"]
            and (existing.get("scope") or "project") == "project"
        ):
            return config, position, True
    config["default_behavior"] = config.get("default_behavior") or "ask"
    config["rules"] = [*rules, dict(rule)]
    return config, len(config["rules"]), False


@dataclass(frozen=True)
class RulePreview:
    """What the draft does with the call now and with the rule added."""

    rule: dict[str, Any]
    error: str  # the rule is invalid: what to fix ("" when it is valid)
    current: PermissionPreview
    after: PermissionPreview | None
    position: int | None  # the rule's 1-based position in the draft with it
    already: bool  # the draft has this rule already

    @property
    def decides(self) -> bool:
        explanation = self.after.explanation if self.after else None
        return explanation is not None and explanation.position == self.position

    @property
    def verdict(self) -> str:
        if self.after is None:
            return f"Not a valid rule: {self.error}"
        if self.after.explanation is None:
            return self.after.summary
        if self.decides:
            return f"The new rule decides this call. {self.after.summary}"
        checks = self.after.explanation.checks
        if self.position is not None and not checks[self.position - 1].matched:
            return f"The new rule does not match this call. {self.after.summary}"
        return (
            f"The new rule matches but does not decide this call: "
            f"{self.after.explanation.reason} {self.after.summary}"
        )


def rule_preview(agent: Agent, rule: Any, tool_name: str, arguments: Any) -> RulePreview:
    """Which rule of the draft, with `rule` added, decides the call and why."""
    arguments = arguments if isinstance(arguments, dict) else {}
    spec = agent_spec(agent)
    current = permission_preview(spec, tool_name, arguments, source="draft")
    try:
        checked = checked_rule(rule)
    except InvalidInput as exc:
        shown = rule if isinstance(rule, dict) else {}
        return RulePreview(shown, exc.message, current, None, None, False)
    permission, position, already = with_rule(spec.get("permission"), checked)
    after = permission_preview(
        {**spec, "permission": permission}, tool_name, arguments, source="draft"
    )
    return RulePreview(checked, "", current, after, position, already)


@dataclass(frozen=True)
class RuleSaved:
    agent: Agent
    rule: dict[str, str]
    position: int  # 1-based, in the draft's rules
    added: bool  # False: the draft had the rule already, nothing changed
    status: DraftStatus


@transaction.atomic
def rule_add_to_draft(agent: Agent, rule: Any, actor: Actor, *, ticket_id: str = "") -> RuleSaved:
    """Append `rule` to the agent's draft (validated, audited); runs get it once the draft
    is published. The published versions are not touched."""
    checked = checked_rule(rule)
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    ensure_writable(locked.team_id)
    before = locked.permission
    permission, position, already = with_rule(before, checked)
    if already:
        return RuleSaved(locked, checked, position, False, agent_draft_status(locked))
    message = permission_message(permission)
    if message:
        raise AgentConfigInvalid(
            f"the draft's permission rules are invalid: {message}", {"permission": message}
        )
    locked.permission = permission
    locked.save(update_fields=["permission", "updated_at"])
    source = f" from the decision on ticket {ticket_id}" if ticket_id else ""
    audit_record(
        actor=actor,
        action=AUDIT_ACTION,
        target_type="agent",
        target_id=locked.pk,
        before=before,
        after=permission,
        comment=f"rule {position}: {checked['tool']} → {checked['behavior']}{source}",
    )
    return RuleSaved(locked, checked, position, True, agent_draft_status(locked))
