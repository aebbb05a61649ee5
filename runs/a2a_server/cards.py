"""Which agents are served over A2A, and the agent card of each.

An agent is served once it has a published version (its latest is what new runs pin)
and AWAKEN_A2A_SERVE names it ("all" by default). Its card lists the agent itself as the
main skill and each tool of its latest version as a further skill; two interfaces (the
JSON-RPC binding at `<base>/a2a/<slug>/jsonrpc`, HTTP+JSON at `<base>/a2a/<slug>`;
AWAKEN_A2A_PREFERRED_BINDING first) and
bearer authentication with an API token.
"""

from __future__ import annotations

from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from django.conf import settings

from agents.models import Agent
from agents.selectors import agent_version_by_id, agents_with_latest_version
from agents.tools import UnknownToolError, get_tool
from common.access import scope

PROTOCOL_VERSION = "1.0"
JSONRPC_BINDING = "JSONRPC"
REST_BINDING = "HTTP+JSON"
SCHEME = "bearer"


def _serves(slug: str) -> bool:
    names = {name.strip() for name in settings.AWAKEN_A2A_SERVE}
    if "none" in names:
        return False
    return "all" in names or slug in names


def served_agent(slug: str) -> Agent | None:
    """The published agent `slug` if it is served over A2A."""
    if not _serves(slug):
        return None
    agent = agents_with_latest_version().filter(slug=slug).first()
    if agent is None or agent.latest_version_id is None:  # type: ignore[attr-defined]
        return None
    return agent


def served_agents(user: Any = None) -> list[Agent]:
    """The agents served over A2A; with `user`, those of the teams they may see."""
    agents = agents_with_latest_version().order_by("slug")
    if user is not None:
        agents = scope(agents, user, "team_id")
    return [a for a in agents if a.latest_version_id is not None and _serves(a.slug)]  # type: ignore[attr-defined]


def sees(user: Any, agent: Agent) -> bool:
    """`user` may see `agent`'s team (and, read here on a thread of its own, the user's
    roles are cached for the request's later checks)."""
    return bool(user.has_perm("runs.view_run", agent))


def default_agent() -> Agent | None:
    """The agent of the site's own /.well-known/agent-card.json."""
    if settings.AWAKEN_A2A_DEFAULT_AGENT:
        return served_agent(settings.AWAKEN_A2A_DEFAULT_AGENT)
    agents = served_agents()
    return agents[0] if agents else None


def _tool_skill(name: str) -> AgentSkill:
    try:
        description = get_tool(name).descriptor.description
    except UnknownToolError:
        description = f"The tool {name}."
    return AgentSkill(id=f"tool:{name}", name=name, description=description, tags=["tool"])


def _interfaces(url: str) -> list[AgentInterface]:
    """Both bindings, the preferred one first."""
    offers = [
        AgentInterface(
            url=f"{url}/jsonrpc",
            protocol_binding=JSONRPC_BINDING,
            protocol_version=PROTOCOL_VERSION,
        ),
        AgentInterface(url=url, protocol_binding=REST_BINDING, protocol_version=PROTOCOL_VERSION),
    ]
    preferred = settings.AWAKEN_A2A_PREFERRED_BINDING
    return sorted(offers, key=lambda offer: offer.protocol_binding != preferred)


def agent_card(agent: Agent, base_url: str) -> AgentCard:
    version = agent_version_by_id(agent.latest_version_id)  # type: ignore[attr-defined]
    spec: dict[str, Any] = version.spec_dict
    description = spec.get("description") or agent.description or f"The agent {agent.name}."
    url = f"{base_url}/a2a/{agent.slug}"
    card = AgentCard(
        name=str(spec.get("name") or agent.name),
        description=description,
        version=str(version.number),
        provider=AgentProvider(organization="Awaken Ops", url=base_url),
        supported_interfaces=_interfaces(url),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id=agent.slug,
                name=agent.name,
                description=description,
                tags=["agent"],
                examples=[],
            ),
            *(_tool_skill(name) for name in spec.get("tools") or []),
        ],
    )
    card.security_schemes[SCHEME].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="awk_<lookup>_<secret>",
                description="A personal API token of an Awaken Ops user; the user's role "
                "(viewer, operator, admin) decides what the token may do.",
            )
        )
    )
    requirement = SecurityRequirement()
    requirement.schemes[SCHEME].CopyFrom(StringList())
    card.security_requirements.append(requirement)
    return card
