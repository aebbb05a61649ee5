"""Permission rules: what is wrong with a configuration's rules, and what they do with one
tool call (the rules editor's preview, evaluated the way a run would)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents.tools import UnknownToolError, get_tool
from common.jsonsafe import JsonTooDeep, check_depth, find_unstorable
from runs.runtime.permissions import (
    Behavior,
    Escalation,
    EscalationError,
    PatternError,
    PermissionExplanation,
    PermissionPolicy,
    PermissionRule,
    explain,
    primary_argument,
)

PATTERN_HELP = (
    'patterns look like write_note, file_*, Bash(npm *), Edit(file_path ~ "src/**"), '
    'Bash(command =~ "(?i)rm") or /mcp__(gh|gl)__.*/'
)


def permission_rule_errors(permission: Any) -> tuple[str | None, dict[int, str]]:
    """(error about the whole config, {0-based rule index: message}) for a permission config."""
    if permission in (None, {}, ""):
        return None, {}
    if not isinstance(permission, dict):
        return 'The permission config must be an object {"default_behavior", "rules"}.', {}
    general: str | None = None
    default = permission.get("default_behavior") or "ask"
    if default not in {b.value for b in Behavior}:
        general = f"Default behavior must be allow, ask or deny (got {default!r})."
    rules = permission.get("rules") or []
    if not isinstance(rules, list):
        return 'Permission "rules" must be a list of {"tool", "behavior"} objects.', {}
    errors: dict[int, str] = {}
    for index, rule in enumerate(rules):
        try:
            parsed = PermissionRule.from_json(rule)
        except EscalationError as exc:
            errors[index] = f"{exc}."
        except PatternError as exc:
            errors[index] = f"{exc}; {PATTERN_HELP}."
        else:
            if parsed.escalation is not None:
                problem = response_error(parsed.escalation.default_response)
                if problem:
                    errors[index] = f"rule {parsed.pattern.source!r}: default_response {problem}."
    return general, errors


def response_error(response: Any) -> str | None:
    """What makes a configured answer unusable as a decision's payload, in words; else None."""
    try:
        check_depth(response)
    except JsonTooDeep as exc:
        return f"is {exc}"
    found = find_unstorable(response)
    if found is not None:
        return f"holds {found[1]} (at {found[0]}), which cannot be stored"
    return None


def ticket_escalation(
    spec: dict[str, Any], tool_name: str, arguments: Any, *, permission_ticket: bool
) -> Escalation | None:
    """The deadline, default action and warning of a ticket a run of `spec` opens: those of
    the ask rule that made the call wait when it has its own (permission tickets), else the
    agent's; None when neither sets a deadline. A published spec's rules are valid, so
    this only parses them when some rule carries a deadline."""
    if permission_ticket:
        rule = _asking_rule(spec, tool_name, arguments)
        if rule is not None and rule.escalation is not None:
            return rule.escalation
    seconds = spec.get("ticket_deadline_seconds")
    if not seconds:
        return None
    warning = spec.get("ticket_warning_seconds")
    return Escalation(
        deadline_seconds=int(seconds),
        default_action=spec.get("ticket_default_action") or "reject",
        default_response=spec.get("ticket_default_response"),
        warning_seconds=int(warning) if warning and warning < seconds else None,
    )


def _asking_rule(spec: dict[str, Any], tool_name: str, arguments: Any) -> PermissionRule | None:
    permission = spec.get("permission") or None
    rules = permission.get("rules") if isinstance(permission, dict) else None
    if not isinstance(rules, list) or not any(
        isinstance(rule, dict) and rule.get("deadline_seconds") is not None for rule in rules
    ):
        return None  # no rule has an escalation of its own: nothing to evaluate
    try:
        policy = PermissionPolicy.from_json(permission)
    except PatternError:
        return None
    primary = _primary_argument(tool_name, list(spec.get("delegates") or []))
    decision = policy.evaluate(tool_name, arguments, primary)
    return decision.rule if decision.behavior is Behavior.ASK else None


def permission_message(permission: Any) -> str | None:
    """Every problem of a permission config in one message (None: the rules are valid)."""
    general, rules = permission_rule_errors(permission)
    parts = [general] if general else []
    parts += [f"Rule {index + 1}: {message}" for index, message in sorted(rules.items())]
    if parts:
        return " ".join(parts)
    try:
        PermissionPolicy.from_json(permission or None)
    except PatternError as exc:  # anything the per-rule pass did not catch
        return f"{exc}."
    return None


@dataclass(frozen=True)
class PermissionPreview:
    """What a configuration does with one tool call (the rules editor's preview)."""

    source: str  # "draft" or "v3"
    explanation: PermissionExplanation | None  # None when the rules do not parse
    outcome: str  # "runs" | "asks" | "blocked" | "invalid"
    summary: str
    notes: list[str]


def _primary_argument(tool_name: str, delegates: list[str]) -> str | None:
    if tool_name.startswith("agent_run_") and tool_name[len("agent_run_") :] in delegates:
        return "prompt"
    try:
        return primary_argument(get_tool(tool_name).descriptor.parameters)
    except UnknownToolError:
        return None


def permission_preview(
    spec: dict[str, Any], tool_name: str, arguments: dict[str, Any], *, source: str
) -> PermissionPreview:
    """Evaluate a tool call against a spec's permission rules the way a run would."""
    try:
        policy = PermissionPolicy.from_json(spec.get("permission") or None)
    except PatternError as exc:
        return PermissionPreview(
            source, None, "invalid", f"The permission rules do not parse: {exc}", []
        )
    delegates = list(spec.get("delegates") or [])
    explanation = explain(policy, tool_name, arguments, _primary_argument(tool_name, delegates))
    notes: list[str] = []
    offered = tool_name in (spec.get("tools") or []) or tool_name in {
        f"agent_run_{slug}" for slug in delegates
    }
    if not offered:
        notes.append(
            f"'{tool_name}' is not among this configuration's tools: the model is not offered "
            "it, and a call to it fails as an unknown tool before any rule is checked."
        )
    elif policy.unconditionally_denied(tool_name):
        notes.append("An exact-name deny rule also removes it from the tools the model sees.")
    behavior = explanation.decision.behavior
    if behavior is Behavior.ALLOW:
        outcome, summary = "runs", "Runs: the tool is called without asking anyone."
    elif behavior is Behavior.ASK:
        outcome = "asks"
        summary = (
            "Asks an operator: the run waits on a ticket perm_<call id> that an operator "
            "approves, edits or rejects."
        )
        rule = explanation.decision.rule
        escalation = ticket_escalation(spec, tool_name, arguments, permission_ticket=True)
        if escalation is not None:
            summary += " " + escalation_summary(
                escalation,
                "set by this rule" if rule is not None and rule.escalation else "set on the agent",
            )
    else:
        outcome = "blocked"
        summary = (
            f"Blocked: the call is refused (\"Tool '{tool_name}' denied by permission rules\") "
            "and the run ends blocked."
        )
    return PermissionPreview(source, explanation, outcome, summary, notes)


def escalation_summary(escalation: Escalation, source: str) -> str:
    """What happens to an undecided ticket, in words (`source`: whose settings they are)."""
    then = f"'{escalation.default_action}'"
    if escalation.default_action == "respond":
        then += f" with the answer {json.dumps(escalation.default_response, ensure_ascii=False)}"
    text = f"Undecided after {escalation.deadline_seconds} s, the system applies {then} ({source})."
    if escalation.warning_seconds:
        text += f" Operators are warned {escalation.warning_seconds} s before."
    return text
