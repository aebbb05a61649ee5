"""Permission rules: allow / ask / deny per tool call.

Pattern syntax:
  read_file                     exact tool name
  file_*   mcp__github__*       glob on the tool name
  Bash(npm *)                   glob on the tool's primary argument (`*` matches anything)
  Edit(file_path ~ "src/**")    path glob on a named argument (`*` stops at `/`, `**` does not)
  Bash(command =~ "(?i)rm")     regex search on a named argument
  /mcp__(gh|gl)__.*/            regex on the tool name
Among matching rules deny > allow > ask, ties broken by specificity; no match gives the
default behaviour (ask unless configured).

An ask rule may carry an escalation for the tickets it opens:
  {"tool": "send_email", "behavior": "ask", "deadline_seconds": 600,
   "default_action": "reject|approve|respond", "default_response": <JSON>,
   "warning_seconds": 120}
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Behavior(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


_PRECEDENCE = {Behavior.DENY: 3, Behavior.ALLOW: 2, Behavior.ASK: 1}


class PatternError(ValueError):
    pass


class EscalationError(PatternError):
    """A rule's deadline, default action, answer or warning is invalid (its pattern is fine)."""


_ARG_PATTERN = re.compile(
    r'^\s*(?P<field>[A-Za-z_][\w.]*)\s*(?P<op>=~|~)\s*"(?P<value>(?:[^"\\]|\\.)*)"\s*$'
)
_CALL_PATTERN = re.compile(r"^(?P<tool>[^()\s]+)\((?P<inner>.*)\)$", re.DOTALL)
_TOOL_NAME = re.compile(r"^[\w*?\[\]!.-]+$")


@dataclass(frozen=True)
class ToolPattern:
    source: str
    tool_glob: str | None = None
    tool_regex: re.Pattern[str] | None = None
    arg_field: str | None = None  # None with arg_glob set = the primary argument
    arg_glob: str | None = None
    arg_regex: re.Pattern[str] | None = None

    @classmethod
    def parse(cls, source: str) -> ToolPattern:
        text = source.strip()
        if not text:
            raise PatternError("empty pattern")
        if len(text) >= 2 and text.startswith("/") and text.endswith("/"):
            return cls(source, tool_regex=_compile(text[1:-1], source))
        call = _CALL_PATTERN.match(text)
        if call:
            tool, inner = call.group("tool"), call.group("inner")
            _check_tool_name(tool, source)
            named = _ARG_PATTERN.match(inner)
            if named:
                value = named.group("value").replace('\\"', '"')
                if named.group("op") == "=~":
                    return cls(
                        source,
                        tool_glob=tool,
                        arg_field=named.group("field"),
                        arg_regex=_compile(value, source),
                    )
                return cls(source, tool_glob=tool, arg_field=named.group("field"), arg_glob=value)
            if not inner.strip():
                raise PatternError(f"pattern {source!r}: empty argument pattern")
            return cls(source, tool_glob=tool, arg_glob=inner.strip())
        _check_tool_name(text, source)
        return cls(source, tool_glob=text)

    @property
    def is_exact_name(self) -> bool:
        return (
            self.tool_glob is not None
            and not _has_glob(self.tool_glob)
            and self.arg_glob is None
            and self.arg_regex is None
        )

    @property
    def specificity(self) -> int:
        score = 0
        if self.tool_glob is not None and not _has_glob(self.tool_glob):
            score += 4
        elif self.tool_glob is not None or self.tool_regex is not None:
            score += 1
        if self.arg_glob is not None or self.arg_regex is not None:
            score += 2
        return score

    def matches(
        self, tool_name: str, arguments: Any, primary_arg: str | None, *, every: bool = False
    ) -> bool:
        """Whether the call matches. An argument pattern on a list argument tests its
        elements: any of them must match, or with `every` all of them (an empty list
        matches nothing)."""
        if self.tool_regex is not None:
            return self.tool_regex.fullmatch(tool_name) is not None
        assert self.tool_glob is not None
        if not fnmatch.fnmatchcase(tool_name, self.tool_glob):
            return False
        if self.arg_glob is None and self.arg_regex is None:
            return True
        field_name = self.arg_field or primary_arg
        if field_name is None:
            return False
        value = _lookup(arguments, field_name)
        if value is None:
            return False
        if isinstance(value, list):
            if not value:
                return False
            check = all if every else any
            return check(self._value_matches(item) for item in value)
        return self._value_matches(value)

    def _value_matches(self, value: Any) -> bool:
        text = value if isinstance(value, str) else str(value)
        if self.arg_regex is not None:
            return self.arg_regex.search(text) is not None
        assert self.arg_glob is not None
        if self.arg_field is None:  # Bash(npm *): a command-like prefix, `*` matches anything
            return fnmatch.fnmatchcase(text, self.arg_glob)
        return _glob_match(text, self.arg_glob)


def _has_glob(text: str) -> bool:
    return any(char in text for char in "*?[")


def _check_tool_name(name: str, source: str) -> None:
    if not _TOOL_NAME.match(name):
        raise PatternError(f"pattern {source!r}: invalid tool name {name!r}")


def _compile(expression: str, source: str) -> re.Pattern[str]:
    try:
        return re.compile(expression)
    except re.error as exc:
        raise PatternError(f"pattern {source!r}: invalid regex: {exc}") from exc


def _lookup(arguments: Any, dotted: str) -> Any:
    value = arguments
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _glob_match(text: str, pattern: str) -> bool:
    """Globs where `**` crosses `/` and `*` does not."""
    regex = ""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            regex += ".*"
            index += 2
            continue
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        else:
            regex += re.escape(char)
        index += 1
    return re.fullmatch(regex, text, re.DOTALL) is not None


ESCALATION_ACTIONS = ("reject", "approve", "respond")
ESCALATION_KEYS = ("deadline_seconds", "default_action", "default_response", "warning_seconds")
MAX_DEADLINE_SECONDS = 30 * 24 * 3600  # 30 days: longer waits are not what a deadline is for


@dataclass(frozen=True)
class Escalation:
    """What happens to an undecided ticket: after `deadline_seconds` the system applies
    `default_action` (with `default_response` as the answer for respond), warning
    `warning_seconds` before the deadline (None: no warning)."""

    deadline_seconds: int
    default_action: str = "reject"
    default_response: Any = field(default=None, hash=False)
    warning_seconds: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> Escalation | None:
        """The escalation keys of a rule (None when it has none; a key set to null counts as
        absent); `where` names the rule in error messages."""
        if not any(data.get(key) is not None for key in ESCALATION_KEYS):
            return None
        deadline = data.get("deadline_seconds")
        if deadline is None:
            raise EscalationError(
                f"{where}: default_action, default_response and warning_seconds need "
                "deadline_seconds (how long a ticket waits before the default action)"
            )
        _check_seconds(deadline, "deadline_seconds", where)
        action = data.get("default_action") or "reject"
        if action not in ESCALATION_ACTIONS:
            raise EscalationError(
                f"{where}: default_action must be reject, approve or respond, got {action!r}"
            )
        response = data.get("default_response")
        if action == "respond" and response is None:
            raise EscalationError(
                f"{where}: default_action respond needs a default_response (the answer the "
                "tool call gets)"
            )
        warning = data.get("warning_seconds")
        if warning is not None:
            _check_seconds(warning, "warning_seconds", where)
            if warning >= deadline:
                raise EscalationError(
                    f"{where}: warning_seconds ({warning}) must be less than deadline_seconds "
                    f"({deadline}): the warning goes out that long before the deadline"
                )
        return cls(deadline, action, response, warning)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "deadline_seconds": self.deadline_seconds,
            "default_action": self.default_action,
        }
        if self.default_response is not None:
            data["default_response"] = self.default_response
        if self.warning_seconds is not None:
            data["warning_seconds"] = self.warning_seconds
        return data


def _check_seconds(value: Any, name: str, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EscalationError(f"{where}: {name} must be a whole number of seconds, got {value!r}")
    if not 1 <= value <= MAX_DEADLINE_SECONDS:
        raise EscalationError(
            f"{where}: {name} must be between 1 and {MAX_DEADLINE_SECONDS} (30 days), got {value}"
        )


@dataclass(frozen=True)
class PermissionRule:
    """One rule. An ask rule may carry its own `escalation` (deadline, default action,
    warning) for the tickets it opens; it replaces the agent's for those tickets."""

    pattern: ToolPattern
    behavior: Behavior
    scope: str = "project"
    escalation: Escalation | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PermissionRule:
        if not isinstance(data, dict):
            raise PatternError("each rule must be an object with 'tool' and 'behavior'")
        tool = data.get("tool")
        if not isinstance(tool, str):
            raise PatternError("rule is missing its 'tool' pattern")
        try:
            behavior = Behavior(str(data.get("behavior")))
        except ValueError as exc:
            raise PatternError(
                f"rule {tool!r}: behavior must be allow, ask or deny, got {data.get('behavior')!r}"
            ) from exc
        pattern = ToolPattern.parse(tool)
        if behavior is not Behavior.ASK and any(
            data.get(key) is not None for key in ESCALATION_KEYS
        ):
            raise EscalationError(
                f"rule {tool!r}: deadline_seconds, default_action, default_response and "
                f"warning_seconds apply only to ask rules (this one is {behavior.value})"
            )
        escalation = Escalation.from_json(data, f"rule {tool!r}")
        return cls(pattern, behavior, str(data.get("scope") or "project"), escalation)

    def to_json(self) -> dict[str, Any]:
        data = {"tool": self.pattern.source, "behavior": self.behavior.value, "scope": self.scope}
        if self.escalation is not None:
            data.update(self.escalation.to_json())
        return data

    def matches(self, tool_name: str, arguments: Any, primary_arg: str | None) -> bool:
        """Lists are judged conservatively: an allow rule needs every element to match
        (one outside recipient is not allowed by `send_email(to ~ "*@example.com")`), a
        deny or ask rule catches a call if any element matches."""
        every = self.behavior is Behavior.ALLOW
        return self.pattern.matches(tool_name, arguments, primary_arg, every=every)


@dataclass(frozen=True)
class PermissionDecision:
    behavior: Behavior
    rule: PermissionRule | None


@dataclass
class PermissionPolicy:
    default_behavior: Behavior = Behavior.ASK
    rules: list[PermissionRule] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> PermissionPolicy:
        if not data:
            return cls()
        if not isinstance(data, dict):
            raise PatternError("permission config must be an object")
        try:
            default = Behavior(data.get("default_behavior") or "ask")
        except ValueError as exc:
            raise PatternError(
                f"default_behavior must be allow, ask or deny, got {data.get('default_behavior')!r}"
            ) from exc
        rules_raw = data.get("rules") or []
        if not isinstance(rules_raw, list):
            raise PatternError("'rules' must be a list")
        return cls(default, [PermissionRule.from_json(rule) for rule in rules_raw])

    def to_json(self) -> dict[str, Any]:
        return {
            "default_behavior": self.default_behavior.value,
            "rules": [rule.to_json() for rule in self.rules],
        }

    def evaluate(
        self, tool_name: str, arguments: Any, primary_arg: str | None = None
    ) -> PermissionDecision:
        matching = [rule for rule in self.rules if rule.matches(tool_name, arguments, primary_arg)]
        if not matching:
            return PermissionDecision(self.default_behavior, None)
        best = max(
            matching, key=lambda rule: (_PRECEDENCE[rule.behavior], rule.pattern.specificity)
        )
        return PermissionDecision(best.behavior, best)

    def unconditionally_denied(self, tool_name: str) -> bool:
        """An exact-name deny rule removes the tool from what the model is offered."""
        return any(
            rule.behavior is Behavior.DENY
            and rule.pattern.is_exact_name
            and rule.pattern.tool_glob == tool_name
            for rule in self.rules
        )


def primary_argument(parameters: dict[str, Any] | None) -> str | None:
    """The argument `Tool(glob)` patterns look at: the first required property, else the first."""
    if not parameters:
        return None
    required = parameters.get("required") or []
    if required:
        return str(required[0])
    properties = parameters.get("properties") or {}
    return next(iter(properties), None)


@dataclass(frozen=True)
class RuleCheck:
    """One rule looked at by `explain`: whether it matched the call, and why not."""

    position: int  # 1-based, as shown to admins
    rule: PermissionRule
    matched: bool
    detail: str


@dataclass(frozen=True)
class PermissionExplanation:
    """Which rule decides a call and why (the admin's preview; same result as `evaluate`)."""

    decision: PermissionDecision
    position: int | None  # 1-based position of the deciding rule; None = default behaviour
    checks: list[RuleCheck]
    reason: str


def describe_pattern(pattern: ToolPattern) -> str:
    """What a pattern looks at, in words (the preview explains specificity with it)."""
    if pattern.tool_regex is not None:
        kind = "a regex on the tool name"
    elif pattern.tool_glob is not None and _has_glob(pattern.tool_glob):
        kind = "a glob on the tool name"
    else:
        kind = "an exact tool name"
    if pattern.arg_regex is not None:
        kind += f" + a regex on argument '{pattern.arg_field}'"
    elif pattern.arg_glob is not None:
        where = f"argument '{pattern.arg_field}'" if pattern.arg_field else "the primary argument"
        kind += f" + a glob on {where}"
    return kind


def _mismatch(pattern: ToolPattern, tool_name: str, arguments: Any, primary: str | None) -> str:
    if pattern.tool_regex is not None or (
        pattern.tool_glob is not None and not fnmatch.fnmatchcase(tool_name, pattern.tool_glob)
    ):
        return f"tool name {tool_name!r} does not match"
    field_name = pattern.arg_field or primary
    if field_name is None:
        return "the tool has no primary argument to match"
    if _lookup(arguments, field_name) is None:
        return f"argument {field_name!r} is missing"
    return f"argument {field_name!r} does not match"


def explain(
    policy: PermissionPolicy, tool_name: str, arguments: Any, primary_arg: str | None = None
) -> PermissionExplanation:
    """Evaluate a call like `PermissionPolicy.evaluate` and say which rule decided and why."""
    decision = policy.evaluate(tool_name, arguments, primary_arg)
    checks: list[RuleCheck] = []
    for position, rule in enumerate(policy.rules, start=1):
        matched = rule.matches(tool_name, arguments, primary_arg)
        detail = (
            f"matches ({describe_pattern(rule.pattern)}, specificity {rule.pattern.specificity})"
            if matched
            else _mismatch(rule.pattern, tool_name, arguments, primary_arg)
        )
        checks.append(RuleCheck(position, rule, matched, detail))
    matching = [check for check in checks if check.matched]
    if decision.rule is None:
        return PermissionExplanation(
            decision,
            None,
            checks,
            f"No rule matches {tool_name!r}: the default behavior "
            f"({policy.default_behavior.value}) applies.",
        )
    winner = next(check for check in matching if check.rule is decision.rule)
    label = f"rule {winner.position} ({winner.rule.pattern.source} → {decision.behavior.value})"
    if len(matching) == 1:
        reason = f"Only {label} matches."
    else:
        outranked = [
            c for c in matching if _PRECEDENCE[c.rule.behavior] < _PRECEDENCE[decision.behavior]
        ]
        same = [c for c in matching if c.rule.behavior is decision.behavior]
        parts = [f"{len(matching)} rules match; deny beats allow beats ask"]
        if outranked:
            parts.append(f"so {decision.behavior.value} wins")
        if len(same) > 1:
            best = winner.rule.pattern.specificity
            tied = [c for c in same if c.rule.pattern.specificity == best]
            parts.append(
                f"among the {len(same)} {decision.behavior.value} rules the most specific wins "
                f"(specificity {best}: {describe_pattern(winner.rule.pattern)})"
                + ("; on a tie the earlier rule wins" if len(tied) > 1 else "")
            )
        reason = ", ".join(parts) + f": {label} decides."
    return PermissionExplanation(decision, winner.position, checks, reason)
