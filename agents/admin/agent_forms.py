"""The agent admin's forms: the draft's form (tools picked from the registry, ticket
escalation validated), the permission rules editor's rows and its preview."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.models import Agent
from agents.services.agents import agent_validate
from agents.services.mcp import mcp_tools_available
from agents.tools import registry
from common.jsonsafe import json_loads
from runs.runtime.permissions import (
    ESCALATION_ACTIONS,
    MAX_DEADLINE_SECONDS,
    Behavior,
    EscalationError,
    PatternError,
    PermissionRule,
    ToolPattern,
)

MAX_PREVIEW_ARGUMENTS = 20_000
ANSWER_HELP = 'JSON: a quoted text like "not now", a number, or an object like {"approved": false}'

# -- the draft's form ----------------------------------------------------------------------


def _tool_label(name: str, description: str) -> SafeString:
    return format_html(
        '<span class="tool-name">{}</span> <span class="tool-description">{}</span>',
        name,
        description,
    )


class ToolPickerField(forms.MultipleChoiceField):
    """The registry's tools as checkboxes, each with its description. A name that is not
    (or no longer) in the registry is not refused here: the agent's validation names every
    unknown tool in one message, as for any other way of setting them."""

    widget = forms.CheckboxSelectMultiple

    def valid_value(self, value: str) -> bool:
        return True


class AnswerField(forms.JSONField):
    """A JSON answer; empty means none (not the text "null")."""

    default_error_messages = {"invalid": f"Enter the answer as {ANSWER_HELP}."}

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else super().prepare_value(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip():
            try:
                json_loads(value)
            except ValueError as exc:
                raise forms.ValidationError(f"Enter the answer as {ANSWER_HELP} ({exc}).") from exc
        return super().to_python(value)


class AgentAdminForm(forms.ModelForm):
    """Refuses every invalid configuration with a message on the field to fix."""

    tools = ToolPickerField(
        required=False,
        help_text=(
            "Registry tools and MCP servers' tools (mcp__&lt;server&gt;__&lt;tool&gt;, listed "
            "by the server's last check) offered to the model. Delegates (tools agent_run_&lt;id&gt;) are "
            "chosen under Delegates."
        ),
    )
    ticket_default_response = AnswerField(
        required=False,
        label="Ticket default response",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text=f"The answer given at the deadline when the default action is respond; "
        f"{ANSWER_HELP}.",
    )

    class Meta:
        model = Agent
        fields = (
            "slug",
            "name",
            "team",
            "description",
            "model",
            "endpoint",
            "system_prompt",
            "tools",
            "permission",
            "max_rounds",
            "stop_conditions",
            "ticket_deadline_seconds",
            "ticket_default_action",
            "ticket_default_response",
            "ticket_warning_seconds",
            "delegates",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self._current_tools()
        choices = [
            (tool.descriptor.name, _tool_label(tool.descriptor.name, tool.descriptor.description))
            for tool in registry
        ]
        mcp_tools = mcp_tools_available(self._team_id())
        choices += [
            (name, _tool_label(name, f"MCP server {entry['server']}: {entry['description']}"))
            for name, entry in sorted(mcp_tools.items())
        ]
        choices += [
            (name, _tool_label(name, "not in the tool registry: untick it to save the agent"))
            for name in current
            if name not in registry and name not in mcp_tools
        ]
        field = self.fields["tools"]
        assert isinstance(field, ToolPickerField)
        field.choices = choices
        if not self.is_bound:
            self.initial["tools"] = current

    def _team_id(self) -> Any:
        """The agent's team: as submitted, else as saved (MCP tools are its team's and
        the shared servers')."""
        submitted = self.data.get("team") if self.is_bound else None
        return submitted or self.instance.team_id or self.initial.get("team")

    def _current_tools(self) -> list[str]:
        tools = self.instance.tools
        if not isinstance(tools, list):
            return []
        return [name for name in tools if isinstance(name, str)]

    def clean_tools(self) -> list[str]:
        """The picked tools, those the agent had first in their saved order (so a save
        that changes nothing changes nothing), then the newly picked ones."""
        picked = [str(name) for name in self.cleaned_data.get("tools") or []]
        kept = [name for name in self._current_tools() if name in picked]
        return list(dict.fromkeys([*kept, *picked]))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        concrete = Agent._meta.concrete_fields
        candidate = Agent(**{f.attname: getattr(self.instance, f.attname) for f in concrete})
        candidate._state.adding = self.instance._state.adding
        for name, value in cleaned.items():
            if name in {f.name for f in concrete}:
                setattr(candidate, name, value)
        if "delegates" in self.fields and "delegates" not in cleaned:
            return cleaned  # the delegates field has its own error already
        delegates = list(cleaned.get("delegates") or []) if "delegates" in self.fields else None
        self._team_errors(cleaned, delegates)
        for field, message in agent_validate(candidate, delegates=delegates).items():
            if field in self.errors:
                continue  # that field's own error says more
            self.add_error(field if field in self.fields else None, message)
        return cleaned

    def _team_errors(self, cleaned: dict[str, Any], delegates: list[Agent] | None) -> None:
        """An agent uses its team's models, endpoints and delegates, or shared models and
        endpoints (what it has already is kept)."""
        team = cleaned.get("team")
        team_id = team.pk if team is not None else self.instance.team_id
        instance = self.instance
        model, endpoint = cleaned.get("model"), cleaned.get("endpoint")
        for name, row, team_of_row, had in (
            ("model", model, model and model.provider.team_id, instance.model_id),
            ("endpoint", endpoint, endpoint and endpoint.team_id, instance.endpoint_id),
        ):
            if row is not None and row.pk != had and team_of_row not in (None, team_id):
                self.add_error(
                    name,
                    f"The {name} '{row.slug}' belongs to another team: choose one of this "
                    f"team's or a shared one.",
                )
        kept = set(instance.delegates.values_list("pk", flat=True)) if instance.pk else set()
        foreign = sorted(
            d.slug for d in delegates or [] if d.team_id != team_id and d.pk not in kept
        )
        if foreign:
            self.add_error(
                "delegates",
                f"Delegates of another team: {', '.join(foreign)}; an agent delegates to "
                "its own team's agents.",
            )


# -- the permission rules editor -----------------------------------------------------------


BEHAVIORS = [(b.value, b.value) for b in Behavior]


class RuleForm(forms.Form):
    """One rule; an ask rule may carry its own escalation (deadline, default action, its
    answer, warning), which replaces the agent's for the tickets it opens."""

    tool = forms.CharField(
        max_length=500,
        required=True,
        widget=forms.TextInput(attrs={"size": 50}),
        help_text='e.g. write_note, file_*, Bash(npm *), Bash(command =~ "(?i)rm")',
    )
    behavior = forms.ChoiceField(choices=[("", "—"), *BEHAVIORS])
    scope = forms.CharField(widget=forms.HiddenInput, required=False)
    deadline_seconds = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_DEADLINE_SECONDS,
        label="Deadline (s)",
        widget=forms.NumberInput(attrs={"class": "seconds-input"}),
    )
    default_action = forms.ChoiceField(
        required=False,
        choices=[("", "—"), *[(action, action) for action in ESCALATION_ACTIONS]],
        label="Then",
    )
    default_response = AnswerField(
        required=False,
        label="Answer (JSON)",
        widget=forms.TextInput(attrs={"size": 20}),
    )
    warning_seconds = forms.IntegerField(
        required=False,
        min_value=1,
        label="Warn (s) before",
        widget=forms.NumberInput(attrs={"class": "seconds-input"}),
    )

    def clean_tool(self) -> str:
        tool = str(self.cleaned_data["tool"]).strip()
        try:
            ToolPattern.parse(tool)
        except PatternError as exc:
            raise forms.ValidationError(f"{exc}; fix the pattern.") from exc
        return tool

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors or not cleaned.get("tool"):
            return cleaned
        try:
            PermissionRule.from_json(rule_json(cleaned))
        except EscalationError as exc:
            raise forms.ValidationError(f"{exc}.") from exc
        except PatternError:
            pass  # the pattern and the behavior have their own errors
        return cleaned


def rule_json(data: dict[str, Any]) -> dict[str, Any]:
    """A rule as stored in the permission config, from a row's cleaned data."""
    rule: dict[str, Any] = {"tool": data["tool"], "behavior": data.get("behavior")}
    if data.get("scope") and data["scope"] != "project":
        rule["scope"] = data["scope"]
    for key in ("deadline_seconds", "default_action", "warning_seconds"):
        if data.get(key) not in (None, ""):
            rule[key] = data[key]
    if data.get("default_response") is not None:  # an answer may be "" or 0
        rule["default_response"] = data["default_response"]
    return rule


RuleFormSet = forms.formset_factory(RuleForm, extra=2, can_delete=True, can_order=True)


class DefaultBehaviorForm(forms.Form):
    default_behavior = forms.ChoiceField(
        choices=BEHAVIORS, help_text="What happens when no rule matches a call."
    )


class PreviewForm(forms.Form):
    tool = forms.CharField(max_length=200, label="Tool name")
    arguments = forms.CharField(
        required=False,
        label="Arguments (JSON object)",
        widget=forms.Textarea(attrs={"rows": 4, "cols": 60}),
        max_length=MAX_PREVIEW_ARGUMENTS,
    )

    def clean_arguments(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("arguments") or "").strip() or "{}"
        try:
            value = json_loads(raw)
        except ValueError as exc:  # not JSON, or nested too deeply
            raise forms.ValidationError(
                f'Arguments must be a JSON object, e.g. {{"command": "ls"}}: {exc}'
            ) from exc
        if not isinstance(value, dict):
            raise forms.ValidationError('Arguments must be a JSON object, e.g. {"command": "ls"}.')
        return value


def rules_from_formset(formset: Any) -> list[dict[str, Any]]:
    rows = []
    for index, form in enumerate(formset.forms):
        data = form.cleaned_data
        if not data or data.get("DELETE") or not data.get("tool"):
            continue
        order = data.get("ORDER")
        rows.append((order if order is not None else 10_000 + index, index, data))
    return [rule_json(data) for _, _, data in sorted(rows, key=lambda row: (row[0], row[1]))]


def rules_initial(permission: Any) -> list[dict[str, Any]]:
    rules = (permission or {}).get("rules") if isinstance(permission, dict) else None
    initial = []
    for position, rule in enumerate(rules or [], start=1):
        if isinstance(rule, dict):
            initial.append(
                {
                    "tool": rule.get("tool", ""),
                    "behavior": rule.get("behavior", "ask"),
                    "scope": rule.get("scope", ""),
                    "deadline_seconds": rule.get("deadline_seconds"),
                    "default_action": rule.get("default_action") or "",
                    "default_response": rule.get("default_response"),
                    "warning_seconds": rule.get("warning_seconds"),
                    "ORDER": position,
                }
            )
    return initial
