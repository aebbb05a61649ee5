"""Permission rules: what is wrong with a configuration's rules, and what they do with one
tool call (the rules editor's preview, evaluated the way a run would)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents.tools import UnknownToolError, get_tool
from runs.runtime.permissions import (
    Behavior,
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
            PermissionRule.from_json(rule)
        except PatternError as exc:
            errors[index] = f"{exc}; {PATTERN_HELP}."
    return general, errors


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
        deadline = spec.get("ticket_deadline_seconds")
        if deadline:
            summary += (
                f" Undecided after {deadline} s, the system applies "
                f"'{spec.get('ticket_default_action') or 'reject'}'."
            )
    else:
        outcome = "blocked"
        summary = (
            f"Blocked: the call is refused (\"Tool '{tool_name}' denied by permission rules\") "
            "and the run ends blocked."
        )
    return PermissionPreview(source, explanation, outcome, summary, notes)
