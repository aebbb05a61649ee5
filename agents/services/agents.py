"""Writes and validation of agents.

The `Agent` row is the editable draft; runs only ever use a published `AgentVersion`.
`agent_validate` says what to fix in a draft, `agent_publish` freezes it (after validating
it), `agent_restore` copies a version back into the draft. The version a new run pins is
`agents.selectors.agent_version_current`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from agents.errors import AgentConfigInvalid, NothingToPublish
from agents.models import Agent, AgentVersion, Model, RemoteEndpoint
from agents.selectors import agent_version_latest
from agents.tools import tool_names
from common.audit import Actor, audit_record
from common.errors import InvalidInput, NotFound
from common.teams import ensure_writable
from runs.runtime.permissions import ESCALATION_ACTIONS, MAX_DEADLINE_SECONDS
from runs.runtime.stop import StopConfigError, StopPolicies

from .endpoints import endpoint_config_errors
from .mcp import is_mcp_tool, mcp_tool_errors, mcp_tools_spec
from .permissions import permission_message, response_error

MAX_ROUNDS_LIMIT = 1000
MAX_TICKET_DEADLINE_SECONDS = MAX_DEADLINE_SECONDS


# -- validation ----------------------------------------------------------------------------


def agent_config_errors(
    *, tools: Any, permission: Any, max_rounds: Any, stop_conditions: Any
) -> dict[str, str]:
    """Field -> message for every invalid part of an agent's tools, rules and limits."""
    errors: dict[str, str] = {}
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        errors["tools"] = 'Tools must be a JSON list of tool names, e.g. ["calculator"].'
    else:
        unknown = sorted(set(tools) - set(tool_names()) - {t for t in tools if is_mcp_tool(t)})
        if unknown:
            errors["tools"] = (
                f"Unknown tools: {', '.join(unknown)}. Remove them or pick from: "
                f"{', '.join(tool_names())}."
            )
    message = permission_message(permission)
    if message:
        errors["permission"] = message
    if not isinstance(max_rounds, int) or not 0 <= max_rounds <= MAX_ROUNDS_LIMIT:
        errors["max_rounds"] = (
            f"Max rounds must be between 1 and {MAX_ROUNDS_LIMIT} (0 disables the limit)."
        )
    if not isinstance(stop_conditions, list):
        errors["stop_conditions"] = (
            'Stop conditions must be a JSON list, e.g. [{"type": "timeout", "seconds": 60}].'
        )
    else:
        try:
            StopPolicies.from_spec(
                max_rounds if isinstance(max_rounds, int) else None, stop_conditions
            )
        except StopConfigError as exc:
            errors["stop_conditions"] = (
                f"{exc}. Each condition is one of {{type: timeout, seconds}}, "
                "{type: token_budget, max_total}, {type: consecutive_errors, max}, "
                "{type: max_rounds, rounds}."
            )
    return errors


def _endpoint_errors(endpoint: RemoteEndpoint) -> list[str]:
    """What is wrong with a remote agent's endpoint (its own admin checks the address, so
    validating an agent does no DNS lookups)."""
    found = endpoint_config_errors(endpoint, check_address=False)
    return [f"{field}: {message.rstrip('.')}" for field, message in found.items()]


def delegation_cycle(agent: Agent, delegates: Iterable[Agent]) -> list[str] | None:
    """A delegation cycle reachable from `agent` when it delegates to `delegates` (the other
    agents' drafts as saved), as slugs [a, b, a]; None when there is none."""
    slugs: dict[Any, str] = dict(Agent.objects.values_list("pk", "slug"))
    graph: dict[Any, list[Any]] = {}
    for source, target in Agent.delegates.through.objects.values_list(
        "from_agent_id", "to_agent_id"
    ):
        graph.setdefault(source, []).append(target)
    me = agent.pk if agent.pk is not None else object()
    slugs[me] = agent.slug
    graph[me] = [d.pk for d in delegates]
    for targets in graph.values():
        targets.sort(key=lambda pk: slugs.get(pk, ""))
    path: list[Any] = []
    on_path: set[Any] = set()
    done: set[Any] = set()

    def visit(node: Any) -> list[Any] | None:
        if node in on_path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        on_path.add(node)
        for target in graph.get(node, []):
            found = visit(target)
            if found:
                return found
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    cycle = visit(me)
    return [slugs.get(pk, str(pk)) for pk in cycle] if cycle else None


def ticket_escalation_errors(agent: Agent) -> dict[str, str]:
    """Field -> message for the agent's ticket deadline, default action, answer and warning."""
    errors: dict[str, str] = {}
    deadline = agent.ticket_deadline_seconds
    if deadline is not None and not 1 <= deadline <= MAX_TICKET_DEADLINE_SECONDS:
        errors["ticket_deadline_seconds"] = (
            f"The ticket deadline must be at least 1 second and at most "
            f"{MAX_TICKET_DEADLINE_SECONDS} (30 days); leave it empty for no deadline."
        )
    action = agent.ticket_default_action
    if action not in ESCALATION_ACTIONS:
        errors["ticket_default_action"] = (
            "The ticket default action must be reject, approve or respond."
        )
    response = agent.ticket_default_response
    if action == "respond" and response is None:
        errors["ticket_default_response"] = (
            "The default action respond needs a default response: the answer (JSON, e.g. "
            '"not now" or {"approved": false}) the waiting tool call gets at the deadline.'
        )
    elif response is not None:
        problem = response_error(response)
        if problem:
            errors["ticket_default_response"] = f"The default response {problem}."
    warning = agent.ticket_warning_seconds
    if warning is not None:
        if deadline is None:
            errors["ticket_warning_seconds"] = (
                "A warning needs a ticket deadline: set the deadline, or leave the warning empty."
            )
        elif warning < 1 or warning >= deadline:
            errors["ticket_warning_seconds"] = (
                f"The warning goes out this many seconds before the deadline: it must be at "
                f"least 1 and less than the deadline ({deadline} s)."
            )
    return errors


def _model_endpoint_errors(agent: Agent) -> dict[str, str]:
    """A local agent's model or a remote agent's endpoint: one of them, and usable."""
    errors: dict[str, str] = {}
    model_id, endpoint_id = agent.model_id, agent.endpoint_id
    has_model, has_endpoint = model_id is not None, endpoint_id is not None
    if not has_model and not has_endpoint:
        errors["model"] = (
            "Choose a model (a local agent) or a remote endpoint (a remote agent); it has neither."
        )
    elif has_model and has_endpoint:
        errors["endpoint"] = (
            "Choose either a model (local agent) or a remote endpoint (remote agent), "
            "not both: clear one of them."
        )
    if model_id is not None and not Model.objects.filter(pk=model_id).exists():
        errors["model"] = "The chosen model no longer exists; choose another model."
    if endpoint_id is not None:
        endpoint = RemoteEndpoint.objects.filter(pk=endpoint_id).first()
        if endpoint is None:
            errors["endpoint"] = "The chosen endpoint no longer exists; choose another one."
        elif not has_model:
            problems = _endpoint_errors(endpoint)
            if problems:
                errors["endpoint"] = (
                    f"Endpoint '{endpoint.slug}' is not usable: {'; '.join(problems)}. "
                    "Fix it under Remote endpoints or choose another."
                )
    return errors


def agent_validate(
    agent: Agent,
    *,
    delegates: Iterable[Agent] | None = None,
) -> dict[str, str]:
    """Field -> message (saying what to fix) for everything wrong with the draft.

    `delegates` overrides the saved delegates (an admin form validates before saving).
    """
    errors = agent_config_errors(
        tools=agent.tools,
        permission=agent.permission,
        max_rounds=agent.max_rounds,
        stop_conditions=agent.stop_conditions,
    )
    if "tools" not in errors:
        mcp_problem = mcp_tool_errors(list(agent.tools), agent.team_id)
        if mcp_problem:
            errors["tools"] = mcp_problem
    errors.update(_model_endpoint_errors(agent))
    errors.update(ticket_escalation_errors(agent))
    if delegates is None:
        chosen = list(agent.delegates.all()) if agent.pk else []
    else:
        chosen = list(delegates)
        existing = set(
            Agent.objects.filter(pk__in=[d.pk for d in chosen]).values_list("pk", flat=True)
        )
        missing = [d.slug for d in chosen if d.pk not in existing]
        if missing:
            errors["delegates"] = (
                f"Delegates no longer exist: {', '.join(missing)}; remove them from the list."
            )
    if "delegates" not in errors:
        cycle = delegation_cycle(agent, chosen)
        if cycle:
            errors["delegates"] = (
                f"Delegation cycle {' → '.join(cycle)}: an agent would end up calling itself. "
                "Remove one of these delegates."
            )
    return errors


def agent_publish_errors(agent: Agent) -> dict[str, str]:
    """`agent_validate`, plus what publishing needs beyond a valid draft."""
    errors = agent_validate(agent)
    if "delegates" not in errors and agent.pk:
        unpublished = sorted(
            agent.delegates.exclude(versions__draft=False).values_list("slug", flat=True)
        )
        if unpublished:
            errors["delegates"] = (
                f"Delegates with no published version: {', '.join(unpublished)}; "
                "publish them first (a run could not call them)."
            )
    return errors


# -- versions ------------------------------------------------------------------------------


def agent_spec(agent: Agent) -> dict[str, Any]:
    """The configuration a run pins: everything needed to resolve the agent later (the
    schemas of its MCP tools too, under `mcp_tools`, when it has any)."""
    spec: dict[str, Any] = {
        "id": agent.slug,
        "name": agent.name,
        "description": agent.description,
        "model_id": agent.model.slug if agent.model_id and agent.model else None,
        "endpoint_id": agent.endpoint.slug if agent.endpoint_id and agent.endpoint else None,
        "system_prompt": agent.system_prompt,
        "tools": list(agent.tools),
        "permission": agent.permission or {},
        "max_rounds": agent.max_rounds,
        "stop_conditions": list(agent.stop_conditions or []),
        "delegates": sorted(d.slug for d in agent.delegates.all()),  # uses a prefetch if any
        "ticket_deadline_seconds": agent.ticket_deadline_seconds,
        "ticket_default_action": agent.ticket_default_action,
        "ticket_default_response": agent.ticket_default_response,
        "ticket_warning_seconds": agent.ticket_warning_seconds,
    }
    mcp_tools = mcp_tools_spec(list(agent.tools or []), agent.team_id)
    if mcp_tools:
        spec["mcp_tools"] = mcp_tools
    return spec


SPEC_DEFAULTS: dict[str, Any] = {
    "endpoint_id": None,
    "ticket_default_response": None,
    "ticket_warning_seconds": None,
}


def spec_normalized(spec: dict[str, Any]) -> dict[str, Any]:
    """A version's spec with keys added since it was published filled in, for comparing."""
    return {**SPEC_DEFAULTS, **spec}


@dataclass(frozen=True)
class DraftStatus:
    """How the draft compares with the latest published version."""

    state: str  # "never_published" | "matches" | "changed"
    latest: AgentVersion | None

    @property
    def label(self) -> str:
        if self.latest is None:
            return "Never published"
        if self.state == "matches":
            return f"Matches v{self.latest.number}"
        return "Draft has unpublished changes"


def agent_draft_status(agent: Agent, latest: AgentVersion | None = None) -> DraftStatus:
    """`latest` may be passed when the caller already has it (list pages prefetch it)."""
    if latest is None:
        latest = agent_version_latest(agent)
    if latest is None:
        return DraftStatus("never_published", None)
    same = spec_normalized(latest.spec) == agent_spec(agent)
    return DraftStatus("matches" if same else "changed", latest)


@transaction.atomic
def agent_publish(*, agent: Agent, actor: Actor, note: str = "") -> AgentVersion:
    """Freeze the validated draft as the next version; refuses an invalid or unchanged one."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    ensure_writable(locked.team_id)
    errors = agent_publish_errors(locked)
    if errors:
        listed = " ".join(f"{field}: {message}" for field, message in errors.items())
        raise AgentConfigInvalid(
            f"agent '{locked.slug}' cannot be published until its draft is fixed. {listed}",
            errors,
        )
    spec = agent_spec(locked)
    latest = agent_version_latest(locked)
    if latest is not None and spec_normalized(latest.spec) == spec:
        raise NothingToPublish(
            f"nothing to publish: the draft of '{locked.slug}' matches v{latest.number}",
            {"version": latest.number},
        )
    note = (note or "").strip()
    if len(note) > 500:
        raise InvalidInput("the note must be at most 500 characters")
    version = AgentVersion.objects.create(
        agent=locked,
        number=latest.number + 1 if latest else 1,
        spec=spec,
        note=note,
        published_by=actor.user_or_none,
    )
    audit_record(
        actor=actor,
        action="agent.publish",
        target_type="agent",
        target_id=locked.pk,
        team=locked.team_id,
        before=latest.spec if latest else None,
        after={"version": version.number, "spec": spec},
        comment=note,
    )
    return version


@transaction.atomic
def agent_draft_snapshot(*, agent: Agent) -> AgentVersion:
    """The draft frozen as a version a fork or a replay can pin (`draft=True`: never
    published, never what new runs take), validated as publishing would; the draft
    unchanged since its last snapshot reuses it."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    errors = agent_publish_errors(locked)
    if errors:
        listed = " ".join(f"{field}: {message}" for field, message in errors.items())
        raise AgentConfigInvalid(f"the draft of '{locked.slug}' cannot run: {listed}", errors)
    spec = agent_spec(locked)
    latest = agent_version_latest(locked)
    number = latest.number if latest else 0
    for snapshot in AgentVersion.objects.filter(agent=locked, draft=True, number=number):
        if spec_normalized(snapshot.spec) == spec:
            return snapshot
    return AgentVersion.objects.create(agent=locked, number=number, spec=spec, draft=True)


@transaction.atomic
def agent_restore(*, version: AgentVersion, actor: Actor) -> Agent:
    """Copy a published version's configuration back into its agent's draft."""
    locked = Agent.objects.select_for_update().get(pk=version.agent_id)
    ensure_writable(locked.team_id)
    spec = spec_normalized(version.spec)
    missing: list[str] = []
    model = endpoint = None
    if spec.get("model_id"):
        model = Model.objects.filter(slug=spec["model_id"]).first()
        if model is None:
            missing.append(f"model '{spec['model_id']}'")
    if spec.get("endpoint_id"):
        endpoint = RemoteEndpoint.objects.filter(slug=spec["endpoint_id"]).first()
        if endpoint is None:
            missing.append(f"endpoint '{spec['endpoint_id']}'")
    delegate_slugs = list(spec.get("delegates") or [])
    delegates = list(Agent.objects.filter(slug__in=delegate_slugs))
    found = {d.slug for d in delegates}
    missing += [f"delegate agent '{slug}'" for slug in delegate_slugs if slug not in found]
    if missing:
        raise NotFound(
            f"cannot restore v{version.number} of '{locked.slug}': {', '.join(missing)} no "
            "longer exist(s); recreate it or edit the draft by hand",
            {"missing": missing},
        )
    before = agent_spec(locked)
    locked.name = spec.get("name") or locked.name
    locked.description = spec.get("description") or ""
    locked.model = model
    locked.endpoint = endpoint
    locked.system_prompt = spec.get("system_prompt") or ""
    locked.tools = list(spec.get("tools") or [])
    locked.permission = spec.get("permission") or {}
    locked.max_rounds = int(spec.get("max_rounds", 16))
    locked.stop_conditions = list(spec.get("stop_conditions") or [])
    locked.ticket_deadline_seconds = spec.get("ticket_deadline_seconds")
    locked.ticket_default_action = spec.get("ticket_default_action") or "reject"
    locked.ticket_default_response = spec.get("ticket_default_response")
    locked.ticket_warning_seconds = spec.get("ticket_warning_seconds")
    locked.save()
    locked.delegates.set(delegates)
    audit_record(
        actor=actor,
        action="agent.restore",
        target_type="agent",
        target_id=locked.pk,
        team=locked.team_id,
        before=before,
        after=agent_spec(locked),
        comment=f"restored v{version.number} as the draft",
    )
    return locked


@transaction.atomic
def agent_permission_update(*, agent: Agent, permission: dict[str, Any], actor: Actor) -> Agent:
    """Save new permission rules into the draft (validated, audited)."""
    message = permission_message(permission)
    if message:
        raise AgentConfigInvalid(message, {"permission": message})
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    ensure_writable(locked.team_id)
    before = locked.permission
    locked.permission = permission
    locked.save(update_fields=["permission", "updated_at"])
    audit_record(
        actor=actor,
        action="agent.permission_update",
        target_type="agent",
        target_id=locked.pk,
        team=locked.team_id,
        before=before,
        after=permission,
    )
    return locked
